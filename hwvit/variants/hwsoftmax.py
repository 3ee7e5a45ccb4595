"""Hardware softmax variants from three accelerator papers, as exact integer kernels.

- ``softmax=softermax``: Softermax (Stevens et al., DAC 2021): base-2 exponent, integer running
  max, one-pass online normalizer, linear-piecewise 2^f and reciprocal;
- ``softmax=ita``: ITA's streaming integer softmax (Islamoglu et al., ISLPED 2023): exp as a
  right shift of 2^8, the denominator accumulated per 16-element chunk and shifted when the max
  grows, one division per row, the outputs as shifts of the inverse;
- ``softmax=log2``: FQ-ViT's log-int-softmax (Lin et al., IJCAI 2022): I-BERT's polynomial i-exp,
  the sum, probabilities as log2 codes ``round(-log2 p)`` (exact integer rounding), returned as the
  linear ``2^(M - code)`` at scale ``2^-M`` for the P.V GEMM.

Input ``x``: (..., N) signed ``in_bits`` (2..16) scores at ``s_in``, N in 1..4096; output unsigned
``out_bits`` (1..16) probabilities, linear, at ``out_scale``. Every kernel is numpy int64,
vectorized over rows (the streaming recurrences loop over columns); every reference is Python ints
over lists, written on its own. ``WIDTHS`` gives each intermediate's bound (bits, unsigned
magnitude) at the extremes (in_bits 16, N 4096, the largest multiplier), which the references can
record (``track``) and tests/test_variants_hwsoftmax.py checks. docs/variants/hwsoftmax.md derives
each formula and states the choices.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hwvit.ops.checks import as_int_array
from hwvit.variants.base import Params, SoftmaxContext, Variant

MAX_ROW = 4096
LOG2E = 1.0 / math.log(2.0)

# Shared: the base-2 slope K = round_half_up(s_in * log2(e) * 2^16), unsigned < 2^31.
K_FRAC = 16
K_MAX = (1 << 31) - 1

# Softermax
SM_LPW = 4  # 2^4 = 16 segments for 2^f and for 1/m
SM_ONE = 15  # pow2 output Q1.15: 2^0 = 2^15
SM_REC = 16  # reciprocal Q1.16: 1/1 = 2^16
# ITA
ITA_CHUNK = 16  # ITA's N = 16 processing elements: one chunk of the row per step
ITA_EXP = 8  # exp = 2^8 >> shift
# ITA's input scale: s_in log2(e) = 1, so the exponent is the difference itself (PyITA's range_scale
# 32, since pulp-platform/ITA 39236c9, Nov 2024); before it, s_in log2(e) = 2^-5 (ITA_SCALE_2023,
# PyITA's first release 6a0bad5). The variant takes any s_in; these are the scales ITA's hardware fixes.
ITA_SCALE = math.log(2.0)
ITA_SCALE_2023 = math.log(2.0) / 32
# log2 (I-BERT i-exp inside FQ-ViT's LIS)
IBERT_A, IBERT_B, IBERT_C = 0.3585, 1.353, 0.344
LIS_EXP_BITS = 19  # i-exp output normalized into [2^18, 2^19)
LIS_S_WORK = 2.0**-3  # the working scale s_in / 2^k is at most 1/8
LIS_S_MIN, LIS_S_MAX = 2.0**-24, 2.0**16

# Bound (bits of the unsigned magnitude) of every intermediate at the extremes; see each kernel.
WIDTHS = {
    "softermax": {
        "u": 46,  # |x * K| < 2^15 * 2^31
        "c": 31,  # ceil(u / 2^16): |c| <= 2^30
        "v": 48,  # 0 <= -(u - m * 2^16) < (2^16 - 1) * 2^31 + 2^16
        "lpw_prod": 24,  # (C[s+1] - C[s]) * r < 2^12 * 2^12
        "lpw": 16,  # 2^f in [2^15, 2^16)
        "e": 16,  # pow2 <= 2^15
        "d": 28,  # running sum <= 4096 * 2^15 = 2^27
        "mq": 16,  # mantissa of d in [2^15, 2^16)
        "rec_prod": 23,  # (R[s] - R[s+1]) * r < 2^12 * 2^11
        "rec": 17,  # 1/m <= 2^16
        "prod": 42,  # e * rec + 2^(sh-1) <= 2^31 + 2^41
    },
    "ita": {
        "dk": 47,  # (max - x) * K + 2^15 < 2^16 * 2^31
        "shift": 31,  # ((max - x) * K + 2^15) >> 16 < 2^31
        "exp": 9,  # 2^8 >> shift <= 2^8
        "sigma": 21,  # denominator <= 4096 * 2^8 = 2^20
        "num": 24,  # (2^out_bits - 1) * 2^8 < 2^24
        "inv": 16,  # inverse <= 2^out_bits - 1
    },
    "log2_exact": {
        "d": 35,  # |(x - max) << k| <= (2^16 - 1) * 2^19 (k <= 19 for s_in <= 2^16)
        "z": 33,  # floor(-d / q_ln2) < 2^35 / 5 (k > 0 gives q_ln2 >= 5; k = 0: z < 2^16)
        "qp": 16,  # |q_p| < min(q_ln2, |d| + 1): < 2^16 at k = 0, < q_ln2 <= 11 at k > 0
        "L": 50,  # (q_p + q_b)^2 + q_c <= q_b^2 + q_c < 2.8 / s^2 <= 2^50
        "E": 19,  # floor(L * 2^(n - z)) < 2^19
        "S": 31,  # sum < 4096 * 2^19
        "S2": 62,  # S^2
        "E2": 38,  # E^2
    },
}


def _track(track: dict | None, name: str, value: int) -> None:
    if track is not None:
        track[name] = max(track.get(name, 0), abs(value))


def _check_x(x: Any, p: Params) -> np.ndarray:
    bits = int(p["in_bits"])
    arr = as_int_array(x, "x", -(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if arr.ndim == 0 or not 1 <= arr.shape[-1] <= MAX_ROW:
        raise ValueError(f"softmax: rows must hold 1..{MAX_ROW} elements, got shape {arr.shape}")
    return arr.astype(np.int64)


def _check_ctx(ctx: SoftmaxContext) -> None:
    if not 2 <= ctx.in_bits <= 16 or not 1 <= ctx.out_bits <= 16:
        raise ValueError(f"softmax: in_bits in [2, 16] and out_bits in [1, 16], got {ctx.in_bits}, {ctx.out_bits}")
    if not (math.isfinite(ctx.s_in) and ctx.s_in > 0):
        raise ValueError(f"s_in must be finite and > 0, got {ctx.s_in!r}")


def _slope(s_in: float) -> int:
    """``K = round_half_up(s_in * log2(e) * 2^16)`` in [1, 2^31 - 1]: the input scale folded with log2(e)."""
    k = math.floor(s_in * LOG2E * (1 << K_FRAC) + 0.5)
    if not 1 <= k <= K_MAX:
        raise ValueError(f"s_in={s_in}: s_in * log2(e) * 2^16 must round into [1, 2^31 - 1], got {k}")
    return k


def _rows_ref(x) -> tuple[list[list[int]], tuple[int, ...]]:
    shape = np.shape(x)
    flat = [int(v) for v in np.asarray(x).reshape(-1).tolist()]
    n = shape[-1]
    return [flat[i : i + n] for i in range(0, len(flat), n)], shape


def _unrows(rows: list[list[int]], shape) -> list:
    return np.array(rows, dtype=np.int64).reshape(shape).tolist()


# ----------------------------------------------------------------------------------------------
# Softermax (Stevens et al., DAC 2021)
# ----------------------------------------------------------------------------------------------


def _softermax_prepare(ctx: SoftmaxContext) -> Params:
    """K, and the two 17-entry LPW knot tables (float only here):

    ``pow2_table[s] = round_half_up(2^15 * 2^(s/16))`` (2^15..2^16) and
    ``recip_table[s] = round_half_up(2^16 / (1 + s/16))`` (2^16..2^15), s = 0..16.
    """
    _check_ctx(ctx)
    seg = 1 << SM_LPW
    pow2 = [math.floor((1 << SM_ONE) * 2.0 ** (s / seg) + 0.5) for s in range(seg + 1)]
    recip = [math.floor((1 << SM_REC) / (1.0 + s / seg) + 0.5) for s in range(seg + 1)]
    return {
        "mult": _slope(ctx.s_in),
        "pow2_table": np.array(pow2, dtype=np.int64),
        "recip_table": np.array(recip, dtype=np.int64),
        "in_bits": ctx.in_bits,
        "out_bits": ctx.out_bits,
    }


def _sm_pow2(v: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``2^(v / 2^16)`` at Q1.15 for ``v <= 0`` (|v| < 2^48): ``LPW(frac) >> -floor``.

    frac = the low 16 bits of v (two's complement), segment s = its top 4 bits, r = the low 12:
    ``LPW = C[s] + ((C[s+1] - C[s]) * r >> 12)`` in [2^15, 2^16) (product < 2^24). Result <= 2^15.
    """
    ip = v >> K_FRAC  # arithmetic shift: floor, <= 0
    fp = v & ((1 << K_FRAC) - 1)
    low = K_FRAC - SM_LPW
    s = fp >> low
    r = fp & ((1 << low) - 1)
    lpw = table[s] + (((table[s + 1] - table[s]) * r) >> low)
    return lpw >> np.minimum(-ip, 62)


