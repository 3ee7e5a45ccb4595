"""What the block modules share: drawing random test inputs, counting coverage bins, contract sizes.

Floats appear only in choosing test inputs and scales; every tensor a block module makes is an
integer array.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hwvit.formats import MULT_MAX, SHIFT_MAX, IntFormat
from hwvit.record import Spec

M_LO = 1 << 30  # quantize_multiplier gives M in [2^30, 2^31-1]
K_MAX = 65535  # the largest K of the contract: K * 255 * 128 still fits the int32 accumulator

# Parameter ranges (inclusive) of the contract.
SIZE = (1, 1 << 24)
U31 = (0, MULT_MAX)  # integer multipliers


def spec(role: str, shape: tuple, fmt: IntFormat) -> Spec:
    """A tensor of the contract with a fixed format."""
    return Spec(role, shape, fmt.bits, fmt.signed)


# ---------------------------------------------------------------------------- random sets


def int_option(opts: dict[str, Any], key: str, lo: int, hi: int) -> int:
    value = opts[key]
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
        raise ValueError(f"{key} must be an integer in [{lo}, {hi}], got {value!r}")
    return int(value)


def fill(edges: np.ndarray, count: int, draw) -> np.ndarray:
    """The first ``count`` of ``edges`` (along axis 0), topped up with ``draw(k)`` random items."""
    if count <= len(edges):
        return edges[:count]
    return np.concatenate([edges, draw(count - len(edges))])


def shift_for(mag: np.ndarray, mult: np.ndarray, out_bits: int, jitter: np.ndarray) -> np.ndarray:
    """Shift that brings ``mag * mult`` near the output range's top, moved by ``jitter`` bits."""
    prod = np.maximum(mag.astype(np.float64) * mult.astype(np.float64), 1.0)
    s = np.ceil(np.log2(prod)).astype(np.int64) - (out_bits - 1) + jitter
    return np.clip(s, 0, SHIFT_MAX)


def unique(values) -> list:
    return list(dict.fromkeys(values))


# ---------------------------------------------------------------------------- coverage bins


def rails(y: np.ndarray | None, out_bits: int) -> tuple[int, int]:
    """Outputs at the top and at the bottom of the signed out_bits range (saturated or exactly there)."""
    if y is None:
        return 0, 0
    hi = (1 << (out_bits - 1)) - 1
    return int(np.count_nonzero(y == hi)), int(np.count_nonzero(y == -hi - 1))


def ties(values: list[int], shifts: list[int]) -> int:
    """Values whose right shift by s (s >= 1) drops exactly one half: the rounding's tie case."""
    return sum(1 for v, s in zip(values, shifts) if s >= 1 and (v & ((1 << s) - 1)) == 1 << (s - 1))


# ---------------------------------------------------------------------------- mismatch lines


def row_text(row: np.ndarray, most: int = 8) -> str:
    vals = ", ".join(str(int(v)) for v in row[:most])
    return f"[{vals}{', ...' if row.size > most else ''}] ({row.size} values)"
