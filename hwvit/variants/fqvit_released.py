"""FQ-ViT's arithmetic as its authors released it: the PTF LayerNorm, log-int-softmax and the PTF
observer, bit for bit.

Source: megvii-research/FQ-ViT at 5daf591 (github.com/megvii-research/FQ-ViT):
``models/ptq/layers.py`` (``QIntLayerNorm`` in its ``'int'`` mode, ``QIntSoftmax`` with
``log_i_softmax``) and ``models/ptq/observer/ptf.py`` (``PtfObserver``). Paper: Y. Lin, T. Zhang,
P. Sun, Z. Li, S. Zhou, "FQ-ViT: Post-Training Quantization for Fully Quantized Vision
Transformer", IJCAI 2022, Sec. 3.2 (Power-of-Two Factor) and 3.3 (Log-Int-Softmax). The modules
compute in floating point; tests/test_variants_authors.py holds these kernels to them run in
float64 (tests/authors): 0 differing elements. docs/variants/ivit.md (ptf) and
docs/variants/hwsoftmax.md (log2) put each beside hwvit's corrected form (``ptf_exact``,
``log2_exact``) with the difference measured.

- ``layernorm=ptf``: channel c of the input at ``s 2^alpha_c``; ``z = x << (alpha - min alpha)``
  (the statistics at the finest scale ``s1 = s 2^min alpha``); per row the module's float64 steps
  (below); per element ``out = round_half_even((sign_c M_c z + B_c) / 2^N_c)``, saturated to
  ``out_bits`` (FQ-ViT hands it to the next quantizer, which clamps).
- ``softmax=log2``: I-BERT's i-exp (FQ-ViT's copy: ``-0.6931``, ``n = 30``, its polynomial), the
  sum, ``v = round(sum / exp)`` (a float64 division, rounded half to even), the 4-bit code
  ``round(log2 v)`` FQ-ViT's way (``floor(log2 v)``, plus one where ``v - 2^k >= 2^(k-1)``),
  codes of 16 and above masked to probability 0; returned as ``2^(M - code)`` at ``2^-M``,
  ``M = out_bits - 1`` (0 past M: at 16 output bits every 4-bit code is exact).
- ``ptf_observer``: the power-of-two factors FQ-ViT's calibration chooses: the least squared
  error over the four factors on the last calibration batch, with FQ-ViT's zero point.

The per-row constants of ``ptf`` are FQ-ViT's own floating-point arithmetic: its integer LayerNorm
computes the standard deviation, ``A = s1 / std * gamma / s_out`` (split into an 8-bit ``M`` and a
shift ``N``) and the offset ``B`` in floats once per row. Equalling it means those IEEE-754
binary64 operations in its order, each correctly rounded (so the same on every machine), and no
others: ``floor(log2 |A|)`` is taken from the exponent exactly, not from a library logarithm.
Everything per element is integer. The layer's float constants travel as their binary64 bit
patterns (int64: ``gamma_f64``, ``beta_f64``, ``s_f64``, ``s_out_f64``), so a vector set records
exactly the numbers the arithmetic uses.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hwvit.ops.checks import check_bits
from hwvit.variants.base import LayerNormContext, Params, SoftmaxContext, Variant, by_rows, signed_rows
from hwvit.variants.ibert import EXP_N, _rhe_shift, ibert_exp, ibert_exp_ref, softmax_constants

SOURCE = "megvii-research/FQ-ViT @ 5daf591"
PTF_K = 3  # alpha in 0..3
MN_BITS = 8  # QIntLayerNorm.get_MN's bit: M in [0, 255]
N_MAX = 31
LIS_BITS = 4  # QIntSoftmax's bit type uint4: codes 0..15, 16 and above masked
LIS_S_MIN = 2.0**-9  # exp <= c 2^30 < 2^49.5, the sum of 4096 below 2^62 (float64 exact below 2^53: _lis_prepare)
MAX_C = 4096


# ----------------------------------------------------------------------------- float constants as ints


def f64_bits(v: Any) -> np.ndarray:
    """float64 values as their IEEE-754 bit patterns (int64), for a set's parameter tensors."""
    return np.ascontiguousarray(np.asarray(v, dtype=np.float64)).view(np.int64).copy()


