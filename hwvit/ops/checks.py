"""Input checks shared by the integer kernels: integer dtypes, value ranges, per-channel shapes.

Every kernel in ``hwvit.ops`` takes numpy or torch integer arrays and refuses anything else with
one ValueError line naming the argument; these helpers say it once. Ranges come from
``hwvit.formats`` (``as_int_array(x, "x", *INT8.range)``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

# The integer dtypes a kernel may take as they are, and give back (``narrow_dtype``), narrowest first.
NARROW_DTYPES = tuple(np.dtype(t) for t in ("int8", "uint8", "int16", "uint16", "int32", "int64"))


# each one's (min, max), read once (np.iinfo is built anew at every call); in NARROW_DTYPES' order
_RANGES = {dt: (int(np.iinfo(dt).min), int(np.iinfo(dt).max)) for dt in NARROW_DTYPES}


def narrow_dtype(lo: int, hi: int) -> np.dtype:
    """The narrowest of ``NARROW_DTYPES`` that holds every integer in ``[lo, hi]``."""
    for dt, (dmin, dmax) in _RANGES.items():
        if dmin <= lo and hi <= dmax:
            return dt
    raise ValueError(f"no integer dtype holds [{lo}, {hi}]")


def out_dtype(lo: int, hi: int, narrow: bool) -> np.dtype:
    """A kernel's output dtype: int64, or with ``narrow`` the narrowest one for ``[lo, hi]``."""
    return narrow_dtype(lo, hi) if narrow else np.dtype(np.int64)


def as_int_operand(x: Any, name: str, lo: int | None = None, hi: int | None = None) -> np.ndarray:
    """``x`` with its values checked in ``[lo, hi]`` (no check without bounds), kept in its own dtype
    when that is one of ``NARROW_DTYPES`` (the kernels compile for each), else as int64.

    A dtype whose whole range lies in ``[lo, hi]`` (int8 for a signed 8-bit operand) needs no scan:
    the integer forward passes such arrays from kernel to kernel."""
    if type(x).__module__.split(".")[0] == "torch":
        x = x.detach().cpu().numpy()
    arr = np.asarray(x)
    if arr.dtype not in _RANGES:
        return as_int_array(arr, name, lo, hi)
    dmin, dmax = _RANGES[arr.dtype]
    if (lo is None or lo <= dmin) and (hi is None or dmax <= hi):
        return arr
    return _check_range(arr, name, lo, hi)


def as_int_array(x: Any, name: str, lo: int | None = None, hi: int | None = None) -> np.ndarray:
    """``x`` as an int64 array, refusing non-integer dtypes and values outside ``[lo, hi]``."""
    if type(x).__module__.split(".")[0] == "torch":
        x = x.detach().cpu().numpy()
    arr = np.asarray(x)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{name}: expected an integer array, got dtype {arr.dtype}")
    if arr.dtype == np.uint64 and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        raise OverflowError(f"{name}: values exceed int64")
    return _check_range(arr.astype(np.int64, copy=False), name, lo, hi)


def _check_range(arr: np.ndarray, name: str, lo: int | None, hi: int | None) -> np.ndarray:
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


def writable(x: np.ndarray) -> np.ndarray:
    """``x``, or a copy where it is read-only (a frozen parameter, hwvit.ops.frozen): to numba a
    read-only array is a type of its own, and every kernel signature costs a second or more of
    compiling; the kernels only read these arrays, so one writable signature serves both."""
    return x if x.flags.writeable else x.copy()


def narrow_operand(x: np.ndarray, bits: int) -> np.ndarray:
    """``x``, whose values are checked to lie in signed ``bits``, as int8 (bits <= 8) or int16:
    exact, and a row kernel then compiles for one or two input dtypes instead of one for each dtype
    a caller passes (seconds each, in every fresh checkout)."""
    dtype = np.int8 if bits <= 8 else np.int16
    return x if x.dtype == dtype else x.astype(dtype)


def as_rows(x: np.ndarray, keep_dtype: bool = False) -> np.ndarray:
    """(..., N) -> contiguous (R, N) int64, or in x's own dtype with ``keep_dtype`` (a scalar
    becomes one row of one element); writable (``writable``)."""
    rows = np.ascontiguousarray(x.reshape(-1, x.shape[-1] if x.ndim else 1), dtype=None if keep_dtype else np.int64)
    return writable(rows)


def per_channel(param: np.ndarray, data: np.ndarray) -> np.ndarray:
    """A checked scalar or (N,) channel parameter as a contiguous, writable (N,) int64 vector."""
    n = data.shape[-1] if data.ndim else 1
    return writable(np.ascontiguousarray(np.broadcast_to(param, (n,)), dtype=np.int64))
