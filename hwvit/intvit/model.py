"""The integer ViT: a bit-accurate forward built only from hwvit.ops kernels.

Shapes: B images, N tokens, D = dim, H heads of hd, F = mlp_dim. Activations are integer arrays in
the narrowest dtype for their point's width (int8 for 8 bits; traces and logits are int64),
holding values of that width (``act_bits``, or a recipe's per-layer width:
``IntViT.point_bits``); each carries one real scale, kept beside it in the layer. Every layer
records its own block records and output value; paths are the float model's record points
(``embed.proj``, ``layers.3.mlp.fc1``, ...). ``hwvit.quant.quantize_model`` builds an IntViT.

The forward is written once, over a kernels provider ``k`` (``hwvit.intvit.kernels``): ``forward``
runs it on numpy (``NUMPY``), ``hwvit.intvit.device.DeviceForward`` on a torch device.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

import numpy as np
from einops import rearrange

from hwvit import ops
from hwvit.blocks import gemm as gemm_block
from hwvit.intvit.kernels import NUMPY
from hwvit.intvit.layers import IntGelu, IntLayerNorm, IntLinear, IntPool, IntResidual, IntSoftmax
from hwvit.intvit.qparams import Requant, Watched, edits
from hwvit.intvit.trace import NO_TRACE, Trace
from hwvit.ops import encoder as ops_encoder
from hwvit.ops import frozen
from hwvit.ops.gemm import gemm_zero


@dataclass(kw_only=True)
class IntAttention(Watched):
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

    # the two requants' parameters under their earlier names (hwvit.core.compile, recipes' tests)
    scores_mult = property(lambda self: self.scores.mult)
    scores_shift = property(lambda self: self.scores.shift)
    scores_bits = property(lambda self: self.scores.out_bits)
    s_scores = property(lambda self: self.scores.s_out)
    ctx_mult = property(lambda self: self.context.mult)
    ctx_shift = property(lambda self: self.context.shift)
    ctx_bits = property(lambda self: self.context.out_bits)
    s_ctx = property(lambda self: self.context.s_out)

    def _qkv_sources(self) -> tuple:
        """What ``_joined_qkv`` is made from: the separate q, k and v projections' weights, biases,
        multipliers and shifts."""
        return tuple(v for p in (self.q, self.k, self.v) for v in (p.w, p.bias, p.requant.mult, p.requant.shift))

    def _joined_qkv(self):
        """The separate q, k and v projections as one: their weights, biases, multipliers and shifts
        stacked by output channel, so one GEMM call (one pass over x) gives all three. Every output
        channel keeps its own bias, multiplier and shift, so the integers are those of the three calls.
        None where they cannot be joined (another rounding, another width, writable weights); made
        once while the parts stay the same (hwvit.ops.frozen)."""
        parts = (self.q, self.k, self.v)
        rqs = [p.requant for p in parts]
        if any(not r.is_default or r.out_bits != rqs[0].out_bits for r in rqs) or any(p.bias_add for p in parts):
            return None
        inputs = self._qkv_sources()

        def join():
            def stack(values):
                return np.concatenate([np.broadcast_to(np.asarray(v), p.w.shape[:1]) for v, p in zip(values, parts)])

            return IntLinear(
                w=np.concatenate([p.w for p in parts]),
                bias=stack([p.bias for p in parts]),
                s_in=self.q.s_in,
                # s_out is q's; nothing reads it: the three parts are traced at their own scales
                requant=Requant(
                    mult=stack([r.mult for r in rqs]),
                    shift=stack([r.shift for r in rqs]),
                    out_bits=rqs[0].out_bits,
                    s_out=rqs[0].s_out,
                ),
            )

        return frozen.derived(inputs, "joined_qkv", join, otherwise=lambda: None)

    def _tag(self, path: str, b: int, i: int) -> str:
        """Record path of batch-head index i: layers.0.attn.h3 (one image) or ...img1.h3."""
        img, head = divmod(i, self.heads)
        return f"{path}.h{head}" if b == 1 else f"{path}.img{img}.h{head}"

    def _requant_of(self, which: str) -> tuple[Requant, bool]:
        """(requant, a signed) of Q.K^T ("qk": signed Q) or P.V ("av": unsigned P)."""
        return (self.scores, True) if which == "qk" else (self.context, False)

    def record_heads(self, tr: Trace, path: str, b: int, which: str, a, w, acc, y) -> None:
        """One `gemm` record per image and head of Q.K^T (``which`` = "qk": a = Q, w = K) or P.V
        ("av": a = P, w = V^T); every array (B*H, rows, cols)."""
        if not tr.keep_records:
            return
        rq, signed = self._requant_of(which)
        scales = (self.s_q if which == "qk" else self.softmax.s_out, rq.s_out)
        for i in range(a.shape[0]):
            tag = f"{self._tag(path, b, i)}.{which}"
            rec = gemm_block.traced(
                tag, a[i], w[i], None, rq.mult, rq.shift, acc[i], y[i], rq.out_bits, signed, scales, rq.rounding,
                rq.zero,
            )  # fmt: skip
            tr.keep(rec)

    def _zeros(self, which: str) -> tuple[int, int]:
        """(zero point of a, of w) of Q.K^T ("qk") or P.V ("av"; the probabilities have none)."""
        return (self.zero_q, self.zero_k) if which == "qk" else (0, self.zero_v)

    def _product(self, tr: Trace, path: str, b: int, which: str, a, w, k=NUMPY):
        """Requantized Q.K^T (``which`` = "qk") or P.V ("av") of every head of every image in one
        batched call; with records, the accumulators are kept for them (gemm, then requant), else
        the GEMM may requantize in its tile (``ops.linear``): the same integers."""
        rq, signed = self._requant_of(which)
        za, zw = self._zeros(which)
        if za or zw:  # an imported model's zero points: sum (a - za)(w - zw), exact (rtl/gemm.v ZERO_POINTS)
            a_h, w_h = np.asarray(k.host(a), np.int64), np.asarray(k.host(w), np.int64)
            acc = gemm_zero(a_h, w_h, None, signed, za, zw)
            y = rq.apply(k, acc)
            if tr.keep_records:
                for i in range(a_h.shape[0]):
                    tag = f"{self._tag(path, b, i)}.{which}"
                    scales = (self.s_q if which == "qk" else self.softmax.s_out, rq.s_out)
                    tr.keep(
                        gemm_block.traced(
                            tag, a_h[i], w_h[i], None, rq.mult, rq.shift, acc[i], y[i], rq.out_bits, signed, scales,
                            rq.rounding, rq.zero, za, zw,
                        )
                    )  # fmt: skip
            return y
        if not tr.keep_records:
            return rq.linear(k, a, w, None, a_signed=signed)
        acc = k.gemm(a, w, None, a_signed=signed)
        y = rq.apply(k, acc)
        self.record_heads(tr, path, b, which, k.host(a), k.host(w), k.host(acc), k.host(y))
        return y

    def __call__(self, x, tr: Trace, path: str, k=NUMPY):
        b, n, _ = x.shape
        h, hd = self.heads, self.head_dim
        if self.qkv is not None:
            y = self.qkv(x, tr, f"{path}.qkv", k=k).reshape(b, n, 3, h, hd)
            qh, kh, vh = (k.permute(y[:, :, i], (0, 2, 1, 3)) for i in range(3))  # (B, H, N, hd)
        elif (joined := None if tr.keep_records else self._joined_qkv()) is not None:
            y = joined.requant.linear(k, x.reshape(b * n, -1), joined.w, joined.bias).reshape(b, n, 3, h, hd)
            qh, kh, vh = (k.permute(y[:, :, i], (0, 2, 1, 3)) for i in range(3))  # (B, H, N, hd)
        else:
            qh, kh, vh = (
                k.permute(lin(x, tr, f"{path}.{name}", value=False, k=k).reshape(b, n, h, hd), (0, 2, 1, 3))
                for name, lin in (("q", self.q), ("k", self.k), ("v", self.v))
            )
        qh = k.value(tr, f"{path}.q", qh, (self.qkv or self.q).s_out)
        kh = k.value(tr, f"{path}.k", kh, (self.qkv or self.k).s_out)
        vh = k.value(tr, f"{path}.v", vh, self.s_v)
        if self.q_table is not None:  # an imported model's scaling of Q and of K, each a table
            qh = self.q_table(qh, tr, f"{path}.q_scaled", k=k)
        if self.k_table is not None:
            kh = self.k_table(kh, tr, f"{path}.k_scaled", k=k)
        # All heads (and images) in one batched GEMM call each; one record per head for the RTL.
        qs, ks, vs = (t.reshape(b * h, n, hd) for t in (qh, kh, vh))
        if self._heads_at_once(tr, k):  # nothing traced between: the three steps as one call
            ctx = k.attention_heads(qs, ks, vs, self.scores, self.softmax, self.context)
            return self._output(ctx, tr, path, b, n, k)
        scores = self._product(tr, path, b, "qk", qs, ks, k)  # (B*H, N, N)
        scores = scores.reshape(b, h, n, n)
        if self.scores_table is not None:  # an imported model's separately quantized scaling
            scores = self.scores_table(scores, tr, f"{path}.scores", k=k)
        else:
            scores = k.value(tr, f"{path}.scores", scores, self.scores.s_out)
        probs = self.softmax(scores, tr, f"{path}.softmax", k=k)
        probs = k.value(tr, f"{path}.probs", probs, self.softmax.s_out)  # the float model's name for the softmax
        ps = probs.reshape(b * h, n, n)
        vt = k.permute(vs, (0, 2, 1))  # (B*H, hd, N): V^T, the GEMM's weight rows
        ctx = self._product(tr, path, b, "av", ps, vt, k)  # (B*H, N, hd)
        return self._output(ctx, tr, path, b, n, k)

    def _heads_at_once(self, tr: Trace, k) -> bool:
        """Whether Q.K^T, softmax and P.V may run as one ``attention_heads`` call: nothing of them is
        traced or forced, hwvit's own arithmetic in all three, and a provider that has the call."""
        sm = self.softmax
        plain = sm.arith is None and sm.exp == "table" and sm.in_bits == self.scores.out_bits
        tables = (self.scores_table, self.q_table, self.k_table)
        plain = plain and tables == (None, None, None) and not (self.zero_q or self.zero_k or self.zero_v)
        rounding = self.scores.is_default and self.context.is_default
        return tr.quiet and plain and rounding and hasattr(k, "attention_heads")

    def _output(self, ctx, tr: Trace, path: str, b: int, n: int, k):
        """(B*H, N, hd) context -> (B, N, H*hd), traced, then the output projection."""
        h, hd = self.heads, self.head_dim
        ctx = k.permute(ctx.reshape(b, h, n, hd), (0, 2, 1, 3))  # (B, N, H, hd)
        ctx = ctx.reshape(b, n, h * hd)
        ctx = k.value(tr, f"{path}.context", ctx, self.context.s_out)
        return self.proj(ctx, tr, f"{path}.proj", k=k)