def f64_of(bits: Any, name: str) -> np.ndarray:
    a = np.asarray(bits)
    if a.dtype.kind not in "iu":
        raise ValueError(f"{name}: float64 bit patterns must be int64, got {a.dtype}")
    out = np.ascontiguousarray(a.astype(np.int64)).view(np.float64)
    if not np.all(np.isfinite(out)):
        raise ValueError(f"{name}: not finite")
    return out


# ----------------------------------------------------------------------------- PTF LayerNorm


def ptf_params(gamma, beta, s: float, alpha, s_out: float, in_bits: int, out_bits: int) -> Params:
    """The parameters of ``layernorm=ptf`` for a layer: FQ-ViT's input scales ``s 2^alpha_c``, its
    weight and bias, its output scale."""
    g = np.asarray(gamma, dtype=np.float64)
    b = np.asarray(beta, dtype=np.float64)
    a = np.asarray(alpha)
    c = len(g)
    if g.shape != (c,) or b.shape != (c,) or a.shape != (c,) or not 1 <= c <= MAX_C:
        raise ValueError(f"ptf: gamma {g.shape}, beta {b.shape} and alpha {a.shape} must have one shape (C,)")
    if a.dtype.kind not in "iu" or a.min() < 0 or a.max() > PTF_K:
        raise ValueError(f"ptf: alpha must be integers in [0, {PTF_K}]")
    for name, v in (("s", s), ("s_out", s_out)):
        if not (math.isfinite(float(v)) and float(v) > 0):
            raise ValueError(f"ptf: {name} must be finite and > 0, got {v!r}")
    if not (np.all(np.isfinite(g)) and np.all(np.isfinite(b))):
        raise ValueError("ptf: gamma and beta must be finite")
    if not (2 <= in_bits <= 12 and 2 <= out_bits <= 16):
        raise ValueError(f"ptf: in_bits in [2, 12] and out_bits in [2, 16], got {in_bits}, {out_bits}")
    return {
        "alpha": a.astype(np.int64),
        "gamma_f64": f64_bits(g),
        "beta_f64": f64_bits(b),
        "s_f64": f64_bits([s]),
        "s_out_f64": f64_bits([s_out]),
        "in_bits": int(in_bits),
        "out_bits": int(out_bits),
    }


def _ptf_prepare(ctx: LayerNormContext) -> Params:
    """``alpha``: ``ctx.alpha`` when given (a ``PtfContext`` from FQ-ViT's own calibration,
    ``ptf_observer``), else hwvit's rule from ``ctx.channel_absmax`` (``layernorm_forms.ptf_alpha``),
    else zeros. ``s = ctx.s_in`` is the base scale. ``ctx.eps`` is not used (the module has none)."""
    from hwvit.variants.layernorm_forms import ptf_alpha

    c = len(ctx.gamma)
    alpha = getattr(ctx, "alpha", None)
    absmax = getattr(ctx, "channel_absmax", None)
    if alpha is None:
        alpha = np.zeros(c, dtype=np.int64) if absmax is None else ptf_alpha(absmax, float(ctx.s_in), ctx.in_bits)
    return ptf_params(ctx.gamma, ctx.beta, float(ctx.s_in), alpha, float(ctx.s_out), ctx.in_bits, ctx.out_bits)


def _floor_log2(v: np.ndarray) -> np.ndarray:
    """``floor(log2 v)`` of positive finite float64, exactly (the binary exponent)."""
    return np.frexp(v)[1].astype(np.int64) - 1


