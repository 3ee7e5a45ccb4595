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
from hwvit.intvit.layers import IntLinear
from hwvit.intvit.model import IntAttention, IntBlock, IntEmbed, IntPatchEmbed, IntReadout, IntViT
from hwvit.quant.calibrate import calibrate
from hwvit.quant.config import QuantConfig
from hwvit.quant.layers import (
    int_gelu,
    int_layernorm,
    int_linear,
    int_pool,
    int_residual,
    int_softmax,
    requant_of,
    scale_of,
)
from hwvit.quant.recipe import Recipe, plain


def _np(t) -> np.ndarray | None:
    return None if t is None else t.detach().double().numpy()


def act_names(model, point: str) -> tuple[str, ...]:
    """The names an ``act_bits`` glob may use for the activation at ``point``: the point itself and
    the path of the layer producing it where that differs (docs/recipes.md)."""
    if point == "logits":
        return ("logits", "head")
    if point == "tokens":
        return ("tokens", "pos_add")
    if point == "embed" and model.cfg.embed == "conv":
        return ("embed", "embed.proj")
    parts = point.split(".")
    if len(parts) == 4 and parts[0] == "layers" and parts[2] == "attn" and parts[3] in ("q", "k", "v", "qkv"):
        attn = model.layers[int(parts[1])].attn
        if getattr(attn, "qkv", None) is not None:  # one fused output tensor, one width
            return tuple(f"layers.{parts[1]}.attn.{n}" for n in ("qkv", "q", "k", "v"))
    return (point,)


class _Scales:
    """``r[path]`` calibration ranges -> per-tensor scales at each point's width; the recipe's per-layer choices."""

    def __init__(self, model, ranges: dict[str, float], bits: int, recipe: Recipe | None = None, channels=None):
        self.model, self.ranges, self.bits = model, ranges, bits
        self.recipe = recipe or plain()
        self.used: set[str] = set()  # recipe globs that matched a layer
        self._channels = channels  # () -> {point: max |x| per channel}, run on first use (PTF only)
        self.widths: dict[str, int] = {}  # point (and alias) -> activation width, for IntViT.point_bits

    def weight(self, path: str) -> tuple[int, bool]:
        self.used |= self.recipe.matches(path, ("weight_bits", "weights"))
        return self.recipe.weight(path)

    def softmax(self, path: str) -> tuple[int, int]:
        self.used |= self.recipe.matches(path, ("softmax_bits", "exp_entries"))
        return self.recipe.softmax(path)

    def variant(self, path: str, family: str) -> str:
        """The arithmetic (hwvit.variants) of the ``family`` block at ``path`` (recipe key ``family``)."""
        self.used |= self.recipe.matches(path, (family,))
        return self.recipe.variant(path, family)

    def act(self, point: str) -> int:
        """Width of the activation at ``point`` (recipe ``act_bits``), remembered for the model."""
        names = act_names(self.model, point)
        bits, used = self.recipe.act(names)
        self.used |= used
        for n in names:
            self.widths[n] = bits
        return bits

    def point(self, path: str, absmax: float | None = None) -> tuple[float, int]:
        """(scale, width) of the activation at ``path``; ``absmax`` replaces its calibrated range."""
        bits = self.act(path)
        return scale_of(self.ranges[path] if absmax is None else absmax, bits), bits


@dataclass(frozen=True)
class _Ptf:
    """A residual stream point quantized per channel for the FQ-ViT PTF LayerNorm it feeds: base
    scale ``s``, factors ``alpha`` (channel c at ``s * 2^alpha[c]``) and the channel ranges they
    come from (the LayerNorm's variant chooses the same alpha from them)."""

    s: float
    alpha: np.ndarray
    absmax: np.ndarray


def _ptf(scale: _Scales, point: str, consumer: str | None) -> _Ptf | None:
    """The PTF quantization of ``point`` if the LayerNorm ``consumer`` reading it is a PTF one
    (``ptf``: FQ-ViT's released arithmetic, or ``ptf_exact``)."""
    from hwvit.variants.layernorm_forms import PTF_VARIANTS, ptf_alpha, ptf_scale

    if consumer is None or scale.variant(consumer, "layernorm") not in PTF_VARIANTS or scale._channels is None:
        return None

    absmax = scale._channels()[point]
    bits = scale.act(point)
    s = ptf_scale(absmax, bits)
    return _Ptf(s, ptf_alpha(absmax, s, bits), absmax)


def _residual(scale: _Scales, point: str, s_a: float, s_b: float, alpha_a, consumer: str | None):
    """The residual add writing stream ``point``: per channel when its LayerNorm is PTF (or when its
    input ``a`` is such a stream); returns it with the PTF choice (or None)."""
    ptf = _ptf(scale, point, consumer)
    s_out, bits = scale.point(point)
    if ptf is not None:
        s_out = ptf.s
    return int_residual(s_a, s_b, s_out, bits, alpha_a, None if ptf is None else ptf.alpha), ptf


