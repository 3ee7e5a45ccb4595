"""Float ViT + calibration ranges -> IntViT (every scale turned into integer multipliers/shifts)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch

from hwvit import ops
from hwvit.intvit.layers import (IntGelu, IntLayerNorm, IntLinear, IntResidual, IntSoftmax, multipliers,
                                 scale_of)
from hwvit.intvit.model import IntAttention, IntBlock, IntPatchEmbed, IntViT
from hwvit.quant.calibrate import calibrate


@dataclass(frozen=True)
class QuantConfig:
    """The architect's knobs. Defaults are the int8 design of docs/arithmetic.md."""

    act_bits: int = 8  # activations, per tensor, symmetric
    softmax_bits: int = 8  # probability width; scale 1/(2^bits - 1)
    exp: str = "table"  # softmax exp: "table" (RTL) or "shift" (shift-and-add)
    exp_entries: int = 256  # exp table entries (<= 2^act_bits); larger differences give exp = 0
    calibration: str = "minmax"  # or "percentile"
    percentile: float = 99.99

    def __post_init__(self) -> None:
        if not 2 <= self.act_bits <= 8:
            raise ValueError(f"act_bits must be in [2, 8], got {self.act_bits}")
        if not 2 <= self.softmax_bits <= 8:
            raise ValueError(f"softmax_bits must be in [2, 8], got {self.softmax_bits}")
        if self.exp not in ("table", "shift"):
            raise ValueError(f"exp must be 'table' or 'shift', got {self.exp!r}")
        if not 1 <= self.exp_entries <= 256:
            raise ValueError(f"exp_entries must be in [1, 256], got {self.exp_entries}")

    def to_dict(self) -> dict:
        return asdict(self)


def _np(t: torch.Tensor | None) -> np.ndarray | None:
    return None if t is None else t.detach().double().numpy()


def _attention(attn, i: int, s_in: float, r: dict[str, float], qc: QuantConfig, dim: int) -> IntAttention:
    bits = qc.act_bits
    p = f"layers.{i}.attn"
    h, hd = attn.heads, attn.head_dim
    if getattr(attn, "qkv", None) is not None:
        s_qkv = scale_of(max(r[f"{p}.q"], r[f"{p}.k"], r[f"{p}.v"]), bits)
        qkv = IntLinear.from_float(attn.qkv.weight, _np(attn.qkv.bias), s_in, s_qkv, bits)
        lin_q = lin_k = lin_v = None
        s_q = s_k = s_v = s_qkv
    else:
        qkv = None
        s_q, s_k, s_v = (scale_of(r[f"{p}.{n}"], bits) for n in "qkv")
        lin_q, lin_k, lin_v = (IntLinear.from_float(m.weight, _np(m.bias), s_in, s, bits)
                               for m, s in ((attn.q, s_q), (attn.k, s_k), (attn.v, s_v)))
    post = attn.scale_mode == "post_softmax_sqrt_dim"  # the ECG model divides the probabilities instead
    alpha = 1.0 if post else 1.0 / math.sqrt(hd)
    beta = 1.0 / math.sqrt(dim) if post else 1.0
    s_scores = scale_of(r[f"{p}.scores"], bits)
    (sm,), (ss,) = multipliers(s_q * s_k * alpha / s_scores)
    softmax = IntSoftmax.build(s_scores, bits, qc.softmax_bits, qc.exp, qc.exp_entries)
    s_ctx = scale_of(r[f"{p}.context"], bits)
    (cm,), (cs,) = multipliers(softmax.s_out * s_v * beta / s_ctx)
    s_proj = scale_of(r[f"{p}.proj"], bits)
    proj = IntLinear.from_float(attn.proj.weight, _np(attn.proj.bias), s_ctx, s_proj, bits)
    return IntAttention(h, hd, qkv, lin_q, lin_k, lin_v, s_q, s_k, s_v, int(sm), int(ss), s_scores, softmax,
                        int(cm), int(cs), s_ctx, proj, bits)


