"""Fused row kernels of hwvit.ops, compiled by numba: the fast paths.

Each function computes exactly what docs/arithmetic.md writes down, on int64 scalars in a loop
(numba compiles the loops; ``prange`` spreads rows over the cores). The public functions in
hwvit.ops check every input first, so these trust theirs: 2-D C-contiguous integer arrays (int64,
or the narrow dtypes of ``checks.NARROW_DTYPES``: each element is widened to int64 as it is read),
widths already in range. Outputs go into arrays the caller allocates in the dtype it wants (values
are clamped to its range first, so the store is exact). ``hwvit.ops.reference`` holds the slow
plain-Python twins the tests compare with. Numbers that matter for overflow: every product below
stays under 2^62 (docs/arithmetic.md).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

_ONE = np.int64(1)


@njit(inline="always")
def _round_shift(v, s):
    """(v + 2^(s-1)) >> s, or v when s = 0 (round half up)."""
    if s > 0:
        return (v + (_ONE << (s - 1))) >> s
    return v


@njit(inline="always")
def _clamp(v, lo, hi):
    return lo if v < lo else (hi if v > hi else v)


@njit(parallel=True, cache=True)
def requant_rows(acc, mult, shift, lo, hi, acc_lo, acc_hi, out):
    """out[i, j] = clamp(round_shift(acc[i, j] * mult[j], shift[j])) for (R, N) acc, into the
    caller's (R, N) ``out`` (any integer dtype holding [lo, hi]); returns whether every acc lies in
    [acc_lo, acc_hi] (the caller refuses the result otherwise)."""
    rows, n = acc.shape
    bad = 0
    for i in prange(rows):
        for j in range(n):
            a = np.int64(acc[i, j])
            if a < acc_lo or a > acc_hi:
                bad += 1
                a = 0
            out[i, j] = _clamp(_round_shift(a * mult[j], shift[j]), lo, hi)
    return bad == 0


@njit(parallel=True, cache=True)
def lookup_flat(x, table, offset, out):
    """out[i] = table[x[i] + offset] for a flat array x, into the caller's ``out``; returns whether
    every x[i] + offset indexes the table (the caller refuses the result otherwise)."""
    n = x.shape[0]
    length = table.shape[0]
    bad = 0
    for i in prange(n):
        j = np.int64(x[i]) + offset
        if j < 0 or j >= length:
            bad += 1
            j = 0
        out[i] = table[j]
    return bad == 0


@njit(inline="always")
def residual_row(a, b, i, add, out):
    """Row ``i``: out[i, j] = clamp(round_shift(a*Ma[j] + b*Mb[j], s[j])) (``add``: an ``AddRows``)."""
    for j in range(a.shape[1]):
        v = np.int64(a[i, j]) * add.mult_a[j] + np.int64(b[i, j]) * add.mult_b[j]
        out[i, j] = _clamp(_round_shift(v, add.shift[j]), add.lo, add.hi)


@njit(parallel=True, cache=True)
def residual_rows(a, b, add, out):
    """out[i, j] = clamp(round_shift(a*Ma[j] + b*Mb[j], s[j])) for (R, N) a and b, into ``out``
    (``add``: an ``AddRows``)."""
    for i in prange(a.shape[0]):
        residual_row(a, b, i, add, out)


SOFTMAX_CHUNK = 16  # rows per parallel job: one exp buffer for them, and fewer jobs for prange


@njit(inline="always")
def softmax_row(x, i, sm, e, out):
    """Row ``i`` of (R, N) ``x`` into ``out[i]`` (``sm``: a ``SoftmaxRows``): E = T[max - x] (or
    shift-and-add when use_shift), one reciprocal, probabilities as differences of the rounded
    cumulative sums (the row sums to q). The table holds the exp table and one 0 after it: an index d
    past the table's end reads that 0 (``min(d, L)``, no branch), which is the d >= L case of the
    contract. ``e``: an (N,) int64 buffer."""
    table, q, recip_shift, exp_frac, shift_frac = sm.table, sm.q, sm.recip_shift, sm.exp_frac, sm.shift_frac
    n = x.shape[1]
    last = table.shape[0] - 1  # the 0 entry
    mx32 = np.int32(x[i, 0])  # inputs are at most 16 bits: int32 lanes vectorize wider
    for j in range(1, n):
        mx32 = max(mx32, np.int32(x[i, j]))
    mx = np.int64(mx32)
    total = np.int64(0)
    if sm.use_shift:  # I-ViT shift-and-add: 2^23 * (1 - f/2) >> q
        one = _ONE << exp_frac
        frac_mask = (_ONE << shift_frac) - 1
        for j in range(n):
            t = (mx - np.int64(x[i, j])) * sm.shift_mult
            qq = t >> shift_frac
            r = t & frac_mask
            ev = np.int64(0) if qq >= exp_frac + 1 else (one - (r << (exp_frac - shift_frac - 1))) >> qq
            e[j] = ev
            total += ev
    else:
        for j in range(n):
            ev = table[min(mx - np.int64(x[i, j]), last)]
            e[j] = ev
            total += ev
    recip = ((q << recip_shift) + (total >> 1)) // total
    half = _ONE << (recip_shift - 1)
    running = np.int64(0)
    prev = np.int64(0)
    for j in range(n):
        running += e[j]
        cum = (running * recip + half) >> recip_shift
        out[i, j] = cum - prev
        prev = cum


@njit(parallel=True, cache=True)
def softmax_rows(x, sm, out):
    """Rows of (R, N) into ``out`` (``softmax_row``; ``sm``: a ``SoftmaxRows``), in chunks of
    SOFTMAX_CHUNK rows that share one exp buffer."""
    rows, n = x.shape
    for c in prange((rows + SOFTMAX_CHUNK - 1) // SOFTMAX_CHUNK):
        e = np.empty(n, dtype=np.int64)
        for i in range(c * SOFTMAX_CHUNK, min(rows, (c + 1) * SOFTMAX_CHUNK)):
            softmax_row(x, i, sm, e, out)


@njit(inline="always")
def _isqrt(n):
    """floor(sqrt(n)) for 0 <= n < 2^62: a float estimate, then exact integer correction."""
    r = np.int64(np.sqrt(np.float64(n)))
    while r * r > n:
        r -= 1
    while (r + 1) * (r + 1) <= n:
        r += 1
    return r


@njit(inline="always")
def layernorm_row(x, i, norm, out):
    """Row ``i`` of (R, C) ``x`` into ``out[i]`` (``norm``: a ``NormRows``): sums, one isqrt and one
    division, then y*G + B and requant. Returns Ve = (V << 2T) + eps, which the caller checks is
    < 2^62."""
    gamma, beta, eps, mult, shift, lo, hi = norm.gamma, norm.beta, norm.eps, norm.mult, norm.shift, norm.lo, norm.hi
    t_bits, k_bits, f_bits = norm.t_bits, norm.k_bits, norm.f_bits
    c = x.shape[1]
    sh = k_bits - t_bits - f_bits
    half = _ONE << (sh - 1)
    sx = np.int64(0)
    sxx = np.int64(0)
    for j in range(c):
        xv = np.int64(x[i, j])
        sx += xv
        sxx += xv * xv
    v = c * sxx - sx * sx
    ve = (v << (2 * t_bits)) + eps
    sig = _isqrt(ve)
    inv = ((_ONE << k_bits) + (sig >> 1)) // sig if sig > 0 else np.int64(0)
    for j in range(c):
        y = ((c * np.int64(x[i, j]) - sx) * inv + half) >> sh
        out[i, j] = _clamp(_round_shift((y * gamma[j] + beta[j]) * mult, shift), lo, hi)
    return ve


@njit(parallel=True, cache=True)
def layernorm_rows(x, norm, out):
    """Rows of (R, C) into ``out`` (``layernorm_row``; ``norm``: a ``NormRows``). Returns, per row,
    Ve = (V << 2T) + eps, which the caller checks is < 2^62."""
    rows = x.shape[0]
    ves = np.empty(rows, dtype=np.int64)
    for i in prange(rows):
        ves[i] = layernorm_row(x, i, norm, out)
    return ves


@njit(parallel=True, cache=True)
def residual_layernorm_rows(a, b, add, sums, norm, out):
    """``residual_rows`` of (R, C) ``a`` and ``b`` into ``sums``, then ``layernorm_rows`` of those
    sums into ``out``, row by row in one pass (the row is still in cache for its norm). ``add``: an
    ``AddRows``; ``norm``: a ``NormRows``. Returns the largest Ve (the caller checks it is < 2^62)."""
    rows = a.shape[0]
    ves = np.empty(rows, dtype=np.int64)
    for i in prange(rows):
        residual_row(a, b, i, add, sums)
        ves[i] = layernorm_row(sums, i, norm, out)
    return ves.max() if rows else np.int64(0)


@njit(parallel=True, cache=True)
def narrow_int8(x, offset, lo, hi):
    """(x - offset) as int8 for a flat integer array, and whether every x lies in [lo, hi].

    One pass both checks the operand's range and makes the int8 copy torch._int_mm takes.
    """
    n = x.shape[0]
    out = np.empty(n, dtype=np.int8)
    bad = 0
    for i in prange(n):
        v = np.int64(x[i])
        if v < lo or v > hi:
            bad += 1
        out[i] = np.int8(v - offset)
    return out, bad == 0


@njit(parallel=True, cache=True)
def widen_bias(acc, bias):
    """int32 (M, N) accumulators + per-column int64 bias -> int64 (|sum| < 2^31 is checked before)."""
    rows, n = acc.shape
    out = np.empty((rows, n), dtype=np.int64)
    for i in prange(rows):
        for j in range(n):
            out[i, j] = np.int64(acc[i, j]) + bias[j]
    return out


@njit(parallel=True, cache=True)
def quantize_flat(x, scale, lo, hi, out):
    """out[i] = clamp(round_half_away(x[i] / scale), lo, hi) for a flat float array x and a scalar
    scale, in float64 step for step as ``hwvit.ops.requant.quantize`` writes it (x / scale, clipped
    to [lo - 1, hi + 1], truncated, the fraction compared with 0.5: every step exact or correctly
    rounded IEEE, so the same doubles); returns whether every x[i] is finite (the caller refuses the
    result otherwise)."""
    n = x.shape[0]
    bad = 0
    below, above = np.float64(lo - 1), np.float64(hi + 1)
    for i in prange(n):
        xi = np.float64(x[i])
        if not np.isfinite(xi):
            bad += 1
            xi = 0.0
        v = xi / scale
        v = below if v < below else (above if v > above else v)
        whole = np.trunc(v)
        frac = v - whole
        if abs(frac) >= 0.5:
            whole += 1.0 if v > 0 else -1.0
        out[i] = np.int64(lo if whole < lo else (hi if whole > hi else whole))
    return bad == 0
