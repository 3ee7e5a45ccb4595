"""Rounding and saturation: the twin of ``rtl/round_sat.v``, the one narrowing stage of hwvit.

Every kernel in ``hwvit.ops`` computes exactly on int64 and narrows only through
``rshift_round`` (round half up, ``Rounding.HALF_UP``, docs/arithmetic.md) and ``saturate``;
``round_sat`` is the two in a row, as the RTL stage does them. ``SHIFT_MODES``: the four roundings
of the RTL stage's ROUNDING parameter (half up, half away, half to even, floor) on int64 arrays,
which the requant variants (hwvit.variants.rounding) and an imported model's zero-point kernels
(``requant_zero``, ``residual_add_zp``: round half to even for ONNX) use.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hwvit.formats import SHIFT_MAX, IntFormat
from hwvit.ops.checks import as_int_array, check_bits


def rshift_round(v: Any, s: Any) -> np.ndarray:
    """``(v + 2^(s-1)) >> s`` (floor shift), and ``v`` for ``s = 0``: round half up.

    ``|v| <= 2^62`` so that the rounding term (at most ``2^61``) cannot overflow int64.
    """
    v = as_int_array(v, "v", -(1 << 62), 1 << 62)
    s = as_int_array(s, "s", 0, SHIFT_MAX)
    half = np.where(s > 0, np.left_shift(np.int64(1), np.maximum(s - 1, 0)), 0)
    return np.right_shift(v + half, s)


def saturate(v: Any, bits: int, signed: bool = True) -> np.ndarray:
    """Clamp to the signed ``bits``-bit range (or ``[0, 2^bits - 1]`` when unsigned)."""
    fmt = IntFormat(check_bits(bits, "bits", 1, 63), bool(signed))
    return np.clip(as_int_array(v, "v"), fmt.lo, fmt.hi)


def round_sat(v: Any, s: Any, out_bits: int, signed: bool = True) -> np.ndarray:
    """``saturate(rshift_round(v, s), out_bits)``: what ``rtl/round_sat.v`` computes."""
    return saturate(rshift_round(v, s), out_bits, signed)


def _round_half_up(v: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``(v + 2^(s-1)) >> s`` (``v`` for s = 0): ``|v| < 2^62``, ``v + 2^61 < 2^63``."""
    half = np.right_shift(np.left_shift(np.int64(1), s), 1)  # 2^(s-1), 0 for s = 0
    return np.right_shift(v + half, s)


def _round_half_away(v: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``sign(v) * ((|v| + 2^(s-1)) >> s)``: ``|v| <= 2^62 - 2^31``, ``|v| + 2^61 < 2^63``."""
    half = np.right_shift(np.left_shift(np.int64(1), s), 1)
    q = np.right_shift(np.abs(v) + half, s)
    return np.where(v < 0, -q, q)


def _round_half_even(v: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``q = v >> s`` (floor), ``r = v & (2^s - 1)`` in ``[0, 2^s)``; up when ``2r > 2^s``, or
    ``2r == 2^s`` (a tie) and ``q`` is odd. ``2r < 2^63`` (``r < 2^62``); s = 0 gives r = 0 < 1/2."""
    p = np.left_shift(np.int64(1), s)  # 2^s <= 2^62
    q = np.right_shift(v, s)
    two_r = np.left_shift(v & (p - 1), 1)
    up = (two_r > p) | ((two_r == p) & ((q & 1) == 1))
    return q + up.astype(np.int64)


def _round_floor(v: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``v >> s``: the arithmetic shift, floor(v / 2^s)."""
    return np.right_shift(v, s)


SHIFT_MODES = {"half_up": _round_half_up, "half_away": _round_half_away, "half_even": _round_half_even,
               "floor": _round_floor}  # fmt: skip
