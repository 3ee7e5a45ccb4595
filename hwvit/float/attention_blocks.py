"""Attention-only checkpoints: one multi-head self-attention block, (B, N, C) -> (B, N, C).

Two seeds are a single attention layer rather than a ViT:
- ``sablock``: a MONAI-style SABlock: fused ``qkv`` Linear(C -> 3*H*hd, optional bias) whose
  output is laid out (3, H, hd), softmax(q k^T / sqrt(hd)) v, then ``out_proj`` Linear with bias.
- ``cookbook_attention``: separate ``query``, ``key``, ``value`` and ``out`` Linears with bias,
  sequence-first input (N, B, C) like torch.nn.MultiheadAttention's default; heads split as
  (H, hd) along the feature axis, logits scaled by 1/sqrt(hd).
Both seeds use 12 heads of 64 on C = 768, so dim 768 defaults to 12 heads; other widths need
``heads=``. The block wraps hwvit.float.model.Attention, so record points match the ViT's.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from hwvit.float.keymaps import Rule, linear
from hwvit.float.loading import check_and_load, hint_fields, rename
from hwvit.float.model import Attention, Recorder

# The seeds' shape: 12 heads of 64 on 768.
SEED_HEADS = {768: 12}


class AttentionBlock(nn.Module):
    """``attn`` (an Attention) on (B, N, C), or on (N, B, C) when ``seq_first``."""

    def __init__(
        self, dim: int, heads: int, head_dim: int, fused: bool, qkv_bias: bool, proj_bias: bool, seq_first: bool
    ) -> None:
        super().__init__()
        self.dim, self.seq_first = dim, seq_first
        self.attn = Attention(dim, heads, head_dim, fused, qkv_bias, proj_bias, "standard")

    def forward(self, x: torch.Tensor, record: Recorder = None) -> torch.Tensor:
        if x.dim() != 3 or x.shape[-1] != self.dim:
            layout = "(N, B, C)" if self.seq_first else "(B, N, C)"
            raise ValueError(f"attention block takes {layout} with C={self.dim}, got {tuple(x.shape)}")
        if self.seq_first:
            x = x.transpose(0, 1)
        out = self.attn(x, record, "attn")
        return out.transpose(0, 1) if self.seq_first else out


def attention_rules(family: str) -> list[Rule]:
    if family == "sablock":
        return linear("qkv", "attn.qkv") + linear("out_proj", "attn.proj")
    return linear("query", "attn.q") + linear("key", "attn.k") + linear("value", "attn.v") + linear("out", "attn.proj")


def _heads_hint(config: Any, heads: int | None) -> int | None:
    if heads is not None:
        return heads
    if config is None:
        return None
    if isinstance(config, int) and not isinstance(config, bool):
        return config
    if isinstance(config, dict):
        return config.get("heads")
    return hint_fields(config).get("heads")


def load_attention(
    sd: dict[str, torch.Tensor], family: str, config: Any = None, heads: int | None = None
) -> AttentionBlock:
    """An AttentionBlock (eval mode) from a ``sablock`` or ``cookbook_attention`` state dict."""
    rules = attention_rules(family)
    weights, origin, unexpected = rename(sd, rules)
    fused = family == "sablock"
    first = "attn.qkv.weight" if fused else "attn.q.weight"
    w = weights.get(first)
    if w is None or w.dim() != 2 or "attn.proj.weight" not in weights or weights["attn.proj.weight"].dim() != 2:
        names = ("qkv.weight", "out_proj.weight") if fused else ("query.weight", "out.weight")
        raise ValueError(
            f"cannot load {family} checkpoint: needs 2-D {' and '.join(names)}; keys found: {', '.join(sorted(sd)[:8])}"
        )
    dim = w.shape[1]
    inner = w.shape[0] // 3 if fused else w.shape[0]
    h = _heads_hint(config, heads) or SEED_HEADS.get(dim)
    if h is None:
        raise ValueError(
            f"{family} checkpoint: the number of heads cannot be read from the weights (dim {dim}); pass heads=H"
        )
    if type(h) is not int or h <= 0 or inner % h:
        raise ValueError(f"{family} checkpoint: q/k/v width {inner} is not divisible by heads={h!r}")
    qkv_bias = ("attn.qkv.bias" if fused else "attn.q.bias") in weights
    proj_bias = "attn.proj.bias" in weights
    block = AttentionBlock(dim, h, inner // h, fused, qkv_bias, proj_bias, seq_first=family == "cookbook_attention")
    check_and_load(block, weights, origin, unexpected, rules, f"{family} checkpoint")
    return block.eval()


__all__ = ["AttentionBlock", "attention_rules", "load_attention"]
