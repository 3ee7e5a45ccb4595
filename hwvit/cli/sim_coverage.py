"""`hwvit sim --coverage`: its options, their checks and the report (kept apart from sim.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from hwvit.cli.common import fail, refuse

F = TypeVar("F", bound=Callable)

DEFAULT_OUT = "coverage"


def coverage_options(func: F) -> F:
    func = click.option(
        "--coverage-out",
        type=click.Path(file_okay=False),
        metavar="DIR",
        help=f"Where --coverage writes its report (default ./{DEFAULT_OUT}; an earlier report there is replaced).",
    )(func)
    return click.option(
        "--coverage",
        is_flag=True,
        help="Verilator line and toggle coverage (a build of its own) and functional bins: writes "
        "merged.dat, annotated sources, untoggled.txt and report.json; prints per file and per block.",
    )(func)


def check(coverage: bool, coverage_out, simulator: str, *, cluster, byo: bool, as_json: bool) -> None:
    """Refuse the combinations --coverage cannot serve, each in one line."""
    if coverage_out and not coverage:
        refuse("--coverage-out applies with --coverage")
    if not coverage:
        return
    if simulator != "verilator":
        refuse("--coverage needs --simulator verilator (Icarus has no line or toggle coverage)")
    if cluster is not None or byo or as_json:
        refuse("--coverage runs the reference blocks locally: not with --cluster, --rtl/--bind or --json")


def report(results, coverage_out) -> None:
    """Merge the runs' coverage, write the report directory and print its summary."""
    from hwvit import coverage, toolchain

    dest = Path(coverage_out or DEFAULT_OUT)
    if not any("coverage_dat" in r.extra for r in results):
        fail("no run wrote coverage data (every run failed before the end?); no report written")
    try:
        data = coverage.write_report(results, dest, toolchain.repo().root)
    except (OSError, FileExistsError) as exc:
        fail(f"cannot write the coverage report to {dest}: {getattr(exc, 'strerror', None) or exc}")
    for line in coverage.report_lines(data):
        click.echo(line)
    click.echo(f"coverage of {data['runs']} runs -> {dest}")