@dataclass(kw_only=True)
class IntBlock(Watched):
    norm1: IntLayerNorm
    attn: IntAttention
    add1: IntResidual
    norm2: IntLayerNorm
    fc1: IntLinear
    gelu: IntGelu
    fc2: IntLinear
    add2: IntResidual

    def __call__(self, x, tr: Trace, path: str, k=NUMPY):
        if hasattr(k, "encoder_block") and (parts := self._parts(tr)) is not None:  # nothing traced
            return k.encoder_block(x, parts)
        h = self.norm1(x, tr, f"{path}.norm1", k=k)
        x = self.add1(x, self.attn(h, tr, f"{path}.attn", k=k), tr, f"{path}.add1", k=k)
        h = self.norm2(x, tr, f"{path}.norm2", k=k)
        h = self.fc1(h, tr, f"{path}.mlp.fc1", k=k)
        h = self.gelu(h, tr, f"{path}.mlp.gelu", k=k)
        h = self.fc2(h, tr, f"{path}.mlp.fc2", k=k)
        return self.add2(x, h, tr, f"{path}.add2", k=k)

    def _joined_from(self) -> list:
        """The arrays that ``_parts``' joined q, k, v projection is made from (none where the model has
        one qkv projection): the parts hold the joined copy, not these."""
        attn = self.attn
        return [] if attn.qkv is not None else [v for v in attn._qkv_sources() if isinstance(v, np.ndarray)]

    def _parts(self, tr: Trace) -> ops_encoder.EncoderBlock | None:
        """The block as ``ops.encoder_block`` takes it (one call for its ten kernels, with their
        integers), or None where the forward must go layer by layer: something traced or forced,
        another arithmetic than hwvit's own in a LayerNorm, the softmax or a requant, separate q, k, v
        projections that cannot be joined."""
        attn, sm = self.attn, self.attn.softmax  # _heads_at_once: nothing traced, attention hwvit's own
        if self.norm1.arith is not None or self.norm2.arith is not None or not attn._heads_at_once(tr, NUMPY):
            return None
        if self.gelu.arith is not None:  # a GELU on rows, not a table
            return None
        qkv = attn.qkv if attn.qkv is not None else attn._joined_qkv()
        lins = (qkv, attn.proj, self.fc1, self.fc2)
        if qkv is None or not all(lin.requant.is_default and lin.bias_add is None for lin in lins):
            return None

        def linear(lin: IntLinear) -> ops_encoder.Linear:
            return ops_encoder.Linear(lin.w, lin.bias, lin.mult, lin.shift, lin.out_bits)

        def norm(ln: IntLayerNorm) -> ops_encoder.Norm:
            return ops_encoder.Norm(ln.gamma, ln.beta, ln.eps_int, ln.mult, ln.shift, ln.out_bits)

        def add(r: IntResidual) -> ops_encoder.Add:
            return ops_encoder.Add(r.mult_a, r.mult_b, r.shift, r.out_bits)

        sc, ctx = attn.scores, attn.context
        heads = ops_encoder.Heads(
            attn.heads, attn.head_dim, sc.mult, sc.shift, sc.out_bits, sm.exp_table, sm.out_bits,
            ctx.mult, ctx.shift, ctx.out_bits,
        )  # fmt: skip
        gelu = ops_encoder.Lookup(self.gelu.table, self.gelu.in_bits)
        return ops_encoder.EncoderBlock(
            norm(self.norm1), linear(qkv), heads, linear(attn.proj), add(self.add1),
            norm(self.norm2), linear(self.fc1), gelu, linear(self.fc2), add(self.add2),
        )  # fmt: skip


