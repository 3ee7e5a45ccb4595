"""Float ViT + calibration ranges -> IntViT (every scale turned into integer multipliers/shifts).

``quantize_model`` calibrates and then builds the integer model part by part, in the order of
the forward: ``build_embed`` (patch embedding, cls token, position table), ``build_block`` per
transformer block, ``build_head`` (final norm, pooling, pre-head, classifier). Each builder takes
the scale of its input and returns the scale of its output, so the chain of scales is explicit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hwvit import ops
from hwvit.intvit.layers import IntLayerNorm, IntLinear, IntPool, IntResidual
from hwvit.intvit.model import IntAttention, IntBlock, IntPatchEmbed, IntViT
from hwvit.quant.calibrate import calibrate
from hwvit.quant.config import QuantConfig
from hwvit.quant.layers import (
    int_gelu,
    int_layernorm,
    int_linear,
    int_pool,
    int_residual,
    int_softmax,
    multiplier,
    scale_of,
)
from hwvit.quant.recipe import Recipe, plain


def _np(t) -> np.ndarray | None:
    return None if t is None else t.detach().double().numpy()


class _Scales:
    """``r[path]`` calibration ranges -> per-tensor scales at ``bits``; the recipe's per-layer choices."""

    def __init__(self, ranges: dict[str, float], bits: int, recipe: Recipe | None = None):
        self.ranges, self.bits = ranges, bits
        self.recipe = recipe or plain()
        self.used: set[str] = set()  # recipe globs that matched a layer

    def weight(self, path: str) -> tuple[int, bool]:
        self.used |= self.recipe.matches(path, ("weight_bits", "weights"))
        return self.recipe.weight(path)

    def softmax(self, path: str) -> tuple[int, int]:
        self.used |= self.recipe.matches(path, ("softmax_bits", "exp_entries"))
        return self.recipe.softmax(path)

    def __call__(self, path: str) -> float:
        return scale_of(self.ranges[path], self.bits)


@dataclass(kw_only=True)
class Embed:
    """What ``build_embed`` returns: the embedding layers and the scale of the tokens they give."""

    patch_embed: IntPatchEmbed
    s_embed: float  # patch embedding output and cls token (they are concatenated)
    cls_q: np.ndarray | None
    pos_q: np.ndarray | None
    s_pos: float | None
    pos_add: IntResidual | None
    s_tokens: float


def _linear(module, s_in: float, s_out: float, bits: int, scale: _Scales, path: str) -> IntLinear:
    w_bits, per_tensor = scale.weight(path)
    return int_linear(module.weight, _np(module.bias), s_in, s_out, bits, w_bits, per_tensor)


def build_embed(model, s_input: float, scale: _Scales) -> Embed:
    """Patch embedding, cls token and position table (added once, or before every block: ECG)."""
    cfg, bits, pe = model.cfg, scale.bits, model.patch_embed
    cls_abs = float(model.cls_token.detach().abs().max()) if model.cls_token is not None else 0.0
    s_embed = scale_of(max(scale.ranges["embed"], cls_abs), bits)
    kind = cfg.embed
    if kind == "conv":
        proj = _linear(pe.proj, s_input, s_embed, bits, scale, "embed.proj")
        patch_embed = IntPatchEmbed(kind=kind, patch_size=cfg.patch_size, proj=proj)
    elif kind == "simple":
        s_ni, s_pr = scale("embed.norm_in"), scale("embed.proj")
        patch_embed = IntPatchEmbed(
            kind=kind,
            patch_size=cfg.patch_size,
            proj=_linear(pe.proj, s_ni, s_pr, bits, scale, "embed.proj"),
            norm_in=int_layernorm(pe.norm_in, s_input, s_ni, bits),
            norm_out=int_layernorm(pe.norm_out, s_pr, s_embed, bits),
        )
    elif kind == "linear1d":
        s_pr, s_no = scale("embed.proj"), scale("embed.norm_out")
        patch_embed = IntPatchEmbed(
            kind=kind,
            patch_size=cfg.patch_size,
            proj=_linear(pe.proj, s_input, s_pr, bits, scale, "embed.proj"),
            norm_out=int_layernorm(pe.norm_out, s_pr, s_no, bits),
            gelu=int_gelu(s_no, s_embed, bits),
        )
    else:
        raise ValueError(f"unknown patch embedding {kind!r}")
    cls_q = ops.quantize(_np(model.cls_token).reshape(-1), s_embed, bits) if model.cls_token is not None else None
    if model.pos_embed is None:
        return Embed(
            patch_embed=patch_embed,
            s_embed=s_embed,
            cls_q=cls_q,
            pos_q=None,
            s_pos=None,
            pos_add=None,
            s_tokens=s_embed,
        )
    pos = _np(model.pos_embed)[0]
    s_pos = scale_of(np.abs(pos).max(), bits)
    s_tokens = scale("tokens")
    return Embed(
        patch_embed=patch_embed,
        s_embed=s_embed,
        cls_q=cls_q,
        pos_q=ops.quantize(pos, s_pos, bits),
        s_pos=s_pos,
        pos_add=int_residual(s_embed, s_pos, s_tokens, bits),
        s_tokens=s_tokens,
    )