def _linear(module, s_in: float, s_out: float, bits: int, scale: _Scales, path: str) -> IntLinear:
    w_bits, per_tensor = scale.weight(path)
    rounding = scale.variant(path, "requant")
    return int_linear(module.weight, _np(module.bias), s_in, s_out, bits, w_bits, per_tensor, rounding)


def build_embed(model, s_input: float, scale: _Scales) -> IntEmbed:
    """Patch embedding, cls token and position table (added once, or before every block: ECG)."""
    cfg, pe = model.cfg, model.patch_embed
    cls_abs = float(model.cls_token.detach().abs().max()) if model.cls_token is not None else 0.0
    s_embed, b_embed = scale.point("embed", max(scale.ranges["embed"], cls_abs))
    kind = cfg.embed
    if kind == "conv":
        proj = _linear(pe.proj, s_input, s_embed, b_embed, scale, "embed.proj")
        patch_embed = IntPatchEmbed(kind=kind, patch_size=cfg.patch_size, proj=proj)
    elif kind == "simple":
        (s_ni, b_ni), (s_pr, b_pr) = scale.point("embed.norm_in"), scale.point("embed.proj")
        patch_embed = IntPatchEmbed(
            kind=kind,
            patch_size=cfg.patch_size,
            proj=_linear(pe.proj, s_ni, s_pr, b_pr, scale, "embed.proj"),
            norm_in=int_layernorm(pe.norm_in, s_input, s_ni, b_ni),
            norm_out=int_layernorm(pe.norm_out, s_pr, s_embed, b_embed),
        )
    elif kind == "linear1d":
        (s_pr, b_pr), (s_no, b_no) = scale.point("embed.proj"), scale.point("embed.norm_out")
        patch_embed = IntPatchEmbed(
            kind=kind,
            patch_size=cfg.patch_size,
            proj=_linear(pe.proj, s_input, s_pr, b_pr, scale, "embed.proj"),
            norm_out=int_layernorm(pe.norm_out, s_pr, s_no, b_no),
            gelu=int_gelu(s_no, s_embed, b_embed, in_bits=b_no),
        )
    else:
        raise ValueError(f"unknown patch embedding {kind!r}")
    # the cls token is concatenated with the patch tokens: one tensor, one scale and width
    cls_q = ops.quantize(_np(model.cls_token).reshape(-1), s_embed, b_embed) if model.cls_token is not None else None
    if model.pos_embed is None:
        return IntEmbed(patch_embed=patch_embed, s_embed=s_embed, cls_q=cls_q, pos_q=None, s_pos=None, pos_add=None)
    pos = _np(model.pos_embed)[0]
    s_pos = scale_of(np.abs(pos).max(), scale.bits)  # a parameter table: the default width
    pos_add, _ = _residual(scale, "tokens", s_embed, s_pos, None, "layers.0.norm1" if model.layers else None)
    return IntEmbed(
        patch_embed=patch_embed,
        s_embed=s_embed,
        cls_q=cls_q,
        pos_q=ops.quantize(pos, s_pos, scale.bits),
        s_pos=s_pos,
        pos_add=pos_add,
    )


def build_attention(attn, p: str, s_in: float, scale: _Scales, qc: QuantConfig, dim: int) -> IntAttention:
    """Attention at path ``p``: projections, Q.K^T and P.V requants, softmax."""
    h, hd = attn.heads, attn.head_dim
    if getattr(attn, "qkv", None) is not None:
        r = scale.ranges
        s_qkv, b_qkv = scale.point(f"{p}.qkv", max(r[f"{p}.q"], r[f"{p}.k"], r[f"{p}.v"]))
        qkv = _linear(attn.qkv, s_in, s_qkv, b_qkv, scale, f"{p}.qkv")
        lin_q = lin_k = lin_v = None
        s_q = s_k = s_v = s_qkv
    else:
        qkv = None
        (s_q, b_q), (s_k, b_k), (s_v, b_v) = (scale.point(f"{p}.{n}") for n in "qkv")
        lin_q, lin_k, lin_v = (
            _linear(m, s_in, s, b, scale, f"{p}.{n}")
            for n, m, s, b in (("q", attn.q, s_q, b_q), ("k", attn.k, s_k, b_k), ("v", attn.v, s_v, b_v))
        )
    post = attn.scale_mode == "post_softmax_sqrt_dim"  # the ECG model divides the probabilities instead
    alpha = 1.0 if post else 1.0 / math.sqrt(hd)
    beta = 1.0 / math.sqrt(dim) if post else 1.0
    s_scores, b_scores = scale.point(f"{p}.scores")
    scores = requant_of(
        s_q * s_k * alpha / s_scores, b_scores, s_scores, scale.variant(f"{p}.scores", "requant"), False
    )
    sm_bits, entries = scale.softmax(f"{p}.softmax")
    for name in ("softmax", "probs"):  # unsigned probabilities: their width is softmax_bits
        scale.widths[f"{p}.{name}"] = sm_bits
    softmax = int_softmax(s_scores, b_scores, sm_bits, qc.exp, entries, scale.variant(f"{p}.softmax", "softmax"))
    s_ctx, b_ctx = scale.point(f"{p}.context")
    context = requant_of(
        softmax.s_out * s_v * beta / s_ctx, b_ctx, s_ctx, scale.variant(f"{p}.context", "requant"), False
    )
    s_proj, b_proj = scale.point(f"{p}.proj")
    proj = _linear(attn.proj, s_ctx, s_proj, b_proj, scale, f"{p}.proj")
    return IntAttention(
        heads=h,
        head_dim=hd,
        qkv=qkv,
        q=lin_q,
        k=lin_k,
        v=lin_v,
        scores=scores,
        softmax=softmax,
        context=context,
        proj=proj,
    )