def ptf_row_constants(sx: np.ndarray, sxx: np.ndarray, c: int, s1: float, g: np.ndarray, b: np.ndarray, s_out: float):
    """QIntLayerNorm's per-row floats (binary64, the module's order) from the row sums of ``z``:

    ``mean = (Sx / C) s1``; ``std = (s1 / C) sqrt(C Sxx - Sx^2)``; ``A_c = (s1 / std) gamma_c / s_out``;
    ``N_c = clamp(7 - floor(log2 |A_c|), 0, 31)`` (31 for A = 0); ``M_c = clamp(floor(|A_c| 2^N_c), 0, 255)``;
    ``B_c = round_half_even(((beta_c - (mean / std) gamma_c) / s_out) 2^N_c)``. A row of variance 0
    (the module divides by a zero std: NaN) gets ``M = 0``, ``N = 0``, ``B = round(beta / s_out)``: beta
    alone, float LayerNorm's value on a constant row. Returns ``(sign, M, N, B)``, int64 (R, C)."""
    v = c * sxx - sx * sx  # exact: C Sxx < 2^53 for in_bits <= 12
    flat = v == 0
    mean = (sx.astype(np.float64) / c) * s1
    std = (s1 / c) * np.sqrt(v.astype(np.float64))
    safe = np.where(flat, 1.0, std)
    a = ((s1 / safe)[:, None] * g) / s_out
    sign = np.sign(a).astype(np.int64)
    mag = np.abs(a)
    n = np.where(mag > 0, np.clip(MN_BITS - 1 - _floor_log2(np.where(mag > 0, mag, 1.0)), 0, N_MAX), N_MAX)
    m = np.clip(np.floor(np.ldexp(mag, n)), 0, (1 << MN_BITS) - 1).astype(np.int64)
    off = np.ldexp((b - (mean / safe)[:, None] * g) / s_out, n)
    big_b = np.rint(off)
    flat2 = np.broadcast_to(flat[:, None], a.shape)
    m = np.where(flat2, 0, m)
    n = np.where(flat2, 0, n)
    big_b = np.where(flat2, np.rint(b / s_out), big_b)
    if np.abs(big_b).max(initial=0) >= 2.0**52:
        raise ValueError("ptf: |B| reaches 2^52 (|beta| / s_out beyond FQ-ViT's exact float64 range)")
    return sign, m, n, big_b.astype(np.int64)


def layernorm_ptf_stages(x: Any, p: Params) -> dict[str, np.ndarray]:
    """Every intermediate of QIntLayerNorm ('int') over the last axis (b = in_bits <= 12, C <= 4096):

    ``z = x << (alpha - min alpha)`` signed b+3; ``Sx`` signed b+15; ``Sxx`` unsigned 2b+18;
    ``C Sxx - Sx^2 < 2^53`` (exact in binary64); per row the float constants of
    ``ptf_row_constants``; ``M z`` signed b+11; ``B`` below 2^52;
    ``out = sat(round_half_even((sign M z + B) / 2^N))``."""
    b_in = check_bits(p["in_bits"], "in_bits", 2, 12)
    arr = signed_rows(x, b_in, "ptf layernorm", MAX_C)
    rows = arr.reshape(-1, arr.shape[-1])
    c = rows.shape[1]
    alpha = np.asarray(p["alpha"])
    if alpha.dtype.kind not in "iu" or alpha.shape != (c,) or alpha.min() < 0 or alpha.max() > PTF_K:
        raise ValueError(f"ptf: alpha must be integers in [0, {PTF_K}] of shape ({c},)")
    g, bt = f64_of(p["gamma_f64"], "gamma_f64"), f64_of(p["beta_f64"], "beta_f64")
    if g.shape != (c,) or bt.shape != (c,):
        raise ValueError(f"ptf: gamma_f64 and beta_f64 must have shape ({c},)")
    s, s_out = float(f64_of(p["s_f64"], "s_f64")[0]), float(f64_of(p["s_out_f64"], "s_out_f64")[0])
    out_bits = check_bits(p["out_bits"], "out_bits", 2, 16)
    alpha = alpha.astype(np.int64)
    amin = int(alpha.min())
    s1 = s * 2.0**amin  # min over channels of s 2^alpha_c
    z = rows << (alpha - amin)
    sx, sxx = z.sum(axis=1), (z * z).sum(axis=1)
    sign, m, n, big_b = ptf_row_constants(sx, sxx, c, s1, g, bt, s_out)
    num = sign * m * z + big_b
    q = np.where(n > 0, _rhe_shift(num, np.maximum(n, 1)), num)
    lo, hi = -(1 << (out_bits - 1)), (1 << (out_bits - 1)) - 1
    out = np.clip(q, lo, hi).reshape(arr.shape)
    return {"z": z, "sx": sx, "sxx": sxx, "m": m, "n": n, "b": big_b, "num": num, "q": q, "out": out}


