"""I-ViT's arithmetic as its authors released it: Shiftmax, ShiftGELU and I-LayerNorm, bit for bit.

Source: zkkli/I-ViT at 380ba99 (github.com/zkkli/I-ViT), ``models/quantization_utils/quant_modules.py``:
``IntSoftmax``, ``IntGELU``, ``IntLayerNorm``; and ``quant_utils.fixedpoint_mul`` (what its
``QuantAct`` runs) for the requant that follows GELU and LayerNorm in its ViT. Paper: Z. Li and Q. Gu,
"I-ViT: Integer-only Quantization for Efficient Vision Transformer Inference", ICCV 2023. The
modules compute in floating point on integer-valued tensors; every step here is its integer
statement (the formulas carry over, the code is hwvit's own), equal to the modules run in float64
on the data of tests/authors (tests/test_variants_authors.py: 0 differing elements).
docs/variants/ivit.md puts each beside hwvit's corrected form (``hwvit.variants.ivit``: the
``*_exact`` names) with the difference measured, and derives every width.

- ``softmax=shiftmax``: ``IntSoftmax(output_bit=out_bits)``: ShiftExp (``n = 15``) of ``x - max``,
  the row sum clamped to ``2^31 - 1``, ``factor = floor((2^31 - 1) / sum)``,
  ``p = floor(E * factor / 2^(32 - k))``; probabilities at ``2^-(k-1)``. I-ViT's ViT runs it at
  ``k = 16``.
- ``gelu=shiftgelu``: ``IntGELU()`` (an 8-bit sigmoid, ``n = 23``, ``1.702`` folded into the scale)
  on a **row** (the last axis: I-ViT takes the sigmoid's maximum over the hidden features of a
  token), ``t = x * sigmoid``, then ``QuantAct(out_bits)``: ``round_half_even(t * M / 2^E)``.
- ``layernorm=ivit``: ``IntLayerNorm``: the mean rounded half to even, ten Newton steps from
  ``2^16`` for the standard deviation, ``factor = floor((2^31 - 1) / std)``, ``y = floor(d factor / 2)``,
  ``bias_int = floor(beta / gamma / (sqrt(C) 2^-30))``, then ``QuantAct(out_bits)`` with one
  ``(M, E)`` per channel (gamma folded into the scale). Inputs up to 16 bits (I-ViT's residual
  stream is a 16-bit QuantAct).

Shared steps:

- ``I_0 = -floor(-1 / s)`` (the module's ``x0_int = floor(-1.0 / s)``, float64 division): the
  ceiling of ``1 / s``, where hwvit's corrected form takes the floor.
- ShiftExp(D, n) (``int_exp_shift``): ``P = D + floor(D/2) - floor(D/16)``, ``P = max(P, -n I_0)``,
  ``q = floor(-P / I_0)``, ``r' = -P - q I_0`` in ``[0, I_0)``, ``E = floor((I_0 - r'/2) 2^(n - q))``
  ``= ((2 I_0 - r') << (n - q)) >> 1``. ``q <= n`` from the clamp at ``-n I_0``; a positive ``D``
  (ShiftGELU's ``e^-max`` when the row's maximum is negative) gives ``q < 0``.
- QuantAct (``fixedpoint_mul``): ``new_scale = double(s_pre) / double(float32(s_out))``,
  ``(M, E) = batch_frexp(new_scale)`` (hwvit.variants.ibert.frexp31, the same function I-BERT
  has), ``out = clamp(round_half_even(z M / 2^E))``. The module clamps only at 4, 8, 16 and 32 bits;
  hwvit saturates at every width (a value outside ``out_bits`` has no code).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from hwvit.ops.checks import check_bits
from hwvit.variants.base import GeluContext, LayerNormContext, Params, SoftmaxContext, Variant, by_rows, signed_rows
from hwvit.variants.ibert import frexp31, ibert_requant, ibert_requant_ref

SM_N = 15  # IntSoftmax.n
GELU_N = 23  # IntGELU.n
GELU_SIG_BITS = 8  # IntGELU's output_bit: the sigmoid at 2^-7 (I-ViT builds IntGELU() with the default)
GELU_K = 1.702  # IntGELU's sigmoid slope, folded into the scale
DIV_NUM = (1 << 31) - 1  # the numerator of every division (and the sums' clamp)
LN_START = 1 << 16  # the Newton iteration's start
LN_STEPS = 10
LN_SQRT_SHIFT = 30  # IntLayerNorm's output scale sqrt(C) / 2^30
I0_MAX = 1 << 16  # s_in >= 2^-16
S_MAX = 2.0**16
EXP_CAP = 33  # ShiftExp left shifts past this saturate the 2^31 - 1 clamp anyway (GELU's e^-max)
BIAS_MAX = 1 << 40  # |bias_int| = |beta / gamma| 2^30 / sqrt(C): |beta / gamma| below 2^10 sqrt(C) (else ValueError)
MAX_N = 4096


def i0_of(s: float) -> int:
    """``I_0 = -floor(-1.0 / s)`` in float64, as ``int_exp_shift``'s ``x0_int``; ``s`` in [2^-16, 2^16]."""
    s = float(s)
    if not (math.isfinite(s) and 2.0**-16 <= s <= S_MAX):
        raise ValueError(f"I-ViT needs a scale in [2^-16, 2^16], got {s!r}")
    return -math.floor(-1.0 / s)


