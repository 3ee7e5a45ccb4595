"""Two forms of hwvit's LayerNorm as variants: without epsilon, and FQ-ViT's power-of-two factor.

- ``layernorm=no_eps``: hwvit's LayerNorm (docs/arithmetic.md, ``ops.layernorm``) with
  ``eps_int = 0``, as the ECG transformer's LayerNorm circuit has it. A constant row (variance 0,
  so ``V = 0``, ``sig = 0``) gives ``inv = 0``, every ``y_i = 0`` and so ``out_i = requant(B_i)``:
  **beta alone** (``round(beta_i / s_out)``, saturated), the limit of float LayerNorm with eps > 0
  on that row. Any other row has ``V >= C - 1 >= 1`` (integers), so ``sig >= 2^11`` and nothing
  blows up without eps.
- ``layernorm=ptf``: FQ-ViT's Power-of-Two Factor (Y. Lin, T. Zhang, P. Sun, Z. Li, S. Zhou,
  "FQ-ViT: Post-Training Quantization for Fully Quantized Vision Transformer", IJCAI 2022,
  Section 3.2, Eqs. 5-7). Channel ``c`` is quantized at ``s * 2^alpha_c`` (``alpha_c`` in
  ``0..3``): code ``x_c = sat8(round(X_c / (s 2^alpha_c)))``; the row statistics are taken on
  ``z_c = x_c << alpha_c`` (all channels at the one scale ``s``, Eq. 7), exactly in integers,
  then hwvit's isqrt / one division per row / gamma-beta / requant path with ``T = 8`` instead of
  11 (``z`` is 11 bits, so ``V`` is 44 bits and ``V << 2T`` must stay below 2^60).

Choosing ``s`` and ``alpha`` from calibration (FQ-ViT Sec. 3.2): record each channel's ``max |X_c|``
over the calibration set (``channel_absmax``); ``s = ptf_scale(channel_absmax)`` =
``max_c absmax_c / (127 * 2^3)`` (the widest channel uses the top factor, FQ-ViT's
``s = range / 2^K / (2^b - 1)`` for symmetric int8); ``alpha_c = ptf_alpha(channel_absmax, s)`` =
the smallest ``alpha`` in ``0..3`` with ``absmax_c <= 127 * s * 2^alpha`` (the finest scale that
does not clip the channel: FQ-ViT takes the argmin of the quantization error, which for the
calibration maximum is this one). Build ``PtfContext(..., s_in=s, channel_absmax=...)``; the
previous layer quantizes its output with ``ptf_quantize(X, s, alpha)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from hwvit.variants.base import LayerNormContext, Params, Variant

PTF_K = 3  # alpha_c in 0..PTF_K (FQ-ViT's K = 3)
PTF_VARIANTS = ("ptf", "ptf_exact")  # the LayerNorms whose input stream is quantized per channel
PTF_T = 8  # extra bits of sig for ptf (hwvit's T = 11 would overflow V << 2T for 11-bit z)
LN_K = 43  # hwvit's: inv = round(2^K / sig)
LN_F = 10  # hwvit's: y = round((x - mean) / std * 2^F)
HWVIT_T = 11
MAX_C = 4096
G_MAX = (1 << 14) - 1
B_MAX = (1 << 30) - 1
MULT_MAX = (1 << 31) - 1
SHIFT_MAX = 62
PTF_EPS_MAX = 1 << 61  # V << 16 < 2^60, so Ve < 2^62 (ops.isqrt's domain)


@dataclass(frozen=True)
class PtfContext(LayerNormContext):
    """LayerNormContext plus the calibration's per-channel ``max |X_c|`` (float, shape (C,)), from
    which ``ptf_alpha`` chooses the factors; or the factors themselves (``alpha``, int (C,), e.g.
    from FQ-ViT's own observer, ``hwvit.variants.fqvit_released.ptf_observer``: the released
    ``layernorm=ptf`` takes them as given). Neither: every ``alpha_c = 0`` (per-tensor at ``s_in``)."""

    channel_absmax: np.ndarray | None = None
    alpha: np.ndarray | None = None


def ptf_scale(channel_absmax: Any, in_bits: int = 8, k: int = PTF_K) -> float:
    """FQ-ViT's base scale ``s``: the widest channel fills the code range at ``s * 2^k``."""
    top = float(np.max(np.asarray(channel_absmax, dtype=np.float64)))
    if not (math.isfinite(top) and top > 0):
        raise ValueError(f"ptf_scale: channel ranges must be finite with a positive maximum, got {top}")
    return top / (((1 << (in_bits - 1)) - 1) * (1 << k))