def _ptf_kernel(x: np.ndarray, p: Params) -> np.ndarray:
    return layernorm_ptf_stages(x, p)["out"]


def _ptf_ref(x, p: Params):
    """Row by row on Python floats (binary64, math.sqrt correctly rounded) and ints."""
    alpha = [int(a) for a in p["alpha"]]
    g = [float(v) for v in f64_of(p["gamma_f64"], "gamma_f64")]
    bt = [float(v) for v in f64_of(p["beta_f64"], "beta_f64")]
    s, s_out = float(f64_of(p["s_f64"], "s_f64")[0]), float(f64_of(p["s_out_f64"], "s_out_f64")[0])
    bits = int(p["out_bits"])
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    s1 = min(s * 2.0**a for a in alpha)

    def row_fn(row: list[int]) -> list[int]:
        c = len(row)
        z = [v * round(s * 2.0 ** alpha[i] / s1) for i, v in enumerate(row)]
        sx, sxx = sum(z), sum(t * t for t in z)
        mean = sx / c * s1
        var = c * sxx - sx * sx
        res = []
        for i, t in enumerate(z):
            if var == 0:
                q = round(bt[i] / s_out)
            else:
                std = s1 / c * math.sqrt(var)
                a = s1 / std * g[i] / s_out
                n = 31 if a == 0 else min(max(7 - (math.frexp(abs(a))[1] - 1), 0), 31)
                m = min(max(math.floor(abs(a) * 2.0**n), 0), 255)
                big_b = round((bt[i] - mean / std * g[i]) / s_out * 2.0**n)
                sign = (a > 0) - (a < 0)
                num = sign * m * t + big_b
                q = num if n == 0 else round(num / 2**n)  # exact: an int over a power of two, to even
            res.append(min(max(q, lo), hi))
        return res

    return by_rows(x, row_fn)


# ----------------------------------------------------------------------------- PTF observer


def ptf_observer(max_val, min_val, inputs, bits: int = 8, signed: bool = False) -> tuple[np.ndarray, float, np.ndarray]:
    """FQ-ViT's ``PtfObserver.get_quantization_params``: ``(scale (C,), zero_point, alpha (C,))``.

    ``max_val``/``min_val``: the per-channel maximum and minimum over the calibration batches
    (``update``); ``inputs``: the last batch, (..., C) floats. In float64 as the module:
    ``scale8 = max(max(max_val) - min(min_val)) / (qmax - qmin)``, floored at float32's eps;
    ``scale4, scale2, scale1 = scale8 / 2, / 4, / 8``; ``zp = clamp(qmin - round(min / scale8))``
    (a zero point even for signed codes); per channel the factor ``2^alpha`` whose fake-quantized
    ``((x / s + zp).round().clamp(qmin, qmax) - zp) * s`` has the least mean squared error (the
    first of equal ones). The mean is summed exactly (``math.fsum``); FQ-ViT's torch sum rounds,
    which can only reorder two errors within one ulp of each other."""
    hi_v = np.asarray(max_val, dtype=np.float64)
    lo_v = np.asarray(min_val, dtype=np.float64)
    x = np.asarray(inputs, dtype=np.float64)
    if x.ndim < 2 or hi_v.shape != (x.shape[-1],) or lo_v.shape != hi_v.shape:
        raise ValueError("ptf_observer: inputs (..., C) and max_val, min_val of shape (C,)")
    qmin, qmax = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    top, bottom = hi_v.max(), lo_v.min()
    scale8 = max((top - bottom) / float(qmax - qmin), float(np.finfo(np.float32).eps))
    scales = [scale8 / 2 / 2 / 2, scale8 / 2 / 2, scale8 / 2, scale8]  # alpha 0..3, as the module halves
    zp = float(np.clip(qmin - np.rint(bottom / scale8), qmin, qmax))
    data = x.reshape(-1, x.shape[-1])
    alpha = np.zeros(hi_v.shape, dtype=np.int64)
    for j in range(data.shape[1]):
        col = data[:, j]
        scores = []
        for sc in scales:
            fq = (np.clip(np.rint(col / sc + zp), qmin, qmax) - zp) * sc
            scores.append(math.fsum(((col - fq) ** 2).tolist()) / col.size)
        alpha[j] = scores.index(min(scores))
    return scales[0] * np.exp2(alpha), zp, alpha