@dataclass(kw_only=True)
class IntPatchEmbed:
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


@dataclass(kw_only=True)
class IntEmbed:
    """Input ints -> the tokens the first block takes: patch embedding, cls token, position table."""

    patch_embed: IntPatchEmbed
    s_embed: float  # patch embedding output and cls token (they are concatenated: one tensor, one scale)
    cls_q: np.ndarray | None  # (D,)
    pos_q: np.ndarray | None  # (T, D)
    s_pos: float | None
    pos_add: IntResidual | None  # None: no position table

    def __post_init__(self):
        # read-only, as the layers' parameters: the forward's narrow copies are made once (k.const)
        self.cls_q = None if self.cls_q is None else frozen.read_only(self.cls_q)
        self.pos_q = None if self.pos_q is None else frozen.read_only(self.pos_q)

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


@dataclass(kw_only=True)
class IntReadout:
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


def _part(group: str, name: str, doc: str) -> property:
    """A read-only IntViT attribute that is ``self.<group>.<name>``."""
    return property(lambda self: getattr(getattr(self, group), name), doc=doc)


@dataclass(kw_only=True)
class IntViT:
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

    # the parts of the embedding and the readout under the names they had as IntViT fields
    patch_embed = _part("embed", "patch_embed", "IntPatchEmbed")
    s_embed = _part("embed", "s_embed", "scale of the patch embedding output and of the cls token")
    cls_q = _part("embed", "cls_q", "(D,) cls token, or None")
    pos_q = _part("embed", "pos_q", "(T, D) position table, or None")
    pos_add = _part("embed", "pos_add", "the position add after the embedding, or None")
    norm = _part("readout", "norm", "final LayerNorm, or None")
    pool = _part("readout", "pool", "mean pooling; None: the cls token's features")
    pre_head_fc = _part("readout", "pre_head_fc", "ECG's pre-head Linear, or None")
    pre_head_norm = _part("readout", "pre_head_norm", "ECG's pre-head LayerNorm, or None")
    head = _part("readout", "head", "the classifier, or None")
    s_tokens = _part("readout", "s_tokens", "scale of the tokens after the last block and the final norm")
    s_pool = _part("readout", "s_pool", "scale of the pooled features")
    s_features = _part("readout", "s_features", "scale of the pooled (and pre-head) features, the head's input")
    s_logits = _part("readout", "s_logits", "scale of the output")

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
        """Integer logits (B, classes), int64, at scale ``s_logits``; ``x`` float (or int if quantized).

        Between layers the activations travel in their narrowest dtype (``hwvit.intvit.layers``)."""
        return self.run(x, trace or NO_TRACE, quantized, NUMPY)

    __call__ = forward

    def run(self, x, tr: Trace, quantized: bool, k) -> np.ndarray:
        """The forward on kernels provider ``k`` (``hwvit.intvit.kernels``): every layer in order,
        each traced under its path; host int64 logits."""
        self.check_input(x)
        if self.input_zero and not quantized:
            xq = k.int_input(self._zero_input(x))
        else:
            xq = k.int_input(x) if quantized else k.quantize(x, self.s_input, self.input_bits)
        xq = k.value(tr, "input", xq, self.s_input)
        pos = k.const(self.pos_q) if self.pos_q is not None else None  # once, for every add
        h = self.embed(xq, pos, tr, k=k)
        stack = self._stack(tr, k)
        if stack is not None:  # nothing traced, no position add between blocks: the stack in one call
            # the last block gives only the tokens the readout reads (the class token's row, or all)
            return k.logits(self.readout(k.encoder_blocks(h, stack, self.readout.tokens_read), tr, k=k))
        for i, block in enumerate(self.blocks):
            pos_add = self.layer_pos_adds[i] if self.layer_pos_adds else None
            if pos_add is not None:
                h = self.embed.add_position(pos_add, h, pos, tr, f"layers.{i}.pos_add", k)
            h = block(h, tr, f"layers.{i}", k=k)
        return k.logits(self.readout(h, tr, k=k))

    def _stack(self, tr: Trace, k) -> ops_encoder.Stack | None:
        """Every block as ``ops.encoder_blocks`` takes them, or None where the forward goes block by
        block: something traced, a provider without it, a position add before a later block (ECG), or
        a block that must go layer by layer (``IntBlock._parts``). Kept between forwards (the same
        Stack, which keeps the blocks' plans) while no layer has been edited (``qparams.edits``), the
        blocks are the same objects and the arrays the joined q, k, v projections were made from are
        read-only still; made again otherwise (~60 us a block in the forward)."""
        if not tr.quiet or not hasattr(k, "encoder_blocks") or any(a is not None for a in self.layer_pos_adds or ()):
            return None
        kept = self.__dict__.get("_kept_stack")
        blocks = self.blocks
        if (
            kept is not None
            and kept[0] == edits()
            and len(kept[1]) == len(blocks)
            and all(map(operator.is_, kept[1], blocks))
            and frozen.still(kept[2])
        ):
            return kept[3]
        parts = [block._parts(tr) for block in blocks]
        stack = None if any(p is None for p in parts) else ops_encoder.Stack(parts)
        sources = [v for block in blocks for v in block._joined_from()]
        self.__dict__["_kept_stack"] = (edits(), tuple(blocks), frozen.links(sources), stack)
        return stack

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_kept_stack", None)  # it holds this process's plans (array addresses): never copied
        return state

    def dequantize_logits(self, logits: np.ndarray) -> np.ndarray:
        head = self.readout.head
        zero = 0
        if head is not None:  # an imported model's logits may have a zero point
            zero = head.bias_add.zero_out if head.bias_add is not None else head.requant.zero
        return (logits.astype(np.float64) - zero) * self.s_logits


__all__ = ["IntAttention", "IntBlock", "IntEmbed", "IntPatchEmbed", "IntReadout", "IntViT"]
