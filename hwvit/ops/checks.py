"""Input checks shared by the integer kernels: integer dtypes, value ranges, per-channel shapes.

Every kernel in ``hwvit.ops`` takes numpy or torch integer arrays and refuses anything else with
one ValueError line naming the argument; these helpers say it once. Ranges come from
``hwvit.formats`` (``as_int_array(x, "x", *INT8.range)``).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def as_int_array(x: Any, name: str, lo: int | None = None, hi: int | None = None) -> np.ndarray:
    """``x`` as an int64 array, refusing non-integer dtypes and values outside ``[lo, hi]``."""
    if type(x).__module__.split(".")[0] == "torch":
        x = x.detach().cpu().numpy()
    arr = np.asarray(x)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{name}: expected an integer array, got dtype {arr.dtype}")
    if arr.dtype == np.uint64 and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        raise OverflowError(f"{name}: values exceed int64")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and ((lo is not None and int(arr.min()) < lo) or (hi is not None and int(arr.max()) > hi)):
        raise ValueError(f"{name}: values must lie in [{lo}, {hi}], got [{int(arr.min())}, {int(arr.max())}]")
    return arr


def check_bits(bits: Any, name: str, lo: int, hi: int) -> int:
    """A width argument: a Python or numpy integer (not a bool) in ``[lo, hi]``."""
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not lo <= int(bits) <= hi:
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {bits!r}")
    return int(bits)


def channel_param(value: Any, name: str, lo: int, hi: int, shape: tuple[int, ...]) -> np.ndarray:
    """A per-tensor scalar or a per-channel vector broadcast along the last axis of ``shape``."""
    arr = as_int_array(value, name, lo, hi)
    if arr.ndim > 1:
        raise ValueError(f"{name}: expected a scalar or a 1-D per-channel array, got shape {arr.shape}")
    if arr.ndim == 1 and (len(shape) == 0 or arr.shape[0] != shape[-1]):
        raise ValueError(f"{name}: {arr.shape[0]} per-channel values for data of shape {shape}")
    return arr


def as_rows(x: np.ndarray) -> np.ndarray:
    """(..., N) -> contiguous (R, N) int64 (a scalar becomes one row of one element)."""
    return np.ascontiguousarray(x.reshape(-1, x.shape[-1] if x.ndim else 1), dtype=np.int64)


def per_channel(param: np.ndarray, data: np.ndarray) -> np.ndarray:
    """A checked scalar or (N,) channel parameter as a contiguous (N,) int64 vector."""
    n = data.shape[-1] if data.ndim else 1
    return np.ascontiguousarray(np.broadcast_to(param, (n,)), dtype=np.int64)