# ----------------------------------------------------------------------------- log-int-softmax


def _lis_prepare(ctx: SoftmaxContext) -> Params:
    """I-BERT's (and FQ-ViT's) i-exp constants at ``s_in`` (``softmax_constants``: ``x0 = floor(-0.6931
    / s)``, ``b = floor(b' / s)``, ``c = floor(c' / s^2)``). ``s_in`` in ``[2^-9, 1.67)``: ``c >= 1``
    (at ``c = 0`` every exp is 0 and the module divides by it) and the sum below 2^63. FQ-ViT's float64
    sum is exact while ``N c 2^30 < 2^53`` (``N <= 197`` at ``s_in >= 0.008``, 4096 at 0.037);
    beyond, its sum rounds in an order torch picks and hwvit keeps the exact sum."""
    if not (math.isfinite(ctx.s_in) and LIS_S_MIN <= ctx.s_in):
        raise ValueError(f"softmax=log2: s_in must be at least 2^-9, got {ctx.s_in}")
    if not (2 <= ctx.in_bits <= 16 and 1 <= ctx.out_bits <= 16):
        raise ValueError(f"softmax=log2: in_bits in [2, 16] and out_bits in [1, 16], got {ctx.in_bits}, {ctx.out_bits}")
    k = softmax_constants(ctx.s_in, ctx.out_bits)  # raises where c = 0
    return {
        "x0_int": k["x0_int"],
        "b_int": k["b_int"],
        "c_int": k["c_int"],
        "in_bits": ctx.in_bits,
        "out_bits": ctx.out_bits,
    }


