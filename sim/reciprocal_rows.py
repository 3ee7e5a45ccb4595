"""Rows whose outputs depend on the exact rounding of the once-per-row reciprocal.

Random data almost never notices R or inv off by one: a one-LSB change of R moves the
accumulated sum by cum_i, far below the 2^40 output step. These helpers search (numpy,
vectorized) for rows near rounding boundaries, where it does, using the formulas of
docs/arithmetic.md written out on plain integers; the tests check the formulas against
hwvit.ops before they trust the rows.
"""

from __future__ import annotations

import numpy as np

EXP_FRAC = 23
RS = EXP_FRAC + 17  # softmax reciprocal shift: R = round(Q * 2^40 / S)


def softmax_p(x: np.ndarray, table: np.ndarray, out_bits: int, r_delta: int = 0, drop_half: bool = False) -> np.ndarray:
    """Softmax probabilities of rows ``x`` with R moved by ``r_delta`` (or S/2 dropped from R's dividend)."""
    q = (1 << out_bits) - 1
    x = np.asarray(x, dtype=np.int64)
    d = x.max(axis=-1, keepdims=True) - x
    t = np.asarray(table, dtype=np.int64)
    e = np.where(d < len(t), t[np.minimum(d, len(t) - 1)], 0)
    s = e.sum(axis=-1, keepdims=True)
    half = 0 if drop_half else s // 2
    r = (q * (1 << RS) + half) // s + r_delta  # Python-int exact: q * 2^40 < 2^56
    cum = np.cumsum(e, axis=-1)
    big = (cum * r + (1 << (RS - 1))) >> RS  # cum < 2^36 (64 x 2^24 at most here), r < 2^25: < 2^61
    return np.diff(big, axis=-1, prepend=0)


def softmax_flip_rows(
    table: np.ndarray, out_bits: int, row_len: int, count: int, seed: int, in_bits: int = 8
) -> np.ndarray:
    """``count`` rows: half whose probabilities change when S/2 is dropped from R's dividend
    (R one lower), half whose probabilities change when R is one higher."""
    rng = np.random.default_rng(seed)
    lo, hi = -(1 << (in_bits - 1)), (1 << (in_bits - 1)) - 1
    lower: list[np.ndarray] = []
    higher: list[np.ndarray] = []
    want = (count + 1) // 2
    for _ in range(400):
        # Narrow spreads keep many E_i large: cum_i near 2^29, a flip every ~2^11 elements.
        centre = rng.integers(lo + 8, hi - 8, (2048, 1))
        x = np.clip(centre + rng.integers(-8, 9, (2048, row_len)), lo, hi)
        base = softmax_p(x, table, out_bits)
        if len(lower) < want:
            lower.extend(x[(base != softmax_p(x, table, out_bits, drop_half=True)).any(axis=-1)][: want - len(lower)])
        if len(higher) < count - want:
            higher.extend(
                x[(base != softmax_p(x, table, out_bits, r_delta=1)).any(axis=-1)][: count - want - len(higher)]
            )
        if len(lower) == want and len(higher) == count - want:
            return np.array(lower + higher, dtype=np.int64)
    raise RuntimeError(f"found only {len(lower)} + {len(higher)} of {count} rows")


# ---------------------------------------------------------------------------- layernorm
T_SHIFT, K_SHIFT, F_BITS = 11, 43, 10  # docs/arithmetic.md: T, K, F


def _isqrt(v: np.ndarray) -> np.ndarray:
    """Floor square root of non-negative int64 values below 2^62 (float guess, corrected exactly)."""
    r = np.floor(np.sqrt(v.astype(np.float64))).astype(np.int64)
    for _ in range(3):
        r = np.where(r * r > v, r - 1, r)
        r = np.where((r + 1) * (r + 1) <= v, r + 1, r)
    return r


def layernorm_out(
    x: np.ndarray,
    gamma: np.ndarray,
    beta: np.ndarray,
    eps_int: int,
    mult: int,
    shift: int,
    out_bits: int,
    inv_delta: int = 0,
    drop_half: bool = False,
) -> np.ndarray:
    """LayerNorm outputs of rows ``x`` with inv moved by ``inv_delta`` (or sig/2 dropped from its dividend)."""
    x = np.asarray(x, dtype=np.int64)
    c = x.shape[-1]
    sx = x.sum(axis=-1, keepdims=True)
    v = c * (x * x).sum(axis=-1, keepdims=True) - sx * sx
    sig = _isqrt((v << (2 * T_SHIFT)) + eps_int)
    half = 0 if drop_half else sig // 2
    inv = np.where(sig > 0, ((1 << K_SHIFT) + half) // np.maximum(sig, 1) + inv_delta, 0)
    k = K_SHIFT - T_SHIFT - F_BITS
    y = ((c * x - sx) * inv + (1 << (k - 1))) >> k  # |d| < 2^21, inv <= 2^32: < 2^53
    acc = y * np.asarray(gamma, dtype=np.int64) + np.asarray(beta, dtype=np.int64)
    out = (acc * mult + (1 << (shift - 1))) >> shift if shift else acc * mult  # |acc*M| < 2^62
    lim = 1 << (out_bits - 1)
    return np.clip(out, -lim, lim - 1)


def layernorm_flip_rows(
    c: int,
    count: int,
    seed: int,
    gamma: np.ndarray,
    beta: np.ndarray,
    eps_int: int,
    mult: int,
    shift: int,
    out_bits: int,
) -> np.ndarray:
    """``count`` rows of length ``c``, wide spreads (large variance): half whose outputs change
    when sig/2 is dropped from inv's dividend, half when inv is one higher."""
    rng = np.random.default_rng(seed)
    lower: list[np.ndarray] = []
    higher: list[np.ndarray] = []
    want = (count + 1) // 2

    def outs(x, **kw):
        return layernorm_out(x, gamma, beta, eps_int, mult, shift, out_bits, **kw)

    for _ in range(400):
        x = rng.integers(-128, 127, (max(8, 65536 // c), c), endpoint=True)
        x[: len(x) // 2] = np.where(rng.random((len(x) // 2, c)) < 0.5, -128, 127)  # the largest V
        base = outs(x)
        if len(lower) < want:
            lower.extend(x[(base != outs(x, drop_half=True)).any(axis=-1)][: want - len(lower)])
        if len(higher) < count - want:
            higher.extend(x[(base != outs(x, inv_delta=1)).any(axis=-1)][: count - want - len(higher)])
        if len(lower) == want and len(higher) == count - want:
            return np.array(lower + higher, dtype=np.int64)
    raise RuntimeError(f"found only {len(lower)} + {len(higher)} of {count} rows")
