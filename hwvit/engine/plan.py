"""What the engine makes once from an integer model's layers: the parameters of a block as one
compiled call takes them, q, k and v joined into one projection, attention's heads in one call.

Each function reads a golden layer (``hwvit.intvit``) and answers None where the fast form does not
apply (another arithmetic than hwvit's own, a zero point, a table of an imported model): the engine
then runs that layer as the golden model does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hwvit.engine import blocks, heads
from hwvit.intvit.layers import IntLayerNorm, IntLinear, IntResidual
from hwvit.intvit.model import IntAttention, IntBlock
from hwvit.intvit.qparams import Requant
from hwvit.intvit.trace import Trace


def plain_heads(attn: IntAttention) -> bool:
    """Whether Q.K^T, the softmax and P.V are hwvit's own arithmetic, so one ``attention_heads`` call
    may run the three: the softmax's table form on the scores' width, default requants, no tables
    or zero points of an imported model."""
    sm = attn.softmax
    plain = sm.arith is None and sm.exp == "table" and sm.in_bits == attn.scores.out_bits
    tables = (attn.scores_table, attn.q_table, attn.k_table)
    plain = plain and tables == (None, None, None) and not (attn.zero_q or attn.zero_k or attn.zero_v)
    return plain and attn.scores.is_default and attn.context.is_default


def joined_qkv(attn: IntAttention) -> IntLinear | None:
    """Attention's q, k and v projections as one IntLinear: ``attn.qkv`` where the model has one, else
    the separate projections' weights, biases, multipliers and shifts stacked by output channel, so
    one GEMM call (one pass over x) gives all three. Every output channel keeps its own bias,
    multiplier and shift, so the integers are those of the three calls. None where they cannot be
    joined (another rounding, another width, a bias added after the requant)."""
    if attn.qkv is not None:
        return attn.qkv
    parts = (attn.q, attn.k, attn.v)
    rqs = [p.requant for p in parts]
    if any(not r.is_default or r.out_bits != rqs[0].out_bits for r in rqs) or any(p.bias_add for p in parts):
        return None

    def stack(values):
        return np.concatenate([np.broadcast_to(np.asarray(v), p.w.shape[:1]) for v, p in zip(values, parts)])

    return IntLinear(
        w=np.concatenate([p.w for p in parts]),
        bias=stack([p.bias for p in parts]),
        s_in=attn.q.s_in,
        # s_out is q's; nothing reads it: the joined projection is never traced
        requant=Requant(
            mult=stack([r.mult for r in rqs]),
            shift=stack([r.shift for r in rqs]),
            out_bits=rqs[0].out_bits,
            s_out=rqs[0].s_out,
        ),
    )


@dataclass(frozen=True, eq=False)
class HeadsAtOnce:
    """A golden attention layer run fast, called as the layer is: the q, k, v projection in one GEMM
    call (``joined_qkv``), then Q.K^T, the softmax and P.V of every head of every image in one
    ``attention_heads`` call, then the output projection. Only where nothing is traced."""

    attn: IntAttention
    qkv: IntLinear

    def __call__(self, x, tr: Trace, path: str, k):
        assert tr.quiet, "HeadsAtOnce traces nothing: a traced forward runs the golden layer"
        a = self.attn
        b, n, _ = x.shape
        h, hd = a.heads, a.head_dim
        y = self.qkv(x, tr, path, value=False, k=k).reshape(b, n, 3, h, hd)
        q, kk, v = (y[:, :, i].transpose(0, 2, 1, 3).reshape(b * h, n, hd) for i in range(3))  # (B*H, N, hd)
        sc, sm, cx = a.scores, a.softmax, a.context
        ctx = heads.attention_heads(
            q, kk, v, sc.mult, sc.shift, sc.out_bits, sm.exp_table, sm.out_bits, cx.mult, cx.shift, cx.out_bits,
            narrow=True,
        )  # fmt: skip
        ctx = ctx.reshape(b, h, n, hd).transpose(0, 2, 1, 3).reshape(b, n, h * hd)
        return a.proj(ctx, tr, path, k=k)


def fast_block(block: IntBlock) -> IntBlock:
    """``block`` with its attention as ``HeadsAtOnce`` where that applies (its other layers as they are),
    else ``block`` itself."""
    qkv = joined_qkv(block.attn) if plain_heads(block.attn) else None
    if qkv is None:
        return block
    from dataclasses import replace

    return replace(block, attn=HeadsAtOnce(block.attn, qkv))


def block_params(block: IntBlock) -> blocks.EncoderBlock | None:
    """The block as ``encoder_block`` takes it (one call for its ten kernels, with their integers),
    or None where the engine runs it layer by layer: another arithmetic than hwvit's own in a
    LayerNorm, the GELU (a row variant), the softmax or a requant, separate q, k, v projections that
    cannot be joined, an imported model's bias added after a requant."""
    attn, sm = block.attn, block.attn.softmax
    if block.norm1.arith is not None or block.norm2.arith is not None or block.gelu.arith is not None:
        return None
    qkv = joined_qkv(attn) if plain_heads(attn) else None
    lins = (qkv, attn.proj, block.fc1, block.fc2)
    if qkv is None or not all(lin.requant.is_default and lin.bias_add is None for lin in lins):
        return None

    def linear(lin: IntLinear) -> blocks.Linear:
        return blocks.Linear(lin.w, lin.bias, lin.mult, lin.shift, lin.out_bits)

    def norm(ln: IntLayerNorm) -> blocks.Norm:
        return blocks.Norm(ln.gamma, ln.beta, ln.eps_int, ln.mult, ln.shift, ln.out_bits)

    def add(r: IntResidual) -> blocks.Add:
        return blocks.Add(r.mult_a, r.mult_b, r.shift, r.out_bits)

    sc, ctx = attn.scores, attn.context
    at_once = blocks.Heads(
        attn.heads, attn.head_dim, sc.mult, sc.shift, sc.out_bits, sm.exp_table, sm.out_bits,
        ctx.mult, ctx.shift, ctx.out_bits,
    )  # fmt: skip
    gelu = blocks.Lookup(block.gelu.table, block.gelu.in_bits)
    return blocks.EncoderBlock(
        norm(block.norm1), linear(qkv), at_once, linear(attn.proj), add(block.add1),
        norm(block.norm2), linear(block.fc1), gelu, linear(block.fc2), add(block.add2),
    )  # fmt: skip
