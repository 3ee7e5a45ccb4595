"""Isolated error and range use of a traced point (issue 12).

Accumulated error at a point is what the whole integer model gets wrong up to there. Isolated
error is what that one layer adds: the integer forward is run again with every traced value
replaced by the float model's activation at that point, quantized at the point's calibrated
scale (``Forcer``), so each layer's inputs carry only their own rounding and clipping.
"""

from __future__ import annotations

import numpy as np


def point_range(path: str, act_bits: int, softmax_bits: int) -> tuple[int, int]:
    """Integer range ``(lo, hi)`` of a traced point: softmax probabilities are unsigned."""
    if path.endswith(".probs") or path.endswith(".softmax"):
        return 0, (1 << softmax_bits) - 1
    half = 1 << (act_bits - 1)
    return -half, half - 1


def quantize_at(x: np.ndarray, scale: float, lo: int, hi: int) -> tuple[np.ndarray, int]:
    """``clip(round_half_away(x / scale), lo, hi)`` and how many elements the clip changed."""
    r = np.asarray(x, dtype=np.float64) / scale
    q = np.sign(r) * np.floor(np.abs(r) + 0.5)
    clipped = int(np.count_nonzero((q < lo) | (q > hi)))
    return np.clip(q, lo, hi).astype(np.int64), clipped


class Forcer:
    """``Trace(force=...)`` callback: the float value of ``floats[path]``, quantized, replaces ``q``."""

    def __init__(self, floats: dict[str, np.ndarray], act_bits: int, softmax_bits: int):
        self.floats, self.act_bits, self.softmax_bits = floats, act_bits, softmax_bits

    def __call__(self, path: str, q: np.ndarray, scale: float) -> np.ndarray:
        ref = self.floats.get(path)
        if ref is None or ref.size != q.size:
            return q  # no float counterpart (e.g. a fused qkv split differently): keep the int value
        lo, hi = point_range(path, self.act_bits, self.softmax_bits)
        return quantize_at(ref.reshape(q.shape), scale, lo, hi)[0]
