"""Requantization rounding variants: the same ``acc * M * 2^-s`` with other roundings and overflows.

hwvit's own ``requant=half_up`` (hwvit.variants.hwvit) rounds half up and saturates. This module
adds, as exact integer kernels with slow Python-int twins:

- ``half_away``: round half away from zero, saturate to signed ``out_bits``;
- ``half_even``: round half to even (banker's rounding), saturate;
- ``floor``: the plain arithmetic right shift (toward -inf), saturate;
- ``gemmlowp``: gemmlowp / TFLite fixed point: a Q31 multiplier and an exponent from TFLite's
  ``QuantizeMultiplier``, then ``MultiplyByQuantizedMultiplier`` (optional left shift,
  ``SaturatingRoundingDoublingHighMul``, ``RoundingDivideByPOT``), clamped to ``out_bits``;
- ``onnxruntime``: onnxruntime's requant of its fused integer kernels (QLinearMatMul, QGemm,
  QLinearConv: MlasRequantizeOutput): the int32 accumulator and a binary32 multiplier multiplied in
  binary32, rounded half to even, clamped; ``round_half_even(f32(f32(acc) * f32(m)))``;
- ``half_up_wrap``, ``half_away_wrap``, ``half_even_wrap``, ``floor_wrap``, ``gemmlowp_wrap``: the
  same rounding, then a two's-complement wrap into ``out_bits`` (keep the low ``out_bits`` bits)
  instead of saturating.

Parameters
----------
The shift modes (``half_*``, ``floor`` and their wraps) take hwvit's own pair: ``multiplier`` M in
``[0, 2^31 - 1]``, ``shift`` s in ``[0, 62]`` (``hwvit.quant.params.quantize_multiplier``), per
tensor (ints) or per last-axis channel (1-D int64 arrays), exactly as ``hwvit.ops.requant``.

The gemmlowp modes take ``multiplier`` in ``[-2^31, 2^31 - 1]`` (any int32; ``prepare`` gives
``[2^30, 2^31 - 1]`` or 0) and ``shift`` in ``[-30, 31]``: a RIGHT shift, so ``shift = -exponent``
of TFLite (TFLite's ``shift`` is a left exponent). ``shift > 0`` divides by ``2^shift`` with
``RoundingDivideByPOT``; ``shift < 0`` multiplies the accumulator by ``2^-shift`` before the high
multiply. A left shift is capped at 30 (``prepare`` raises for a real multiplier >= 2^30).

The onnxruntime mode takes a binary32 multiplier ``m = M * 2^-s``: ``multiplier`` M in ``[0, 2^24 -
1]`` (its significand; ``prepare`` gives ``[2^23, 2^24 - 1]`` or 0), ``shift`` s in ``[0, 62]``.

``acc`` is always int32 (``[-2^31, 2^31 - 1]``); ``out_bits`` in ``[2, 16]``. docs/variants/requant.md
gives each formula, its source and the width of every intermediate.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from hwvit.formats import ACC, MULT_MAX, OUT_BITS, SHIFT_MAX
from hwvit.ops.checks import as_int_array, channel_param, check_bits
from hwvit.ops.round_sat import F32_SIGNIFICAND, SHIFT_MODES, f32_multiplier, f32_product
from hwvit.variants.base import Params, RequantContext, Variant

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
GEMMLOWP_SHIFT_MIN = -30  # the largest left shift: acc * 2^30 stays below 2^61 in int64
GEMMLOWP_SHIFT_MAX = 31  # RoundingDivideByPOT's exponent is at most 31


# ---------------------------------------------------------------- prepare (floats allowed here)


def _prepare_shift(ctx: RequantContext) -> Params:
    """hwvit's (M, s) pair: M in [2^30, 2^31 - 1] (or 0), s in [0, 62]."""
    from hwvit.quant.params import quantize_multiplier

    m, s = quantize_multiplier(ctx.scale)
    if np.ndim(m) == 0:
        m, s = int(m), int(s)
    return {"multiplier": m, "shift": s, "out_bits": int(ctx.out_bits)}


