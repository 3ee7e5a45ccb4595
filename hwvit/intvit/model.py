"""The integer ViT: the golden model, a bit-accurate forward built only from hwvit.ops kernels.

Shapes: B images, N tokens, D = dim, H heads of hd, F = mlp_dim. Activations are integer arrays in
the narrowest dtype for their point's width (int8 for 8 bits; traces and logits are int64),
holding values of that width (``act_bits``, or a recipe's per-layer width:
``IntViT.point_bits``); each carries one real scale, kept beside it in the layer. Every layer
records its own block records and output value; paths are the float model's record points
(``embed.proj``, ``layers.3.mlp.fc1``, ...). ``hwvit.quant.quantize_model`` builds an IntViT.

``IntViT.forward`` is the one forward, layer by layer as the paper writes the model
(``x = x + attn(norm1(x))``, ``x = x + mlp(norm2(x))``): the reference the RTL is judged against and
the forward every vector set is traced from. It is written over a kernels provider ``k``
(``hwvit.intvit.kernels``): numpy here, torch tensors on a device in ``hwvit.intvit.device``. Running
a model fast (fused blocks, compiled kernels, kept plans) is ``hwvit.engine``'s work, tested bit for
bit against this forward. A model is immutable once built (frozen dataclasses, read-only arrays):
``dataclasses.replace`` makes an edited copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from einops import rearrange

from hwvit import ops
from hwvit.blocks import gemm as gemm_block
from hwvit.intvit.kernels import NUMPY
from hwvit.intvit.layers import IntGelu, IntLayerNorm, IntLinear, IntPool, IntResidual, IntSoftmax
from hwvit.intvit.qparams import Layer, Requant, read_only
from hwvit.intvit.trace import NO_TRACE, Trace
from hwvit.ops.gemm import gemm_zero


@dataclass(frozen=True, kw_only=True, eq=False)
class IntAttention(Layer):
    """Projections, Q.K^T requantized to the softmax input, softmax, P.V requantized to the
    context, output projection. The scales of q, k and v are their projections' outputs."""

    heads: int
    head_dim: int
    qkv: IntLinear | None  # fused projection (q, k and v share one output scale)
    q: IntLinear | None  # separate projections
    k: IntLinear | None
    v: IntLinear | None
    scores: Requant  # Q.K^T to the softmax input (1/sqrt(hd) folded into the multiplier)
    softmax: IntSoftmax
    context: Requant  # P.V to the context (ECG's 1/sqrt(dim) folded into the multiplier)
    proj: IntLinear
    # an imported model's table of one score code between Q.K^T's requant and the softmax (its
    # separately quantized scaling Mul), and its activations' zero points (q, k, v), subtracted from
    # the operands of Q.K^T and P.V
    scores_table: IntGelu | None = None
    # ... and its tables of one code on Q and on K before Q.K^T (HF's SDPA export scales each by
    # head_dim^-1/4 in a quantized Mul of its own)
    q_table: IntGelu | None = None
    k_table: IntGelu | None = None
    zero_q: int = 0
    zero_k: int = 0
    zero_v: int = 0

    def __post_init__(self):
        assert (self.qkv is None) != (self.q is None), "attention: either a fused qkv or separate q, k, v projections"

    @property
    def s_q(self) -> float:
        """The scale of Q as Q.K^T reads it (after its table, if any)."""
        return self.q_table.s_out if self.q_table is not None else (self.qkv or self.q).s_out

    @property
    def s_k(self) -> float:
        return self.k_table.s_out if self.k_table is not None else (self.qkv or self.k).s_out

    @property
    def s_v(self) -> float:
        return (self.qkv or self.v).s_out

    def _tag(self, path: str, b: int, i: int) -> str:
        """Record path of batch-head index i: layers.0.attn.h3 (one image) or ...img1.h3."""
        img, head = divmod(i, self.heads)
        return f"{path}.h{head}" if b == 1 else f"{path}.img{img}.h{head}"

    def _requant_of(self, which: str) -> tuple[Requant, bool]:
        """(requant, a signed) of Q.K^T ("qk": signed Q) or P.V ("av": unsigned P)."""
        return (self.scores, True) if which == "qk" else (self.context, False)

    def _zeros(self, which: str) -> tuple[int, int]:
        """(zero point of a, of w) of Q.K^T ("qk") or P.V ("av"; the probabilities have none)."""
        return (self.zero_q, self.zero_k) if which == "qk" else (0, self.zero_v)

    def _product(self, tr: Trace, path: str, b: int, which: str, a, w, k=NUMPY):
        """Requantized Q.K^T (``which`` = "qk": a = Q, w = K) or P.V ("av": a = P, w = V^T) of every head
        of every image in one batched call (every array (B*H, rows, cols)); with records, the
        accumulators are kept for one `gemm` record per image and head (gemm, then requant), else the
        GEMM may requantize in its tile (``ops.linear``): the same integers."""
        rq, signed = self._requant_of(which)
        za, zw = self._zeros(which)
        if za or zw:  # an imported model's zero points: sum (a - za)(w - zw), exact (rtl/gemm.v ZERO_POINTS)
            a, w = np.asarray(k.host(a), np.int64), np.asarray(k.host(w), np.int64)
            acc = k.int_input(gemm_zero(a, w, None, signed, za, zw))
        elif tr.keep_records:
            acc = k.gemm(a, w, None, a_signed=signed)
        else:
            return rq.linear(k, a, w, None, a_signed=signed)
        y = rq.apply(k, acc)
        if tr.keep_records:
            a, w, acc, yh = k.host(a), k.host(w), k.host(acc), k.host(y)
            scales = (self.s_q if which == "qk" else self.softmax.s_out, rq.s_out)
            for i in range(a.shape[0]):
                tag = f"{self._tag(path, b, i)}.{which}"
                rec = gemm_block.traced(
                    tag, a[i], w[i], None, rq.mult, rq.shift, acc[i], yh[i], rq.out_bits, signed, scales,
                    rq.rounding, rq.zero, za, zw,
                )  # fmt: skip
                tr.keep(rec)
        return y

    def __call__(self, x, tr: Trace, path: str, k=NUMPY):
        """(B, N, D) tokens -> (B, N, D): q, k, v, then every head of every image in one batched GEMM call
        per product (one record per head for the RTL), then the output projection."""
        b, n, _ = x.shape
        h, hd = self.heads, self.head_dim
        if self.qkv is not None:  # one projection: q's, k's and v's channels side by side
            y = self.qkv(x, tr, f"{path}.qkv", k=k).reshape(b, n, 3, h, hd)
            qh, kh, vh = (y[:, :, i] for i in range(3))
        else:
            projections = (("q", self.q), ("k", self.k), ("v", self.v))
            qh, kh, vh = (
                lin(x, tr, f"{path}.{name}", value=False, k=k).reshape(b, n, h, hd) for name, lin in projections
            )
        qh, kh, vh = (k.permute(t, (0, 2, 1, 3)) for t in (qh, kh, vh))  # (B, H, N, hd)
        qh = k.value(tr, f"{path}.q", qh, (self.qkv or self.q).s_out)
        kh = k.value(tr, f"{path}.k", kh, (self.qkv or self.k).s_out)
        vh = k.value(tr, f"{path}.v", vh, self.s_v)
        if self.q_table is not None:  # an imported model's scaling of Q and of K, each a table
            qh = self.q_table(qh, tr, f"{path}.q_scaled", k=k)
        if self.k_table is not None:
            kh = self.k_table(kh, tr, f"{path}.k_scaled", k=k)
        qs, ks, vs = (t.reshape(b * h, n, hd) for t in (qh, kh, vh))
        scores = self._product(tr, path, b, "qk", qs, ks, k).reshape(b, h, n, n)  # Q.K^T
        if self.scores_table is not None:  # an imported model's separately quantized scaling
            scores = self.scores_table(scores, tr, f"{path}.scores", k=k)
        else:
            scores = k.value(tr, f"{path}.scores", scores, self.scores.s_out)
        probs = self.softmax(scores, tr, f"{path}.softmax", k=k)
        probs = k.value(tr, f"{path}.probs", probs, self.softmax.s_out)  # the float model's name for the softmax
        vt = k.permute(vs, (0, 2, 1))  # (B*H, hd, N): V^T, the GEMM's weight rows
        ctx = self._product(tr, path, b, "av", probs.reshape(b * h, n, n), vt, k)  # P.V: (B*H, N, hd)
        return self._output(ctx, tr, path, b, n, k)

    def _output(self, ctx, tr: Trace, path: str, b: int, n: int, k):
        """(B*H, N, hd) context -> (B, N, H*hd), traced, then the output projection."""
        h, hd = self.heads, self.head_dim
        ctx = k.permute(ctx.reshape(b, h, n, hd), (0, 2, 1, 3))  # (B, N, H, hd)
        ctx = ctx.reshape(b, n, h * hd)
        ctx = k.value(tr, f"{path}.context", ctx, self.context.s_out)
        return self.proj(ctx, tr, f"{path}.proj", k=k)