def quant_act(s_pre: float, s_out: float) -> tuple[int, int]:
    """QuantAct's ``(M, E)``: ``batch_frexp(double(s_pre) / double(float32(s_out)))``."""
    s_out32 = float(np.float32(s_out))
    if not (math.isfinite(s_out32) and s_out32 > 0):
        raise ValueError(f"s_out must be a finite positive float32, got {s_out!r}")
    return frexp31(float(s_pre) / s_out32)


# ----------------------------------------------------------------------------- ShiftExp


def shift_exp(delta: np.ndarray, i0: int, n: int) -> np.ndarray:
    """``int_exp_shift`` of integer ``delta`` (int64, ``|delta| < 2^20``), ``1 <= i0 <= 2^16``.
    ``delta <= 0``: ``0 <= q <= n``, ``E <= I_0 2^n``. ``delta > 0``: ``q < 0`` and the shift
    ``n - q`` is capped at 33, where ``E >= 2^33`` is past the callers' ``2^31 - 1`` clamp with or
    without the cap (the module's float gives the same clamp, or infinity clamped): ``E < 2^50``."""
    p = delta + (delta >> 1) - (delta >> 4)
    p = np.maximum(p, -n * i0)
    q = (-p) // i0  # floor(P / x0_int), x0_int = -I_0
    rr = (-p) - q * i0  # -r, in [0, I_0)
    sh = np.minimum(n - q, EXP_CAP)
    return ((2 * i0 - rr) << sh) >> 1


def shift_exp_ref(delta: int, i0: int, n: int) -> int:
    """The module's steps on Python ints and exact fractions: ``x0 = -I_0``, ``floor`` as written."""
    x0 = -i0
    x = delta + math.floor(Fraction(delta, 2)) - math.floor(Fraction(delta, 16))
    x = max(x, n * x0)
    q = math.floor(Fraction(x, x0))
    r = x - x0 * q
    exp = Fraction(r, 2) - x0  # r/2 - x0_int, not floored
    return max(math.floor(exp * Fraction(2) ** (n - q)), 0)


def _ratio(e: np.ndarray, total: np.ndarray, k: int) -> np.ndarray:
    """``floor(e * floor((2^31 - 1) / min(total, 2^31 - 1)) / 2^(32 - k))`` (the division of both
    modules): factor <= 2^31 - 1; ``e * factor <= 2^31`` where ``e <= total`` and otherwise
    ``factor = 1``, ``e < 2^50``."""
    factor = DIV_NUM // np.minimum(total, DIV_NUM)
    return (e * factor) >> (32 - k)


def _ratio_ref(e: int, total: int, k: int) -> int:
    factor = math.floor(Fraction(DIV_NUM, min(total, DIV_NUM)))
    return math.floor(Fraction(e * factor, 2 ** (32 - k)))


# ----------------------------------------------------------------------------- Shiftmax


def _softmax_prepare(ctx: SoftmaxContext) -> Params:
    return {
        "i0": i0_of(ctx.s_in),
        "in_bits": check_bits(ctx.in_bits, "shiftmax in_bits", 2, 16),
        "out_bits": check_bits(ctx.out_bits, "shiftmax out_bits", 2, 16),
    }