def tflite_quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite ``QuantizeMultiplier``: ``real ~= q * 2^(e - 31)``, returned as ``(q, -e)``.

    ``real = f * 2^e`` with ``f`` in [0.5, 1) (frexp); ``q = round_half_away(f * 2^31)`` (exact:
    ``f * 2^31`` is a double times a power of two); ``q = 2^31`` (``f`` rounded up to 1) becomes
    ``2^30`` with ``e + 1``; ``e < -31`` (real below about 2^-32: every int32 result is 0) flushes
    to ``(0, 0)``. ``real = 0`` gives ``(0, 0)``. The second value is the RIGHT shift ``-e`` of this
    module's convention. ValueError for a negative or non-finite ``real`` and for ``e > 30``
    (``real >= 2^30`` would need a left shift past 30).
    """
    real = float(real)
    if not math.isfinite(real) or real < 0:
        raise ValueError(f"gemmlowp multiplier must be finite and >= 0, got {real!r}")
    if real == 0:
        return 0, 0
    f, e = math.frexp(real)
    scaled = Fraction(f) * (1 << 31)  # in [2^30, 2^31)
    q = math.floor(scaled + Fraction(1, 2))  # positive: half away == half up
    if q == 1 << 31:
        q, e = q // 2, e + 1
    if e < -31:
        return 0, 0
    if -e < GEMMLOWP_SHIFT_MIN:
        raise ValueError(f"gemmlowp multiplier {real!r} is too large: its left shift {e} exceeds 30")
    return q, -e


def _prepare_by(pair):
    """A variant's ``prepare`` from ``pair(real) -> (multiplier, shift)``: one pair per tensor, or an
    int64 array of each per channel."""

    def prepare(ctx: RequantContext) -> Params:
        if np.ndim(ctx.scale) == 0:
            m, s = pair(float(ctx.scale))
            return {"multiplier": m, "shift": s, "out_bits": int(ctx.out_bits)}
        reals = np.asarray(ctx.scale, dtype=np.float64)
        pairs = [pair(float(r)) for r in reals.reshape(-1)]
        m = np.array([p[0] for p in pairs], dtype=np.int64).reshape(reals.shape)
        s = np.array([p[1] for p in pairs], dtype=np.int64).reshape(reals.shape)
        return {"multiplier": m, "shift": s, "out_bits": int(ctx.out_bits)}

    return prepare


_prepare_gemmlowp = _prepare_by(tflite_quantize_multiplier)


_prepare_f32 = _prepare_by(f32_multiplier)


# ---------------------------------------------------------------- kernels (numpy int64)


def _inputs(x: Any, p: Params, m_lo: int, m_hi: int, s_lo: int, s_hi: int):
    out_bits = check_bits(p["out_bits"], "out_bits", *OUT_BITS)
    acc = as_int_array(x, "acc", *ACC.range)
    m = channel_param(p["multiplier"], "multiplier", m_lo, m_hi, acc.shape)
    s = channel_param(p["shift"], "shift", s_lo, s_hi, acc.shape)
    return acc, m, s, out_bits


def _saturate(y: np.ndarray, bits: int) -> np.ndarray:
    half = 1 << (bits - 1)
    return np.clip(y, -half, half - 1)


def _wrap(y: np.ndarray, bits: int) -> np.ndarray:
    """Two's-complement wrap: ``((y + 2^(b-1)) & (2^b - 1)) - 2^(b-1)``; ``|y| < 2^62`` so the sum
    stays in int64."""
    half = 1 << (bits - 1)
    return ((y + half) & ((1 << bits) - 1)) - half


# the shift modes of rtl/round_sat.v's ROUNDING, with their bounds: hwvit.ops.round_sat
_round_half_up, _round_half_away, _round_half_even, _round_floor = (
    SHIFT_MODES[m] for m in ("half_up", "half_away", "half_even", "floor")
)


def _shift_kernel(rounding, overflow):
    def kernel(x: Any, p: Params) -> np.ndarray:
        """``overflow(rounding(acc * M, s))``. acc int32, M in [0, 2^31 - 1]: ``|acc * M| <= 2^62 - 2^31``
        (int64); the rounding's own intermediates are bounded in its docstring; its result
        ``|y| <= 2^62 >> s``; saturate or wrap to signed ``out_bits``. int64 out, acc's shape."""
        acc, m, s, out_bits = _inputs(x, p, 0, MULT_MAX, 0, SHIFT_MAX)
        return overflow(rounding(acc * m, s), out_bits).astype(np.int64)

    return kernel