def _softermax_kernel(x: Any, p: Params) -> np.ndarray:
    """Softermax over the last axis; int64 bounds (in_bits <= 16, N <= 4096, K < 2^31):

    - ``u = x * K``: the base-2 exponent with 16 fraction bits, |u| < 2^46;
    - IntMax ``c = ceil(u / 2^16)`` (|c| <= 2^30), running ``m_j = max(m_(j-1), c_j)``;
    - ``v = u - m * 2^16``, 0 >= v > -2^48; ``pow2(v)`` <= 2^15 (16 bits), see ``_sm_pow2``;
    - online sum ``d_j = (d_(j-1) >> (m_j - m_(j-1))) + pow2(u_j - m_j * 2^16)``, 2^14 < d <= 2^27;
    - ``ex = bitlen(d) - 1`` in [14, 27], mantissa ``mq = (d << 15) >> ex`` in [2^15, 2^16) (d << 15 < 2^43);
    - reciprocal ``rec = R[s] - ((R[s] - R[s+1]) * r >> 11)`` in (2^15, 2^16] (product < 2^23);
    - ``y = min((e_i * rec + 2^(sh-1)) >> sh, 2^out_bits - 1)``, sh = 16 + ex - out_bits >= 14,
      e_i * rec <= 2^31 (sum < 2^42); scale 2^-out_bits.
    """
    rows = _check_x(x, p)
    shape = rows.shape
    rows = rows.reshape(-1, shape[-1])
    k = int(p["mult"])
    t2 = np.asarray(p["pow2_table"], dtype=np.int64)
    rt = np.asarray(p["recip_table"], dtype=np.int64)
    ob = int(p["out_bits"])
    u = rows * k
    c = -((-u) >> K_FRAC)  # ceil
    m = c[:, 0].copy()
    d = _sm_pow2(u[:, 0] - (m << K_FRAC), t2)
    for j in range(1, rows.shape[1]):
        mn = np.maximum(m, c[:, j])
        d = (d >> np.minimum(mn - m, 62)) + _sm_pow2(u[:, j] - (mn << K_FRAC), t2)
        m = mn
    e = _sm_pow2(u - (m[:, None] << K_FRAC), t2)
    ex = (d[:, None] >= (np.int64(1) << np.arange(1, 40, dtype=np.int64))).sum(axis=1)
    mq = (d << SM_ONE) >> ex
    low = SM_ONE - SM_LPW
    s = (mq >> low) & ((1 << SM_LPW) - 1)
    r = mq & ((1 << low) - 1)
    rec = rt[s] - (((rt[s] - rt[s + 1]) * r) >> low)
    sh = (SM_REC + ex - ob)[:, None]
    y = (e * rec[:, None] + (np.int64(1) << (sh - 1))) >> sh
    return np.minimum(y, (1 << ob) - 1).reshape(shape)