def softmax_stages(x: Any, p: Params) -> dict[str, np.ndarray]:
    """Every intermediate of IntSoftmax over the last axis (b = in_bits <= 16, N <= 4096, k = out_bits):

    ``delta = x - max`` signed b+1; ``E = ShiftExp(delta, 15)`` unsigned 32 (``<= I_0 2^15 <= 2^31``);
    ``S = sum E`` unsigned 44 (``<= N 2^31``), clamped to ``2^31 - 1``; ``factor`` unsigned 31;
    ``E factor`` unsigned 32 (``<= 2^31``); ``y = (E factor) >> (32 - k)`` in ``[0, 2^(k-1)]``."""
    b = check_bits(p["in_bits"], "in_bits", 2, 16)
    x = signed_rows(x, b, "x", MAX_N)
    i0 = check_bits(p["i0"], "i0", 1, I0_MAX)
    k = check_bits(p["out_bits"], "out_bits", 2, 16)
    delta = x - x.max(axis=-1, keepdims=True)
    e = shift_exp(delta, i0, SM_N)
    total = e.sum(axis=-1, keepdims=True)
    factor = DIV_NUM // np.minimum(total, DIV_NUM)
    prod = e * factor
    return {"delta": delta, "e": e, "sum": total, "factor": factor, "prod": prod, "out": prod >> (32 - k)}


def _softmax_kernel(x: np.ndarray, p: Params) -> np.ndarray:
    return softmax_stages(x, p)["out"]


def _softmax_ref(x, p: Params):
    i0, k = int(p["i0"]), int(p["out_bits"])

    def row_fn(row: list[int]) -> list[int]:
        e = [shift_exp_ref(v - max(row), i0, SM_N) for v in row]
        return [_ratio_ref(v, sum(e), k) for v in e]

    return by_rows(x, row_fn)


# ----------------------------------------------------------------------------- ShiftGELU


def _gelu_prepare(ctx: GeluContext) -> Params:
    """``I_0`` of the sigmoid's scale ``s_in * 1.702``; QuantAct's ``(M, E)`` from ``t``'s scale
    ``s_in * 2^-7`` to ``s_out``."""
    i0 = i0_of(float(ctx.s_in) * GELU_K)
    m, e = quant_act(float(ctx.s_in) * 2.0 ** -(GELU_SIG_BITS - 1), ctx.s_out)
    return {
        "i0": i0,
        "multiplier": m,
        "shift": e,
        "in_bits": check_bits(ctx.in_bits, "shiftgelu in_bits", 2, 16),
        "out_bits": check_bits(ctx.out_bits, "shiftgelu out_bits", 2, 16),
    }


def gelu_stages(x: Any, p: Params) -> dict[str, np.ndarray]:
    """Every intermediate of IntGELU and its QuantAct over the last axis (b = in_bits <= 16):

    ``m = max x`` per row; ``e1 = ShiftExp(x - m, 23)`` unsigned 40 (``<= I_0 2^23``);
    ``e2 = ShiftExp(-m, 23)`` per row (``-m > 0`` when the row is negative: saturating, capped below
    2^50); ``S = min(e1 + e2, 2^31 - 1)``; ``sig = floor(e1 floor((2^31 - 1) / S) / 2^24)``: in
    ``[0, 2^7]`` when ``e1 + e2 < 2^31``, up to ``I_0 / 2 <= 2^15`` when clamped; ``t = x sig``
    signed ``b + 16``; ``out = sat(round_half_even(t M / 2^E))``, ``|t M| < 2^62``."""
    b = check_bits(p["in_bits"], "in_bits", 2, 16)
    x = signed_rows(x, b, "x", MAX_N)
    i0 = check_bits(p["i0"], "i0", 1, I0_MAX)
    out_bits = check_bits(p["out_bits"], "out_bits", 2, 16)
    top = x.max(axis=-1, keepdims=True)
    e1 = shift_exp(x - top, i0, GELU_N)
    e2 = shift_exp(-top, i0, GELU_N)
    sig = _ratio(e1, e1 + e2, GELU_SIG_BITS)
    t = x * sig
    out = ibert_requant(t, int(p["multiplier"]), int(p["shift"]), out_bits)
    return {"e1": e1, "e2": e2, "sig": sig, "t": t, "out": out}


def _gelu_kernel(x: np.ndarray, p: Params) -> np.ndarray:
    return gelu_stages(x, p)["out"]


