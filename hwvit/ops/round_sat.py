"""Rounding and saturation: the twin of ``rtl/round_sat.v``, the one narrowing stage of hwvit.

Every kernel in ``hwvit.ops`` computes exactly on int64 and narrows only through
``rshift_round`` (round half up, ``Rounding.HALF_UP``, docs/arithmetic.md) and ``saturate``;
``round_sat`` is the two in a row, as the RTL stage does them.
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
