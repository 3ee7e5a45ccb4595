"""A whole pre-norm encoder block: ``layernorm`` -> qkv ``linear`` -> ``attention_heads`` -> ``linear`` ->
``residual_add`` -> ``layernorm`` -> ``linear`` -> ``gelu`` -> ``linear`` -> ``residual_add``.

``encoder_block`` is the composition of those ten kernels, with their integers: it has no Verilog
twin of its own (the RTL runs the blocks one by one, and ``composed`` is its reference). Where the
GEMM backend requantizes in its tile (``int8_avx2``, ``int16_avx2``, ``int8_vnni``), every width is 8
bits and the GELU table's values fit int8, the block is one compiled call
(``hwvit.engine.compiled.encoder_block``): the same kernels one after another with no Python between
them, attention reading q, k and v where the projection put them, the first residual add and the
second LayerNorm in one pass over the rows. Anywhere else it makes the ten calls. A model's stack of
blocks is one ``encoder_blocks`` call with a ``Stack`` that keeps their plans between calls, the
compiled calls following one another with next to no Python between them, and the last block asked
for the class token's row alone where the readout reads only that.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from hwvit.engine.heads import attention_heads
from hwvit.formats import INT8
from hwvit.ops import gemm_backends
from hwvit.ops.checks import as_int_operand, narrow_operand
from hwvit.ops.gelu import gelu, lookup_table
from hwvit.ops.gemm import layer_params, linear, requant_vectors
from hwvit.ops.layernorm import LN_F, LN_K, LN_T, MAX_C, VE_LIMIT, layernorm, norm_params
from hwvit.ops.records import AddRows, NormRows
from hwvit.ops.residual_add import add_params, residual_add
from hwvit.ops.softmax import table_of


class Norm(NamedTuple):
    """``layernorm``'s parameters."""

    gamma: Any
    beta: Any
    eps_int: int
    mult: Any
    shift: Any
    out_bits: int = 8


class Linear(NamedTuple):
    """``linear``'s parameters: (N, K) weights, (N,) bias, multipliers and shifts per tensor or channel."""

    w: Any
    bias: Any
    mult: Any
    shift: Any
    out_bits: int = 8


class Heads(NamedTuple):
    """``attention_heads``'s parameters, with the number of heads and their width: q, k, v and the
    context are ``heads * head_dim`` wide (the block's width D in most models, not in all)."""

    heads: int
    head_dim: int
    scores_mult: Any
    scores_shift: Any
    scores_bits: int
    exp_table: Any
    probs_bits: int
    ctx_mult: Any
    ctx_shift: Any
    ctx_bits: int


class Add(NamedTuple):
    """``residual_add``'s parameters (a: the residual stream, b: the branch)."""

    mult_a: Any
    mult_b: Any
    shift: Any
    out_bits: int = 8


class Lookup(NamedTuple):
    """``gelu``'s table and input width."""

    table: Any
    in_bits: int = 8


class EncoderBlock(NamedTuple):
    """One block's parameters. ``qkv``'s (3 * heads * head_dim, D) rows are q's, k's and v's output
    channels, each heads x head_dim (q's channels ``h*hd .. (h+1)*hd - 1`` are head h's); ``proj``
    takes the (heads * head_dim) context back to D."""

    norm1: Norm
    qkv: Linear
    attention: Heads
    proj: Linear
    add1: Add
    norm2: Norm
    fc1: Linear
    gelu: Lookup
    fc2: Linear
    add2: Add


class Stack(Sequence):
    """A model's blocks (``EncoderBlock``s) as one object that keeps their plans: ``encoder_blocks``
    given a Stack makes each block's plan once for a token shape and backend, not at every call
    (``_plan`` packs vectors and checks every parameter: ~60 us a block). The plans hold the
    addresses of the blocks' arrays and what was made from them: a Stack is for blocks whose arrays
    do not change while it lives (``hwvit.engine.Engine`` makes a new one where one could have)."""

    __slots__ = ("_blocks", "_plans")

    def __init__(self, blocks: Sequence[EncoderBlock]):
        self._blocks = tuple(blocks)
        self._plans: dict = {}

    def __len__(self) -> int:
        return len(self._blocks)

    def __getitem__(self, i):
        return self._blocks[i]

    def __reduce__(self):  # the plans hold addresses of this process's arrays: never copied
        return (Stack, (self._blocks,))

    def plans(self, x: np.ndarray) -> list:
        """``_fused_plan`` of each block for int8 (B, N, D) ``x``: kept per (N, D, backend, kind)."""
        if not _fusable(x):
            return [None] * len(self._blocks)
        name = gemm_backends.backend()
        key = (x.shape[1], x.shape[2], name, gemm_backends.fused_kind(name))
        plans = self._plans.get(key)
        if plans is None:
            plans = self._plans[key] = [_fused_plan(x, block) for block in self._blocks]
        return plans