def softermax_row_ref(row: list[int], p: Params, track: dict | None = None) -> list[int]:
    """One row of Softermax on Python ints (``track``: the largest |value| of each intermediate)."""
    k, ob = int(p["mult"]), int(p["out_bits"])
    t2 = [int(v) for v in p["pow2_table"]]
    rt = [int(v) for v in p["recip_table"]]
    one = 1 << K_FRAC
    step = one // (1 << SM_LPW)  # 2^12 fraction codes per segment

    def pow2(v: int) -> int:
        _track(track, "v", v)
        whole, frac = divmod(v, one)  # whole <= 0, 0 <= frac < 2^16
        seg, r = divmod(frac, step)
        _track(track, "lpw_prod", (t2[seg + 1] - t2[seg]) * r)
        lpw = t2[seg] + (t2[seg + 1] - t2[seg]) * r // step
        _track(track, "lpw", lpw)
        out = lpw >> -whole  # Python ints: >> is floor division by 2^k for any k
        _track(track, "e", out)
        return out

    us = [v * k for v in row]
    m = None
    d = 0
    for u in us:
        _track(track, "u", u)
        c = (u + one - 1) // one
        _track(track, "c", c)
        new = c if m is None else max(m, c)
        if m is not None:
            d = d >> (new - m)
        m = new
        d += pow2(u - m * one)
        _track(track, "d", d)
    ex = d.bit_length() - 1
    mq = d * 2**SM_ONE // 2**ex
    _track(track, "mq", mq)
    rstep = 1 << (SM_ONE - SM_LPW)
    seg, r = divmod(mq - (1 << SM_ONE), rstep)
    _track(track, "rec_prod", (rt[seg] - rt[seg + 1]) * r)
    rec = rt[seg] - (rt[seg] - rt[seg + 1]) * r // rstep
    _track(track, "rec", rec)
    sh = SM_REC + ex - ob
    out = []
    for u in us:
        num = pow2(u - m * one) * rec + 2 ** (sh - 1)
        _track(track, "prod", num)
        out.append(min(num // 2**sh, 2**ob - 1))
    return out


def _softermax_ref(x, p: Params):
    rows, shape = _rows_ref(x)
    return _unrows([softermax_row_ref(r, p) for r in rows], shape)


# ----------------------------------------------------------------------------------------------
# ITA (Islamoglu et al., ISLPED 2023)
# ----------------------------------------------------------------------------------------------


def _ita_prepare(ctx: SoftmaxContext) -> Params:
    """K = round_half_up(s_in * log2(e) * 2^16): ITA's scale ``s_in = 1/log2 e`` (``ITA_SCALE``) gives
    K = 2^16 and ``shift = d``, ITA's own shift; its earlier ``1/(32 log2 e)`` (``ITA_SCALE_2023``)
    gives K = 2^11 and ``shift = (d + 16) >> 5``."""
    _check_ctx(ctx)
    return {"mult": _slope(ctx.s_in), "in_bits": ctx.in_bits, "out_bits": ctx.out_bits}


def _ita_kernel(x: Any, p: Params) -> np.ndarray:
    """ITA's softmax over the last axis, chunks of 16; int64 bounds (in_bits <= 16, N <= 4096):

    - ``shift = ((max - x) * K + 2^15) >> 16`` (round half up of (max - x) s_in log2 e): the
      product < 2^16 * 2^31 = 2^47;
    - per chunk: chunk max ``cm``; where ``cm > gmax`` the partial sum is shifted right by
      ``((cm - gmax) * K + 2^15) >> 16`` and gmax = cm; then ``sigma += sum(2^8 >> shift)`` over the
      chunk with the new gmax (exp <= 2^8, sigma <= N * 2^8 <= 2^20, >= 2^8);
    - ``inv = floor((2^out_bits - 1) * 2^8 / sigma)`` <= 2^out_bits - 1 (numerator < 2^24);
    - ``y = inv >> shift_i`` with the final gmax; scale 1/(2^out_bits - 1).
    """
    rows = _check_x(x, p)
    shape = rows.shape
    rows = rows.reshape(-1, shape[-1])
    k, ib, ob = int(p["mult"]), int(p["in_bits"]), int(p["out_bits"])
    half = 1 << (K_FRAC - 1)
    gmax = np.full(rows.shape[0], -(1 << (ib - 1)), dtype=np.int64)
    sigma = np.zeros(rows.shape[0], dtype=np.int64)
    for start in range(0, rows.shape[1], ITA_CHUNK):
        chunk = rows[:, start : start + ITA_CHUNK]
        cm = chunk.max(axis=1)
        grow = np.where(cm > gmax, ((cm - gmax) * k + half) >> K_FRAC, 0)
        gmax = np.maximum(gmax, cm)
        shift = ((gmax[:, None] - chunk) * k + half) >> K_FRAC
        part = ((1 << ITA_EXP) >> np.minimum(shift, ITA_EXP + 1)).sum(axis=1)
        sigma = (sigma >> np.minimum(grow, 62)) + part
    inv = (((1 << ob) - 1) << ITA_EXP) // sigma
    shift = ((gmax[:, None] - rows) * k + half) >> K_FRAC
    return (inv[:, None] >> np.minimum(shift, 62)).reshape(shape)


def ita_row_ref(row: list[int], p: Params, track: dict | None = None) -> list[int]:
    """One row of ITA's softmax on Python ints."""
    k, ib, ob = int(p["mult"]), int(p["in_bits"]), int(p["out_bits"])

    def shift_of(diff: int) -> int:
        t = diff * k + 2**15
        _track(track, "dk", t)
        s = t // 2**16
        _track(track, "shift", s)
        return s

    top = -(2 ** (ib - 1))
    sigma = 0
    for i in range(0, len(row), ITA_CHUNK):
        chunk = row[i : i + ITA_CHUNK]
        local = max(chunk)
        if local > top:
            sigma = sigma >> shift_of(local - top)  # Python ints: floor(sigma / 2^k)
            top = local
        for v in chunk:
            e = 2**ITA_EXP >> shift_of(top - v)
            _track(track, "exp", e)
            sigma += e
        _track(track, "sigma", sigma)
    num = (2**ob - 1) * 2**ITA_EXP
    _track(track, "num", num)
    inv = num // sigma
    _track(track, "inv", inv)
    return [inv >> shift_of(top - v) for v in row]


def _ita_ref(x, p: Params):
    rows, shape = _rows_ref(x)
    return _unrows([ita_row_ref(r, p) for r in rows], shape)


# ----------------------------------------------------------------------------------------------
# FQ-ViT log-int-softmax with I-BERT's i-exp (Lin et al., IJCAI 2022; Kim et al., ICML 2021)
# ----------------------------------------------------------------------------------------------


def _log2_prepare(ctx: SoftmaxContext) -> Params:
    """I-BERT's integer constants (Kim et al. 2021, Sec. 3.4) at the working scale ``s = s_in / 2^k``:
    ``q_ln2 = floor(ln2 / s)``, ``q_b = floor(b / s)``, ``q_c = floor(c / (a s^2))``.

    ``k`` (``in_shift``) is the smallest k >= 0 with ``s_in / 2^k <= 2^-3`` (the scores are shifted
    left by k: q_ln2 >= 5 steps per octave; k = 0 for every s_in <= 1/8, pure I-BERT);
    ``n = 19 - bitlen(q_b^2 + q_c)`` (negative for fine scales) puts i-exp(0) in [2^18, 2^19).
    ValueError for s_in outside [2^-24, 2^16].
    """
    _check_ctx(ctx)
    if not LIS_S_MIN <= ctx.s_in <= LIS_S_MAX:
        raise ValueError(f"softmax=log2: s_in must lie in [2^-24, 2^16], got {ctx.s_in}")
    k = 0
    while ctx.s_in / 2.0**k > LIS_S_WORK:
        k += 1
    s = ctx.s_in / 2.0**k
    q_ln2 = math.floor(math.log(2.0) / s)
    q_b = math.floor(IBERT_B / s)
    q_c = math.floor(IBERT_C / (IBERT_A * s * s))
    top = q_b * q_b + q_c
    return {
        "in_shift": k,
        "q_ln2": q_ln2,
        "q_b": q_b,
        "q_c": q_c,
        "exp_shift": LIS_EXP_BITS - top.bit_length(),
        "in_bits": ctx.in_bits,
        "out_bits": ctx.out_bits,
    }


def _log2_kernel(x: Any, p: Params) -> np.ndarray:
    """i-exp, sum, log2 codes, ``y = 2^(M - code)`` (0 for code > M); int64 bounds:

    - ``d = (x - max) << k`` in [-(2^16 - 1) 2^19, 0]; ``z = floor(-d / q_ln2)`` < 2^33 (q_ln2 >= 5);
      ``q_p = d + z q_ln2`` in (-q_ln2, 0], |q_p| < 2^16 (q_ln2 <= 11 where k > 0);
    - ``L = (q_p + q_b)^2 + q_c`` in [1, 2^50) (q_p + q_b >= 1 since b > ln 2);
    - ``E = floor(L * 2^(n - z))`` < 2^19 (``L << (n - z)`` or ``L >> (z - n)``, n in [-31, 11]);
      ``S = sum E`` in [2^18, 2^31) (the max contributes ``L(0) * 2^n`` >= 2^18);
    - ``code = #{k in 1..M+1 : floor(S^2 / 2^(2k-1)) >= E^2}`` = round(log2(S / E)) capped at
      M + 1 (S^2 < 2^62, E^2 < 2^38; no ties: S/E = 2^(k - 1/2) is irrational);
    - ``y = 2^M >> code`` (0 at code M + 1), M = out_bits - 1; scale 2^-M.
    """
    rows = _check_x(x, p)
    shape = rows.shape
    rows = rows.reshape(-1, shape[-1])
    q_ln2, q_b, q_c, n = (int(p[k]) for k in ("q_ln2", "q_b", "q_c", "exp_shift"))
    top = int(p["out_bits"]) - 1  # M
    d = (rows - rows.max(axis=1, keepdims=True)) << int(p["in_shift"])
    z = (-d) // q_ln2
    qp = d + z * q_ln2
    big_l = (qp + q_b) * (qp + q_b) + q_c
    t = z - n
    e = np.where(t >= 0, big_l >> np.clip(t, 0, 62), big_l << np.clip(-t, 0, 62))
    s = e.sum(axis=1)
    s2 = (s * s)[:, None]
    e2 = e * e
    code = np.zeros(e.shape, dtype=np.int64)
    for k in range(1, top + 2):
        code += (s2 >> (2 * k - 1)) >= e2
    return ((np.int64(1) << top) >> code).reshape(shape)


def log2_iexp(diff: int, p: Params, track: dict | None = None) -> int:
    """E of one element ``diff = max - x >= 0`` below its row's max, on Python ints."""
    q_ln2, q_b, q_c, n = (int(p[k]) for k in ("q_ln2", "q_b", "q_c", "exp_shift"))
    d = -diff * 2 ** int(p["in_shift"])
    _track(track, "d", d)
    z, rem = divmod(-d, q_ln2)  # -d = z q_ln2 + rem, q_p = -rem
    _track(track, "z", z)
    _track(track, "qp", rem)
    poly = (q_b - rem) ** 2 + q_c
    _track(track, "L", poly)
    # floor(poly * 2^(n - z)) on Python ints (>> floors, for any shift)
    e = poly << (n - z) if n >= z else poly >> (z - n)
    _track(track, "E", e)
    return e


def log2_row_ref(row: list[int], p: Params, track: dict | None = None) -> list[int]:
    """One row of log-int-softmax on Python ints: the code as the first k whose threshold fails."""
    big_m = int(p["out_bits"]) - 1
    top = max(row)
    exps = [log2_iexp(top - v, p, track) for v in row]
    total = sum(exps)
    _track(track, "S", total)
    _track(track, "S2", total * total)
    out = []
    for e in exps:
        _track(track, "E2", e * e)
        # round(log2(S/E)) >= k  <=>  S/E >= 2^(k - 1/2)  <=>  S^2 >= E^2 2^(2k - 1)
        code = 0
        while code <= big_m and total * total >= e * e * 2 ** (2 * code + 1):
            code += 1
        out.append(2 ** (big_m - code) if code <= big_m else 0)
    return out


def _log2_ref(x, p: Params):
    rows, shape = _rows_ref(x)
    return _unrows([log2_row_ref(r, p) for r in rows], shape)


VARIANTS = [
    Variant(
        "softmax",
        "softermax",
        "base-2 exp (s_in * log2 e folded into K), IntMax online normalizer, 16-segment LPW 2^f and 1/x",
        "Stevens et al., Softermax, DAC 2021: Sec. 3.1 (base 2), Sec. 3.2 (online normalization, IntMax), "
        "Sec. 4 (LPW pow2 and reciprocal units)",
        _softermax_prepare,
        _softermax_kernel,
        _softermax_ref,
        lambda ctx, p: 2.0**-ctx.out_bits,
    ),
    Variant(
        "softmax",
        "ita",
        "exp = 2^8 >> round((max - x) s_in log2 e), streaming chunked denominator, one inverse per row",
        "Islamoglu et al., ITA, ISLPED 2023: Sec. III (ITAMax: streaming softmax, shift-based exp, "
        "denominator update on a new max, inversion and shift outputs)",
        _ita_prepare,
        _ita_kernel,
        _ita_ref,
        lambda ctx, p: 1.0 / ((1 << ctx.out_bits) - 1),
    ),
    Variant(
        "softmax",
        "log2_exact",
        "hwvit's exact log-int-softmax: I-BERT i-exp, sum, codes round(-log2 p) by exact thresholds, y = 2^(M - code)",
        "Lin et al., FQ-ViT, IJCAI 2022: Sec. 3.3 (Log-Int-Softmax); Kim et al., I-BERT, ICML 2021: Sec. 3.4 (i-exp)",
        _log2_prepare,
        _log2_kernel,
        _log2_ref,
        lambda ctx, p: 2.0 ** -(ctx.out_bits - 1),
    ),
]