def build_attention(attn, p: str, s_in: float, scale: _Scales, qc: QuantConfig, dim: int) -> IntAttention:
    """Attention at path ``p``: projections, Q.K^T and P.V requants, softmax."""
    bits = qc.act_bits
    h, hd = attn.heads, attn.head_dim
    if getattr(attn, "qkv", None) is not None:
        r = scale.ranges
        s_qkv = scale_of(max(r[f"{p}.q"], r[f"{p}.k"], r[f"{p}.v"]), bits)
        qkv = _linear(attn.qkv, s_in, s_qkv, bits, scale, f"{p}.qkv")
        lin_q = lin_k = lin_v = None
        s_q = s_k = s_v = s_qkv
    else:
        qkv = None
        s_q, s_k, s_v = (scale(f"{p}.{n}") for n in "qkv")
        lin_q, lin_k, lin_v = (
            _linear(m, s_in, s, bits, scale, f"{p}.{n}")
            for n, m, s in (("q", attn.q, s_q), ("k", attn.k, s_k), ("v", attn.v, s_v))
        )
    post = attn.scale_mode == "post_softmax_sqrt_dim"  # the ECG model divides the probabilities instead
    alpha = 1.0 if post else 1.0 / math.sqrt(hd)
    beta = 1.0 / math.sqrt(dim) if post else 1.0
    s_scores = scale(f"{p}.scores")
    sm, ss = multiplier(s_q * s_k * alpha / s_scores)
    sm_bits, entries = scale.softmax(f"{p}.softmax")
    softmax = int_softmax(s_scores, bits, sm_bits, qc.exp, entries)
    s_ctx = scale(f"{p}.context")
    cm, cs = multiplier(softmax.s_out * s_v * beta / s_ctx)
    proj = _linear(attn.proj, s_ctx, scale(f"{p}.proj"), bits, scale, f"{p}.proj")
    return IntAttention(
        heads=h,
        head_dim=hd,
        qkv=qkv,
        q=lin_q,
        k=lin_k,
        v=lin_v,
        s_q=s_q,
        s_k=s_k,
        s_v=s_v,
        scores_mult=sm,
        scores_shift=ss,
        s_scores=s_scores,
        softmax=softmax,
        ctx_mult=cm,
        ctx_shift=cs,
        s_ctx=s_ctx,
        proj=proj,
        act_bits=bits,
    )


def build_block(blk, i: int, s_x: float, scale: _Scales, qc: QuantConfig, dim: int) -> IntBlock:
    """Block ``layers.i`` with input scale ``s_x``: x + attn(norm1(x)), then + mlp(norm2(x))."""
    bits, p = qc.act_bits, f"layers.{i}"
    norm1 = int_layernorm(blk.norm1, s_x, scale(f"{p}.norm1"), bits)
    attn = build_attention(blk.attn, f"{p}.attn", norm1.s_out, scale, qc, dim)
    add1 = int_residual(s_x, attn.proj.s_out, scale(f"{p}.add1"), bits)
    norm2 = int_layernorm(blk.norm2, add1.s_out, scale(f"{p}.norm2"), bits)
    fc1 = _linear(blk.mlp.fc1, norm2.s_out, scale(f"{p}.mlp.fc1"), bits, scale, f"{p}.mlp.fc1")
    gelu = int_gelu(fc1.s_out, scale(f"{p}.mlp.gelu"), bits)
    fc2 = _linear(blk.mlp.fc2, gelu.s_out, scale(f"{p}.mlp.fc2"), bits, scale, f"{p}.mlp.fc2")
    add2 = int_residual(add1.s_out, fc2.s_out, scale(f"{p}.add2"), bits)
    return IntBlock(norm1=norm1, attn=attn, add1=add1, norm2=norm2, fc1=fc1, gelu=gelu, fc2=fc2, add2=add2)


@dataclass(kw_only=True)
class Head:
    """What ``build_head`` returns."""

    norm: IntLayerNorm | None
    pool: IntPool | None
    pre_head_fc: IntLinear | None
    pre_head_norm: IntLayerNorm | None
    head: IntLinear | None


