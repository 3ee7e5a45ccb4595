"""Functional coverage bins: the arithmetic corners a block's testbench run drove it through.

Plain counters (a dict of bin name -> count), computed in the cocotb testbench from what it drove
into the block (the set's inputs and parameters), what came out of the block (the outputs it
received, never the expected ones) and what it saw of the handshakes (``seen``: output stalls).
Every bin of a kind is always present, so a count of 0 is a bin never hit.

Each kind's module in ``hwvit.blocks`` declares its bins (``bins``, ``reset_states``,
``seen_bins``) and counts its data bins (``count_bins``); this module runs them. Rows of length 1
and of the maximum compare with the built block's limit (``limits``: softmax MAX_N, layernorm
MAX_C, gemm ROWS/COLS).

Bins of what the testbench did rather than what the set holds come from ``seen`` (the
testbench's counters, sim/tbutil.SEEN): ``out_stall`` (an output offered and refused),
``reset_<state>`` (a reset sampled while the block was in that state: the block's reset test,
which `hwvit sim --stress` runs) and gemm's ``back_to_back`` (a job started in the cycle the
previous one ended: the stress variant of that name). A plain `hwvit sim` run leaves them at 0,
and the report says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hwvit import blocks
from hwvit.blocks.layernorm import largest_variance


def __getattr__(name: str):
    """Views of the registry by kind: ``NAMES`` (the data bins and out_stall, in report order),
    ``RESET_STATES`` (the states the kind's reset test resets in: a bin reset_<state> each, in the
    testbench's RESET_STATES order) and ``SEEN_BINS`` (other bins only the testbench counts)."""
    if name not in ("NAMES", "RESET_STATES", "SEEN_BINS"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    every = blocks.kinds()
    if name == "NAMES":
        return {k: v.bins for k, v in every.items()}
    if name == "RESET_STATES":
        return {k: v.reset_states for k, v in every.items()}
    return {k: v.seen_bins for k, v in every.items() if v.seen_bins}  # SEEN_BINS


def names(kind: str) -> tuple[str, ...]:
    """Every bin of ``kind`` in report order: the data bins, then the reset states and the
    testbench-only bins."""
    spec = blocks.get(kind)
    return spec.bins + tuple(f"reset_{state}" for state in spec.reset_states) + spec.seen_bins


def count(
    kind: str,
    params: dict[str, Any],
    inputs: dict[str, np.ndarray],
    outputs: dict[str, np.ndarray | None],
    limits: dict[str, int] | None = None,
    seen: dict[str, int] | None = None,
) -> dict[str, int]:
    """Every bin of ``kind`` with its count for one run (0: never hit). ``outputs`` hold the
    block's outputs as received (None where the run did not complete them)."""
    spec = blocks.get(kind)
    limits, seen = limits or {}, seen or {}
    counts = spec.count_bins(params, inputs, outputs, limits)
    every = names(kind)
    for name in every:
        if name == "out_stall" or name.startswith("reset_") or name in spec.seen_bins:
            counts[name] = int(seen.get(name, 0))
    assert set(counts) == set(every), sorted(set(counts) ^ set(every))
    return {name: int(counts[name]) for name in every}


__all__ = ["count", "largest_variance", "names"]