def build_block(
    blk,
    i: int,
    s_x: float,
    scale: _Scales,
    qc: QuantConfig,
    dim: int,
    stream: _Ptf | None = None,
    next_norm: str | None = None,
) -> tuple[IntBlock, _Ptf | None]:
    """Block ``layers.i`` with input scale ``s_x``: x + attn(norm1(x)), then + mlp(norm2(x)).
    ``stream``: the input quantized per channel for a PTF norm1; ``next_norm``: the LayerNorm
    that reads this block's output (for its PTF choice). Returns the block and its output's PTF."""
    p = f"layers.{i}"
    alpha_x, absmax_x = (None, None) if stream is None else (stream.alpha, stream.absmax)
    norm1 = int_layernorm(
        blk.norm1, s_x, *scale.point(f"{p}.norm1"), scale.variant(f"{p}.norm1", "layernorm"), absmax_x
    )
    attn = build_attention(blk.attn, f"{p}.attn", norm1.s_out, scale, qc, dim)
    add1, ptf1 = _residual(scale, f"{p}.add1", s_x, attn.proj.s_out, alpha_x, f"{p}.norm2")
    norm2 = int_layernorm(
        blk.norm2,
        add1.s_out,
        *scale.point(f"{p}.norm2"),
        scale.variant(f"{p}.norm2", "layernorm"),
        None if ptf1 is None else ptf1.absmax,
    )
    fc1 = _linear(blk.mlp.fc1, norm2.s_out, *scale.point(f"{p}.mlp.fc1"), scale, f"{p}.mlp.fc1")
    # the GELU table is indexed by fc1's output: its domain is fc1's width (2^bits entries)
    gelu = int_gelu(
        fc1.s_out, *scale.point(f"{p}.mlp.gelu"), in_bits=fc1.out_bits, variant=scale.variant(f"{p}.mlp.gelu", "gelu")
    )
    fc2 = _linear(blk.mlp.fc2, gelu.s_out, *scale.point(f"{p}.mlp.fc2"), scale, f"{p}.mlp.fc2")
    add2, ptf2 = _residual(scale, f"{p}.add2", add1.s_out, fc2.s_out, add1.alpha_out, next_norm)
    block = IntBlock(norm1=norm1, attn=attn, add1=add1, norm2=norm2, fc1=fc1, gelu=gelu, fc2=fc2, add2=add2)
    return block, ptf2


def build_head(model, s_x: float, scale: _Scales, x_bits: int, stream: _Ptf | None = None) -> IntReadout:
    """Final norm, pooling (cls token or mean over all T tokens), ECG's pre-head, classifier."""
    cfg = model.cfg
    s_in, norm = s_x, None
    if model.norm is not None:
        absmax = None if stream is None else stream.absmax
        norm = int_layernorm(model.norm, s_x, *scale.point("norm"), scale.variant("norm", "layernorm"), absmax)
        s_x, x_bits = norm.s_out, norm.out_bits
    pool = None
    if cfg.pool == "cls":  # a selection, no arithmetic: the cls token keeps its width
        scale.widths["pool"] = x_bits
    else:  # mean over all T tokens (the cls slot included, as the float model does)
        s_pool, b_pool = scale.point("pool")
        pool = int_pool(s_x, s_pool, cfg.num_tokens, b_pool)
        s_x = pool.s_out
    pre_fc = pre_norm = None
    ph = model.pre_head
    if ph is not None:
        if ph.fc is not None:
            pre_fc = _linear(ph.fc, s_x, *scale.point("pre_head.fc"), scale, "pre_head.fc")
            s_x = pre_fc.s_out
        pre_norm = int_layernorm(ph.norm, s_x, *scale.point("pre_head.norm"))
        s_x = pre_norm.s_out
    head = _linear(model.head, s_x, *scale.point("logits"), scale, "head") if model.head is not None else None
    return IntReadout(s_in=s_in, norm=norm, pool=pool, pre_head_fc=pre_fc, pre_head_norm=pre_norm, head=head)