def build_head(model, s_x: float, scale: _Scales) -> Head:
    """Final norm, pooling (cls token or mean over all T tokens), ECG's pre-head, classifier."""
    cfg, bits = model.cfg, scale.bits
    norm = None
    if model.norm is not None:
        norm = int_layernorm(model.norm, s_x, scale("norm"), bits)
        s_x = norm.s_out
    pool = None
    if cfg.pool != "cls":  # mean over all T tokens (the cls slot included, as the float model does)
        pool = int_pool(s_x, scale("pool"), cfg.num_tokens, bits)
        s_x = pool.s_out
    pre_fc = pre_norm = None
    ph = model.pre_head
    if ph is not None:
        if ph.fc is not None:
            pre_fc = _linear(ph.fc, s_x, scale("pre_head.fc"), bits, scale, "pre_head.fc")
            s_x = pre_fc.s_out
        pre_norm = int_layernorm(ph.norm, s_x, scale("pre_head.norm"), bits)
        s_x = pre_norm.s_out
    head = _linear(model.head, s_x, scale("logits"), bits, scale, "head") if model.head is not None else None
    return Head(norm=norm, pool=pool, pre_head_fc=pre_fc, pre_head_norm=pre_norm, head=head)


def _calibrate(
    model, calib_inputs, recipe: Recipe, runs: dict | None = None
) -> tuple[dict[str, float], dict[str, str], set[str]]:
    """Ranges per point by the recipe's method for it: one calibration pass per method used.

    ``runs`` (method, percentile, act_bits) -> ranges: a cache the caller may keep across models of
    the same float model and calibration data (hwvit.quant.sensitivity builds dozens).
    """
    qc = recipe.base
    runs = {} if runs is None else runs

    def ranges_for(how: tuple[str, float]) -> dict[str, float]:
        key = (*how, qc.act_bits)
        if key not in runs:
            runs[key] = calibrate(model, calib_inputs, how[0], how[1], bits=qc.act_bits)
        return runs[key]

    default = (qc.calibration, qc.percentile)
    ranges, methods, used = {}, {}, set()
    for path in ranges_for(default):
        how = recipe.calibration(path)
        used |= recipe.matches(path, ("calibration", "percentile"))
        ranges[path] = ranges_for(how)[path]
        methods[path] = how[0] if how[0] != "percentile" else f"percentile {how[1]:g}"
    return ranges, methods, used


def quantize_model(
    model,
    calib_inputs,
    qconfig: QuantConfig | None = None,
    recipe: Recipe | None = None,
    calibration_cache: dict | None = None,
) -> IntViT:
    """Calibrate ``model`` (hwvit.float.model.ViT) on ``calib_inputs`` and build its IntViT.

    ``recipe`` (hwvit.quant.recipe) replaces ``qconfig``: its default plus per-layer overrides.
    ``calibration_cache``: see ``_calibrate`` (only for the same model and calibration inputs).
    """
    recipe = recipe or plain(qconfig)
    qc = recipe.base
    for name, param in model.named_parameters():
        if not bool(param.detach().isfinite().all()):
            raise ValueError(f"weight {name} contains NaN or Inf")
    r, methods, used = _calibrate(model, calib_inputs, recipe, calibration_cache)
    cfg, bits = model.cfg, qc.act_bits
    scale = _Scales(r, bits, recipe)
    s_input = scale("input")
    embed = build_embed(model, s_input, scale)
    blocks, layer_pos_adds = [], []
    s_x = embed.s_tokens
    for i, blk in enumerate(model.layers):
        pos_add = None
        if cfg.pos_every_layer and i > 0:  # ECG: the position table is added before every block
            pos_add = int_residual(s_x, embed.s_pos, scale(f"layers.{i}.pos_add"), bits)
            s_x = pos_add.s_out
        layer_pos_adds.append(pos_add)
        blocks.append(build_block(blk, i, s_x, scale, qc, cfg.dim))
        s_x = blocks[-1].add2.s_out
    head = build_head(model, s_x, scale)
    unmatched = [g for g, _ in recipe.layers if g not in scale.used | used]
    if unmatched:
        raise ValueError(
            f"recipe: layers glob {unmatched[0]!r} matches no layer of this model "
            f"(paths look like layers.0.mlp.fc1, layers.0.attn.softmax, head)"
        )
    meta = {"quant": qc.to_dict(), "calibration": methods}
    if not recipe.is_plain():
        meta["recipe"] = recipe.to_dict()
    return IntViT(
        config=cfg,
        act_bits=bits,
        s_input=s_input,
        patch_embed=embed.patch_embed,
        s_embed=embed.s_embed,
        cls_q=embed.cls_q,
        pos_q=embed.pos_q,
        pos_add=embed.pos_add,
        layer_pos_adds=layer_pos_adds,
        blocks=blocks,
        norm=head.norm,
        pool=head.pool,
        pre_head_fc=head.pre_head_fc,
        pre_head_norm=head.pre_head_norm,
        head=head.head,
        ranges=r,
        meta=meta,
    )
