"""The integer ViT: a bit-accurate forward built only from hwvit.ops kernels.

Shapes: B images, N tokens, D = dim, H heads of hd, F = mlp_dim. Activations are integer arrays in
the narrowest dtype for their point's width (int8 for 8 bits; traces and logits are int64),
holding values of that width (``act_bits``, or a recipe's per-layer width:
``IntViT.point_bits``); each carries one real scale, kept beside it in the layer. Every layer
records its own block records and output value; paths are the float model's record points
(``embed.proj``, ``layers.3.mlp.fc1``, ...). ``hwvit.quant.quantize_model`` builds an IntViT.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from einops import rearrange

from hwvit import ops
from hwvit.intvit.layers import IntGelu, IntLayerNorm, IntLinear, IntPool, IntResidual, IntSoftmax, record_gemm
from hwvit.intvit.trace import NO_TRACE, Trace
from hwvit.ops.checks import narrow_dtype


def _narrow(a: np.ndarray) -> np.ndarray:
    """A small parameter (cls token, position table) in the narrowest dtype holding its values,
    so the kernel it joins takes it without a range scan."""
    return a.astype(narrow_dtype(int(a.min()), int(a.max()))) if a.size else a


@dataclass(kw_only=True)
class IntAttention:
    heads: int
    head_dim: int
    qkv: IntLinear | None  # fused projection (q, k and v share one output scale)
    q: IntLinear | None  # separate projections
    k: IntLinear | None
    v: IntLinear | None
    s_q: float
    s_k: float
    s_v: float
    scores_mult: int  # requant of Q.K^T to the softmax input scale (1/sqrt(hd) folded in)
    scores_shift: int
    s_scores: float
    softmax: IntSoftmax
    ctx_mult: int  # requant of P.V to the context scale (ECG's 1/sqrt(dim) folded in)
    ctx_shift: int
    s_ctx: float
    proj: IntLinear
    scores_bits: int  # width of the Q.K^T requant (the softmax input)
    ctx_bits: int  # width of the P.V requant (the context)

    def _tag(self, path: str, b: int, i: int) -> str:
        """Record path of batch-head index i: layers.0.attn.h3 (one image) or ...img1.h3."""
        img, head = divmod(i, self.heads)
        return f"{path}.h{head}" if b == 1 else f"{path}.img{img}.h{head}"

    def _requant_of(self, which: str) -> tuple[int, int, int, bool]:
        """(M, s, out_bits, a signed) of Q.K^T ("qk": signed Q) or P.V ("av": unsigned P)."""
        if which == "qk":
            return self.scores_mult, self.scores_shift, self.scores_bits, True
        return self.ctx_mult, self.ctx_shift, self.ctx_bits, False

    def record_heads(self, tr: Trace, path: str, b: int, which: str, a, w, acc, y) -> None:
        """One `gemm` record per image and head of Q.K^T (``which`` = "qk": a = Q, w = K) or P.V
        ("av": a = P, w = V^T); every array (B*H, rows, cols)."""
        if not tr.keep_records:
            return
        mult, shift, bits, signed = self._requant_of(which)
        scales = (self.s_q, self.s_scores) if which == "qk" else (self.softmax.s_out, self.s_ctx)
        for i in range(a.shape[0]):
            tag = f"{self._tag(path, b, i)}.{which}"
            record_gemm(tr, tag, a[i], w[i], None, mult, shift, acc[i], y[i], bits, signed, scales)

    def _product(self, tr: Trace, path: str, b: int, which: str, a, w) -> np.ndarray:
        """Requantized Q.K^T (``which`` = "qk") or P.V ("av") of every head of every image in one
        batched call; with records, the accumulators are kept for them (gemm, then requant), else
        the GEMM may requantize in its tile (``ops.linear``): the same integers."""
        mult, shift, bits, signed = self._requant_of(which)
        if not tr.keep_records:
            return ops.linear(a, w, None, mult, shift, bits, a_signed=signed, narrow=True)
        acc = ops.gemm(a, w, None, a_signed=signed)
        y = ops.requant(acc, mult, shift, bits, narrow=True)
        self.record_heads(tr, path, b, which, a, w, acc, y)
        return y

    def __call__(self, x: np.ndarray, tr: Trace, path: str) -> np.ndarray:
        b, n, _ = x.shape
        h, hd = self.heads, self.head_dim
        if self.qkv is not None:
            y = self.qkv(x, tr, f"{path}.qkv").reshape(b, n, 3, h, hd)
            q, k, v = (y[:, :, i].transpose(0, 2, 1, 3) for i in range(3))  # (B, H, N, hd)
        else:
            q, k, v = (
                lin(x, tr, f"{path}.{name}", value=False).reshape(b, n, h, hd).transpose(0, 2, 1, 3)
                for name, lin in (("q", self.q), ("k", self.k), ("v", self.v))
            )
        q = tr.value(f"{path}.q", q, self.s_q)
        k = tr.value(f"{path}.k", k, self.s_k)
        v = tr.value(f"{path}.v", v, self.s_v)
        # All heads (and images) in one batched GEMM call each; one record per head for the RTL.
        qs, ks, vs = (t.reshape(b * h, n, hd) for t in (q, k, v))
        scores = self._product(tr, path, b, "qk", qs, ks)  # (B*H, N, N)
        scores = scores.reshape(b, h, n, n)
        scores = tr.value(f"{path}.scores", scores, self.s_scores)
        probs = self.softmax(scores, tr, f"{path}.softmax")
        probs = tr.value(f"{path}.probs", probs, self.softmax.s_out)  # the float model's name for the softmax
        ps = probs.reshape(b * h, n, n)
        vt = vs.transpose(0, 2, 1)  # (B*H, hd, N): V^T, the GEMM's weight rows
        ctx = self._product(tr, path, b, "av", ps, vt)  # (B*H, N, hd)
        ctx = ctx.reshape(b, h, n, hd).transpose(0, 2, 1, 3)  # (B, N, H, hd)
        ctx = ctx.reshape(b, n, h * hd)
        ctx = tr.value(f"{path}.context", ctx, self.s_ctx)
        return self.proj(ctx, tr, f"{path}.proj")


@dataclass(kw_only=True)
class IntBlock:
    norm1: IntLayerNorm
    attn: IntAttention
    add1: IntResidual
    norm2: IntLayerNorm
    fc1: IntLinear
    gelu: IntGelu
    fc2: IntLinear
    add2: IntResidual

    def __call__(self, x: np.ndarray, tr: Trace, path: str) -> np.ndarray:
        h = self.norm1(x, tr, f"{path}.norm1")
        x = self.add1(x, self.attn(h, tr, f"{path}.attn"), tr, f"{path}.add1")
        h = self.norm2(x, tr, f"{path}.norm2")
        h = self.fc1(h, tr, f"{path}.mlp.fc1")
        h = self.gelu(h, tr, f"{path}.mlp.gelu")
        h = self.fc2(h, tr, f"{path}.mlp.fc2")
        return self.add2(x, h, tr, f"{path}.add2")


@dataclass(kw_only=True)
class IntPatchEmbed:
    """conv: im2col + GEMM; simple: rearrange, LN, GEMM, LN; linear1d: GEMM (K=1), LN, GELU."""

    kind: str
    patch_size: int
    proj: IntLinear
    norm_in: IntLayerNorm | None = None
    norm_out: IntLayerNorm | None = None
    gelu: IntGelu | None = None

    def patches(self, x: np.ndarray) -> np.ndarray:
        """Input -> (B, N, patch_dim) in the order the float weights expect (the float model's patterns)."""
        p = self.patch_size
        if self.kind == "linear1d":
            x = x[..., None] if x.ndim == 2 else x  # (B, L) signals have one channel
            return rearrange(x, "b (n p) c -> b n (p c)", p=p)
        if self.kind == "conv":  # Conv2d weight (D, C, p, p): features ordered (c, p1, p2)
            return rearrange(x, "b c (h p1) (w p2) -> b (h w) (c p1 p2)", p1=p, p2=p)
        return rearrange(x, "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=p, p2=p)  # SimpleViT

    def __call__(self, x: np.ndarray, tr: Trace, path: str = "embed") -> np.ndarray:
        h = self.patches(x)
        if self.norm_in is not None:
            h = self.norm_in(h, tr, f"{path}.norm_in")
        h = self.proj(h, tr, f"{path}.proj")
        if self.norm_out is not None:
            h = self.norm_out(h, tr, f"{path}.norm_out")
        if self.gelu is not None:
            h = self.gelu(h, tr, f"{path}.gelu")
        return h


@dataclass(kw_only=True)
class IntViT:
    """Integer-only ViT. ``forward`` takes float inputs (quantized at the boundary) or int inputs."""

    config: object  # hwvit.float.config.ViTConfig
    act_bits: int  # the default activation width (a recipe may set others: point_bits)
    s_input: float
    patch_embed: IntPatchEmbed
    s_embed: float  # scale of the patch embedding output and of the cls token
    cls_q: np.ndarray | None  # (D,)
    pos_q: np.ndarray | None  # (T, D)
    pos_add: IntResidual | None
    layer_pos_adds: list[IntResidual | None]  # ECG: position added again before blocks 1..depth-1
    blocks: list[IntBlock]
    norm: IntLayerNorm | None
    pool: IntPool | None  # mean over tokens; None: the cls token's features (pool == "cls")
    pre_head_fc: IntLinear | None  # ECG: Linear -> LayerNorm after pooling
    pre_head_norm: IntLayerNorm | None
    head: IntLinear | None
    ranges: dict[str, float] = field(default_factory=dict)
    point_bits: dict[str, int] = field(default_factory=dict)  # point path -> width (recipe act_bits)
    meta: dict = field(default_factory=dict)

    def bits_at(self, path: str) -> int:
        """Width of the integer tensor at a traced point (unsigned for probabilities)."""
        return self.point_bits.get(path, self.act_bits)

    @property
    def input_bits(self) -> int:
        return self.bits_at("input")

    @property
    def s_tokens(self) -> float:
        """Scale of the tokens after the last block and the final norm: the pool's input."""
        if self.norm is not None:
            return self.norm.s_out
        if self.blocks:
            return self.blocks[-1].add2.s_out
        return self.pos_add.s_out if self.pos_add is not None else self.s_embed

    @property
    def s_pool(self) -> float:
        return self.pool.s_out if self.pool is not None else self.s_tokens

    def quantize_input(self, x) -> np.ndarray:
        return ops.quantize(x, self.s_input, self.input_bits)

    @property
    def s_features(self) -> float:
        """Scale of the pooled (and pre-head) features, the head's input."""
        return self.pre_head_norm.s_out if self.pre_head_norm is not None else self.s_pool

    @property
    def s_logits(self) -> float:
        return self.head.s_out if self.head is not None else self.s_features

    def check_input(self, x) -> None:
        want = tuple(self.config.input_shape)
        shape = tuple(np.shape(x))
        ok = len(shape) == len(want) + 1 and shape[1:] == want
        if not ok and self.config.ndim == 1 and self.config.in_chans == 1:
            ok = len(shape) == 2 and shape[1] == want[0]  # (B, L) signals
        if not ok:
            raise ValueError(f"model {self.config.name!r} takes input (B, {', '.join(map(str, want))}), got {shape}")

    def forward(self, x, trace: Trace | None = None, quantized: bool = False) -> np.ndarray:
        """Integer logits (B, classes), int64, at scale ``s_logits``; ``x`` float (or int if quantized).

        Between layers the activations travel in their narrowest dtype (``hwvit.intvit.layers``)."""
        tr = trace or NO_TRACE
        self.check_input(x)
        if quantized:
            xq = np.asarray(x)
            xq = xq if xq.dtype.kind in "iu" else xq.astype(np.int64)
        else:
            xq = ops.quantize(x, self.s_input, self.input_bits, narrow=True)
        xq = tr.value("input", xq, self.s_input)
        h = self.patch_embed(xq, tr, "embed")
        h = tr.value("embed", h, self.s_embed)
        b = h.shape[0]
        if self.cls_q is not None:
            h = np.concatenate([np.broadcast_to(_narrow(self.cls_q), (b, 1, h.shape[-1])), h], axis=1)
        pos = _narrow(self.pos_q) if self.pos_q is not None else None  # once, for every add below
        if self.pos_add is not None:
            h = self.pos_add(h, np.broadcast_to(pos, h.shape), tr, "pos_add")
        h = tr.value("tokens", h, self.pos_add.s_out if self.pos_add is not None else self.s_embed)
        for i, block in enumerate(self.blocks):
            pos_add = self.layer_pos_adds[i] if self.layer_pos_adds else None
            if pos_add is not None:
                h = pos_add(h, np.broadcast_to(pos, h.shape), tr, f"layers.{i}.pos_add")
            h = block(h, tr, f"layers.{i}")
        if self.norm is not None:
            h = self.norm(h, tr, "norm")
        if self.pool is not None:
            pooled = self.pool(h, tr, "pool")
        else:
            pooled = h[:, 0]
            pooled = tr.value("pool", pooled, self.s_pool)
        if self.pre_head_fc is not None:
            pooled = self.pre_head_fc(pooled, tr, "pre_head.fc")
        if self.pre_head_norm is not None:
            pooled = self.pre_head_norm(pooled, tr, "pre_head.norm")
        if self.head is None:
            return pooled.astype(np.int64)
        logits = self.head(pooled, tr, "head")
        return tr.value("logits", logits, self.head.s_out).astype(np.int64)

    __call__ = forward

    def dequantize_logits(self, logits: np.ndarray) -> np.ndarray:
        return logits.astype(np.float64) * self.s_logits


__all__ = ["IntAttention", "IntBlock", "IntPatchEmbed", "IntViT"]
