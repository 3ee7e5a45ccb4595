"""Residual add of two activations at different scales (``rtl/residual_add.v``).

Both inputs are rescaled to the output scale by integer multipliers with one shared shift and
one rounding: ``y = sat(rshift_round(a*Ma + b*Mb, s))``, ``Ma*2^-s = s_a/s_out``,
``Mb*2^-s = s_b/s_out`` (``hwvit.quant.residual_params``). Also adds position embeddings.
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

    if rounding not in modes:
        raise ValueError(f"residual_add: rounding {rounding!r}; choose from {', '.join(modes)}")
    v = (a - int(zero_a)) * ma + (b - int(zero_b)) * mb  # |v| <= 2 * 255 * (2^31 - 1) < 2^40
    y = modes[rounding](v, s) + int(zero_out)
    return np.clip(y, *signed(out_bits).range).astype(np.int64)