def ptf_alpha(channel_absmax: Any, s: float, in_bits: int = 8, k: int = PTF_K) -> np.ndarray:
    """Per channel the smallest ``alpha`` in ``0..k`` with ``absmax_c <= qmax * s * 2^alpha``
    (``k`` where none fits: that channel clips). int64 array (C,)."""
    a = np.asarray(channel_absmax, dtype=np.float64)
    if a.ndim != 1 or not np.all(np.isfinite(a)) or np.any(a < 0) or not s > 0:
        raise ValueError("ptf_alpha: channel_absmax must be a finite (C,) array >= 0 and s > 0")
    qmax = (1 << (in_bits - 1)) - 1
    alpha = np.full(a.shape, k, dtype=np.int64)
    for cand in range(k, -1, -1):  # last write wins: the smallest alpha that fits
        alpha = np.where(a <= qmax * s * 2.0**cand * (1 + 1e-12), cand, alpha)
    return alpha


def ptf_quantize(x_float: Any, s: float, alpha: Any, in_bits: int = 8) -> np.ndarray:
    """Codes of float activations (..., C): channel c at ``s * 2^alpha_c``, round half away from
    zero, saturated to signed ``in_bits`` (``hwvit.ops.quantize``)."""
    from hwvit.ops import quantize

    return quantize(x_float, s * np.exp2(np.asarray(alpha, dtype=np.float64)), in_bits)


# ----------------------------------------------------------------------------- shared path


def _checks(p: Params, c: int) -> tuple[np.ndarray, np.ndarray, int, int, int]:
    g = np.asarray(p["gamma"])
    b = np.asarray(p["beta"])
    if g.dtype.kind not in "iu" or b.dtype.kind not in "iu" or g.shape != (c,) or b.shape != (c,):
        raise ValueError(f"layernorm: gamma {g.shape} and beta {b.shape} must be integer arrays of shape ({c},)")
    g, b = g.astype(np.int64), b.astype(np.int64)
    if np.abs(g).max() > G_MAX or np.abs(b).max() > B_MAX:
        raise ValueError("layernorm: |gamma| must be <= 2^14-1 and |beta| <= 2^30-1")
    vals = []
    for key, lo, hi in (("multiplier", 0, MULT_MAX), ("shift", 0, SHIFT_MAX), ("out_bits", 2, 16)):
        v = p[key]
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= int(v) <= hi:
            raise ValueError(f"{key} must be an integer in [{lo}, {hi}], got {v!r}")
        vals.append(int(v))
    return g, b, vals[0], vals[1], vals[2]


