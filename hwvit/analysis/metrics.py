"""Error metrics between a float reference and a dequantized integer tensor."""

from __future__ import annotations

import math

import numpy as np


def sqnr_db(ref: np.ndarray, test: np.ndarray) -> float:
    """10 log10(sum ref^2 / sum (ref - test)^2); +inf when equal."""
    ref = np.asarray(ref, dtype=np.float64)
    noise = float(np.sum((ref - np.asarray(test, dtype=np.float64)) ** 2))
    signal = float(np.sum(ref**2))
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def cosine(ref: np.ndarray, test: np.ndarray) -> float:
    a = np.asarray(ref, dtype=np.float64).reshape(-1)
    b = np.asarray(test, dtype=np.float64).reshape(-1)
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return 1.0 if na == nb else 0.0
    return float(np.dot(a, b) / (na * nb))


def layer_metrics(ref: np.ndarray, q: np.ndarray, scale: float) -> dict[str, float]:
    """SQNR, cosine, max and mean |error| in output LSB of the integer tensor ``q`` (scale ``scale``)."""
    test = np.asarray(q, dtype=np.float64) * scale
    err = np.abs(np.asarray(ref, dtype=np.float64) - test) / scale
    return {
        "sqnr_db": sqnr_db(ref, test),
        "cosine": cosine(ref, test),
        "max_err_lsb": float(err.max()) if err.size else 0.0,
        "mean_err_lsb": float(err.mean()) if err.size else 0.0,
    }
