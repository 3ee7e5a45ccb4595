"""The float reference ViT: one pre-norm model, configured by a ViTConfig, for every family.

Order of operations (what the integer model in hwvit.intvit mirrors, block by block):

    x = patch_embed(input)                        (B, N, D)   conv | LN->Linear->LN | Linear->LN->GELU
    x = cat(cls, x) + pos                         (B, T, D)
    for each block:                               (pos added again first if cfg.pos_every_layer)
        x = x + attn(norm1(x))
        x = x + mlp(norm2(x))
    x = norm(x)                                   if cfg.final_norm
    p = x[:, 0] | x.mean(1)                       (B, D)
    p = pre_head(p)                               Linear->LN (ECG) | LN (timm fc_norm) | nothing
    logits = head(p)                              (B, classes) if cfg.num_classes

``forward(x, record=fn)`` calls ``fn(path, tensor)`` at every named point (see RECORD_POINTS);
without ``record`` the only cost is a few ``is None`` tests.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from einops import rearrange
from torch import nn
from torch.nn import functional as F

from hwvit.float.config import AttnScale, Embed, HeadPre, Pool, Pos, Qkv, ViTConfig, sincos2d_table

Recorder = Callable[[str, torch.Tensor], None] | None

# The record points of one forward pass; "{i}" is the block index. Points that exist only for
# some configs: embed.norm_in (simple), embed.norm_out (simple, linear1d), layers.{i}.pos_add
# (pos_every_layer, i >= 1), norm (final_norm), pre_head.fc / pre_head.norm (head_pre), logits.
RECORD_POINTS = (
    "input",
    "embed.proj",
    "embed.norm_in",
    "embed.norm_out",
    "embed",
    "tokens",
    "layers.{i}.pos_add",
    "layers.{i}.norm1",
    "layers.{i}.attn.q",
    "layers.{i}.attn.k",
    "layers.{i}.attn.v",
    "layers.{i}.attn.scores",
    "layers.{i}.attn.probs",
    "layers.{i}.attn.context",
    "layers.{i}.attn.proj",
    "layers.{i}.add1",
    "layers.{i}.norm2",
    "layers.{i}.mlp.fc1",
    "layers.{i}.mlp.gelu",
    "layers.{i}.mlp.fc2",
    "layers.{i}.add2",
    "norm",
    "pool",
    "pre_head.fc",
    "pre_head.norm",
    "logits",
)


def _rec(record: Recorder, path: str, t: torch.Tensor) -> None:
    if record is not None:  # float32, or float64 when the model runs in float64 (calibration)
        record(path, t.detach() if t.dtype == torch.float64 else t.detach().float())


class PatchEmbed(nn.Module):
    """Input -> (B, N, D) tokens. ``proj`` is the Conv2d / Linear whose weights are imported."""

    def __init__(self, kind: str, in_chans: int, patch_size: int, dim: int, eps: float, ndim: int) -> None:
        super().__init__()
        self.kind, self.patch_size, self.in_chans, self.ndim = kind, patch_size, in_chans, ndim
        patch_dim = in_chans * patch_size**ndim
        self.norm_in = nn.LayerNorm(patch_dim, eps=eps) if kind == Embed.SIMPLE else None
        if kind == Embed.CONV:
            self.proj = nn.Conv2d(in_chans, dim, kernel_size=patch_size, stride=patch_size)
        else:
            self.proj = nn.Linear(patch_dim, dim)
        self.norm_out = nn.LayerNorm(dim, eps=eps) if kind in (Embed.SIMPLE, Embed.LINEAR1D) else None

    def patches(self, x: torch.Tensor) -> torch.Tensor:
        """(B, N, patch_dim) patch vectors for the Linear embeddings, in the originals' order."""
        p = self.patch_size
        if self.kind == Embed.SIMPLE:  # SimpleViT: channels innermost, (p1 p2 c)
            return rearrange(x, "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=p, p2=p)
        return rearrange(x, "b (n p) c -> b n (p c)", p=p)  # linear1d on (B, L, C)

    def forward(self, x: torch.Tensor, record: Recorder = None) -> torch.Tensor:
        if self.kind == Embed.CONV:
            x = self.proj(x).flatten(2).transpose(1, 2)  # (B, D, h, w) -> (B, N, D), row-major patches
            _rec(record, "embed.proj", x)
            return x
        x = self.patches(x)
        if self.norm_in is not None:
            x = self.norm_in(x)
            _rec(record, "embed.norm_in", x)
        x = self.proj(x)
        _rec(record, "embed.proj", x)
        x = self.norm_out(x)
        _rec(record, "embed.norm_out", x)
        if self.kind == Embed.LINEAR1D:
            x = F.gelu(x)  # exact erf GELU, as nn.GELU()
        return x


class Attention(nn.Module):
    """Multi-head self-attention with fused (``qkv``) or separate (``q``, ``k``, ``v``) projections."""

    def __init__(
        self,
        dim: int,
        heads: int,
        head_dim: int,
        fused: bool,
        qkv_bias: bool,
        proj_bias: bool,
        scale_mode: str = "standard",
    ) -> None:
        super().__init__()
        inner = heads * head_dim
        self.heads, self.head_dim, self.scale_mode = heads, head_dim, scale_mode
        self.scale = head_dim**-0.5 if scale_mode == AttnScale.STANDARD else 1.0
        # ECG model: softmax(q k^T) / sqrt(embed_size), the model width, not the head width.
        self.post_divisor = math.sqrt(dim) if scale_mode == AttnScale.POST_SOFTMAX_SQRT_DIM else 1.0
        if fused:
            self.qkv = nn.Linear(dim, 3 * inner, bias=qkv_bias)  # output laid out (3, H, hd)
            self.q = self.k = self.v = None
        else:
            self.qkv = None
            self.q = nn.Linear(dim, inner, bias=qkv_bias)
            self.k = nn.Linear(dim, inner, bias=qkv_bias)
            self.v = nn.Linear(dim, inner, bias=qkv_bias)
        self.proj = nn.Linear(inner, dim, bias=proj_bias)

    def forward(self, x: torch.Tensor, record: Recorder = None, prefix: str = "attn") -> torch.Tensor:
        b, n, _ = x.shape
        h, hd = self.heads, self.head_dim
        if self.qkv is not None:
            q, k, v = self.qkv(x).reshape(b, n, 3, h, hd).permute(2, 0, 3, 1, 4)  # each (B, H, N, hd)
        else:
            q, k, v = (lin(x).reshape(b, n, h, hd).transpose(1, 2) for lin in (self.q, self.k, self.v))
        scores = q @ k.transpose(-2, -1)  # (B, H, N, N)
        if self.scale != 1.0:
            scores = scores * self.scale
        probs = scores.softmax(dim=-1)
        weights = probs / self.post_divisor if self.post_divisor != 1.0 else probs
        context = (weights @ v).transpose(1, 2).reshape(b, n, h * hd)  # (B, N, H*hd)
        out = self.proj(context)
        if record is not None:
            for name, t in (
                ("q", q),
                ("k", k),
                ("v", v),
                ("scores", scores),
                ("probs", probs),
                ("context", context),
                ("proj", out),
            ):
                _rec(record, f"{prefix}.{name}", t)
        return out


class MLP(nn.Module):
    """fc1 -> exact GELU -> fc2."""

    def __init__(self, dim: int, hidden: int, bias: bool) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden, bias=bias)
        self.fc2 = nn.Linear(hidden, dim, bias=bias)

    def forward(self, x: torch.Tensor, record: Recorder = None, prefix: str = "mlp") -> torch.Tensor:
        h = self.fc1(x)
        _rec(record, f"{prefix}.fc1", h)
        h = F.gelu(h)
        _rec(record, f"{prefix}.gelu", h)
        h = self.fc2(h)
        _rec(record, f"{prefix}.fc2", h)
        return h


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(norm1(x)), then x + mlp(norm2(x))."""

    def __init__(self, cfg: ViTConfig) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.dim, eps=cfg.norm_eps)
        self.attn = Attention(
            cfg.dim, cfg.heads, cfg.head_dim, cfg.qkv == Qkv.FUSED, cfg.qkv_bias, cfg.proj_bias, cfg.attn_scale
        )
        self.norm2 = nn.LayerNorm(cfg.dim, eps=cfg.norm_eps)
        self.mlp = MLP(cfg.dim, cfg.mlp_dim, cfg.mlp_bias)

    def forward(self, x: torch.Tensor, record: Recorder = None, prefix: str = "layers.0") -> torch.Tensor:
        h = self.norm1(x)
        _rec(record, f"{prefix}.norm1", h)
        x = x + self.attn(h, record, f"{prefix}.attn")
        _rec(record, f"{prefix}.add1", x)
        h = self.norm2(x)
        _rec(record, f"{prefix}.norm2", h)
        x = x + self.mlp(h, record, f"{prefix}.mlp")
        _rec(record, f"{prefix}.add2", x)
        return x


class PreHead(nn.Module):
    """After pooling, before the head: optional Linear(D, D) (ECG) then LayerNorm."""

    def __init__(self, dim: int, with_fc: bool, eps: float) -> None:
        super().__init__()
        self.fc = nn.Linear(dim, dim) if with_fc else None
        self.norm = nn.LayerNorm(dim, eps=eps)

    def forward(self, x: torch.Tensor, record: Recorder = None) -> torch.Tensor:
        if self.fc is not None:
            x = self.fc(x)
            _rec(record, "pre_head.fc", x)
        x = self.norm(x)
        _rec(record, "pre_head.norm", x)
        return x


class ViT(nn.Module):
    """The float ViT of ``cfg`` (weights initialised as timm does: trunc-normal 0.02, zero biases)."""

    def __init__(self, cfg: ViTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.dim
        self.patch_embed = PatchEmbed(cfg.embed, cfg.in_chans, cfg.patch_size, d, cfg.norm_eps, cfg.ndim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d)) if cfg.cls_token else None
        if cfg.pos == Pos.LEARNED:
            self.pos_embed = nn.Parameter(torch.zeros(1, cfg.num_tokens, d))
        elif cfg.pos == Pos.SINCOS2D:
            table = sincos2d_table(cfg.grid, d)
            if cfg.cls_token:  # the cls slot gets no position (zeros)
                table = torch.cat([torch.zeros(1, d), table])
            # Fixed, so not saved: recomputed from the config (SimpleViT does not save it either).
            self.register_buffer("pos_embed", table[None], persistent=False)
        else:
            self.pos_embed = None
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.depth))
        self.norm = nn.LayerNorm(d, eps=cfg.norm_eps) if cfg.final_norm else None
        self.pre_head = (
            PreHead(d, cfg.head_pre == HeadPre.LINEAR_NORM, cfg.norm_eps) if cfg.head_pre != HeadPre.NONE else None
        )
        self.head = nn.Linear(d, cfg.num_classes) if cfg.num_classes else None
        self._init_weights()

    def _init_weights(self) -> None:
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        if self.cls_token is not None:
            nn.init.normal_(self.cls_token, std=0.02)
        if isinstance(self.pos_embed, nn.Parameter):
            nn.init.trunc_normal_(self.pos_embed, std=0.02)

    def _check_input(self, x: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        if cfg.ndim == 1 and x.dim() == 2 and cfg.in_chans == 1:
            x = x.unsqueeze(-1)  # (B, L) -> (B, L, 1)
        want = cfg.input_shape
        if x.dim() != len(want) + 1 or tuple(x.shape[1:]) != want:
            extra = " or (B, L)" if cfg.ndim == 1 and cfg.in_chans == 1 else ""
            raise ValueError(
                f"model {cfg.name!r} takes input (B, {', '.join(map(str, want))}){extra}, got {tuple(x.shape)}"
            )
        return x

    def forward_tokens(self, x: torch.Tensor, record: Recorder = None) -> torch.Tensor:
        """Input -> (B, T, D) tokens after the last block and the final norm (if any)."""
        x = self._check_input(x)
        _rec(record, "input", x)
        x = self.patch_embed(x, record)
        _rec(record, "embed", x)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        if self.pos_embed is not None:
            x = x + self.pos_embed
        _rec(record, "tokens", x)
        for i, block in enumerate(self.layers):
            if self.cfg.pos_every_layer and i > 0:
                x = x + self.pos_embed
                _rec(record, f"layers.{i}.pos_add", x)
            x = block(x, record, f"layers.{i}")
        if self.norm is not None:
            x = self.norm(x)
            _rec(record, "norm", x)
        return x

    def forward(self, x: torch.Tensor, record: Recorder = None) -> torch.Tensor:
        """Input -> logits (B, num_classes), or pooled features (B, D) when num_classes == 0."""
        x = self.forward_tokens(x, record)
        x = x[:, 0] if self.cfg.pool == Pool.CLS else x.mean(dim=1)
        _rec(record, "pool", x)
        if self.pre_head is not None:
            x = self.pre_head(x, record)
        if self.head is not None:
            x = self.head(x)
            _rec(record, "logits", x)
        return x


__all__ = ["MLP", "RECORD_POINTS", "Attention", "Block", "PatchEmbed", "PreHead", "ViT"]