def _gelu_ref(x, p: Params):
    i0, m, e, bits = int(p["i0"]), int(p["multiplier"]), int(p["shift"]), int(p["out_bits"])

    def one(v: int, top: int, e2: int) -> int:
        e1 = shift_exp_ref(v - top, i0, GELU_N)  # e^(x - max)
        return ibert_requant_ref(v * _ratio_ref(e1, e1 + e2, GELU_SIG_BITS), m, e, bits)

    def row_fn(row: list[int]) -> list[int]:
        top = max(row)
        e2 = shift_exp_ref(-top, i0, GELU_N)  # e^(-max), once per row
        return [one(v, top, e2) for v in row]

    return by_rows(x, row_fn)


# ----------------------------------------------------------------------------- I-LayerNorm


def _ln_prepare(ctx: LayerNormContext) -> Params:
    """IntLayerNorm's constants, float64 as the module makes them: ``dim_sqrt = sqrt(float32(C))``
    (float32), ``s_y = dim_sqrt / 2^30``; ``bias_int = floor((beta / gamma) / s_y)``; the output scale
    per channel ``s_y * gamma``, so QuantAct's ``(M_c, E_c) = batch_frexp(s_y gamma_c / float32(s_out))``.
    ``ctx.eps`` is not used (the module has none) nor ``ctx.s_in`` (the integers are the module's)."""
    g = np.asarray(ctx.gamma, dtype=np.float64)
    bt = np.asarray(ctx.beta, dtype=np.float64)
    c = len(g)
    if g.shape != (c,) or bt.shape != (c,) or not 1 <= c <= MAX_N:
        raise ValueError(f"ivit layernorm: gamma {g.shape} and beta {bt.shape} must have one shape (C,), C <= {MAX_N}")
    if not (np.all(np.isfinite(g)) and np.all(np.isfinite(bt))) or np.any(g == 0):
        raise ValueError("ivit layernorm: I-ViT divides beta by gamma: gamma must be finite and nonzero")
    s_y = float(np.sqrt(np.float32(c))) / 2.0**LN_SQRT_SHIFT
    bias = np.floor((bt / g) / s_y)
    if np.abs(bias).max() >= BIAS_MAX:
        raise ValueError("ivit layernorm: |beta / gamma| too large for I-ViT's bias (|bias_int| >= 2^40)")
    pairs = [quant_act(s_y * float(gc), ctx.s_out) for gc in g]
    return {
        "bias": bias.astype(np.int64),
        "multiplier": np.array([m for m, _ in pairs], dtype=np.int64),
        "shift": np.array([e for _, e in pairs], dtype=np.int64),
        "in_bits": check_bits(ctx.in_bits, "ivit in_bits", 2, 16),
        "out_bits": check_bits(ctx.out_bits, "ivit out_bits", 2, 16),
    }