def encoder_block(x: Any, block: EncoderBlock, narrow: bool = False) -> np.ndarray:
    """``composed(x, block)`` for (B, N, D) signed 8-bit tokens ``x``, in one compiled call where it can
    (see the module); the same integers either way. ``narrow`` as in ``linear``."""
    x = narrow_operand(as_int_operand(x, "x", -128, 127), 8)  # int8 as it is; anything else checked
    fused = _fused_plan(x, block)
    return composed(x, block, narrow) if fused is None else _run(x, [fused], narrow)


def encoder_blocks(
    x: Any, blocks: Sequence[EncoderBlock], narrow: bool = False, tokens: int | None = None
) -> np.ndarray:
    """``encoder_block`` of each block in turn (a model's stack of blocks). Every block's plan is
    looked up first, in one run of Python, and then the compiled calls follow one another with next to
    no Python between them (the interpreter's state is not evicted by a block's GEMMs between the
    lookups); a block that cannot run as one call makes its ten. The same integers either way.

    ``tokens``: only the first ``tokens`` tokens of each image are wanted from the last block (a
    readout of the class token wants 1): the result is (B, tokens, D), the full result's
    ``[:, :tokens]``. In one compiled call the last block works out only those rows past its
    attention (every token still gives its key and value); the ten calls work out every row and
    drop the rest."""
    x = narrow_operand(as_int_operand(x, "x", -128, 127), 8)
    n = x.shape[1] if x.ndim == 3 else None
    is_int = isinstance(tokens, (int, np.integer)) and not isinstance(tokens, bool)
    if tokens is not None and (n is None or not is_int or not 1 <= tokens <= n):
        raise ValueError(f"encoder_blocks: tokens must be 1..N (N = {n} tokens an image), got {tokens!r}")
    plans = blocks.plans(x) if isinstance(blocks, Stack) else [_fused_plan(x, block) for block in blocks]
    if not blocks or any(p is None for p in plans):
        for block in blocks:
            x = encoder_block(x, block, narrow=True)
        x = x if tokens is None else x[:, :tokens]
        return x if narrow else x.astype(np.int64)
    return _run(x, plans, narrow, tokens)


def _run(x: np.ndarray, plans: list, narrow: bool, tokens: int | None = None) -> np.ndarray:
    """``compiled.encoder_block`` of each plan in turn on int8 (B, N, D) ``x``; the last one gives the
    first ``tokens`` tokens of each image (None: all)."""
    import numba

    from hwvit.engine import compiled

    b, n, d = x.shape
    rows = np.ascontiguousarray(x).reshape(b * n, d)
    threads = numba.get_num_threads()  # once for the stack
    for i, plan in enumerate(plans):
        rows, ve, _ = compiled.encoder_block(rows, b, plan, tokens if i == len(plans) - 1 else None, threads)
        if ve >= VE_LIMIT:
            raise OverflowError(f"layernorm: (V << 22) + eps_int = {ve} >= 2^62")
    y = rows.reshape(b, -1, d)
    return y if narrow else y.astype(np.int64)


def composed(x: Any, block: EncoderBlock, narrow: bool = False) -> np.ndarray:
    """The block as its ten kernel calls, each checking its inputs: the reference of the one-call path."""
    x = as_int_operand(x, "x")
    if x.ndim != 3:
        raise ValueError(f"encoder_block: x must be (B, N, D) tokens, got shape {x.shape}")
    b, n, d = x.shape
    p, att = block, block.attention
    heads, hd = att.heads, att.head_dim
    if heads < 1 or hd < 1:
        raise ValueError(f"encoder_block: {heads} heads of {hd} channels")
    inner = heads * hd
    h = layernorm(x, *p.norm1, narrow=True)
    y = linear(h, *p.qkv, narrow=True)
    if y.shape[-1] != 3 * inner:
        raise ValueError(f"encoder_block: the qkv projection gives {y.shape[-1]} channels, not 3 x {heads} x {hd}")
    y = y.reshape(b, n, 3, heads, hd)
    q, k, v = (y[:, :, i].transpose(0, 2, 1, 3).reshape(b * heads, n, hd) for i in range(3))
    scores, probs = (att.scores_mult, att.scores_shift, att.scores_bits), (att.exp_table, att.probs_bits)
    ctx = attention_heads(q, k, v, *scores, *probs, att.ctx_mult, att.ctx_shift, att.ctx_bits, narrow=True)
    ctx = ctx.reshape(b, heads, n, hd).transpose(0, 2, 1, 3).reshape(b, n, inner)
    x1 = residual_add(x, linear(ctx, *p.proj, narrow=True), *p.add1, narrow=True)
    h = layernorm(x1, *p.norm2, narrow=True)
    g = gelu(linear(h, *p.fc1, narrow=True), *p.gelu, narrow=True)
    return residual_add(x1, linear(g, *p.fc2, narrow=True), *p.add2, narrow=narrow)


