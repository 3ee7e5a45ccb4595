"""Clip searches on a sample of |x|: MSE-optimal and entropy (KL) thresholds for symmetric quantizers.

Both return a threshold ``c`` (the calibrated range, so the scale is ``c / (2^(bits-1) - 1)``):
- ``mse_clip``: the ``c`` among ``candidates`` fractions of max|x| that minimises the mean squared
  error of ``x - clip(round(x / s), -qmax, qmax) * s`` on the sample itself. max|x| (min/max
  calibration) is always a candidate, so the search is never worse than min/max on that objective.
- ``entropy_clip``: the TensorRT-style KL search: a 2048-bin histogram of |x|; for each candidate
  edge ``i`` the reference P is the first ``i`` bins with everything above folded into the last,
  Q is P merged into ``qmax + 1`` levels and spread back over the non-empty bins; ``c`` is the edge
  with the smallest KL(P || Q).
"""

from __future__ import annotations

import numpy as np

HIST_BINS = 2048


def _qmax(bits: int) -> int:
    if not 2 <= bits <= 16:
        raise ValueError(f"bits must be in [2, 16], got {bits}")
    return (1 << (bits - 1)) - 1


def quant_mse(x: np.ndarray, clip: float, bits: int) -> float:
    """Mean squared error of the symmetric ``bits`` quantizer with range ``clip`` on ``x``."""
    qmax = _qmax(bits)
    s = clip / qmax
    r = np.asarray(x, dtype=np.float64) / s
    q = np.clip(np.sign(r) * np.floor(np.abs(r) + 0.5), -qmax, qmax)
    return float(np.mean((x - q * s) ** 2))


def mse_clip(x: np.ndarray, bits: int = 8, steps: int = 100) -> float:
    """MSE-optimal clip over ``steps`` candidates ``max|x| * k / steps``, ``k = 1..steps``."""
    a = np.abs(np.asarray(x, dtype=np.float64).reshape(-1))
    top = float(a.max()) if a.size else 0.0
    if top == 0.0:
        return 0.0
    best, best_err = top, quant_mse(a, top, bits)  # min/max first: ties keep it
    for k in range(steps - 1, 0, -1):
        c = top * k / steps
        err = quant_mse(a, c, bits)
        if err < best_err:
            best, best_err = c, err
    return best


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    m = p > 0
    if np.any(q[m] == 0):
        return np.inf
    p, q = p[m] / p.sum(), q[m] / q.sum()
    return float(np.sum(p * np.log(p / q)))


def entropy_clip(x: np.ndarray, bits: int = 8, bins: int = HIST_BINS, stride: int = 8) -> float:
    """KL-optimal clip (edges from ``qmax + 1`` bins up to all, every ``stride`` bins)."""
    a = np.abs(np.asarray(x, dtype=np.float64).reshape(-1))
    top = float(a.max()) if a.size else 0.0
    if top == 0.0:
        return 0.0
    levels = _qmax(bits) + 1
    hist, edges = np.histogram(a, bins=bins, range=(0.0, top))
    hist = hist.astype(np.float64)
    best_i, best_kl = bins, np.inf
    for i in list(range(levels, bins, stride)) + [bins]:
        p = hist[:i].copy()
        p[-1] += hist[i:].sum()  # outliers fold into the last kept bin
        groups = np.array_split(np.arange(i), levels)
        q = np.zeros(i)
        for g in groups:
            # Q from the histogram without the folded outliers (as TensorRT does): with them, Q would
            # equal P at i = qmax + 1 and the search would always clip at 1/16 of max|x|.
            nz = g[hist[g] > 0]
            if nz.size:
                q[nz] = hist[g].sum() / nz.size  # the level's mass spread over its non-empty bins
        kl = _kl(p, q)
        if kl < best_kl:
            best_i, best_kl = i, kl
    return float(edges[best_i])