def round_ratio(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """``round_half_even(fl(S / E))``, ``1 <= E <= S < 2^63``: the float64 division rounded to 53
    bits, then to an integer, exactly in int64. With ``S = Q E + R`` and ``t = floor(log2 Q)``: the
    double is ``Q + 1/2`` exactly where ``|2R - E| 2^(52 - t) < E`` (or ``= E`` and ``t <= 50``, a tie
    at 53 bits going to the even ``Q + 1/2``), and then rounds to the even of ``Q``, ``Q + 1``;
    elsewhere the double lies on the same side of ``Q + 1/2`` as ``S / E``. (``t >= 51`` gives
    ``v >= 2^51``, whose code is masked: there only ``Q + (2R > E)`` is returned.)"""
    q, r = s // e, s % e
    t = (
        np.frexp(q.astype(np.float64))[1].astype(np.int64) - 1
    )  # floor(log2 Q), exact: Q < 2^63 rounds up only past 2^53
    dist = np.abs(r - (e - r))  # |2R - E| without overflow
    k = np.clip(52 - t, 0, 62)
    below = dist <= ((e - 1) >> k)  # dist 2^k < E
    at = ((e & ((np.int64(1) << k) - 1)) == 0) & (dist == (e >> k)) & (t <= 50)
    half = (below | at) & (t <= 50)
    up = np.where(half, (q & 1) == 1, (r - (e - r)) > 0)
    return q + up.astype(np.int64)


def round_ratio_ref(s: int, e: int) -> int:
    """The same on Python ints: ``float(Fraction)`` is the correctly rounded double of ``S / E``."""
    from fractions import Fraction

    return round(float(Fraction(s, e)))  # Python's round of a float: half to even


def log_code(v: np.ndarray) -> np.ndarray:
    """QIntSoftmax.log_round of integers ``v >= 1``: ``k = floor(log2 v)``, plus one where bit
    ``k - 1`` of v is set (``v - 2^k >= 2^(k-1)``)."""
    k = np.frexp(v.astype(np.float64))[1].astype(np.int64) - 1
    k = np.where((np.int64(1) << np.clip(k, 0, 62)) > v, k - 1, k)  # float rounding up near 2^53..
    nxt = np.where(k >= 1, (v >> np.maximum(k - 1, 0)) & 1, 0)
    return k + nxt


def log2_stages(x: Any, p: Params) -> dict[str, np.ndarray]:
    """Every intermediate of the log-int-softmax over the last axis (b = in_bits <= 16, N <= 4096):

    ``d = x - max`` in ``[-(2^b - 1), 0]``, clamped at ``30 x0``; i-exp ``E = (r (r + b) + c) 2^(30 - q)``
    in ``[1, c 2^30]`` (< 2^49.5 at ``s_in >= 2^-9``); ``S = sum E`` < 2^62; ``v = round(S / E)`` in
    ``[1, 2^62)``; ``code = log_code(v)``; masked where ``code >= 16``; ``y = 2^(M - code)``
    (0 where masked or ``code > M``), ``M = out_bits - 1``."""
    b_in = check_bits(p["in_bits"], "in_bits", 2, 16)
    arr = signed_rows(x, b_in, "softmax=log2", MAX_C)
    x0 = check_bits(p["x0_int"], "x0_int", -(1 << 20), -1)
    b, c = check_bits(p["b_int"], "b_int", 0, 1 << 20), check_bits(p["c_int"], "c_int", 1, 1 << 20)
    top = check_bits(p["out_bits"], "out_bits", 1, 16) - 1
    e = ibert_exp(arr - arr.max(axis=-1, keepdims=True), x0, b, c)
    total = e.sum(axis=-1, keepdims=True)
    masked = e == 0  # cannot happen for c >= 1 (every exp >= 1); the module would divide by 0
    v = round_ratio(np.broadcast_to(total, e.shape), np.maximum(e, 1))
    code = np.where(masked, 1 << LIS_BITS, log_code(v))
    keep = code <= min(top, (1 << LIS_BITS) - 1)
    y = np.where(keep, np.left_shift(np.int64(1), np.clip(top - code, 0, 62)), 0)
    return {"e": e, "sum": total, "v": v, "code": code, "out": y}


def _lis_kernel(x: np.ndarray, p: Params) -> np.ndarray:
    return log2_stages(x, p)["out"]


def _lis_ref(x, p: Params):
    x0, b, c, top = int(p["x0_int"]), int(p["b_int"]), int(p["c_int"]), int(p["out_bits"]) - 1

    def prob(total: int, e: int) -> int:
        v = round_ratio_ref(total, e)
        big = v.bit_length() - 1  # floor(log2 v)
        code = big + 1 if big >= 1 and v - 2**big >= 2 ** (big - 1) else big
        return 2 ** (top - code) if code <= top and code < 2**LIS_BITS else 0

    def row_fn(row: list[int]) -> list[int]:
        exps = [ibert_exp_ref(v - max(row), x0, b, c) for v in row]
        return [prob(sum(exps), e) for e in exps]

    return by_rows(x, row_fn)


assert EXP_N == 30  # FQ-ViT's int_exp has n = 30, as I-BERT's

VARIANTS = [
    Variant(
        "layernorm",
        "ptf",
        "FQ-ViT's released integer LayerNorm (QIntLayerNorm 'int'): codes at s*2^alpha_c, per-row float64 "
        "M*2^-N and B, out = round((M z + B) / 2^N)",
        f"Lin et al., FQ-ViT (IJCAI 2022), Sec. 3.2; released code {SOURCE}, models/ptq/layers.py: QIntLayerNorm",
        _ptf_prepare,
        _ptf_kernel,
        _ptf_ref,
        lambda ctx, p: ctx.s_out,
    ),
    Variant(
        "softmax",
        "log2",
        "FQ-ViT's released log-int-softmax (QIntSoftmax): i-exp, round(sum/exp) in float64, 4-bit log2 "
        "codes (16 and above masked), y = 2^(M - code)",
        f"Lin et al., FQ-ViT (IJCAI 2022), Sec. 3.3; released code {SOURCE}, models/ptq/layers.py: QIntSoftmax",
        _lis_prepare,
        _lis_kernel,
        _lis_ref,
        lambda ctx, p: 2.0 ** -(ctx.out_bits - 1),
    ),
]
