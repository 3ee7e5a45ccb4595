"""Attention's core for every head at once: Q.K^T requantized, softmax, P.V requantized.

``attention_heads`` is the composition of three kernels, ``linear`` -> ``softmax`` -> ``linear``,
per entry (image x head), with their integers: it has no Verilog twin of its own (the RTL runs the
three blocks). Where the GEMM backend requantizes in its tile (``int8_avx2``, ``int16_avx2``,
``int8_vnni``) and every width is 8 bits, one compiled call runs each entry as one job, the scores
and probabilities of a head staying in its thread's cache (``hwvit.engine.compiled.attention_heads``);
anywhere else it makes the three calls.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hwvit.formats import OUT_BITS
from hwvit.ops import gemm_backends
from hwvit.ops.checks import as_int_operand, check_bits
from hwvit.ops.gemm import linear, requant_vectors
from hwvit.ops.softmax import softmax, table_of


def attention_heads(
    q: Any,
    k: Any,
    v: Any,
    scores_mult: Any,
    scores_shift: Any,
    scores_bits: int,
    exp_table: Any,
    probs_bits: int,
    ctx_mult: Any,
    ctx_shift: Any,
    ctx_bits: int,
    narrow: bool = False,
) -> np.ndarray:
    """Per entry e of (E, N, hd) ``q``, ``k``, ``v`` (signed 8-bit): the (E, N, hd) context
    ``linear(P, v[e]^T, None, ctx_mult, ctx_shift, ctx_bits, a_signed=False)`` of the probabilities
    ``P = softmax(S, exp_table, probs_bits, in_bits=scores_bits)`` of the scores
    ``S = linear(q[e], k[e], None, scores_mult, scores_shift, scores_bits)``. The same integers as
    those three calls, whichever way it runs; ``narrow`` as in ``linear``."""
    fused = _fused_inputs(q, k, v, scores_bits, probs_bits, ctx_bits)
    if fused is not None:
        from hwvit.engine import compiled

        kind, q8, k8, v8 = fused
        n, hd = q8.shape[1:]
        scores = requant_vectors(scores_mult, scores_shift, scores_bits, n)
        context = requant_vectors(ctx_mult, ctx_shift, ctx_bits, hd)
        table = table_of(exp_table, scores_bits)
        y = compiled.attention_heads(q8, k8, v8, scores, context, table, kind)
        return y if narrow else y.astype(np.int64)
    s = linear(q, k, None, scores_mult, scores_shift, scores_bits, narrow=True)
    p = softmax(s, exp_table, out_bits=probs_bits, in_bits=scores_bits, narrow=True)
    vt = np.swapaxes(as_int_operand(v, "v"), 1, 2)  # V^T: P.V's weight rows (a torch v as numpy)
    return linear(p, vt, None, ctx_mult, ctx_shift, ctx_bits, a_signed=False, narrow=narrow)


def _fused_inputs(q: Any, k: Any, v: Any, scores_bits: int, probs_bits: int, ctx_bits: int) -> tuple | None:
    """(kernel kind, q, k, v) where the one-call path runs: int8 numpy q, k, v of one (E, N, hd) shape,
    8-bit scores, probabilities and context, and a backend that requantizes in its tile; else None."""
    arrays = (q, k, v)
    if not all(isinstance(x, np.ndarray) and x.dtype == np.int8 and x.ndim == 3 for x in arrays):
        return None
    if q.shape != k.shape or q.shape != v.shape or 0 in q.shape:
        return None
    widths = (check_bits(scores_bits, "scores_bits", *OUT_BITS), check_bits(probs_bits, "probs_bits", 1, 16))
    if widths != (8, 8) or check_bits(ctx_bits, "ctx_bits", *OUT_BITS) != 8:
        return None
    kind = gemm_backends.fused_kind(gemm_backends.backend())  # such a backend takes uint8 P as it is
    if kind is None:
        return None
    from hwvit.ops import native

    if max(q.shape[1], q.shape[2]) > native.k_limit(kind):
        return None
    return kind, q, k, v
