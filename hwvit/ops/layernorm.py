"""Integer LayerNorm along the last axis (``rtl/layernorm.v``).

Per row of C signed 8-bit inputs: exact sums ``Sx``, ``Sxx``; ``V = C*Sxx - Sx^2`` (C^2 times the
variance, in LSB^2); one floor square root and one rounded division per row; per element one
multiply and a rounding shift give ``y = round((x - mean) / std * 2^F)``, then the fixed-point
affine ``y*G + B`` and a requant. See docs/arithmetic.md for every width.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hwvit.formats import BETA, GAMMA, INT8, MULT_MAX, OUT_BITS, SHIFT_MAX, signed
from hwvit.ops import frozen
from hwvit.ops._lazyjit import jit as _jit
from hwvit.ops.checks import as_int_array, as_int_operand, as_rows, check_bits, narrow_operand, out_dtype, writable
from hwvit.ops.records import NormRows

LN_T = 11  # extra bits of sig: V is scaled by 2^(2T), so floor(sqrt) costs <= 2^-11 relative
LN_K = 43  # inv = round(2^K / sig) <= 2^32
LN_F = 10  # fractional bits of the normalized value y
MAX_C = 4096
G_MAX = GAMMA.hi  # symmetric: -G_MAX..G_MAX
B_MAX = BETA.hi
EPS_MAX = 1 << 61  # eps_int is in units of 2^-2T LSB^2 * C^2; V << 2T < 2^60, so Ve < 2^62
VE_LIMIT = 1 << 62


def layernorm(
    x: Any,
    gamma: Any,
    beta: Any,
    eps_int: int,
    multiplier: Any,
    shift: Any,
    out_bits: int = 8,
    narrow: bool = False,
) -> np.ndarray:
    """LayerNorm of signed 8-bit rows; gamma/beta are the integer ``G``, ``B`` of
    ``hwvit.quant.layernorm_params`` (shape (C,)), ``eps_int`` in units of ``2^-22 * C^2 * LSB^2``
    (``V << 22``'s units: 22 fractional bits, so a small eps is not rounded away). ``narrow``: the
    result in the narrowest dtype holding ``out_bits`` instead of int64 (``requant``'s)."""
    x = narrow_operand(as_int_operand(x, "x", *INT8.range), 8)
    if x.ndim == 0 or not 1 <= x.shape[-1] <= MAX_C:
        raise ValueError(f"layernorm: rows must hold 1..{MAX_C} elements, got shape {x.shape}")
    c = x.shape[-1]
    g, b, eps, m, s, lo, hi = norm_params(gamma, beta, eps_int, multiplier, shift, out_bits, c)
    # Per row (docs/arithmetic.md): Sx signed 20, Sxx unsigned 27, V = C*Sxx - Sx^2 < 2^39,
    # Ve = (V << 22) + eps_int < 2^62, sig = isqrt(Ve) < 2^31, inv <= 2^32 (0 when sig = 0: then
    # every d is 0), d = C*x - Sx signed 21, y = (d*inv + 2^21) >> 22 signed 17, acc = y*G + B
    # signed 32, then requant (|acc * M| < 2^62).
    rows = as_rows(x, keep_dtype=True)
    out = np.empty(rows.shape, dtype=out_dtype(lo, hi, narrow))
    ve = _jit.layernorm_rows(rows, NormRows(g, b, eps, m, s, lo, hi, LN_T, LN_K, LN_F), out)
    if ve.size and int(ve.max()) >= VE_LIMIT:
        raise OverflowError(f"layernorm: (V << 22) + eps_int = {int(ve.max())} >= 2^62")
    return out.reshape(x.shape)


def norm_params(gamma: Any, beta: Any, eps_int: int, multiplier: Any, shift: Any, out_bits: int, c: int) -> tuple:
    """The checked parameters of a LayerNorm of rows of ``c``: ((C,) int64 G and B, eps, M, s, lo, hi);
    made once for immutable ones (ints, read-only arrays: hwvit.ops.frozen)."""

    def params():
        g = as_int_array(gamma, "gamma", -G_MAX, G_MAX)
        b = as_int_array(beta, "beta", -B_MAX, B_MAX)
        if g.shape != (c,) or b.shape != (c,):
            raise ValueError(f"layernorm: gamma {g.shape} and beta {b.shape} must have shape ({c},)")
        eps = int(as_int_array(eps_int, "eps_int", 0, EPS_MAX))
        m = int(as_int_array(multiplier, "multiplier", 0, MULT_MAX))
        s = int(as_int_array(shift, "shift", 0, SHIFT_MAX))
        bits = check_bits(out_bits, "out_bits", *OUT_BITS)
        return (writable(np.ascontiguousarray(g)), writable(np.ascontiguousarray(b)), eps, m, s, *signed(bits).range)

    return frozen.derived((gamma, beta, eps_int, multiplier, shift, out_bits, c), "layernorm", params)
