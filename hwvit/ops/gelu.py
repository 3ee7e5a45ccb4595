"""GELU by table lookup (``rtl/gelu.v``): ``y = table[x + 2^(in_bits-1)]``.

Every entry is the correctly rounded GELU output (``hwvit.quant.gelu_table``), so the error is
at most 0.5 LSB wherever the output does not saturate.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hwvit.formats import signed
from hwvit.ops.checks import as_int_array, check_bits


def gelu(x: Any, table: Any, in_bits: int = 8) -> np.ndarray:
    """Look up signed ``in_bits`` inputs in a table of ``2^in_bits`` signed (<= 16-bit) entries."""
    in_bits = check_bits(in_bits, "in_bits", 2, 16)
    table = as_int_array(table, "table", *signed(16).range)
    if table.shape != (1 << in_bits,):
        raise ValueError(f"table: expected {1 << in_bits} entries for in_bits={in_bits}, got shape {table.shape}")
    x = as_int_array(x, "x", *signed(in_bits).range)
    return table[x + (1 << (in_bits - 1))]
