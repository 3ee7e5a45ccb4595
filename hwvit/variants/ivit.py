"""I-ViT's integer arithmetic as hwvit variants: ShiftGELU, Shiftmax and I-LayerNorm.

Source: Z. Li and Q. Gu, "I-ViT: Integer-only Quantization for Efficient Vision Transformer
Inference", ICCV 2023 (arXiv:2207.01405). Section 3.3 (Shiftmax, Eqs. 9-15), Section 3.4
(ShiftGELU, Eqs. 16-18) and Section 3.5 (I-LayerNorm, Eq. 19). The formulas carry over; the code
here is hwvit's own. docs/variants/ivit.md derives every width and lists the choices made where
the paper is silent.

- ``gelu=shiftgelu``: ``GELU(x) ~ x * sigmoid(1.702 x)``, ``1.702 x ~ x + x>>1 + x>>3 + x>>4``, the
  sigmoid as ``e^(z-m) / (e^(z-m) + e^(-m))`` with two ShiftExps and one IntDiv, then a requant to
  ``ctx.out_bits`` at ``ctx.s_out``;
- ``softmax=shiftmax``: ShiftExp of ``x - max``, then ``IntDiv(E_i, sum E, out_bits)``: unsigned
  ``out_bits`` probabilities at ``2^-(out_bits-1)`` (1.0 is ``2^(out_bits-1)``);
- ``layernorm=ivit``: integer mean (rounded), ``Var = sum (x - mu)^2``, the bit-shift Newton
  square root (10 steps), ``IntDiv(x - mu, std, 17)``, then hwvit's gamma/beta fixed point and a
  requant.

Conventions shared by all three (the paper's operators, with the widths pinned down):

- ``>>`` is the arithmetic (floor) shift, also on negative values, exactly as the paper's ``>>``.
- ``I_0 = floor(1 / s_in)``: the integer of 1.0 at the input scale (Eq. 13); ``s_in`` must lie in
  ``[2^-16, 1]`` so ``1 <= I_0 <= 2^16``.
- ShiftExp(D), ``D <= 0`` (Eqs. 10-14): ``P = D + (D>>1) - (D>>4)`` (``D * log2 e``),
  ``q = floor(-P / I_0)``, ``r = -P - q*I_0`` in ``[0, I_0)``, ``v = I_0 + ((-r) >> 1)``
  (``2^(-r/I_0) ~ 1 - r/(2 I_0)``), ``E = (v << EXP_N) >> q``. ``EXP_N = 15`` fraction bits are
  added before the right shift by ``q`` (the paper's Eq. 12 shifts ``v`` itself, which leaves
  only ``log2 I_0`` bits: with ``I_0 = 20`` every ``q >= 5`` gave 0). ``E`` is at scale
  ``s_in * 2^-EXP_N``.
- IntDiv(a, b, k) (Eq. 15): ``(floor(2^DIV_M / b) * a) >> (DIV_M - (k - 1))`` with
  ``DIV_M = 62``, the largest M whose product ``floor(2^M/b) * a <= 2^M`` (``0 <= a <= b``) stays
  inside int64. Output at scale ``2^-(k-1)``, floor (as the paper).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from hwvit.variants.base import GeluContext, LayerNormContext, Params, SoftmaxContext, Variant

EXP_N = 15  # fraction bits ShiftExp adds before its right shift by q
DIV_M = 62  # IntDiv's 2^M
Q_CLAMP = 40  # q >= 33 already gives E = 0 (v << 15 < 2^32); the clamp keeps numpy's shift defined
SQRT_STEPS = 10  # I-LayerNorm's Newton steps (Section 3.5)
LN_K = 17  # I-LayerNorm's IntDiv output width: y at sqrt(C) * 2^-16, |y| <= 2^16
LN_FRAC = LN_K - 1
I0_MAX = 1 << 16
MAX_N = 4096  # softmax / LayerNorm row length
EPS_INT_MAX = 1 << 40  # I-LayerNorm's eps in LSB^2 (Var < 2^28 beside it: Ve < 2^41)
G_MAX = (1 << 14) - 1  # gamma fixed point, signed 15 (hwvit's)
B_MAX = (1 << 30) - 1  # beta fixed point, signed 31 (hwvit's)
MULT_MAX = (1 << 31) - 1
SHIFT_MAX = 62


# ----------------------------------------------------------------------------- checks


def _int64(x: Any, name: str, lo: int, hi: int) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{name}: expected an integer array, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.size and (int(arr.min()) < lo or int(arr.max()) > hi):
        raise ValueError(f"{name}: values must lie in [{lo}, {hi}], got [{int(arr.min())}, {int(arr.max())}]")
    return arr


def _int_param(p: Params, key: str, lo: int, hi: int) -> int:
    v = p[key]
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= int(v) <= hi:
        raise ValueError(f"{key} must be an integer in [{lo}, {hi}], got {v!r}")
    return int(v)


def _signed_range(bits: int) -> tuple[int, int]:
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _i0(s_in: float) -> int:
    s = float(s_in)
    if not (math.isfinite(s) and 2.0**-16 <= s <= 1.0):
        raise ValueError(f"I-ViT needs s_in in [2^-16, 1] (I_0 = floor(1/s_in) in [1, 2^16]), got {s_in!r}")
    return math.floor(Fraction(1) / Fraction(s))


def _rows(x: np.ndarray, what: str) -> np.ndarray:
    if x.ndim == 0 or not 1 <= x.shape[-1] <= MAX_N:
        raise ValueError(f"{what}: rows must hold 1..{MAX_N} elements, got shape {x.shape}")
    return x.reshape(-1, x.shape[-1])


# ----------------------------------------------------------------------------- shared kernels


def shift_exp(delta: np.ndarray, i0: int) -> np.ndarray:
    """ShiftExp of ``delta <= 0`` (int64, ``|delta| < 2^18``): ``E ~ e^(delta * s) * 2^15 / s``.

    ``P`` signed (width of delta + 1), ``q <= |P|``, ``r < I_0 <= 2^16``, ``v`` in
    ``[ceil(I_0/2), I_0]`` (unsigned 17), ``E <= I_0 * 2^15 <= 2^31`` (unsigned 32)."""
    p = delta + (delta >> 1) - (delta >> 4)
    q = (-p) // i0
    r = -p - q * i0
    v = i0 + ((-r) >> 1)
    return (v << EXP_N) >> np.minimum(q, Q_CLAMP)


def int_div(a: np.ndarray, b: np.ndarray, k: int) -> np.ndarray:
    """IntDiv(a, b, k) for ``0 <= a <= b``, ``1 <= b < 2^62``: ``floor(2^62/b) * a >> (63 - k)``,
    in ``[0, 2^(k-1)]``. The factor is unsigned ``63 - bitlen(b) + 1`` bits; the product <= 2^62."""
    return (((1 << DIV_M) // b) * a) >> (DIV_M - (k - 1))


def shift_exp_ref(delta: int, i0: int) -> int:
    """ShiftExp on Python ints, each step as the paper writes it (floor division for ``>>``)."""
    p = delta + delta // 2 - delta // 16  # delta * log2(e) ~ delta * (1 + 1/2 - 1/16)
    q, r = divmod(-p, i0)  # -p = q * I_0 + r
    v = i0 + (-r) // 2  # 2^(-r/I_0) * I_0 ~ I_0 - r/2
    return (v * 2**EXP_N) // 2**q


def int_div_ref(a: int, b: int, k: int) -> int:
    return (2**DIV_M // b) * a // 2 ** (DIV_M - k + 1)


def _requant(v: np.ndarray, m: int, s: int, bits: int) -> np.ndarray:
    half = (1 << s) >> 1
    lo, hi = _signed_range(bits)
    return np.clip((v * m + half) >> s, lo, hi)


def _requant_ref(v: int, m: int, s: int, bits: int) -> int:
    lo, hi = _signed_range(bits)
    t = v * m
    if s > 0:
        t = (t + 2 ** (s - 1)) // 2**s
    return min(max(t, lo), hi)


def _quantize_multiplier(real: float) -> tuple[int, int]:
    from hwvit.quant.params import quantize_multiplier

    m, s = quantize_multiplier(real)
    return int(m), int(s)


# ----------------------------------------------------------------------------- ShiftGELU


def _gelu_prepare(ctx: GeluContext) -> Params:
    if not (2 <= ctx.in_bits <= 16 and 2 <= ctx.out_bits <= 16):
        raise ValueError(f"shiftgelu: in_bits and out_bits must lie in [2, 16], got {ctx.in_bits}, {ctx.out_bits}")
    k = ctx.out_bits  # the sigmoid's IntDiv width: the paper's k_out
    m, s = _quantize_multiplier(float(ctx.s_in) / (1 << (k - 1)) / float(ctx.s_out))
    return {"i0": _i0(ctx.s_in), "sig_bits": k, "multiplier": m, "shift": s, "in_bits": ctx.in_bits, "out_bits": k}


def gelu_stages(x: Any, p: Params) -> dict[str, np.ndarray]:
    """Every intermediate of ShiftGELU (b = in_bits <= 16, k = sig_bits <= 16):

    ``x`` signed b; ``z = x + x>>1 + x>>3 + x>>4``: ``|z| <= 1.6875 * 2^(b-1) + 3`` (the floors),
    signed b+1 for b >= 5 (b+2 below);
    ``m = max(z, 0)``; ``e1 = ShiftExp(z - m)``, ``e2 = ShiftExp(-m)``: unsigned 32 (<= 2^31, one
    of them is ``I_0 * 2^15``); ``den = e1 + e2`` unsigned 33; ``sig = IntDiv(e1, den, k)`` in
    ``[0, 2^(k-1)]``; ``t = x * sig`` signed b+k-1; ``out = sat_out(round_half_up(t * M >> s))``
    with ``|t * M| < 2^(b+k+29) <= 2^61``."""
    b = _int_param(p, "in_bits", 2, 16)
    x = _int64(x, "x", *_signed_range(b))
    i0 = _int_param(p, "i0", 1, I0_MAX)
    k = _int_param(p, "sig_bits", 2, 16)
    mult = _int_param(p, "multiplier", 0, MULT_MAX)
    shift = _int_param(p, "shift", 0, SHIFT_MAX)
    out_bits = _int_param(p, "out_bits", 2, 16)
    z = x + (x >> 1) + (x >> 3) + (x >> 4)
    m = np.maximum(z, 0)
    e1 = shift_exp(z - m, i0)
    e2 = shift_exp(-m, i0)
    den = e1 + e2
    sig = int_div(e1, den, k)
    t = x * sig
    out = _requant(t, mult, shift, out_bits)
    return {"z": z, "e1": e1, "e2": e2, "den": den, "sig": sig, "t": t, "t_mult": t * mult, "out": out}


def _gelu_kernel(x: np.ndarray, p: Params) -> np.ndarray:
    return gelu_stages(x, p)["out"]


def _gelu_ref(x, p: Params):
    i0, k = int(p["i0"]), int(p["sig_bits"])
    mult, shift, bits = int(p["multiplier"]), int(p["shift"]), int(p["out_bits"])

    def one(v: int) -> int:
        z = v + v // 2 + v // 8 + v // 16  # 1.702 v ~ v * (1 + 1/2 + 1/8 + 1/16)
        top = z if z > 0 else 0  # sigmoid(z) = e^(z - top) / (e^(z - top) + e^(-top))
        e1 = shift_exp_ref(z - top, i0)
        e2 = shift_exp_ref(-top, i0)
        return _requant_ref(v * int_div_ref(e1, e1 + e2, k), mult, shift, bits)

    arr = np.asarray(x)
    return np.array([one(int(v)) for v in arr.reshape(-1)], dtype=np.int64).reshape(arr.shape).tolist()


# ----------------------------------------------------------------------------- Shiftmax


def _softmax_prepare(ctx: SoftmaxContext) -> Params:
    if not (2 <= ctx.in_bits <= 16 and 2 <= ctx.out_bits <= 16):
        raise ValueError(f"shiftmax: in_bits and out_bits must lie in [2, 16], got {ctx.in_bits}, {ctx.out_bits}")
    return {"i0": _i0(ctx.s_in), "in_bits": ctx.in_bits, "out_bits": ctx.out_bits}


def softmax_stages(x: Any, p: Params) -> dict[str, np.ndarray]:
    """Every intermediate of Shiftmax over the last axis (b = in_bits <= 16, N <= 4096, k = out_bits):

    ``delta = x - max`` in ``[-(2^b - 1), 0]`` (signed b+1); ShiftExp's ``P`` signed b+2;
    ``E`` unsigned 32 (<= 2^31; the row max gives ``I_0 * 2^15``); ``S = sum E`` unsigned 44
    (<= N * 2^31 <= 2^43, >= 2^15); ``factor = floor(2^62 / S)`` unsigned 48 (<= 2^47);
    ``factor * E <= 2^62``; ``p = (factor * E) >> (63 - k)`` in ``[0, 2^(k-1)]``."""
    b = _int_param(p, "in_bits", 2, 16)
    x = _int64(x, "x", *_signed_range(b))
    rows = _rows(x, "shiftmax")
    i0 = _int_param(p, "i0", 1, I0_MAX)
    k = _int_param(p, "out_bits", 2, 16)
    delta = rows - rows.max(axis=1, keepdims=True)
    e = shift_exp(delta, i0)
    s = e.sum(axis=1, keepdims=True)
    factor = (1 << DIV_M) // s
    prod = factor * e
    out = (prod >> (DIV_M - (k - 1))).reshape(x.shape)
    return {"delta": delta, "e": e, "sum": s, "factor": factor, "prod": prod, "out": out}


def _softmax_kernel(x: np.ndarray, p: Params) -> np.ndarray:
    return softmax_stages(x, p)["out"]


def _softmax_ref(x, p: Params):
    i0, k = int(p["i0"]), int(p["out_bits"])
    arr = np.asarray(x)
    out = []
    for row in arr.reshape(-1, arr.shape[-1]).tolist():
        top = max(row)
        e = [shift_exp_ref(v - top, i0) for v in row]
        total = sum(e)
        out.append([int_div_ref(v, total, k) for v in e])
    return np.array(out, dtype=np.int64).reshape(arr.shape).tolist()


# ----------------------------------------------------------------------------- I-LayerNorm


def _ln_prepare(ctx: LayerNormContext) -> Params:
    """G, B with one shared scale ``s_g`` (hwvit's fixed point, ``|G| <= 2^14-1``, ``|B| <= 2^30-1``)
    for ``y`` at ``sqrt(C) * 2^-16``: ``G = round(gamma/s_g)``, ``B = round(beta / (s_g sqrt(C) 2^-16))``,
    ``M 2^-s = s_g sqrt(C) 2^-16 / s_out``; ``eps_int = round_half_up(eps * C / s_in^2)`` (Var's
    units, LSB^2 summed over the row), at most 2^40."""
    from hwvit.ops import quantize

    g = np.asarray(ctx.gamma, dtype=np.float64)
    bt = np.asarray(ctx.beta, dtype=np.float64)
    c = len(g)
    if g.shape != (c,) or bt.shape != (c,) or not 1 <= c <= MAX_N:
        raise ValueError(f"ivit layernorm: gamma {g.shape} and beta {bt.shape} must have one shape (C,), C <= {MAX_N}")
    if not 2 <= ctx.out_bits <= 16:
        raise ValueError(f"ivit layernorm: out_bits must lie in [2, 16], got {ctx.out_bits}")
    eps, s_in, s_out = float(ctx.eps), float(ctx.s_in), float(ctx.s_out)
    if not (math.isfinite(eps) and eps >= 0 and s_in > 0 and s_out > 0):
        raise ValueError("ivit layernorm: eps must be >= 0 and the scales > 0")
    y_lsb = math.sqrt(c) / (1 << LN_FRAC)  # the real value of one LSB of y
    s_g = max(float(np.abs(g).max()) / G_MAX, float(np.abs(bt).max()) / y_lsb / B_MAX)
    if s_g == 0:
        s_g = 1.0
    g_int = np.clip(quantize(g, s_g, 32), -G_MAX, G_MAX).astype(np.int64)
    b_int = np.clip(quantize(bt, s_g * y_lsb, 32), -B_MAX, B_MAX).astype(np.int64)
    eps_int = min(math.floor(Fraction(eps) * c / Fraction(s_in) ** 2 + Fraction(1, 2)), EPS_INT_MAX)
    m, s = _quantize_multiplier(s_g * y_lsb / s_out)
    return {
        "gamma": g_int,
        "beta": b_int,
        "eps_int": int(eps_int),
        "multiplier": m,
        "shift": s,
        "out_bits": int(ctx.out_bits),
    }


def sqrt_iter(v: np.ndarray) -> np.ndarray:
    """I-ViT's bit-shift square root (Eq. 19) of ``0 <= v < 2^53``, vectorized, SQRT_STEPS steps:
    ``I_0 = 2^floor(bitlen(v)/2)``, ``I_(i+1) = (I_i + floor(v / I_i)) >> 1``; the paper's stop rule
    (stop once ``I_(i+1) >= I_i``) holds from the second step on (the first may rise: ``I_0`` lies
    below ``sqrt(v)`` when bitlen(v) is odd). Result: ``floor(sqrt(v))`` (0 for v = 0)."""
    bits = np.frexp(v.astype(np.float64))[1].astype(np.int64)  # bitlen(v): exact for v < 2^53
    cur = np.left_shift(np.int64(1), bits // 2)
    cur = (cur + v // cur) >> 1
    for _ in range(SQRT_STEPS - 1):
        nxt = (cur + v // np.maximum(cur, 1)) >> 1
        cur = np.where(nxt < cur, nxt, cur)
    return cur


def sqrt_iter_ref(v: int) -> int:
    """The same iteration, one step at a time with an early exit."""
    cur = 2 ** (v.bit_length() // 2)
    cur = (cur + v // cur) // 2
    for _ in range(SQRT_STEPS - 1):
        if cur == 0:
            break
        nxt = (cur + v // cur) // 2
        if nxt >= cur:
            break
        cur = nxt
    return cur


def layernorm_stages(x: Any, p: Params) -> dict[str, np.ndarray]:
    """Every intermediate of I-LayerNorm over the last axis (int8 x, C <= 4096):

    ``Sx`` signed 20; ``mu = floor((2 Sx + C) / 2C)`` (round half up) signed 8; ``d = x - mu``
    signed 9 (``|d| <= 255``); ``Var = sum d^2 + eps_int`` unsigned 41 (sum < 2^28, eps <= 2^40);
    ``std = sqrt_iter(Var)`` unsigned 21; ``factor = floor(2^62 / std)`` (0 when std = 0) unsigned
    63; ``|factor * d| <= 2^62`` (``|d| <= std``); ``y = (factor * d) >> 46`` signed 17
    (``|y| <= 2^16``: ``y = IntDiv(d, std, 17)``, floor); ``acc = y G + B`` signed 32;
    ``out = sat_out(round_half_up(acc M >> s))`` with ``|acc M| < 2^62``."""
    x = _int64(x, "x", -128, 127)
    rows = _rows(x, "ivit layernorm")
    c = rows.shape[1]
    g = _int64(p["gamma"], "gamma", -G_MAX, G_MAX)
    b = _int64(p["beta"], "beta", -B_MAX, B_MAX)
    if g.shape != (c,) or b.shape != (c,):
        raise ValueError(f"ivit layernorm: gamma {g.shape} and beta {b.shape} must have shape ({c},)")
    eps = _int_param(p, "eps_int", 0, EPS_INT_MAX)
    mult = _int_param(p, "multiplier", 0, MULT_MAX)
    shift = _int_param(p, "shift", 0, SHIFT_MAX)
    out_bits = _int_param(p, "out_bits", 2, 16)
    sx = rows.sum(axis=1, keepdims=True)
    mu = (2 * sx + c) // (2 * c)
    d = rows - mu
    var = (d * d).sum(axis=1, keepdims=True) + eps
    std = sqrt_iter(var)
    factor = np.where(std > 0, (1 << DIV_M) // np.maximum(std, 1), 0)
    prod = factor * d
    y = prod >> (DIV_M - LN_FRAC)
    acc = y * g + b
    out = _requant(acc, mult, shift, out_bits).reshape(x.shape)
    stages = {"sx": sx, "mu": mu, "d": d, "var": var, "std": std, "factor": factor, "prod": prod, "y": y}
    return {**stages, "acc": acc, "acc_mult": acc * mult, "out": out}


def _ln_kernel(x: np.ndarray, p: Params) -> np.ndarray:
    return layernorm_stages(x, p)["out"]


def _ln_ref(x, p: Params):
    g, b = [int(v) for v in p["gamma"]], [int(v) for v in p["beta"]]
    eps, mult, shift, bits = int(p["eps_int"]), int(p["multiplier"]), int(p["shift"]), int(p["out_bits"])
    arr = np.asarray(x)
    out = []
    for row in arr.reshape(-1, arr.shape[-1]).tolist():
        c = len(row)
        mu = math.floor(Fraction(sum(row), c) + Fraction(1, 2))
        d = [v - mu for v in row]
        std = sqrt_iter_ref(sum(t * t for t in d) + eps)
        res = []
        for i, t in enumerate(d):
            y = int_div_ref(t, std, LN_K) if std else 0  # Python's // floors negative t as >> does
            res.append(_requant_ref(y * g[i] + b[i], mult, shift, bits))
        out.append(res)
    return np.array(out, dtype=np.int64).reshape(arr.shape).tolist()


VARIANTS = [
    Variant(
        "gelu",
        "shiftgelu_exact",
        "hwvit's corrected ShiftGELU: x * sigmoid(1.702 x) per element (max(z, 0)), 15 fraction bits, IntDiv, requant",
        "Li & Gu, I-ViT (ICCV 2023), Sec. 3.4 Eqs. 16-18 (ShiftExp Eqs. 10-14, IntDiv Eq. 15)",
        _gelu_prepare,
        _gelu_kernel,
        _gelu_ref,
        lambda ctx, p: ctx.s_out,
    ),
    Variant(
        "softmax",
        "shiftmax_exact",
        "hwvit's corrected Shiftmax: I_0 = floor(1/s), ShiftExp with 15 fraction bits, 2^62 IntDiv; 2^-(out_bits-1)",
        "Li & Gu, I-ViT (ICCV 2023), Sec. 3.3 Eqs. 9-15",
        _softmax_prepare,
        _softmax_kernel,
        _softmax_ref,
        lambda ctx, p: 2.0 ** -(ctx.out_bits - 1),
    ),
    Variant(
        "layernorm",
        "ivit_exact",
        "hwvit's corrected I-LayerNorm: mean half up, exact floor sqrt (Newton), 2^62 IntDiv, gamma/beta fixed point",
        "Li & Gu, I-ViT (ICCV 2023), Sec. 3.5 Eq. 19 (IntDiv Eq. 15)",
        _ln_prepare,
        _ln_kernel,
        _ln_ref,
        lambda ctx, p: ctx.s_out,
    ),
]
