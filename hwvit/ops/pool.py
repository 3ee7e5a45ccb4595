"""Mean pooling over tokens: an exact int32 sum, then one requant (``M*2^-s = s_x / (N*s_out)``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from hwvit.formats import INT8
from hwvit.ops.checks import as_int_array
from hwvit.ops.requant import requant


def mean_pool(x: Any, multiplier: Any, shift: Any, out_bits: int = 8, axis: int = -2) -> np.ndarray:
    """``requant(sum(x, axis), M, s, out_bits)`` for signed 8-bit ``x``; M, s may be per channel."""
    x = as_int_array(x, "x", *INT8.range)
    if x.ndim == 0 or not -x.ndim <= axis < x.ndim:
        raise ValueError(f"mean_pool: axis {axis} out of range for shape {x.shape}")
    if x.shape[axis] == 0:
        raise ValueError("mean_pool: no tokens to pool")
    if x.shape[axis] * 128 > 1 << 31:
        raise OverflowError(f"mean_pool: {x.shape[axis]} tokens overflow the int32 sum")
    return requant(x.sum(axis=axis), multiplier, shift, out_bits)