def _f32_kernel(x: Any, p: Params) -> np.ndarray:
    """``sat(round_half_even(f32_product(acc, M) / 2^s))``: the binary32 product of ``f32(acc)`` and
    ``M`` exactly (``hwvit.ops.round_sat.f32_product``, ``|.| < 2^55``), then the binary32-to-int32
    conversion's round half to even of its value ``/ 2^s``; onnxruntime clamps the float to the range
    before converting, the same integers as clamping after. int64 out, acc's shape."""
    acc, m, s, out_bits = _inputs(x, p, 0, (1 << F32_SIGNIFICAND) - 1, 0, SHIFT_MAX)
    return _saturate(_round_half_even(f32_product(acc, m), s), out_bits).astype(np.int64)


def saturating_rounding_doubling_high_mul(a: Any, b: Any) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` on int32 values held in int64.

    ``a == b == -2^31`` -> ``2^31 - 1`` (the one product whose doubled high half overflows);
    otherwise ``ab = a * b`` (``|ab| <= 2^62``), ``nudge = 2^30`` if ``ab >= 0`` else ``1 - 2^30``,
    ``t = ab + nudge`` (``|t| <= 2^62 + 2^30 < 2^63``), result ``t / 2^31`` truncated toward zero
    (C division), computed as ``sign(t) * (|t| >> 31)``; it lies in ``[-2^31 + 1, 2^31 - 1]``.
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ab = a * b
    t = ab + np.where(ab >= 0, np.int64(1 << 30), np.int64(1 - (1 << 30)))
    q = np.where(t >= 0, np.right_shift(t, 31), -np.right_shift(-t, 31))
    return np.where((a == INT32_MIN) & (b == INT32_MIN), np.int64(INT32_MAX), q)


def rounding_divide_by_pot(x: Any, exponent: Any) -> np.ndarray:
    """gemmlowp ``RoundingDivideByPOT``: x / 2^exponent rounded to nearest, ties away from zero.

    ``x`` int32 (in int64), ``exponent`` in [0, 31]: ``mask = 2^exponent - 1`` (< 2^31),
    ``remainder = x & mask`` in [0, mask], ``threshold = (mask >> 1) + (1 if x < 0 else 0)``
    (<= 2^30), result ``(x >> exponent) + (1 if remainder > threshold else 0)`` (int32).
    """
    x = np.asarray(x, dtype=np.int64)
    mask = np.left_shift(np.int64(1), exponent) - 1
    remainder = x & mask
    threshold = np.right_shift(mask, 1) + (x < 0).astype(np.int64)
    return np.right_shift(x, exponent) + (remainder > threshold).astype(np.int64)


def _gemmlowp_kernel(overflow):
    def kernel(x: Any, p: Params) -> np.ndarray:
        """TFLite ``MultiplyByQuantizedMultiplier``, then saturate or wrap to ``out_bits``.

        ``left = max(-shift, 0)`` in [0, 30], ``right = max(shift, 0)`` in [0, 31];
        ``acc << left`` (``|.| <= 2^61``) is taken modulo 2^32 into int32 (the int32 product of C
        code: overflow wraps as on every two's-complement target; it is UB in ISO C);
        ``h = SaturatingRoundingDoublingHighMul(that, M)`` (``|ab| <= 2^62``, int32 result);
        ``y = RoundingDivideByPOT(h, right)`` (int32); then saturate or wrap to ``out_bits``.
        """
        acc, m, s, out_bits = _inputs(x, p, INT32_MIN, INT32_MAX, GEMMLOWP_SHIFT_MIN, GEMMLOWP_SHIFT_MAX)
        left = np.maximum(-s, 0)
        right = np.maximum(s, 0)
        shifted = _wrap(np.left_shift(acc, left), 32)
        h = saturating_rounding_doubling_high_mul(shifted, m)
        y = rounding_divide_by_pot(h, right)
        return overflow(y, out_bits).astype(np.int64)

    return kernel


# ---------------------------------------------------------------- references (Python ints)


def _ref_sat(v: int, bits: int) -> int:
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return lo if v < lo else hi if v > hi else v


def _ref_wrap(v: int, bits: int) -> int:
    low = v % 2**bits  # the low `bits` bits as an unsigned number
    return low - 2**bits if low >= 2 ** (bits - 1) else low


def _ref_half_up(x: Fraction) -> int:
    return math.floor(x + Fraction(1, 2))


def _ref_half_away(x: Fraction) -> int:
    magnitude = math.floor(abs(x) + Fraction(1, 2))
    return -magnitude if x < 0 else magnitude


def _ref_half_even(x: Fraction) -> int:
    below = math.floor(x)
    frac = x - below
    if frac > Fraction(1, 2):
        return below + 1
    if frac < Fraction(1, 2):
        return below
    return below if below % 2 == 0 else below + 1


def _ref_floor(x: Fraction) -> int:
    return math.floor(x)


def _shift_one(rounding, overflow):
    def one(acc: int, m: int, s: int, bits: int) -> int:
        return overflow(rounding(Fraction(acc * m, 2**s)), bits)

    return one


def _ref_gemmlowp_value(acc: int, m: int, shift: int) -> int:
    """MultiplyByQuantizedMultiplier from the definitions in words, on unbounded ints.

    1. left shift: multiply by 2^max(-shift, 0) in int32 arithmetic (keep the value modulo 2^32);
    2. SaturatingRoundingDoublingHighMul is ARM's VQRDMULH (gemmlowp fixedpoint.h says so): the
       high 32 bits of ``2ab + 2^31``, saturated to int32;
    3. RoundingDivideByPOT: the quotient by 2^max(shift, 0) rounded to nearest, ties away from 0.
    """
    a = _ref_wrap(acc * 2 ** max(-shift, 0), 32)
    high = (2 * a * m + 2**31) // 2**32
    high = min(high, 2**31 - 1)
    return _ref_half_away(Fraction(high, 2 ** max(shift, 0)))


def _ref_f32(x: int) -> int:
    """The binary32 value of the integer ``x`` (``|x| < 2^128``), from the definition: its leading 24
    bits, the rest rounded half to even."""
    drop = max(abs(x).bit_length() - F32_SIGNIFICAND, 0)
    return _ref_half_even(Fraction(x, 2**drop)) * 2**drop


def _f32_one(acc: int, m: int, s: int, bits: int) -> int:
    return _ref_sat(_ref_half_even(Fraction(_ref_f32(_ref_f32(acc) * m), 2**s)), bits)


def _gemmlowp_one(overflow):
    def one(acc: int, m: int, s: int, bits: int) -> int:
        return overflow(_ref_gemmlowp_value(acc, m, s), bits)

    return one


def _reference(one):
    def reference(x: Any, p: Params):
        """Element by element on Python ints over nested lists; channel j of the last axis uses
        ``multiplier[j]`` / ``shift[j]`` when those are per-channel."""
        data = x.tolist() if isinstance(x, np.ndarray) else x
        ms = p["multiplier"].tolist() if isinstance(p["multiplier"], np.ndarray) else p["multiplier"]
        ss = p["shift"].tolist() if isinstance(p["shift"], np.ndarray) else p["shift"]
        bits = int(p["out_bits"])

        def pick(param, j: int) -> int:
            return int(param[j]) if isinstance(param, list) else int(param)

        def walk(node):
            if isinstance(node, (list, tuple)):
                if node and isinstance(node[0], (list, tuple)):
                    return [walk(child) for child in node]
                return [one(int(v), pick(ms, j), pick(ss, j), bits) for j, v in enumerate(node)]
            return one(int(node), pick(ms, 0), pick(ss, 0), bits)

        return walk(data)

    return reference


def _nan_scale(ctx: RequantContext, p: Params) -> float:
    return float("nan")  # the output scale is the layer's, set by its calibration


# ---------------------------------------------------------------- the variants

_SHIFT_MODES = {
    # name: (kernel rounding, reference rounding, words)
    "half_up": (_round_half_up, _ref_half_up, "round half up (toward +inf)"),
    "half_away": (_round_half_away, _ref_half_away, "round half away from zero"),
    "half_even": (_round_half_even, _ref_half_even, "round half to even (banker's)"),
    "floor": (_round_floor, _ref_floor, "floor (arithmetic right shift, toward -inf)"),
}
_CITE = {
    "half_up": "hwvit docs/arithmetic.md (requant), with a two's-complement wrap; docs/variants/requant.md",
    "half_away": "round-half-away-from-zero (C round(), TFLite TfLiteRound); docs/variants/requant.md",
    "half_even": "IEEE 754 roundTiesToEven (convergent rounding); docs/variants/requant.md",
    "floor": "the arithmetic right shift (truncation of two's-complement bits); docs/variants/requant.md",
}
_GEMMLOWP_CITE = (
    "gemmlowp fixedpoint/fixedpoint.h (SaturatingRoundingDoublingHighMul, RoundingDivideByPOT); "
    "TFLite kernels/internal/common.h MultiplyByQuantizedMultiplier and quantization_util.cc "
    "QuantizeMultiplier; docs/variants/requant.md"
)

VARIANTS: list[Variant] = []
for _name, (_kround, _rround, _words) in _SHIFT_MODES.items():
    for _wrapped in (False, True):
        if _name == "half_up" and not _wrapped:
            continue  # hwvit's default, in hwvit.variants.hwvit
        VARIANTS.append(
            Variant(
                "requant",
                f"{_name}_wrap" if _wrapped else _name,
                f"(acc * M) / 2^s, {_words}, then "
                + ("wrap (two's complement) into out_bits" if _wrapped else "saturate to out_bits"),
                _CITE[_name],
                _prepare_shift,
                _shift_kernel(_kround, _wrap if _wrapped else _saturate),
                _reference(_shift_one(_rround, _ref_wrap if _wrapped else _ref_sat)),
                _nan_scale,
            )
        )
for _wrapped in (False, True):
    VARIANTS.append(
        Variant(
            "requant",
            "gemmlowp_wrap" if _wrapped else "gemmlowp",
            "TFLite MultiplyByQuantizedMultiplier (Q31 SRDHM, rounding divide by 2^shift), then "
            + ("wrap (two's complement) into out_bits" if _wrapped else "clamp to out_bits"),
            _GEMMLOWP_CITE,
            _prepare_gemmlowp,
            _gemmlowp_kernel(_wrap if _wrapped else _saturate),
            _reference(_gemmlowp_one(_ref_wrap if _wrapped else _ref_sat)),
            _nan_scale,
        )
    )
VARIANTS.append(
    Variant(
        "requant",
        "onnxruntime",
        "onnxruntime's fused integer kernels: round_half_even(f32(f32(acc) * f32(m))), m = M * 2^-s a binary32 "
        "multiplier, then clamp to out_bits",
        "onnxruntime core/mlas/lib/quantize.cpp MlasRequantizeOutput (cvtepi32_ps, mul_ps, min/max, cvtps_epi32), "
        "the output scale a_scale * b_scale / y_scale in binary32 (QLinearMatMul, QGemm, QLinearConv); "
        "docs/variants/requant.md",
        _prepare_f32,
        _f32_kernel,
        _reference(_f32_one),
        _nan_scale,
    )
)
del _name, _kround, _rround, _words, _wrapped