def _fused_plan(x: np.ndarray, block: EncoderBlock) -> tuple | None:
    """What ``compiled.encoder_block`` takes for this block (its ``BlockPlan`` and the arrays behind its
    addresses), or None where the one call does not run: an int8 (B, N, D) x,
    8-bit widths throughout, a GELU table of int8 values, a backend that requantizes in its tile,
    shapes that chain, K within one call."""
    if not _fusable(x):
        return None
    name = gemm_backends.backend()
    kind = gemm_backends.fused_kind(name)
    return None if kind is None else _plan(x, block, name, kind)


def _fusable(x: np.ndarray) -> bool:
    """Whether tokens ``x`` can go to the one call: int8 (B, N, D), none of them empty."""
    return x.dtype == np.int8 and x.ndim == 3 and 0 not in x.shape


def _plan(x: np.ndarray, block: EncoderBlock, name: str, kind: int) -> tuple | None:
    from hwvit.engine import compiled
    from hwvit.ops import native

    n, d = x.shape[1:]
    att = block.attention
    widths = (
        *(p.out_bits for p in (block.norm1, block.norm2, block.qkv, block.proj, block.fc1, block.fc2)),
        *(p.out_bits for p in (block.add1, block.add2)),
        att.scores_bits,
        att.probs_bits,
        att.ctx_bits,
        block.gelu.in_bits,
    )
    if any(not isinstance(w, (int, np.integer)) or w != 8 for w in widths) or not 1 <= d <= MAX_C:
        return None
    if not all(isinstance(v, (int, np.integer)) and v >= 1 for v in (att.heads, att.head_dim)):
        return None
    hd = att.head_dim
    inner = att.heads * hd
    lins = []
    for lin, rows in ((block.qkv, 3 * inner), (block.proj, d), (block.fc1, None), (block.fc2, d)):
        w = lin.w
        if not isinstance(w, np.ndarray) or w.ndim != 2 or (rows is not None and w.shape[0] != rows):
            return None
        _, _, _, _, _, lo, hi, plan = layer_params(w, lin.bias, lin.mult, lin.shift, lin.out_bits, 0, name, kind)
        if plan is None:  # K past one call
            return None
        _, n_out, k, _, _, addresses = plan
        lins.append((compiled.LinearPlan(n_out, k, *addresses, lo, hi), plan))
    (qkv, _), (proj, _), (fc1, _), (fc2, _) = lins
    if qkv.k != d or proj.k != inner or fc1.k != d or fc2.k != fc1.n:
        return None
    if max(n, hd) > native.k_limit(kind):
        return None
    _, _, table8 = lookup_table(block.gelu.table, 8, True)
    if table8 is None:  # values past int8
        return None
    norms = tuple(NormRows(*norm_params(*p[:5], p.out_bits, d), LN_T, LN_K, LN_F) for p in (block.norm1, block.norm2))
    adds = tuple(
        AddRows(*add_params(a.mult_a, a.mult_b, a.shift, (n, d)), *INT8.range) for a in (block.add1, block.add2)
    )
    scores = requant_vectors(att.scores_mult, att.scores_shift, 8, n)
    context = requant_vectors(att.ctx_mult, att.ctx_shift, 8, hd)
    zero = np.zeros(max(n, hd), np.int64)
    attention = compiled.attention_plan(att.heads, hd, zero, scores, context)
    table = table_of(att.exp_table, 8)
    keep = (lins, scores, context, zero, table8)  # the arrays whose addresses the plan holds
    linears = tuple(lin for lin, _ in lins)
    return compiled.BlockPlan(kind, norms, linears, adds, attention, table8.ctypes.data, table), keep


__all__ = [
    "Add",
    "EncoderBlock",
    "Heads",
    "Linear",
    "Lookup",
    "Norm",
    "Stack",
    "composed",
    "encoder_block",
    "encoder_blocks",
]
