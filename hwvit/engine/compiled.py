"""The engine's compiled compositions: attention's heads and a whole encoder block, each one numba call
over hwvit's C kernels (``hwvit.ops.native``: the same packing, tiles and requantization as
``ops.linear``, the same softmax and LayerNorm rows as ``hwvit.ops._jit``), with no Python between
the steps.

What crosses from Python into the compiled code is named: ``AttentionPlan`` (attention's parameters),
``HeadsOperands`` (q, k, v and the context: address and strides each), ``HeadsRun``, ``Buffers``, ``LinearPlan`` and
``BlockPlan`` (a block's plan, made once by ``hwvit.engine.blocks``), with ``hwvit.ops.records``'
for the kernels they call. No compiled function takes more than eight parameters
(tests/test_native_records.py checks it).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numba
import numpy as np
from numba import njit, prange

from hwvit.ops._jit import layernorm_rows, residual_layernorm_rows, residual_rows, softmax_row
from hwvit.ops.native import (
    _LINE,
    _NR,
    _check_k,
    _hw_copy_rows,
    _hw_linear,
    _hw_next_job,
    _hw_now_ns,
    _hw_pack_a_rows,
    _hw_pack_w_strided,
    _hw_packed_a_size,
    _hw_reset_jobs,
    _hw_rows_padded,
    _line_up,
    _linear_parallel,
    _load,
    _sizes_of,
    one_thread,
)
from hwvit.ops.records import Dims, Packing, Scratch, SoftmaxRows, Strided


class AttentionPlan(NamedTuple):
    """Attention's parameters as the compiled code takes them: the heads and their width, Q.K^T's and
    P.V's (N,) / (hd,) int64 multipliers and shifts by address with their output range, the zero bias
    they share (by address), and the softmax's constants (``hwvit.ops.softmax``)."""

    heads: int
    head_dim: int
    zero: int
    scores_mult: int
    scores_shift: int
    scores_lo: int
    scores_hi: int
    ctx_mult: int
    ctx_shift: int
    ctx_lo: int
    ctx_hi: int
    qmax: int  # 2^out_bits - 1 of the probabilities
    recip_shift: int
    exp_frac: int
    shift_frac: int


class HeadsOperand(NamedTuple):
    """One of q, k, v or the context as the heads read or write it: its address and its strides in
    bytes from one image, one head and one row to the next, and along the product's K (unused for
    the context)."""

    addr: int
    image: int
    head: int
    row: int
    k: int


class HeadsOperands(NamedTuple):
    """q, k, v and the context y of an attention call (``HeadsOperand`` each)."""

    q: HeadsOperand
    k: HeadsOperand
    v: HeadsOperand
    y: HeadsOperand


class HeadsRun(NamedTuple):
    """The entries (image x head) of one attention call, their tokens N, the query rows NQ <= N that
    attend, and the threads."""

    entries: int
    n: int
    nq: int
    threads: int


class Buffers(NamedTuple):
    """Each worker's scores, probabilities, exp buffer and context, and the scratch for the job counter
    and every worker's packed operands (``_attention_buffers``)."""

    scores: Any
    probs: Any
    ebuf: Any
    ctx: Any
    scratch: Any


class LinearPlan(NamedTuple):
    """A linear layer as ``_linear_into`` takes it: N, K, the packed W, bias, multipliers and shifts
    by address, and the output range."""

    n: int
    k: int
    packed_w: int
    bias: int
    mult: int
    shift: int
    lo: int
    hi: int


class BlockPlan(NamedTuple):
    """A pre-norm encoder block as ``_encoder_block`` takes it: the kernel kind, its two LayerNorms
    (``NormRows``), its four linears (qkv, proj, fc1, fc2: ``LinearPlan``), its two residual adds
    (``AddRows``), its attention, the GELU table's address and the softmax's exp table with its
    trailing 0."""

    kind: int
    norms: tuple
    lins: tuple
    adds: tuple
    attention: AttentionPlan
    gelu_at: int
    table: Any


