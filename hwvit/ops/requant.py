"""Requantization (``rtl/requant.v``) and quantization, the model's float->int boundary.

``requant`` is the gemmlowp-style fixed-point multiply: an exact product, then the one rounding
and saturation stage of ``hwvit.ops.round_sat``. ``quantize`` is the single float->int step, at
the model's input boundary.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hwvit.formats import ACC, MULT_MAX, OUT_BITS, SHIFT_MAX, signed
from hwvit.ops._lazyjit import jit as _jit
from hwvit.ops.checks import as_int_array, as_rows, channel_param, check_bits, out_dtype, per_channel


def requant(acc: Any, multiplier: Any, shift: Any, out_bits: int = 8, narrow: bool = False) -> np.ndarray:
    """``sat_out_bits(rshift_round(acc * M, s))`` with M, s per tensor or per last-axis channel.

    acc is signed 32, M unsigned 31, s in [0, 62]: ``|acc * M| < 2^62`` (exact in int64).
    ``narrow``: the result in the narrowest integer dtype holding ``out_bits`` (int8 for 8)
    instead of int64; the integer forward passes such arrays from kernel to kernel.
    """
    out_bits = check_bits(out_bits, "out_bits", *OUT_BITS)
    acc = as_int_array(acc, "acc")  # its range is checked by the kernel, in the same pass
    m = channel_param(multiplier, "multiplier", 0, MULT_MAX, acc.shape)
    s = channel_param(shift, "shift", 0, SHIFT_MAX, acc.shape)
    lo, hi = signed(out_bits).range
    acc_lo, acc_hi = ACC.range
    rows = as_rows(acc)
    out = np.empty(rows.shape, dtype=out_dtype(lo, hi, narrow))
    ok = _jit.requant_rows(rows, per_channel(m, acc), per_channel(s, acc), lo, hi, acc_lo, acc_hi, out)
    if not ok:
        raise ValueError(f"acc: values must lie in [{acc_lo}, {acc_hi}], got [{int(acc.min())}, {int(acc.max())}]")
    return out.reshape(acc.shape)


_KERNEL_MIN = 1 << 12  # elements from which quantize runs as one numba pass (a model input: 150 528)


def quantize(x_float: Any, scale: Any, bits: int = 8, narrow: bool = False) -> np.ndarray:
    """``sat_bits(round_half_away(x / scale))``: the model-input boundary, the only float->int op.

    ``x_float`` is a float numpy array or torch tensor (computed in float64); ``scale`` a
    positive scalar or an array broadcastable against it. ``narrow``: as in ``requant``.
    """
    bits = check_bits(bits, "bits", 2, 32)
    if type(x_float).__module__.split(".")[0] == "torch":
        x_float = x_float.detach().cpu().double().numpy()
    x = np.asarray(x_float)
    if x.dtype.kind not in "fiu" or x.dtype == np.bool_:
        raise ValueError(f"quantize: expected a real array, got dtype {x.dtype}")
    scale = np.asarray(scale, dtype=np.float64)
    lo, hi = signed(bits).range
    big = x.size >= _KERNEL_MIN  # small arrays (parameters, a testbench's values) need no numba import
    if big and scale.ndim == 0 and x.dtype in (np.float32, np.float64) and np.isfinite(scale) and scale > 0:
        out = np.empty(x.shape, dtype=out_dtype(lo, hi, narrow))  # the kernel: the same steps, one pass
        if not _jit.quantize_flat(np.ascontiguousarray(x).reshape(-1), float(scale), lo, hi, out.reshape(-1)):
            raise ValueError("quantize: input holds NaN or infinity")
        return out
    x = x.astype(np.float64)
    if not np.all(np.isfinite(x)):
        raise ValueError("quantize: input holds NaN or infinity")
    if not (np.all(np.isfinite(scale)) and np.all(scale > 0)):
        raise ValueError(f"quantize: scale must be finite and > 0, got {scale}")
    v = x / scale
    v = np.clip(v, lo - 1, hi + 1)  # beyond the range the rounding does not matter
    whole = np.trunc(v)
    frac = v - whole  # exact in binary floating point
    q = whole + np.where(np.abs(frac) >= 0.5, np.sign(v), 0.0)  # half away from zero
    return np.clip(q, lo, hi).astype(out_dtype(lo, hi, narrow))


def requant_zero(
    acc: Any, multiplier: Any, shift: Any, out_bits: int = 8, rounding: str = "half_up", zero: int = 0
) -> np.ndarray:
    """``sat_out_bits(round(acc * M / 2^s) + zero)`` with one of the shift roundings of
    ``round_sat.SHIFT_MODES`` (half to even for ONNX), or onnxruntime's (``round_half_even`` of the
    binary32 product ``round_sat.f32_product``, M < 2^24): an imported model's requant (rtl/gemm.v with
    ZERO_POINTS = 1; without a zero point, the saturating requant variant of that name). The rounded
    value is saturated to ``out_bits + 1`` bits first, as the RTL does: clipped there it lies
    2^(out_bits-1) past the output range, beyond a zero point's reach, so the one saturation after
    the add gives the same integers. acc int32, M unsigned 31 bits: ``|acc * M| < 2^62``. int64 out."""
    from hwvit.ops.round_sat import F32_SIGNIFICAND, SHIFT_MODES, ZERO_POINT_ROUNDINGS, f32_product

    if rounding not in ZERO_POINT_ROUNDINGS:
        raise ValueError(
            f"requant: rounding {rounding!r} with a zero point; choose from {', '.join(ZERO_POINT_ROUNDINGS)}"
        )
    out_bits = check_bits(out_bits, "out_bits", *OUT_BITS)
    lo, hi = signed(out_bits).range
    if zero and out_bits > OUT_BITS[1] - 1:
        raise ValueError(f"requant: a zero point needs out_bits <= {OUT_BITS[1] - 1}, got {out_bits}")
    if not lo <= int(zero) <= hi:
        raise ValueError(f"requant: zero point {zero} outside [{lo}, {hi}]")
    acc = as_int_array(acc, "acc", *ACC.range)
    f32 = rounding == "onnxruntime"  # the binary32 product, then round half to even (its conversion)
    m_max = (1 << F32_SIGNIFICAND) - 1 if f32 else MULT_MAX
    m = np.asarray(as_int_array(multiplier, "multiplier", 0, m_max), np.int64)
    s = np.asarray(as_int_array(shift, "shift", 0, SHIFT_MAX), np.int64)
    wide = signed(out_bits + 1).range if zero else (lo, hi)
    v = f32_product(acc, m) if f32 else acc * m
    y = np.clip(SHIFT_MODES["half_even" if f32 else rounding](v, s), *wide)
    return np.clip(y + int(zero), lo, hi).astype(np.int64)