def quantize_model(model, calib_inputs, qconfig: QuantConfig | None = None) -> IntViT:
    """Calibrate ``model`` (hwvit.float.model.ViT) on ``calib_inputs`` and build its IntViT."""
    qc = qconfig or QuantConfig()
    for name, param in model.named_parameters():
        if not torch.isfinite(param).all():
            raise ValueError(f"weight {name} contains NaN or Inf")
    r = calibrate(model, calib_inputs, qc.calibration, qc.percentile)
    cfg = model.cfg
    bits = qc.act_bits
    s_input = scale_of(r["input"], bits)

    # Patch embedding; its output shares one scale with the cls token (they are concatenated).
    pe = model.patch_embed
    cls_abs = float(model.cls_token.detach().abs().max()) if model.cls_token is not None else 0.0
    s_embed = scale_of(max(r["embed"], cls_abs), bits)
    kind = cfg.embed
    if kind == "conv":
        embed = IntPatchEmbed(kind, cfg.patch_size,
                              IntLinear.from_float(pe.proj.weight, _np(pe.proj.bias), s_input, s_embed, bits))
    elif kind == "simple":
        s_ni = scale_of(r["embed.norm_in"], bits)
        s_pr = scale_of(r["embed.proj"], bits)
        embed = IntPatchEmbed(kind, cfg.patch_size,
                              IntLinear.from_float(pe.proj.weight, _np(pe.proj.bias), s_ni, s_pr, bits),
                              norm_in=IntLayerNorm.from_float(pe.norm_in, s_input, s_ni, bits),
                              norm_out=IntLayerNorm.from_float(pe.norm_out, s_pr, s_embed, bits))
    elif kind == "linear1d":
        s_pr = scale_of(r["embed.proj"], bits)
        s_no = scale_of(r["embed.norm_out"], bits)
        embed = IntPatchEmbed(kind, cfg.patch_size, IntLinear.from_float(pe.proj.weight, _np(pe.proj.bias), s_input, s_pr, bits),
                              norm_out=IntLayerNorm.from_float(pe.norm_out, s_pr, s_no, bits),
                              gelu=IntGelu.build(s_no, s_embed, bits))
    else:
        raise ValueError(f"unknown patch embedding {kind!r}")
    cls_q = ops.quantize(_np(model.cls_token).reshape(-1), s_embed, bits) if model.cls_token is not None else None

    s_pos = None
    if model.pos_embed is not None:
        pos = _np(model.pos_embed)[0]
        s_pos = scale_of(np.abs(pos).max(), bits)
        pos_q = ops.quantize(pos, s_pos, bits)
        s_tokens = scale_of(r["tokens"], bits)
        pos_add = IntResidual.build(s_embed, s_pos, s_tokens, bits)
    else:
        pos_q, pos_add, s_tokens = None, None, s_embed

    blocks, layer_pos_adds = [], []
    s_x = s_tokens
    for i, blk in enumerate(model.layers):
        p = f"layers.{i}"
        if cfg.pos_every_layer and i > 0:  # ECG: the position table is added before every block
            s_pa = scale_of(r[f"{p}.pos_add"], bits)
            layer_pos_adds.append(IntResidual.build(s_x, s_pos, s_pa, bits))
            s_x = s_pa
        else:
            layer_pos_adds.append(None)
        s_n1 = scale_of(r[f"{p}.norm1"], bits)
        norm1 = IntLayerNorm.from_float(blk.norm1, s_x, s_n1, bits)
        attn = _attention(blk.attn, i, s_n1, r, qc, cfg.dim)
        s_a1 = scale_of(r[f"{p}.add1"], bits)
        add1 = IntResidual.build(s_x, attn.proj.s_out, s_a1, bits)
        s_n2 = scale_of(r[f"{p}.norm2"], bits)
        norm2 = IntLayerNorm.from_float(blk.norm2, s_a1, s_n2, bits)
        s_f1 = scale_of(r[f"{p}.mlp.fc1"], bits)
        fc1 = IntLinear.from_float(blk.mlp.fc1.weight, _np(blk.mlp.fc1.bias), s_n2, s_f1, bits)
        gelu = IntGelu.build(s_f1, scale_of(r[f"{p}.mlp.gelu"], bits), bits)
        s_f2 = scale_of(r[f"{p}.mlp.fc2"], bits)
        fc2 = IntLinear.from_float(blk.mlp.fc2.weight, _np(blk.mlp.fc2.bias), gelu.s_out, s_f2, bits)
        s_a2 = scale_of(r[f"{p}.add2"], bits)
        add2 = IntResidual.build(s_a1, s_f2, s_a2, bits)
        blocks.append(IntBlock(norm1, attn, add1, norm2, fc1, gelu, fc2, add2))
        s_x = s_a2

    norm = None
    if model.norm is not None:
        s_norm = scale_of(r["norm"], bits)
        norm = IntLayerNorm.from_float(model.norm, s_x, s_norm, bits)
        s_x = s_norm
    if cfg.pool == "cls":
        s_pool, pool_mult, pool_shift = s_x, 0, 0
    else:  # mean over all T tokens (the cls slot included, as the float model does)
        s_pool = scale_of(r["pool"], bits)
        (pool_mult,), (pool_shift,) = multipliers(s_x / (cfg.num_tokens * s_pool))
    pre_fc = pre_norm = None
    s_feat = s_pool
    ph = model.pre_head
    if ph is not None:
        if ph.fc is not None:
            s_fc = scale_of(r["pre_head.fc"], bits)
            pre_fc = IntLinear.from_float(ph.fc.weight, _np(ph.fc.bias), s_feat, s_fc, bits)
            s_feat = s_fc
        pre_norm = IntLayerNorm.from_float(ph.norm, s_feat, scale_of(r["pre_head.norm"], bits), bits)
        s_feat = pre_norm.s_out
    head = None
    if model.head is not None:
        head = IntLinear.from_float(model.head.weight, _np(model.head.bias), s_feat,
                                    scale_of(r["logits"], bits), bits)
    return IntViT(cfg, bits, s_input, embed, s_embed, cls_q, pos_q, pos_add, layer_pos_adds, blocks, norm,
                  int(pool_mult), int(pool_shift), s_pool, pre_fc, pre_norm, head, ranges=r,
                  meta={"quant": qc.to_dict()})