def calibration_key(method: str, percentile: float, bits: int) -> tuple:
    """The key of one calibration pass in ``quantize_model``'s ``calibration_cache``: MSE and entropy
    depend on the point's width, min/max and percentile do not."""
    return (method, percentile, bits if method in ("mse", "entropy") else None)


def _calibrate(
    model, calib_inputs, recipe: Recipe, runs: dict | None = None
) -> tuple[dict[str, float], dict[str, str], set[str]]:
    """Ranges per point by the recipe's method for it: one calibration pass per method used.

    ``runs`` (method, percentile, bits) -> ranges: a cache the caller may keep across models of
    the same float model and calibration data (hwvit.analysis.sensitivity builds dozens). The MSE and
    entropy searches depend on the point's width (recipe ``act_bits``); min/max and percentile do not.
    """
    qc = recipe.base
    runs = {} if runs is None else runs

    def ranges_for(how: tuple[str, float], bits: int) -> dict[str, float]:
        key = calibration_key(*how, bits)
        if key not in runs:
            runs[key] = calibrate(model, calib_inputs, how[0], how[1], bits=bits)
        return runs[key]

    default = (qc.calibration, qc.percentile)
    ranges, methods, used = {}, {}, set()
    for path in ranges_for(default, qc.act_bits):
        how = recipe.calibration(path)
        used |= recipe.matches(path, ("calibration", "percentile"))
        ranges[path] = ranges_for(how, recipe.act(act_names(model, path))[0])[path]
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

    def channels() -> dict[str, np.ndarray]:  # one min/max pass, only for a PTF LayerNorm
        cache = {} if calibration_cache is None else calibration_cache
        if ("channels",) not in cache:
            found: dict[str, np.ndarray] = {}
            calibrate(model, calib_inputs, "minmax", channels=found)
            cache[("channels",)] = found
        return cache[("channels",)]

    scale = _Scales(model, r, bits, recipe, channels)
    s_input, _ = scale.point("input")
    embed = build_embed(model, s_input, scale)
    blocks, layer_pos_adds = [], []
    s_x = embed.s_tokens
    x_bits = embed.pos_add.out_bits if embed.pos_add is not None else scale.widths["embed"]
    stream = None
    if embed.pos_add is not None and embed.pos_add.alpha_out is not None:
        stream = _ptf(scale, "tokens", "layers.0.norm1")
    depth = len(model.layers)
    for i, blk in enumerate(model.layers):
        pos_add = None
        if cfg.pos_every_layer and i > 0:  # ECG: the position table is added before every block
            alpha = None if stream is None else stream.alpha
            pos_add, stream = _residual(scale, f"layers.{i}.pos_add", s_x, embed.s_pos, alpha, f"layers.{i}.norm1")
            s_x = pos_add.s_out
        layer_pos_adds.append(pos_add)
        if i + 1 < depth:  # who reads this block's output: the next norm1, or ECG's position add first
            next_norm = None if cfg.pos_every_layer else f"layers.{i + 1}.norm1"
        else:
            next_norm = "norm" if model.norm is not None else None
        block, stream = build_block(blk, i, s_x, scale, qc, cfg.dim, stream, next_norm)
        blocks.append(block)
        s_x, x_bits = blocks[-1].add2.s_out, blocks[-1].add2.out_bits
    readout = build_head(model, s_x, scale, x_bits, stream)
    unmatched = [g for g, _ in recipe.layers if g not in scale.used | used]
    if unmatched:
        raise ValueError(
            f"recipe: layers glob {unmatched[0]!r} matches no layer of this model "
            f"(paths look like layers.0.mlp.fc1, layers.0.attn.softmax, head; act_bits: layers.0.attn.scores)"
        )
    meta = {"quant": qc.to_dict(), "calibration": methods}
    if not recipe.is_plain():
        meta["recipe"] = recipe.to_dict()
    return IntViT(
        config=cfg,
        act_bits=bits,
        s_input=s_input,
        embed=embed,
        layer_pos_adds=layer_pos_adds,
        blocks=blocks,
        readout=readout,
        ranges=r,
        point_bits=dict(scale.widths),
        meta=meta,
    )
