"""Verilator line and toggle coverage of `hwvit sim --coverage` (a stub grows below)."""

from __future__ import annotations


def build_args(simulator: str) -> list[str]:
    if simulator != "verilator":
        raise ValueError("coverage needs Verilator (Icarus has no line or toggle coverage)")
    return ["--coverage-line", "--coverage-toggle"]
