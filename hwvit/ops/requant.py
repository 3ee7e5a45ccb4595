"""Rounding, saturation and requantization: the one place where hwvit narrows an integer.

Every kernel in ``hwvit.ops`` computes exactly on int64 and narrows only through
``rshift_round`` (round half up, ``docs/arithmetic.md``) and ``saturate``. ``requant`` is the
gemmlowp-style fixed-point multiply of ``rtl/requant.v``. ``quantize`` is the single float->int
step, at the model's input boundary. The input checks shared by all kernels live here too.
"""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from hwvit.ops import _jit

ACC_BITS = 32  # accumulators: signed 32
MULT_MAX = (1 << 31) - 1  # multipliers: unsigned 31
SHIFT_MAX = 62  # shifts: unsigned 6, [0, 62]
OUT_BITS_RANGE = (2, 16)  # requant output widths


class Rounding(enum.Enum):
    """Rounding modes of hwvit; there is one, matching the RTL's add-then-shift."""

    HALF_UP = "half_up"  # (v + 2^(s-1)) >> s: ties toward +inf

    @classmethod
    def from_string(cls, name: str) -> "Rounding":
        for mode in cls:
            if mode.value == str(name).lower():
                return mode
        raise ValueError(f"unknown rounding mode {name!r}; known: {[m.value for m in cls]}")


def signed_range(bits: int) -> tuple[int, int]:
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


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


def rshift_round(v: Any, s: Any) -> np.ndarray:
    """``(v + 2^(s-1)) >> s`` (floor shift), and ``v`` for ``s = 0``: round half up.

    ``|v| <= 2^62`` so that the rounding term (at most ``2^61``) cannot overflow int64.
    """
    v = as_int_array(v, "v", -(1 << 62), 1 << 62)
    s = as_int_array(s, "s", 0, SHIFT_MAX)
    half = np.where(s > 0, np.left_shift(np.int64(1), np.maximum(s - 1, 0)), 0)
    return np.right_shift(v + half, s)


def saturate(v: Any, bits: int, signed: bool = True) -> np.ndarray:
    """Clamp to the signed ``bits``-bit range (or ``[0, 2^bits - 1]`` when unsigned)."""
    bits = check_bits(bits, "bits", 1, 63)
    v = as_int_array(v, "v")
    lo, hi = signed_range(bits) if signed else (0, (1 << bits) - 1)
    return np.clip(v, lo, hi)


def requant(acc: Any, multiplier: Any, shift: Any, out_bits: int = 8) -> np.ndarray:
    """``sat_out_bits(rshift_round(acc * M, s))`` with M, s per tensor or per last-axis channel.

    acc is signed 32, M unsigned 31, s in [0, 62]: ``|acc * M| < 2^62`` (exact in int64).
    """
    out_bits = check_bits(out_bits, "out_bits", *OUT_BITS_RANGE)
    acc = as_int_array(acc, "acc")  # its range is checked by the kernel, in the same pass
    m = channel_param(multiplier, "multiplier", 0, MULT_MAX, acc.shape)
    s = channel_param(shift, "shift", 0, SHIFT_MAX, acc.shape)
    lo, hi = signed_range(out_bits)
    acc_lo, acc_hi = signed_range(ACC_BITS)
    out, ok = _jit.requant_rows(as_rows(acc), per_channel(m, acc), per_channel(s, acc), lo, hi, acc_lo, acc_hi)
    if not ok:
        raise ValueError(f"acc: values must lie in [{acc_lo}, {acc_hi}], got [{int(acc.min())}, {int(acc.max())}]")
    return out.reshape(acc.shape)


def as_rows(x: np.ndarray) -> np.ndarray:
    """(..., N) -> contiguous (R, N) int64 (a scalar becomes one row of one element)."""
    return np.ascontiguousarray(x.reshape(-1, x.shape[-1] if x.ndim else 1), dtype=np.int64)


def per_channel(param: np.ndarray, data: np.ndarray) -> np.ndarray:
    """A checked scalar or (N,) channel parameter as a contiguous (N,) int64 vector."""
    n = data.shape[-1] if data.ndim else 1
    return np.ascontiguousarray(np.broadcast_to(param, (n,)), dtype=np.int64)


def quantize(x_float: Any, scale: Any, bits: int = 8) -> np.ndarray:
    """``sat_bits(round_half_away(x / scale))``: the model-input boundary, the only float->int op.

    ``x_float`` is a float numpy array or torch tensor (computed in float64); ``scale`` a
    positive scalar or an array broadcastable against it.
    """
    bits = check_bits(bits, "bits", 2, 32)
    if type(x_float).__module__.split(".")[0] == "torch":
        x_float = x_float.detach().cpu().double().numpy()
    x = np.asarray(x_float)
    if x.dtype.kind not in "fiu" or x.dtype == np.bool_:
        raise ValueError(f"quantize: expected a real array, got dtype {x.dtype}")
    x = x.astype(np.float64)
    scale = np.asarray(scale, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise ValueError("quantize: input holds NaN or infinity")
    if not (np.all(np.isfinite(scale)) and np.all(scale > 0)):
        raise ValueError(f"quantize: scale must be finite and > 0, got {scale}")
    v = x / scale
    lo, hi = signed_range(bits)
    v = np.clip(v, lo - 1, hi + 1)  # beyond the range the rounding does not matter
    whole = np.trunc(v)
    frac = v - whole  # exact in binary floating point
    q = whole + np.where(np.abs(frac) >= 0.5, np.sign(v), 0.0)  # half away from zero
    return np.clip(q, lo, hi).astype(np.int64)
