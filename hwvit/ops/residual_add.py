"""Residual add of two activations at different scales (``rtl/residual_add.v``).

Both inputs are rescaled to the output scale by integer multipliers with one shared shift and
one rounding: ``y = sat(rshift_round(a*Ma + b*Mb, s))``, ``Ma*2^-s = s_a/s_out``,
``Mb*2^-s = s_b/s_out`` (``hwvit.quant.residual_params``). Also adds position embeddings. An
imported model's add (``residual_add_zp``) has zero points and the file's rounding, or computes as
onnxruntime's QLinearAdd does (``qlinear_add``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hwvit.formats import INT8, MULT_MAX, OUT_BITS, SHIFT_MAX, signed
from hwvit.ops import frozen
from hwvit.ops._lazyjit import jit as _jit
from hwvit.ops.checks import (
    as_int_operand,
    as_rows,
    channel_param,
    check_bits,
    narrow_operand,
    out_dtype,
    per_channel,
)
from hwvit.ops.records import AddRows


def residual_add(
    a: Any, b: Any, mult_a: Any, mult_b: Any, shift: Any, out_bits: int = 8, narrow: bool = False
) -> np.ndarray:
    """``sat_out_bits(rshift_round(a*Ma + b*Mb, s))``; a, b signed 8 (broadcastable shapes).

    Ma, Mb unsigned 31 and s in [1, 62], per tensor or per last-axis channel. The sum is signed
    40 (``|a*Ma| < 2^38``). ``narrow``: the result in the narrowest dtype holding ``out_bits``
    instead of int64 (``requant``'s).
    """
    out_bits = check_bits(out_bits, "out_bits", *OUT_BITS)
    a = narrow_operand(as_int_operand(a, "a", *INT8.range), 8)  # int8 arrays as they are, no scan
    b = narrow_operand(as_int_operand(b, "b", *INT8.range), 8)
    try:  # the same shapes (the residual stream) need no broadcast rules: a few us a call
        shape = a.shape if a.shape == b.shape else np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ValueError(f"residual_add: shapes {a.shape} and {b.shape} do not broadcast") from None
    ma, mb, s = add_params(mult_a, mult_b, shift, shape)
    lo, hi = signed(out_bits).range
    a_rows = as_rows(a if a.shape == shape else np.broadcast_to(a, shape), keep_dtype=True)
    b_rows = as_rows(b if b.shape == shape else np.broadcast_to(b, shape), keep_dtype=True)
    out = np.empty(a_rows.shape, dtype=out_dtype(lo, hi, narrow))
    _jit.residual_rows(a_rows, b_rows, AddRows(ma, mb, s, lo, hi), out)
    return out.reshape(shape)


def add_params(mult_a: Any, mult_b: Any, shift: Any, shape: tuple) -> tuple:
    """The checked (Ma, Mb, s) of a residual add of data of ``shape``, each a contiguous (C,) int64
    vector of the last axis; made once for immutable ones (ints, read-only arrays: hwvit.ops.frozen)."""
    channels = shape[-1] if shape else 1

    def params():
        ref = np.empty((0, channels))  # per_channel only reads the channel count
        checked = (
            channel_param(mult_a, "mult_a", 0, MULT_MAX, shape),
            channel_param(mult_b, "mult_b", 0, MULT_MAX, shape),
            channel_param(shift, "shift", 1, SHIFT_MAX, shape),
        )
        return tuple(per_channel(v, ref) for v in checked)

    return frozen.derived((mult_a, mult_b, shift, shape), "residual_add", params)


def residual_add_zp(
    a: Any,
    b: Any,
    mult_a: Any,
    mult_b: Any,
    shift: Any,
    out_bits: int = 8,
    rounding: str = "half_up",
    zero_a: int = 0,
    zero_b: int = 0,
    zero_out: int = 0,
) -> np.ndarray:
    """``sat(round((a - za)*Ma + (b - zb)*Mb, s) + zy)``: the residual add of an imported model, whose
    activations may have zero points and whose rounding is the file's (a requant rounding of
    ``hwvit.variants.rounding``: ``half_even`` for ONNX). a, b signed 8 (broadcastable); zero points
    signed 8: ``|a - za| <= 255``, so ``|sum| < 2^40`` as in ``residual_add``; the zero point ``zy`` is
    added after the rounding. With every zero point 0 and ``half_up`` it equals ``residual_add``.
    int64 out."""
    out_bits = check_bits(out_bits, "out_bits", *OUT_BITS)
    a = np.asarray(as_int_operand(a, "a", *INT8.range), dtype=np.int64)
    b = np.asarray(as_int_operand(b, "b", *INT8.range), dtype=np.int64)
    for name, z in (("zero_a", zero_a), ("zero_b", zero_b), ("zero_out", zero_out)):
        if not INT8.lo <= int(z) <= INT8.hi:
            raise ValueError(f"residual_add: {name} {z} outside [-128, 127]")
    shape = np.broadcast_shapes(a.shape, b.shape)
    ma, mb, s = add_params(mult_a, mult_b, shift, shape)
    from hwvit.ops.round_sat import SHIFT_MODES as modes

    if rounding in QLINEAR_ADD:
        return qlinear_add(a, b, ma, mb, s, out_bits, QLINEAR_ADD[rounding], zero_a, zero_b, zero_out)
    if rounding not in modes:
        raise ValueError(f"residual_add: rounding {rounding!r}; choose from {', '.join([*modes, *QLINEAR_ADD])}")
    v = (a - int(zero_a)) * ma + (b - int(zero_b)) * mb  # |v| <= 2 * 255 * (2^31 - 1) < 2^40
    y = modes[rounding](v, s) + int(zero_out)
    return np.clip(y, *signed(out_bits).range).astype(np.int64)


# onnxruntime's QLinearAdd (hwvit.variants-style names of residual_add_zp's rounding): the codes it
# computes on are the file's, an int8 file's as hwvit holds them, a uint8 file's 128 above them.
QLINEAR_ADD = {"onnxruntime": 0, "onnxruntime_u8": 128}
QLINEAR_ADD_SHIFT_MAX = 40  # z_c * 2^s < 2^48: every intermediate below stays inside int64


def qlinear_add(a, b, ma, mb, s, out_bits: int, offset: int, zero_a: int, zero_b: int, zero_out: int) -> np.ndarray:
    """onnxruntime's QLinearAdd on x86 with AVX2 (MLAS ``qladd_avx2.cpp``), exactly on int64.

    On the file's codes ``A = a + offset`` (likewise ``B``, ``Z_a``, ``Z_b``, ``Z_c``) and the
    binary32 ratios ``r_a = f32(s_a / s_c) = Ma' * 2^-s``, ``r_b = Mb' * 2^-s`` over one shift, each
    ``M' = m * 2^k`` a binary32 significand ``m < 2^24`` moved up by ``k <= 23`` bits, carried in its
    31-bit multiplier as ``M = k * 2^24 + m`` (``decode_ratio``), onnxruntime computes in binary32,
    each step rounded half to even to 24 significant bits (``round_significant``):

        F = f32(Z_c) - fma(r_a, Z_a, f32(r_b * Z_b))      (its compiler's contraction)
        c = sat(round_half_even(fma(A, r_a, fma(B, r_b, F))))

    saturated to the file's 8-bit range, then ``- offset`` back to hwvit's codes. Every value is a
    multiple of ``2^-s`` (the ratios are, the codes are integers, and rounding to 24 bits keeps a
    multiple of ``2^-s`` one), so all of it is integers ``* 2^s``: ``|A Ma'| < 2^9 * 2^47``,
    ``|Z_c 2^s| < 2^48`` (s <= 40), their sums below 2^57. int64 out."""
    from hwvit.ops.round_sat import SHIFT_MODES, round_significant

    if out_bits != 8:
        raise ValueError(f"residual_add: onnxruntime's QLinearAdd is 8-bit, got out_bits {out_bits}")
    ma, mb = decode_ratio(ma, "mult_a"), decode_ratio(mb, "mult_b")
    if np.any(s > QLINEAR_ADD_SHIFT_MAX):
        raise ValueError(
            f"residual_add: onnxruntime's QLinearAdd takes shift <= {QLINEAR_ADD_SHIFT_MAX}, got {s.max()}"
        )
    za, zb, zc = (np.int64(int(z) + offset) for z in (zero_a, zero_b, zero_out))
    fixed = round_significant(np.left_shift(zc, s) - round_significant(za * ma + round_significant(zb * mb)))
    t = round_significant((b + offset) * mb + fixed)
    u = round_significant((a + offset) * ma + t)
    y = SHIFT_MODES["half_even"](u, s) - offset
    return np.clip(y, *signed(8).range).astype(np.int64)


QLINEAR_ADD_K_MAX = 23  # a ratio's significand moved up at most 23 bits: M' < 2^47


def encode_ratio(m: int, k: int) -> int:
    """``M = k * 2^24 + m``: a binary32 significand ``m < 2^24`` moved up by ``k`` bits, in 31 bits."""
    if not (0 <= m < 1 << 24 and 0 <= k <= QLINEAR_ADD_K_MAX):
        raise ValueError(
            f"residual_add: ratio significand {m} up {k} bits; hwvit takes m < 2^24, k <= {QLINEAR_ADD_K_MAX}"
        )
    return (k << 24) | m


def decode_ratio(mult: Any, name: str = "multiplier") -> np.ndarray:
    """``m * 2^k`` of ``M = k * 2^24 + m`` (``encode_ratio``); ValueError for ``k > 23``."""
    mult = np.asarray(mult, np.int64)
    k = np.right_shift(mult, 24)
    if np.any(k > QLINEAR_ADD_K_MAX):
        raise ValueError(
            f"residual_add: {name} {mult.tolist()} moves its significand up more than {QLINEAR_ADD_K_MAX} bits"
        )
    return np.left_shift(mult & ((1 << 24) - 1), k)


def f32_ratios(s_a: float, s_b: float, s_out: float) -> tuple[int, int, int]:
    """onnxruntime's QLinearAdd ratios ``f32(s_a / s_out)``, ``f32(s_b / s_out)`` (binary32 divisions)
    as ``(Ma, Mb, s)`` over one shift, each M its significand and how far the finer shift moves it up
    (``hwvit.ops.residual_add.encode_ratio``). ValueError when the two lie more than 2^23 apart or s
    exceeds 40."""
    from hwvit.ops.round_sat import f32_multiplier

    (m_a, e_a), (m_b, e_b) = (f32_multiplier(np.float32(x) / np.float32(s_out)) for x in (s_a, s_b))
    s = max(e_a, e_b)
    k_a, k_b = (s - e_a) if m_a else 0, (s - e_b) if m_b else 0
    if max(k_a, k_b) > QLINEAR_ADD_K_MAX or not 1 <= s <= QLINEAR_ADD_SHIFT_MAX:
        raise ValueError(
            f"onnxruntime's add ratios {s_a / s_out:.4g} and {s_b / s_out:.4g}: hwvit takes them within "
            f"2^{QLINEAR_ADD_K_MAX} of each other and at least 2^-{QLINEAR_ADD_SHIFT_MAX - 24}"
        )
    return encode_ratio(m_a, k_a), encode_ratio(m_b, k_b), s