def newton_std(var: np.ndarray) -> np.ndarray:
    """IntLayerNorm's ``k = 2^16``, ten times ``k = floor((k + floor(var / k)) / 2)``, for
    ``0 <= var < 2^53``: ``64 <= k < 2^28`` (it halves at most ten times from 2^16; the first step
    is the largest)."""
    k = np.full(var.shape, LN_START, dtype=np.int64)
    for _ in range(LN_STEPS):
        k = (k + var // k) >> 1
    return k


def layernorm_stages(x: Any, p: Params) -> dict[str, np.ndarray]:
    """Every intermediate of IntLayerNorm and its QuantAct over the last axis (b = in_bits <= 16, C <= 4096):

    ``Sx`` signed 28; ``mu = round_half_even(Sx / C)`` signed b; ``d = x - mu`` signed b+1;
    ``var = sum d^2`` unsigned 45 (``<= C 2^(2b)``); ``std = newton_std(var)`` in ``[64, 2^28)``;
    ``factor = floor((2^31 - 1) / std)`` unsigned 25; ``y = floor(d factor / 2)`` signed 41;
    ``z = y + bias`` signed 42 (``|bias| < 2^40``); ``out = sat(round_half_even(z M_c / 2^E_c))``
    (``|z M| < 2^73``: hwvit.variants.ibert.ibert_requant's split product)."""
    b = check_bits(p["in_bits"], "in_bits", 2, 16)
    x = signed_rows(x, b, "x", MAX_N)
    c = x.shape[-1]
    bias = np.asarray(p["bias"])
    mult, shift = np.asarray(p["multiplier"]), np.asarray(p["shift"])
    for name, a in (("bias", bias), ("multiplier", mult), ("shift", shift)):
        if a.dtype.kind not in "iu" or a.shape != (c,):
            raise ValueError(f"ivit layernorm: {name} must be an integer array of shape ({c},)")
    if np.abs(bias).max() >= BIAS_MAX or np.abs(mult).max() > 1 << 31 or shift.min() < 1 or shift.max() > 93:
        raise ValueError("ivit layernorm: |bias| < 2^40, |multiplier| <= 2^31 and shift in [1, 93]")
    out_bits = check_bits(p["out_bits"], "out_bits", 2, 16)
    sx = x.sum(axis=-1, keepdims=True)
    q, r = np.divmod(sx, c)
    mu = q + ((2 * r > c) | ((2 * r == c) & (q % 2 == 1)))
    d = x - mu
    var = (d * d).sum(axis=-1, keepdims=True)
    std = newton_std(var)
    factor = DIV_NUM // std
    y = (d * factor) >> 1
    z = y + bias.astype(np.int64)
    out = ibert_requant(z, mult, shift, out_bits)
    return {"sx": sx, "mu": mu, "d": d, "var": var, "std": std, "factor": factor, "y": y, "z": z, "out": out}


def _ln_kernel(x: np.ndarray, p: Params) -> np.ndarray:
    return layernorm_stages(x, p)["out"]


def _ln_ref(x, p: Params):
    bias, mult, shift = ([int(v) for v in p[k]] for k in ("bias", "multiplier", "shift"))
    bits = int(p["out_bits"])

    def row_fn(row: list[int]) -> list[int]:
        mu = round(Fraction(sum(row), len(row)))  # Python's round of a Fraction: half to even, as torch.round
        d = [v - mu for v in row]
        var = sum(t * t for t in d)
        k = LN_START
        for _ in range(LN_STEPS):
            k = math.floor(Fraction(k + math.floor(Fraction(var, k)), 2))
        factor = math.floor(Fraction(DIV_NUM, k))
        ys = [math.floor(Fraction(t * factor, 2)) for t in d]
        return [ibert_requant_ref(y + bias[i], mult[i], shift[i], bits) for i, y in enumerate(ys)]

    return by_rows(x, row_fn)


SOURCE = "zkkli/I-ViT @ 380ba99, models/quantization_utils/quant_modules.py"

VARIANTS = [
    Variant(
        "softmax",
        "shiftmax",
        "I-ViT's released Shiftmax (IntSoftmax): ShiftExp n=15 of x - max, sum clamped to 2^31-1, "
        "floor((2^31-1)/sum) factor; unsigned out_bits at 2^-(out_bits-1)",
        f"Li & Gu, I-ViT (ICCV 2023), Sec. 3.3; released code {SOURCE}: IntSoftmax",
        _softmax_prepare,
        _softmax_kernel,
        _softmax_ref,
        lambda ctx, p: 2.0 ** -(ctx.out_bits - 1),
    ),
    Variant(
        "gelu",
        "shiftgelu",
        "I-ViT's released ShiftGELU (IntGELU): x * sigmoid(1.702 x) with the sigmoid on the row's maximum, "
        "8-bit sigmoid, then QuantAct (round half to even)",
        f"Li & Gu, I-ViT (ICCV 2023), Sec. 3.4; released code {SOURCE}: IntGELU, quant_utils.fixedpoint_mul",
        _gelu_prepare,
        _gelu_kernel,
        _gelu_ref,
        lambda ctx, p: ctx.s_out,
        row=True,
    ),
    Variant(
        "layernorm",
        "ivit",
        "I-ViT's released I-LayerNorm (IntLayerNorm): mean half to even, 10 Newton steps from 2^16, "
        "floor((2^31-1)/std), beta/gamma bias, then a per-channel QuantAct",
        f"Li & Gu, I-ViT (ICCV 2023), Sec. 3.5; released code {SOURCE}: IntLayerNorm, quant_utils.fixedpoint_mul",
        _ln_prepare,
        _ln_kernel,
        _ln_ref,
        lambda ctx, p: ctx.s_out,
    ),
]
