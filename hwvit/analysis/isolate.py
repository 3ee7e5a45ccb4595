"""Isolated error and range use of a traced point (issue 12).

Accumulated error at a point is what the whole integer model gets wrong up to there. Isolated
error is what that one layer adds: the integer forward is run again with every traced value
replaced by the float model's activation at that point, quantized at the point's calibrated
scale (``Forcer``), so each layer's inputs carry only their own rounding and clipping.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def point_range(path: str, bits: int) -> tuple[int, int]:
    """Integer range ``(lo, hi)`` of a traced point ``bits`` wide (``IntViT.bits_at``): softmax
    probabilities are unsigned, every other point is two's complement."""
    if path.endswith(".probs") or path.endswith(".softmax"):
        return 0, (1 << bits) - 1
    half = 1 << (bits - 1)
    return -half, half - 1


def quantize_at(x: np.ndarray, scale: float, lo: int, hi: int, zero: int = 0) -> tuple[np.ndarray, int]:
    """``clip(round_half_away(x / scale) + zero, lo, hi)`` and how many elements the clip changed
    (``zero``: the point's zero point, an imported model's; 0 for hwvit's own)."""
    r = np.asarray(x, dtype=np.float64) / scale
    q = np.sign(r) * np.floor(np.abs(r) + 0.5) + zero
    clipped = int(np.count_nonzero((q < lo) | (q > hi)))
    return np.clip(q, lo, hi).astype(np.int64), clipped


def aligned(ref: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """``ref`` as an array of ``shape`` if it holds the same elements in the same layout (the same
    shape, up to axes of size 1: the ECG input is (B, L, 1) in float, (B, L) in int), else None.
    A mere reshape of the same size would hide a transposed layout: separate q/k/v come out of
    their Linear as (B, N, H*hd) and are traced as (B, H, N, hd)."""
    ref = np.asarray(ref)
    if tuple(ref.shape) == tuple(shape):
        return ref
    squeeze = [d for d in ref.shape if d != 1] == [d for d in shape if d != 1]
    return ref.reshape(shape) if squeeze else None


class Forcer:
    """``Trace(force=...)`` callback: the float value of ``floats[path]``, quantized at the point's
    scale, zero point and width (``bits_at``: path -> bits, e.g. ``IntViT.bits_at``; ``zero_at``:
    path -> zero point, ``IntViT.zero_at``, none by default), replaces ``q``."""

    def __init__(
        self, floats: dict[str, np.ndarray], bits_at: Callable[[str], int], zero_at: Callable[[str], int] | None = None
    ):
        self.floats, self.bits_at = floats, bits_at
        self.zero_at = zero_at or (lambda path: 0)

    def __call__(self, path: str, q: np.ndarray, scale: float) -> np.ndarray:
        ref = self.floats.get(path)
        ref = None if ref is None else aligned(ref, q.shape)
        if ref is None:
            return q  # no float counterpart (the fused qkv output, the softmax's own path): keep the int value
        lo, hi = point_range(path, self.bits_at(path))
        return quantize_at(ref, scale, lo, hi, self.zero_at(path))[0]