def attention_plan(heads: int, head_dim: int, zero: np.ndarray, scores: tuple, context: tuple) -> AttentionPlan:
    """``AttentionPlan`` of ``heads`` heads of ``head_dim`` with 8-bit probabilities: ``scores`` and
    ``context`` as ``hwvit.ops.gemm.requant_vectors`` gives them ((N,) / (hd,) multipliers and
    shifts, lo, hi), ``zero`` a zero bias as long as the longer. The plan holds addresses: the caller
    keeps the arrays alive while it is used."""
    from hwvit.ops.softmax import EXP_FRAC, RECIP_SHIFT, SHIFT_FRAC

    (s_mult, s_shift, s_lo, s_hi), (c_mult, c_shift, c_lo, c_hi) = scores, context
    return AttentionPlan(
        heads, head_dim, zero.ctypes.data, s_mult.ctypes.data, s_shift.ctypes.data, s_lo, s_hi,
        c_mult.ctypes.data, c_shift.ctypes.data, c_lo, c_hi, (1 << 8) - 1, RECIP_SHIFT, EXP_FRAC, SHIFT_FRAC,
    )  # fmt: skip


@njit(parallel=True, cache=True)
def _attention_parallel(kind, operands, plan, run, buffers, table):
    """``attention_heads``: per entry e, one job of a worker (one a thread, entries from a counter):
    Q.K^T requantized to int8 scores (pack q[e] and k[e], hw_linear), the softmax of each score row
    to uint8 probabilities (``_jit.softmax_row``), P.V^T requantized to the int8 context (pack the
    probabilities raw, v[e] as W with its rows along hd, hw_linear). The worker's scores, probabilities,
    exp buffer and context are its rows of ``buffers``; its packed operands a slot of its own in the
    scratch, after the counter's line.

    Entry e is head ``e % heads`` of image ``e // heads``; ``operands``: q, k, v and the context y as
    ``HeadsOperand``s (v's row stride along hd, its K stride along the tokens): the heads of an
    (E, N, hd) array (heads = E, image stride 0) or the column blocks of a (B, N, H*hd) activation
    alike. The first ``run.nq`` query rows of each entry attend to all N keys and values (each query
    row's context depends on its own row of Q alone): an (NQ, hd) context."""
    # the records' fields as scalars: a record that is not an argument cannot enter numba's parallel loop
    q, k, v, y = operands.q, operands.k, operands.v, operands.y
    q_addr, q_image, q_head, q_row, q_k = q.addr, q.image, q.head, q.row, q.k
    k_addr, k_image, k_head, k_row, k_k = k.addr, k.image, k.head, k.row, k.k
    v_addr, v_image, v_head, v_row, v_k = v.addr, v.image, v.head, v.row, v.k
    y_addr, y_image, y_head, y_row = y.addr, y.image, y.head, y.row
    n, hd, nq, entries, heads = run.n, plan.head_dim, run.nq, run.entries, plan.heads
    (sa1, sw1, sa2, sw2), _, _ = _attention_slot(kind, n, hd)
    slot = sa1 + sw1 + sa2 + sw2
    pad = _hw_rows_padded(kind, nq)  # the packed rows of Q and of P (the slot holds N's)
    workers = min(run.threads, entries)
    counter = _line_up(buffers.scratch.ctypes.data)
    _hw_reset_jobs(counter)
    s_panels, c_panels = -(-n // _NR), -(-hd // _NR)
    for t in prange(workers):
        pa1 = counter + _LINE + 4 * t * slot
        pw1 = pa1 + 4 * sa1
        pa2 = pw1 + 4 * sw1
        pw2 = pa2 + 4 * sa2
        sc, pr, e_buf = buffers.scores[t], buffers.probs[t], buffers.ebuf[t]
        own = buffers.ctx[t].ctypes.data
        softmax = SoftmaxRows(table, plan.qmax, plan.recip_shift, False, 0, plan.exp_frac, plan.shift_frac)
        e = _hw_next_job(counter)
        while e < entries:
            img, head = e // heads, e % heads
            q_e, k_e = q_addr + img * q_image + head * q_head, k_addr + img * k_image + head * k_head
            _hw_pack_a_rows(kind, q_e, nq, hd, q_row, q_k, 0, pad, pa1, 0x80)
            _hw_pack_w_strided(kind, k_e, n, hd, k_row, k_k, pw1)
            s_at = sc.ctypes.data
            _hw_linear(
                kind, pa1, pw1, nq, hd, n, 0, 0, nq, 0, s_panels, plan.zero, plan.scores_mult, plan.scores_shift,
                plan.scores_lo, plan.scores_hi, 1, s_at, 0,
            )  # fmt: skip
            for i in range(nq):
                softmax_row(sc, i, softmax, e_buf, pr)
            _hw_pack_a_rows(kind, pr.ctypes.data, nq, n, n, 1, 0, pad, pa2, 0)
            _hw_pack_w_strided(kind, v_addr + img * v_image + head * v_head, hd, n, v_row, v_k, pw2)
            y_e = y_addr + img * y_image + head * y_head
            if y_row == hd:  # the entry's (NQ, hd) context is contiguous where it goes: written there
                _hw_linear(
                    kind, pa2, pw2, nq, n, hd, 0, 0, nq, 0, c_panels, plan.zero, plan.ctx_mult, plan.ctx_shift,
                    plan.ctx_lo, plan.ctx_hi, 1, y_e, 1,
                )  # fmt: skip
            else:  # into the worker's own, then row by row to its place
                _hw_linear(
                    kind, pa2, pw2, nq, n, hd, 0, 0, nq, 0, c_panels, plan.zero, plan.ctx_mult, plan.ctx_shift,
                    plan.ctx_lo, plan.ctx_hi, 1, own, 1,
                )  # fmt: skip
                _hw_copy_rows(own, nq, hd, y_e, y_row)
            e = _hw_next_job(counter)


@njit(cache=True)
def _lines(words):
    """``words`` int32 words rounded up to whole cache lines."""
    return -(-words // (_LINE // 4)) * (_LINE // 4)


@njit(cache=True)
def _attention_slot(kind, n, hd):
    """(int32 words of a worker's packed Q, K, P and V^T, each a whole number of cache lines; the
    padded rows of Q and of P) for ``_attention_parallel``."""
    sa1, sw1, pad1 = _sizes_of(kind, n, hd, n)
    sa2, sw2, pad2 = _sizes_of(kind, n, n, hd)
    return (_lines(sa1), _lines(sw1), _lines(sa2), _lines(sw2)), pad1, pad2


@njit(cache=True)
def _attention_buffers(kind, workers, n, hd):
    """``Buffers`` for ``_attention_parallel``. Made by the caller and passed in as arrays: an array
    that compiled code only takes the address of is freed after that (numba frees a variable after
    its last use), before the C code it was handed to has run."""
    words, _, _ = _attention_slot(kind, n, hd)
    slot = words[0] + words[1] + words[2] + words[3]
    return Buffers(
        np.empty((workers, n, n), np.int8),
        np.empty((workers, n, n), np.uint8),
        np.empty((workers, n), np.int64),
        np.empty((workers, n, hd), np.int8),
        np.empty(workers * slot + 2 * _LINE // 4, np.int32),
    )


@njit(cache=True)
def _keep_alive(array):
    """A use of ``array`` after the C calls that had only its address: numba frees an array after its
    variable's last use, and taking ``.ctypes.data`` is a use that ends there."""
    return array.size


def attention_heads(q8: np.ndarray, k8: np.ndarray, v8: np.ndarray, scores: tuple, context: tuple, table, kind: int):
    """Per entry e of int8 (E, N, hd) ``q8``, ``k8``, ``v8`` in any layout: the int8 context
    ``requant(softmax(requant(q8[e] @ k8[e]^T)) @ v8[e])`` (E, N, hd), every step on the integers
    of ``linear_packed`` and ``ops.softmax`` (table form, 8-bit probabilities), one compiled call
    whose jobs are the entries. ``scores``, ``context``: ((N,) / (hd,) int64 multipliers, shifts,
    lo, hi) with [lo, hi] within int8; ``table``: the softmax's exp table with its trailing 0
    (``softmax._padded``). Checked by ``hwvit.engine.heads.attention_heads``."""
    _load()
    entries, n, hd = q8.shape
    for k in (hd, n):
        _check_k(k, kind)
    y = np.empty((entries, n, hd), np.int8)
    zero = np.zeros(max(n, hd), np.int64)
    plan = attention_plan(entries, hd, zero, scores, context)  # every entry its own head
    threads = min(numba.get_num_threads(), entries)
    q, k = (HeadsOperand(x.ctypes.data, 0, *x.strides) for x in (q8, k8))
    v = HeadsOperand(v8.ctypes.data, 0, v8.strides[0], v8.strides[2], v8.strides[1])
    out = HeadsOperand(y.ctypes.data, 0, n * hd, hd, 0)
    run = HeadsRun(entries, n, n, threads)
    _attention_parallel(kind, HeadsOperands(q, k, v, out), plan, run, _attention_buffers(kind, threads, n, hd), table)
    return y


@njit(cache=True)
def _linear_into(kind, a, lin, y, scratch, threads, lut):
    """``linear_planned`` of the 2-D int8 ``a`` (contiguous) into the int8 ``y``, in compiled code: ``lin``
    a ``LinearPlan``; ``scratch`` an int32 buffer of at least the packed A's words and four cache
    lines; ``lut``: 0, or a table the outputs are looked up in (``_linear_parallel``). Returns the
    nanoseconds it took."""
    start = _hw_now_ns()
    m = a.shape[0]
    sa, sw, padded = _sizes_of(kind, m, lin.k, lin.n)
    at = Scratch(scratch.ctypes.data, lin.packed_w, lin.bias, lin.mult, lin.shift, y.ctypes.data)
    threads = 1 if one_thread(m, lin.k, lin.n) else threads
    dims = Dims(m, lin.k, lin.n, 0, lin.lo, lin.hi, 1, threads)
    _linear_parallel(
        kind,
        Strided(a.ctypes.data, 0, lin.k, 1),
        Strided(0, 0, 0, 0),
        at,
        dims,
        Packing(0x80, padded, sa, sw, 0, 0, lut),
    )
    return _hw_now_ns() - start


@njit(cache=True)
def _encoder_block(plan, x, images, threads, keep):
    """One pre-norm encoder block (``plan``: a ``BlockPlan``) on the (B*N, D) int8 rows ``x`` of
    ``images`` images, every step one of the kernels the separate calls run, on the same integers,
    with no Python between them: LayerNorm (``layernorm_rows``), the qkv projection (``_linear_into``),
    every head's attention (``_attention_parallel``, reading q, k and v where the projection put them
    and writing each head's context to its columns), the output projection, the residual add and the
    second LayerNorm in one pass (``residual_layernorm_rows``), fc1 with GELU's lookup in each of its
    jobs, fc2 and the second residual add. ``keep``: the tokens of each image that come out (the first
    ``keep`` of its N): every row is LayerNormed and projected to k and v, but only those rows' queries
    attend, and only those rows go on through the projection, the MLP and the adds (each step after
    the attention is row by row), so with ``keep`` < N the output is the full one's rows of those
    tokens. Returns the (B*keep, D) int8 output, the largest Ve of the two norms and the nanoseconds
    spent in the four projections (``hwvit bench`` counts them as GEMM time)."""
    kind, att = plan.kind, plan.attention
    m, d = x.shape
    n = m // images
    mk = images * keep  # the rows that go on after the attention
    qkv, proj, fc1, fc2 = plan.lins
    hd = att.head_dim
    inner = att.heads * hd  # the width of q, k, v and the context (D in ViT-B/16, not in every model)
    words = 0
    for lin in (qkv, proj, fc1, fc2):
        words = max(words, _hw_packed_a_size(kind, m, lin.k))
    scratch = np.empty(words + 4 * _LINE // 4, np.int32)
    h = np.empty((m, d), np.int8)
    ve = layernorm_rows(x, plan.norms[0], h).max()
    qkv_out = np.empty((m, 3 * inner), np.int8)
    spent = _linear_into(kind, h, qkv, qkv_out, scratch, threads, 0)
    ctx = np.empty((mk, inner), np.int8)
    entries = images * att.heads
    workers = min(threads, entries)
    row, at = 3 * inner, qkv_out.ctypes.data  # q, k, v: column blocks 0, 1, 2 of the projection
    q = HeadsOperand(at, n * row, hd, row, 1)
    k = HeadsOperand(at + inner, n * row, hd, row, 1)
    v = HeadsOperand(at + 2 * inner, n * row, hd, 1, row)
    y = HeadsOperand(ctx.ctypes.data, keep * inner, hd, inner, 0)
    run = HeadsRun(entries, n, keep, workers)
    _attention_parallel(kind, HeadsOperands(q, k, v, y), att, run, _attention_buffers(kind, workers, n, hd), plan.table)
    _keep_alive(qkv_out)  # read by address above
    a = np.empty((mk, d), np.int8)
    spent += _linear_into(kind, ctx, proj, a, scratch, threads, 0)
    x1, h2 = np.empty((mk, d), np.int8), np.empty((mk, d), np.int8)
    if keep < n:  # the residual stream of the rows that go on
        xk = np.empty((mk, d), np.int8)
        for i in range(images):  # element by element: a slice assignment compiles a shape check
            for t in range(keep):  # whose error message (string formatting) is slow to compile
                for c in range(d):
                    xk[i * keep + t, c] = x[i * n + t, c]
        ve = max(ve, residual_layernorm_rows(xk, a, plan.adds[0], x1, plan.norms[1], h2))
    else:
        ve = max(ve, residual_layernorm_rows(x, a, plan.adds[0], x1, plan.norms[1], h2))
    f = np.empty((mk, fc1.n), np.int8)
    spent += _linear_into(kind, h2, fc1, f, scratch, threads, plan.gelu_at)  # GELU in place, job by job
    spent += _linear_into(kind, f, fc2, a, scratch, threads, 0)
    out = np.empty((mk, d), np.int8)
    residual_rows(x1, a, plan.adds[1], out)
    return out, ve, spent


def encoder_block(
    x8: np.ndarray, images: int, plan: tuple, keep: int | None = None, threads: int | None = None
) -> tuple[np.ndarray, int, int]:
    """``_encoder_block`` on the C-contiguous (B*N, D) int8 rows ``x8`` of ``images`` images with a
    block's plan (``hwvit.engine.blocks``: its ``BlockPlan`` and the arrays behind its addresses;
    every shape and width checked there): the (B*keep, D) int8 output (``keep``: the first tokens of
    each image, 1..N; None: all N), the largest Ve and the nanoseconds in the projections.
    ``threads``: numba's (asked once for a stack of blocks by the caller: ``numba.get_num_threads``
    takes two locks, which cost more in the forward, where the GEMMs have evicted them from cache,
    than in a warm loop)."""
    _load()
    block, _ = plan  # the arrays behind the addresses stay alive with the plan
    keep = x8.shape[0] // images if keep is None else keep
    threads = numba.get_num_threads() if threads is None else threads
    return _encoder_block(block, x8, images, threads, keep)


__all__ = [
    "AttentionPlan",
    "attention_plan",
    "BlockPlan",
    "Buffers",
    "HeadsOperand",
    "HeadsOperands",
    "HeadsRun",
    "LinearPlan",
    "attention_heads",
    "encoder_block",
]