@dataclass(frozen=True, kw_only=True, eq=False)
class IntBlock(Layer):
    norm1: IntLayerNorm
    attn: IntAttention
    add1: IntResidual
    norm2: IntLayerNorm
    fc1: IntLinear
    gelu: IntGelu
    fc2: IntLinear
    add2: IntResidual

    def __call__(self, x, tr: Trace, path: str, k=NUMPY):
        """A pre-norm encoder block: x + attn(norm1(x)), then x + fc2(gelu(fc1(norm2(x))))."""
        h = self.norm1(x, tr, f"{path}.norm1", k=k)
        x = self.add1(x, self.attn(h, tr, f"{path}.attn", k=k), tr, f"{path}.add1", k=k)
        h = self.norm2(x, tr, f"{path}.norm2", k=k)
        h = self.fc1(h, tr, f"{path}.mlp.fc1", k=k)
        h = self.gelu(h, tr, f"{path}.mlp.gelu", k=k)
        h = self.fc2(h, tr, f"{path}.mlp.fc2", k=k)
        return self.add2(x, h, tr, f"{path}.add2", k=k)


@dataclass(frozen=True, kw_only=True, eq=False)
class IntPatchEmbed(Layer):
    """conv: im2col + GEMM; simple: rearrange, LN, GEMM, LN; linear1d: GEMM (K=1), LN, GELU."""

    kind: str
    patch_size: int
    proj: IntLinear
    norm_in: IntLayerNorm | None = None
    norm_out: IntLayerNorm | None = None
    gelu: IntGelu | None = None

    def patches(self, x):
        """Input -> (B, N, patch_dim) in the order the float weights expect (the float model's
        patterns); numpy arrays or torch tensors alike (einops)."""
        p = self.patch_size
        if self.kind == "linear1d":
            x = x[..., None] if x.ndim == 2 else x  # (B, L) signals have one channel
            return rearrange(x, "b (n p) c -> b n (p c)", p=p)
        if self.kind == "conv":  # Conv2d weight (D, C, p, p): features ordered (c, p1, p2)
            return rearrange(x, "b c (h p1) (w p2) -> b (h w) (c p1 p2)", p1=p, p2=p)
        return rearrange(x, "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=p, p2=p)  # SimpleViT

    def __call__(self, x, tr: Trace, path: str = "embed", k=NUMPY):
        h = self.patches(x)
        if self.norm_in is not None:
            h = self.norm_in(h, tr, f"{path}.norm_in", k=k)
        h = self.proj(h, tr, f"{path}.proj", k=k)
        if self.norm_out is not None:
            h = self.norm_out(h, tr, f"{path}.norm_out", k=k)
        if self.gelu is not None:
            h = self.gelu(h, tr, f"{path}.gelu", k=k)
        return h


@dataclass(frozen=True, kw_only=True, eq=False)
class IntEmbed(Layer):
    """Input ints -> the tokens the first block takes: patch embedding, cls token, position table."""

    patch_embed: IntPatchEmbed
    s_embed: float  # patch embedding output and cls token (they are concatenated: one tensor, one scale)
    cls_q: np.ndarray | None  # (D,)
    pos_q: np.ndarray | None  # (T, D)
    s_pos: float | None
    pos_add: IntResidual | None  # None: no position table

    def __post_init__(self):
        read_only(self, "cls_q", "pos_q")

    @property
    def s_tokens(self) -> float:
        return self.pos_add.s_out if self.pos_add is not None else self.s_embed

    @property
    def tokens_scale(self):
        """The tokens' scale: ``s_tokens``, or per channel when the position add writes a PTF stream."""
        return self.pos_add.out_scale if self.pos_add is not None else self.s_embed

    @staticmethod
    def add_position(add: IntResidual, h, pos, tr: Trace, path: str, k=NUMPY):
        """``h`` + the position table ``pos`` (``k.const(pos_q)``), by
        ``add`` (``pos_add``, or ECG's before a later block)."""
        return add(h, k.expand(pos, h.shape), tr, path, k=k)

    def __call__(self, x, pos, tr: Trace, k=NUMPY):
        """Input ints -> tokens at ``s_tokens``; ``pos`` as for ``add_position``."""
        h = self.patch_embed(x, tr, "embed", k=k)
        h = k.value(tr, "embed", h, self.s_embed)
        if self.cls_q is not None:
            h = k.cat([k.expand(k.const(self.cls_q), (h.shape[0], 1, h.shape[-1])), h], 1)
        if self.pos_add is not None:
            h = self.add_position(self.pos_add, h, pos, tr, "pos_add", k)
        return k.value(tr, "tokens", h, self.tokens_scale)


@dataclass(frozen=True, kw_only=True, eq=False)
class IntReadout(Layer):
    """Tokens (at scale ``s_in``) -> logits: final norm, pooling, ECG's pre-head, classifier."""

    s_in: float
    norm: IntLayerNorm | None
    pool: IntPool | None  # mean over tokens; None: the cls token's features (pool == "cls")
    pre_head_fc: IntLinear | None  # ECG: Linear -> LayerNorm after pooling
    pre_head_norm: IntLayerNorm | None
    head: IntLinear | None  # None: the features are the output

    @property
    def s_tokens(self) -> float:
        """Scale of the tokens after the final norm: the pool's input."""
        return self.norm.s_out if self.norm is not None else self.s_in

    @property
    def s_pool(self) -> float:
        return self.pool.s_out if self.pool is not None else self.s_tokens

    @property
    def s_features(self) -> float:
        """Scale of the pooled (and pre-head) features, the head's input."""
        return self.pre_head_norm.s_out if self.pre_head_norm is not None else self.s_pool

    @property
    def s_logits(self) -> float:
        return self.head.s_out if self.head is not None else self.s_features

    @property
    def tokens_read(self) -> int | None:
        """The leading tokens of each image the readout reads: 1 where it takes the class token's
        features (the final norm works row by row), None (all) where it pools them."""
        return 1 if self.pool is None else None

    def __call__(self, h, tr: Trace, k=NUMPY):
        if self.norm is not None:
            h = self.norm(h, tr, "norm", k=k)
        if self.pool is not None:
            h = self.pool(h, tr, "pool", k=k)
        else:
            h = k.value(tr, "pool", h[:, 0], self.s_pool)
        if self.pre_head_fc is not None:
            h = self.pre_head_fc(h, tr, "pre_head.fc", k=k)
        if self.pre_head_norm is not None:
            h = self.pre_head_norm(h, tr, "pre_head.norm", k=k)
        if self.head is not None:
            h = self.head(h, tr, "head", k=k)
            h = k.value(tr, "logits", h, self.head.s_out)
        return h


@dataclass(frozen=True, kw_only=True, eq=False)
class IntViT(Layer):
    """Integer-only ViT. ``forward`` takes float inputs (quantized at the boundary) or int inputs."""

    config: object  # hwvit.float.config.ViTConfig
    act_bits: int  # the default activation width (a recipe may set others: point_bits)
    s_input: float
    embed: IntEmbed
    layer_pos_adds: list[IntResidual | None]  # ECG: position added again before blocks 1..depth-1
    blocks: list[IntBlock]
    readout: IntReadout
    ranges: dict[str, float] = field(default_factory=dict)
    point_bits: dict[str, int] = field(default_factory=dict)  # point path -> width (recipe act_bits)
    meta: dict = field(default_factory=dict)
    input_zero: int = 0  # an imported model's input zero point, added to the quantized input
    # an imported model's zero point at each traced point (real value = scale * (q - zero)); none: 0
    point_zero: dict[str, int] = field(default_factory=dict)

    def __post_init__(self):
        # tuples: the blocks cannot be swapped or edited after the model is built; ECG's position adds
        # one per block (None where a block has none)
        object.__setattr__(self, "blocks", tuple(self.blocks))
        adds = tuple(self.layer_pos_adds) or (None,) * len(self.blocks)
        assert len(adds) == len(self.blocks), "IntViT: one layer_pos_adds entry per block"
        object.__setattr__(self, "layer_pos_adds", adds)

    def bits_at(self, path: str) -> int:
        """Width of the integer tensor at a traced point (unsigned for probabilities)."""
        return self.point_bits.get(path, self.act_bits)

    def zero_at(self, path: str) -> int:
        """Zero point of the integer tensor at a traced point (0 but in an imported model)."""
        return self.point_zero.get(path, 0)

    @property
    def input_bits(self) -> int:
        return self.bits_at("input")

    def quantize_input(self, x) -> np.ndarray:
        if self.input_zero:
            return self._zero_input(x)
        return ops.quantize(x, self.s_input, self.input_bits)

    def _zero_input(self, x):
        """An imported model's input: rounded at 16 bits, its zero point added, then saturated."""
        from hwvit.formats import signed

        xq = ops.quantize(x, self.s_input, 16)
        return np.clip(np.asarray(xq, np.int64) + self.input_zero, *signed(self.input_bits).range)

    def check_input(self, x) -> None:
        want = tuple(self.config.input_shape)
        shape = tuple(np.shape(x))
        ok = len(shape) == len(want) + 1 and shape[1:] == want
        if not ok and self.config.ndim == 1 and self.config.in_chans == 1:
            ok = len(shape) == 2 and shape[1] == want[0]  # (B, L) signals
        if not ok:
            raise ValueError(f"model {self.config.name!r} takes input (B, {', '.join(map(str, want))}), got {shape}")

    def forward(self, x, trace: Trace | None = None, quantized: bool = False) -> np.ndarray:
        """Integer logits (B, classes), int64, at scale ``readout.s_logits``; ``x`` float (or int if
        ``quantized``). ``trace`` keeps block records and traced values (``Trace``)."""
        return self.run(x, trace or NO_TRACE, quantized, NUMPY)

    __call__ = forward

    def run(self, x, tr: Trace, quantized: bool, k) -> np.ndarray:
        """The forward on kernels provider ``k`` (``hwvit.intvit.kernels``): every layer in order,
        each traced under its path; host int64 logits."""
        pos = k.const(self.embed.pos_q) if self.embed.pos_q is not None else None  # once, for every add
        h = self.embed(self.input(x, tr, quantized, k), pos, tr, k=k)
        for i, block in enumerate(self.blocks):
            if self.layer_pos_adds[i] is not None:  # ECG: the position table added again before the block
                h = self.embed.add_position(self.layer_pos_adds[i], h, pos, tr, f"layers.{i}.pos_add", k)
            h = block(h, tr, f"layers.{i}", k=k)
        return k.logits(self.readout(h, tr, k=k))

    def input(self, x, tr: Trace, quantized: bool, k):
        """The checked input as the first layer takes it: ``x`` quantized at ``s_input`` (or taken as
        it is where ``quantized``), traced as ``input``."""
        self.check_input(x)
        if self.input_zero and not quantized:
            xq = k.int_input(self._zero_input(x))
        else:
            xq = k.int_input(x) if quantized else k.quantize(x, self.s_input, self.input_bits)
        return k.value(tr, "input", xq, self.s_input)

    def dequantize_logits(self, logits: np.ndarray) -> np.ndarray:
        head = self.readout.head
        zero = 0
        if head is not None:  # an imported model's logits may have a zero point
            zero = head.bias_add.zero_out if head.bias_add is not None else head.requant.zero
        return (logits.astype(np.float64) - zero) * self.readout.s_logits


__all__ = ["IntAttention", "IntBlock", "IntEmbed", "IntPatchEmbed", "IntReadout", "IntViT"]
