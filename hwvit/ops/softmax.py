"""Integer softmax along the last axis (``rtl/softmax.v``).

Per row: ``d = max - x``, ``E = T[d]`` (24-bit exp table, ``T[0] = 2^23``), ``S = sum E``, one
rounded reciprocal ``R = floor((Q*2^40 + floor(S/2)) / S)`` per row, then the rounded cumulative
probabilities ``P_i = (C_i*R + 2^39) >> 40`` of the prefix sums ``C_i = E_0 + ... + E_i`` and
``p_i = P_i - P_(i-1)`` with ``Q = 2^out_bits - 1``. Probabilities are unsigned, real value
``p / Q`` (1.0 is representable); every row sums to exactly ``Q`` and each ``p_i`` is within
1 LSB of the float softmax (rounding each ``p_i`` on its own would lose ~3 LSB per row to the
many probabilities below half an LSB).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hwvit.formats import EXP, MULT_MAX, signed
from hwvit.ops import frozen
from hwvit.ops._lazyjit import jit as _jit
from hwvit.ops.checks import as_int_array, as_int_operand, as_rows, check_bits, narrow_operand, out_dtype
from hwvit.ops.records import SoftmaxRows

EXP_FRAC = 23  # T[0] = 2^23: entries off by <= 1/2 move p by <= Q * N * 2^-24 (0.004 LSB at N = 256)
EXP_ONE = 1 << EXP_FRAC
RECIP_SHIFT = EXP_FRAC + 17  # R = round(Q * 2^40 / S) <= Q * 2^17
MAX_ROW = 4096  # S <= 4096 * 2^23 = 2^35 (36 bits)
SHIFT_FRAC = 16  # exp="shift": fractional bits of d * m


def _padded(table: np.ndarray) -> np.ndarray:
    """The table with one 0 after it, as the row kernel reads it (an index past the end reads 0)."""
    out = np.zeros(table.shape[0] + 1, dtype=np.int64)
    out[:-1] = table
    return out


def table_of(exp_table: Any, in_bits: int) -> np.ndarray:
    """The checked exp table with one 0 after it (``_padded``), as the row kernel reads it; made
    once for a read-only table (``hwvit.ops.frozen``), else at every call."""

    def checked():
        t = as_int_array(exp_table, "exp_table", *EXP.range)
        if t.ndim != 1 or not 1 <= t.shape[0] <= 1 << in_bits:
            raise ValueError(f"exp_table: expected 1..{1 << in_bits} entries, got shape {t.shape}")
        if int(t[0]) != EXP_ONE:
            raise ValueError(f"exp_table: T[0] must be 2^{EXP_FRAC} = {EXP_ONE}, got {int(t[0])}")
        return _padded(t)

    return frozen.derived((exp_table, in_bits), "softmax-table", checked)


def softmax(
    x: Any,
    exp_table: Any,
    out_bits: int = 8,
    in_bits: int = 8,
    exp: str = "table",
    exp_mult: int | None = None,
    narrow: bool = False,
) -> np.ndarray:
    """Integer softmax of signed ``in_bits`` inputs along the last axis (rows of 1..4096).

    exp="table": ``exp_table`` has L <= 2^in_bits unsigned 24-bit entries, ``T[0] = 2^23``;
    ``d >= L`` gives 0. exp="shift": the shift-and-add exp above (Python only), ``exp_table``
    ignored, ``exp_mult = round(s_in * log2(e) * 2^16)`` (``hwvit.quant.exp_shift_mult``).
    Returns unsigned ``out_bits`` probabilities, real value ``p / (2^out_bits - 1)``; ``narrow``:
    in the narrowest dtype holding them (uint8 for 8 bits) instead of int64.
    """
    out_bits = check_bits(out_bits, "out_bits", 1, 16)
    in_bits = check_bits(in_bits, "in_bits", 2, 16)
    x = narrow_operand(as_int_operand(x, "x", *signed(in_bits).range), in_bits)
    if x.ndim == 0 or not 1 <= x.shape[-1] <= MAX_ROW:
        raise ValueError(f"softmax: rows must hold 1..{MAX_ROW} elements, got shape {x.shape}")
    if exp == "table":
        padded = table_of(exp_table, in_bits)
        mult = 0
    elif exp == "shift":
        if exp_mult is None:
            raise ValueError("softmax: exp='shift' needs exp_mult = round(s_in * log2(e) * 2^16)")
        mult = int(as_int_array(exp_mult, "exp_mult", 0, MULT_MAX))
        padded = _padded(np.full(1, EXP_ONE, dtype=np.int64))  # unused by the shift-and-add path
    else:
        raise ValueError(f"softmax: exp must be 'table' or 'shift', got {exp!r}")
    q = (1 << out_bits) - 1
    # Per row: S in [2^23, N * 2^23] (d = 0 at the max gives 2^23), R <= Q * 2^17, the prefix sums
    # C_i <= S, so C_i * R <= Q * 2^40 + 2^34 < 2^57: exact in int64.
    rows = as_rows(x, keep_dtype=True)
    out = np.empty(rows.shape, dtype=out_dtype(0, q, narrow))
    sm = SoftmaxRows(padded, q, RECIP_SHIFT, exp == "shift", mult, EXP_FRAC, SHIFT_FRAC)
    _jit.softmax_rows(rows, sm, out)
    return out.reshape(x.shape)