def hwvit_path_stages(z: np.ndarray, p: Params, t_bits: int, inv_delta: int = 0) -> dict[str, np.ndarray]:
    """hwvit's LayerNorm on rows of integers ``z`` (R, C) at one scale, vectorized, with ``T = t_bits``:

    ``Sx = sum z``, ``Sxx = sum z^2``, ``V = C Sxx - Sx^2``, ``Ve = (V << 2T) + eps_int`` (< 2^62),
    ``sig = isqrt(Ve)``, ``inv = floor((2^43 + sig/2) / sig)`` (0 if sig = 0), ``d = C z - Sx``,
    ``y = (d inv + 2^(sh-1)) >> sh`` with ``sh = 43 - T - 10``, ``acc = y G + B``,
    ``out = sat(round_half_up(acc M >> s))``. Widths per caller (ptf: ``layernorm_ptf``).
    ``inv_delta`` (tests only) moves inv by that much where sig > 0: rows whose outputs change then
    hold a block to inv's exact rounding."""
    from hwvit.ops import isqrt

    c = z.shape[1]
    g, b, mult, shift, out_bits = _checks(p, c)
    eps = p["eps_int"]
    if isinstance(eps, bool) or not isinstance(eps, (int, np.integer)) or not 0 <= int(eps) <= PTF_EPS_MAX:
        raise ValueError(f"eps_int must be an integer in [0, 2^61], got {eps!r}")
    sx = z.sum(axis=1, keepdims=True)
    sxx = (z * z).sum(axis=1, keepdims=True)
    v = c * sxx - sx * sx
    ve = (v << (2 * t_bits)) + int(eps)
    sig = isqrt(ve)  # raises on Ve >= 2^62
    inv = np.where(sig > 0, ((1 << LN_K) + (sig >> 1)) // np.maximum(sig, 1) + inv_delta, 0)
    d = c * z - sx
    sh = LN_K - t_bits - LN_F
    prod = d * inv
    y = (prod + (1 << (sh - 1))) >> sh
    acc = y * g + b
    lo, hi = -(1 << (out_bits - 1)), (1 << (out_bits - 1)) - 1
    acc_mult = acc * mult
    out = np.clip((acc_mult + ((1 << shift) >> 1)) >> shift, lo, hi)
    stages = {"sx": sx, "sxx": sxx, "v": v, "ve": ve, "sig": sig, "inv": inv, "d": d, "prod": prod, "y": y}
    return {**stages, "acc": acc, "acc_mult": acc_mult, "out": out}


def hwvit_path_ref(row: list[int], p: Params, t_bits: int) -> list[int]:
    """One row on Python ints: the formulas of docs/arithmetic.md (LayerNorm), any T."""
    c = len(row)
    mean_c = sum(row)  # C * mean
    var_c2 = c * sum(v * v for v in row) - mean_c**2  # C^2 * variance
    sig = math.isqrt(var_c2 * 4**t_bits + int(p["eps_int"]))
    inv = (2**LN_K + sig // 2) // sig if sig else 0
    sh = LN_K - t_bits - LN_F
    mult, shift, bits = int(p["multiplier"]), int(p["shift"]), int(p["out_bits"])
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    out = []
    for i, v in enumerate(row):
        y = math.floor(Fraction((c * v - mean_c) * inv, 2**sh) + Fraction(1, 2))
        acc = (y * int(p["gamma"][i]) + int(p["beta"][i])) * mult
        q = math.floor(Fraction(acc, 2**shift) + Fraction(1, 2)) if shift else acc
        out.append(min(max(q, lo), hi))
    return out


def _base_params(ctx: LayerNormContext) -> Params:
    from hwvit.quant.params import layernorm_params

    c = len(ctx.gamma)
    lp = layernorm_params(ctx.gamma, ctx.beta, ctx.eps, c, ctx.s_in, ctx.s_out, ctx.out_bits)
    return {**lp, "multiplier": int(lp["multiplier"]), "shift": int(lp["shift"]), "out_bits": int(ctx.out_bits)}


def _rows(x: Any, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    arr = np.asarray(x)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"x: expected an integer array, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.ndim == 0 or not 1 <= arr.shape[-1] <= MAX_C:
        raise ValueError(f"layernorm: rows must hold 1..{MAX_C} elements, got shape {arr.shape}")
    if arr.size and (int(arr.min()) < lo or int(arr.max()) > hi):
        raise ValueError(f"x: values must lie in [{lo}, {hi}]")
    return arr, arr.reshape(-1, arr.shape[-1])


# ----------------------------------------------------------------------------- no_eps


def _no_eps_prepare(ctx: LayerNormContext) -> Params:
    return {**_base_params(ctx), "eps_int": 0}


def _no_eps_kernel(x: np.ndarray, p: Params) -> np.ndarray:
    """hwvit's own kernel (``ops.layernorm``, widths in docs/arithmetic.md: V < 2^38, sig < 2^30,
    inv <= 2^32, y signed 17, acc signed 32) with eps_int = 0."""
    from hwvit import ops

    if int(p["eps_int"]) != 0:
        raise ValueError("no_eps: eps_int must be 0")
    return ops.layernorm(x, p["gamma"], p["beta"], 0, int(p["multiplier"]), int(p["shift"]), int(p["out_bits"]))


def _no_eps_ref(x, p: Params):
    arr = np.asarray(x)
    rows = arr.reshape(-1, arr.shape[-1]).tolist()
    return np.array([hwvit_path_ref(r, p, HWVIT_T) for r in rows], dtype=np.int64).reshape(arr.shape).tolist()


# ----------------------------------------------------------------------------- ptf


def _ptf_prepare(ctx: LayerNormContext) -> Params:
    """hwvit's G, B, M, s (``layernorm_params``: they do not depend on T); ``alpha`` from
    ``ctx.channel_absmax`` (``ptf_alpha``; zeros for a plain LayerNormContext);
    ``eps_int = round_half_up(eps C^2 / s^2 * 2^16)`` (units of ``V << 2 PTF_T``), at most 2^61."""
    c = len(ctx.gamma)
    base = _base_params(ctx)
    absmax = getattr(ctx, "channel_absmax", None)
    given = getattr(ctx, "alpha", None)
    if given is not None:
        alpha = np.asarray(given, dtype=np.int64)
    elif absmax is None:
        alpha = np.zeros(c, dtype=np.int64)
    else:
        if np.shape(absmax) != (c,):
            raise ValueError(f"ptf: channel_absmax must have shape ({c},), got {np.shape(absmax)}")
        alpha = ptf_alpha(absmax, float(ctx.s_in), ctx.in_bits)
    eps = Fraction(float(ctx.eps)) * c * c * 2 ** (2 * PTF_T) / Fraction(float(ctx.s_in)) ** 2
    eps_int = min(math.floor(eps + Fraction(1, 2)), PTF_EPS_MAX)
    return {**base, "eps_int": int(eps_int), "alpha": alpha}


def layernorm_ptf_stages(x: Any, p: Params, inv_delta: int = 0) -> dict[str, np.ndarray]:
    """PTF LayerNorm, every intermediate (int8 codes x, alpha_c in 0..3, C <= 4096):

    ``z = x << alpha`` signed 11 (``[-1024, 1016]``); ``Sx`` signed 23 (``|Sx| <= 2^22``);
    ``Sxx`` unsigned 33 (``<= 2^32``); ``V = C Sxx - Sx^2`` unsigned 44 (``= C^2 var_z``,
    ``var_z <= 1020^2 < 2^20``); ``Ve = (V << 16) + eps_int`` unsigned 62 (``< 2^60 + 2^61``);
    ``sig = isqrt(Ve)`` unsigned 31; ``inv <= 2^35`` (``V >= 1`` gives ``sig >= 2^8``), 0 when
    sig = 0; ``d = C z - Sx`` signed 24 (``|d| <= 2^23``); ``|d inv| <= 2^58``;
    ``y = round(d inv / 2^25)`` signed 17 (``|y| <= sqrt(C-1) 2^10 < 2^16``); ``acc = y G + B``
    signed 32; ``|acc M| < 2^62``. The output is at ``s_out`` (gamma/beta as hwvit's)."""
    arr, rows = _rows(x, -128, 127)
    c = rows.shape[1]
    alpha = np.asarray(p["alpha"])
    if alpha.dtype.kind not in "iu" or alpha.shape != (c,) or alpha.min() < 0 or alpha.max() > PTF_K:
        raise ValueError(f"ptf: alpha must be integers in [0, {PTF_K}] of shape ({c},)")
    z = rows << alpha.astype(np.int64)
    stages = hwvit_path_stages(z, p, PTF_T, inv_delta)
    return {"z": z, **stages, "out": stages["out"].reshape(arr.shape)}


def _ptf_kernel(x: np.ndarray, p: Params) -> np.ndarray:
    return layernorm_ptf_stages(x, p)["out"]


def _ptf_ref(x, p: Params):
    arr = np.asarray(x)
    alpha = [int(a) for a in p["alpha"]]
    out = []
    for row in arr.reshape(-1, arr.shape[-1]).tolist():
        z = [v * 2 ** alpha[i] for i, v in enumerate(row)]  # x_c << alpha_c
        out.append(hwvit_path_ref(z, p, PTF_T))
    return np.array(out, dtype=np.int64).reshape(arr.shape).tolist()


VARIANTS = [
    Variant(
        "layernorm",
        "no_eps",
        "hwvit's LayerNorm with eps_int = 0 (the ECG LayerNorm circuit); a constant row gives beta",
        "hwvit docs/arithmetic.md (LayerNorm) with eps = 0; docs/variants/ivit.md",
        _no_eps_prepare,
        _no_eps_kernel,
        _no_eps_ref,
        lambda ctx, p: ctx.s_out,
    ),
    Variant(
        "layernorm",
        "ptf_exact",
        "FQ-ViT power-of-two factor, hwvit's exact path: stats on x << alpha_c, isqrt, one division",
        "Lin et al., FQ-ViT (IJCAI 2022), Sec. 3.2 Eqs. 5-7 (Power-of-Two Factor)",
        _ptf_prepare,
        _ptf_kernel,
        _ptf_ref,
        lambda ctx, p: ctx.s_out,
    ),
]
