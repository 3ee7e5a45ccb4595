"""Rounding and saturation: the twin of ``rtl/round_sat.v``, the one narrowing stage of hwvit.

Every kernel in ``hwvit.ops`` computes exactly on int64 and narrows only through
``rshift_round`` (round half up, ``Rounding.HALF_UP``, docs/arithmetic.md) and ``saturate``;
``round_sat`` is the two in a row, as the RTL stage does them. ``SHIFT_MODES``: the four roundings
of the RTL stage's ROUNDING parameter (half up, half away, half to even, floor) on int64 arrays,
which the requant variants (hwvit.variants.rounding) and an imported model's zero-point kernels
(``requant_zero``, ``residual_add_zp``: round half to even for ONNX) use.
"""

from __future__ import annotations

import math
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

# The roundings a requant with an output zero point takes (ops.requant_zero, rtl/gemm.v ZERO_POINTS):
# the saturating shift modes and onnxruntime's binary32 product (hwvit.variants.rounding).
ZERO_POINT_ROUNDINGS = (*SHIFT_MODES, "onnxruntime")
F32_SIGNIFICAND = 24  # binary32's significand bits, the hidden one included
F32_ACC_MAX = 1 << 55  # |f32_product| bound: |acc| <= 2^31 rounded, times M < 2^24


def round_significant(v: Any, bits: int = F32_SIGNIFICAND) -> np.ndarray:
    """``v`` rounded half to even to its ``bits`` leading significant bits, low bits zero: the value an
    IEEE-754 float with a ``bits``-bit significand holds for the integer ``v`` (binary32: 24), exactly
    on int64. ``|v| < 2^62``: ``d = bitlength(|v|) - bits`` bits drop (none when ``d <= 0``), ``q =
    |v| >> d``, ``r = |v| - (q << d)``; up when ``2r > 2^d`` or ``2r == 2^d`` and ``q`` is odd; the
    result ``(q + up) << d <= 2^bitlength(|v|)`` (a carry into one more bit is binary32's next binade),
    then ``v``'s sign again (round half to even is symmetric)."""
    v = as_int_array(v, "v", -(1 << 62) + 1, (1 << 62) - 1)
    mag = np.abs(v)
    length = np.zeros(mag.shape, np.int64)
    for k in range(62):  # bit length: how many of 2^0 .. 2^61 are <= |v|
        length += mag >= (np.int64(1) << k)
    d = np.maximum(length - bits, 0)
    q = np.right_shift(mag, d)
    two_r = np.left_shift(mag - np.left_shift(q, d), 1)
    p = np.left_shift(np.int64(1), d)
    up = (two_r > p) | ((two_r == p) & ((q & 1) == 1))
    out = np.left_shift(q + up.astype(np.int64), d)
    return np.where(v < 0, -out, out)


def f32_product(acc: Any, m: Any) -> np.ndarray:
    """``f32(f32(acc) * M)`` scaled by ``2^s`` out of ``f32(f32(acc) * (M * 2^-s))``: onnxruntime's
    requant product (MlasRequantizeOutput: the int32 accumulator converted to binary32, times a
    binary32 multiplier ``M * 2^-s``, ``M < 2^24`` its significand), exactly on int64. The power of two
    changes no significand bit (every value stays a normal binary32: ``s <= 62``, ``|value| >= 2^-62``),
    so the two roundings are ``round_significant`` of ``acc`` (exact for ``|acc| < 2^24``), then of its
    product with ``M`` (``|.| <= 2^31 * (2^24 - 1) < 2^55``). int64, ``|result| < 2^55``."""
    acc = as_int_array(acc, "acc", -(1 << 31), (1 << 31) - 1)
    m = as_int_array(m, "multiplier", 0, (1 << F32_SIGNIFICAND) - 1)
    return round_significant(round_significant(acc) * m)


def f32_multiplier(real: float) -> tuple[int, int]:
    """``(M, s)`` with ``M * 2^-s`` the binary32 value of ``real`` (round to nearest even): ``M`` its
    24-bit significand in ``[2^23, 2^24 - 1]``, ``s = 24 - e`` for ``f32(real) = M / 2^24 * 2^e``.
    ``(0, 0)`` for 0 and for a multiplier below ``2^-38`` (``s > 62``: ``|acc| * m < 2^-7``, every
    result 0). ValueError for a negative or non-finite ``real`` and for ``f32(real) >= 2^24``."""
    real = float(real)
    if not math.isfinite(real) or real < 0:
        raise ValueError(f"onnxruntime multiplier must be finite and >= 0, got {real!r}")
    m32 = np.float32(min(real, 2.0**24))  # at or above 2^24 it is refused below, without an overflow
    if m32 == 0:
        return 0, 0
    f, e = math.frexp(float(m32))  # f in [0.5, 1) with 24 significant bits: f * 2^24 is an integer
    shift = 24 - e
    if shift > SHIFT_MAX:
        return 0, 0
    if shift < 0:
        raise ValueError(f"onnxruntime multiplier {real!r} is too large: a binary32 of 2^24 or more needs a left shift")
    return int(f * (1 << 24)), shift
