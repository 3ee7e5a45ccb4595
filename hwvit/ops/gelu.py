"""GELU by table lookup (``rtl/gelu.v``): ``y = table[x + 2^(in_bits-1)]``.

Every entry is the correctly rounded GELU output (``hwvit.quant.gelu_table``), so the error is
at most 0.5 LSB wherever the output does not saturate.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hwvit.formats import signed
from hwvit.ops import frozen
from hwvit.ops._lazyjit import jit as _jit
from hwvit.ops.checks import as_int_array, as_int_operand, check_bits, narrow_dtype, narrow_operand

_VECTOR_MIN = 1 << 12  # elements from which an int8 lookup runs on the AVX2 kernel (one FFN: 605 184)


def gelu(x: Any, table: Any, in_bits: int = 8, narrow: bool = False) -> np.ndarray:
    """Look up signed ``in_bits`` inputs in a table of ``2^in_bits`` signed (<= 16-bit) entries.

    ``narrow``: the result in the narrowest dtype holding the table's values instead of int64."""
    in_bits = check_bits(in_bits, "in_bits", 2, 16)

    table, dtype, table8 = lookup_table(table, in_bits, narrow)
    x = as_int_operand(x, "x")  # an int8 or int16 x: its range is checked by the lookup, in the same pass
    if x.dtype not in (np.int8, np.int16):  # checked here, then narrowed (exact): two kernel signatures
        x = narrow_operand(as_int_operand(x, "x", *signed(in_bits).range), in_bits)
    if x.dtype == np.int8 and in_bits == 8 and table8 is not None and x.size >= _VECTOR_MIN:
        from hwvit.ops import native  # imported here: numba with it, which small callers never need

        if native.unavailable() is None:  # an int8 x always indexes the 256 entries: no check
            return native.lookup_i8(x, table8)
    out = np.empty(x.size, dtype=dtype)
    ok = _jit.lookup_flat(np.ascontiguousarray(x).reshape(-1), table, 1 << (in_bits - 1), out)
    if not ok:
        lo, hi = signed(in_bits).range
        raise ValueError(f"x: values must lie in [{lo}, {hi}], got [{int(x.min())}, {int(x.max())}]")
    return out.reshape(x.shape)


def lookup_table(table: Any, in_bits: int, narrow: bool) -> tuple:
    """(the checked table as an int64 copy of its own, the output dtype, the table as int8 where
    ``narrow`` and its values fit int8, else None); made once for a read-only table (hwvit.ops.frozen)."""

    def checked():
        t = np.array(as_int_array(table, "table", *signed(16).range))  # the kernel's own (writable) copy
        if t.shape != (1 << in_bits,):
            raise ValueError(f"table: expected {1 << in_bits} entries for in_bits={in_bits}, got shape {t.shape}")
        dt = narrow_dtype(int(t.min()), int(t.max())) if narrow else np.int64
        return t, dt, t.astype(np.int8) if dt == np.int8 else None

    return frozen.derived((table, in_bits, narrow), "gelu-table", checked)
