"""hwvit.engine.heads.attention_heads: Q.K^T requantized, softmax, P.V requantized for every head in one
call equals the three calls (ops.linear, ops.softmax, ops.linear) on every kernel kind, layout, tail
and extreme (the engine's use of it: tests/test_engine.py)."""

from __future__ import annotations

import numpy as np
import pytest

from hwvit import ops
from hwvit.engine import heads
from hwvit.ops import gemm_backends as gb
from hwvit.ops.gemm import requant_vectors
from hwvit.ops.softmax import EXP_ONE

# (entries, tokens, head dim): one of each, tails off the 24-column panel and the 4-byte quad, ViT-B/16's
SHAPES = [(1, 1, 1), (3, 5, 7), (2, 33, 65), (4, 49, 24), (12, 197, 64)]


def _heads(rng, e, n, hd):
    """q, k, v as the forward hands them: per-head views of one (N, 3, E, hd) projection output."""
    y = rng.integers(-128, 128, (n, 3, e, hd)).astype(np.int8)
    return tuple(y[:, i].transpose(1, 0, 2) for i in range(3))


def _table(rng, entries=256):
    t = np.sort(rng.integers(0, EXP_ONE, entries))[::-1].copy()
    t[0] = EXP_ONE
    return t


def _params(rng, n, hd, per_channel):
    if per_channel:
        return (rng.integers(1 << 28, 1 << 31, n), rng.integers(34, 40, n), rng.integers(1 << 28, 1 << 31, hd), 37)
    return (1 << 30, 38, (1 << 30) + 12345, 37)


def _three_calls(q, k, v, sm, ss, sb, table, pb, cm, cs, cb):
    """The composition itself, on the exact int64 backend."""
    with gb.using("int64"):
        s = ops.linear(q, k, None, sm, ss, sb, narrow=True)
        p = ops.softmax(s, table, out_bits=pb, in_bits=sb, narrow=True)
        return ops.linear(p, v.transpose(0, 2, 1), None, cm, cs, cb, a_signed=False, narrow=True)


@pytest.mark.parametrize("per_channel", [False, True])
def test_one_call_equals_the_three_on_every_kernel(kind, per_channel):
    from hwvit.engine import compiled
    from hwvit.ops.softmax import table_of

    rng = np.random.default_rng(40)
    for e, n, hd in SHAPES:
        q, k, v = _heads(rng, e, n, hd)
        if n > 1:  # the extremes: a row of -128 against 127 and the reverse, in one head
            q[0, 0], k[0, :], v[0, :, 0] = -128, 127, -128
        table = _table(rng)
        sm, ss, cm, cs = _params(rng, n, hd, per_channel)
        want = _three_calls(q, k, v, sm, ss, 8, table, 8, cm, cs, 8)
        scores, context = requant_vectors(sm, ss, 8, n), requant_vectors(cm, cs, 8, hd)
        got = compiled.attention_heads(q, k, v, scores, context, table_of(table, 8), kind)
        assert got.dtype == np.int8 and np.array_equal(got, want), (e, n, hd)


@pytest.mark.parametrize("name", ["int8_avx2", "int16_avx2", "int8_vnni", "float64"])
def test_the_op_on_each_backend(name, vnni_here, monkeypatch, counted):
    """The fused backends take the one call (counted), the others the three; the integers are the same."""
    from hwvit.engine import compiled

    calls = counted(compiled, "attention_heads")
    monkeypatch.setenv(gb.ENV, name)
    rng = np.random.default_rng(41)
    q, k, v = _heads(rng, 6, 50, 32)
    table = _table(rng, 100)  # a short table: d >= 100 reads 0
    args = (q, k, v, 1 << 30, 37, 8, table, 8, 1 << 29, 36, 8)
    got = heads.attention_heads(*args)
    assert got.dtype == np.int64 and np.array_equal(got, _three_calls(*args))
    assert len(calls) == (0 if name == "float64" else 1)


def test_other_widths_and_operands_take_the_three_calls(vnni_here, monkeypatch):
    """Scores or context wider than 8 bits, 7-bit probabilities, an int16 operand: the three calls, with
    the same integers; bad operands are refused as the three calls refuse them."""
    monkeypatch.setenv(gb.ENV, "int8_vnni")
    rng = np.random.default_rng(42)
    q, k, v = _heads(rng, 4, 21, 16)
    table = _table(rng, 512)
    for sb, pb, cb in [(9, 8, 8), (8, 7, 8), (8, 8, 10)]:
        args = (q, k, v, 1 << 30, 36, sb, table[: 1 << sb], pb, 1 << 30, 37, cb)
        assert np.array_equal(heads.attention_heads(*args), _three_calls(*args)), (sb, pb, cb)
    wide = q.astype(np.int16)
    args = (wide, k, v, 1 << 30, 37, 8, table[:256], 8, 1 << 30, 37, 8)
    assert np.array_equal(heads.attention_heads(*args), _three_calls(*args))
    wide[0, 0, 0] = 200  # past int8: refused by the first linear
    with pytest.raises(ValueError, match="a: values must lie in"):
        heads.attention_heads(wide, k, v, 1 << 30, 37, 8, table[:256], 8, 1 << 30, 37, 8)
    bad = table[:256].copy()
    bad[0] = 5  # T[0] must be 2^23
    with pytest.raises(ValueError, match="T\\[0\\] must be"):
        heads.attention_heads(q, k, v, 1 << 30, 37, 8, bad, 8, 1 << 30, 37, 8)


def test_one_worker_runs_every_entry(vnni_here):
    """On one numba thread the one worker takes every entry from the counter in turn, reusing its
    buffers: the same integers as the three calls."""
    import numba

    from hwvit.engine import compiled
    from hwvit.ops.softmax import table_of

    rng = np.random.default_rng(43)
    q, k, v = _heads(rng, 5, 30, 20)
    table = _table(rng)
    want = _three_calls(q, k, v, 1 << 30, 37, 8, table, 8, 1 << 30, 36, 8)
    scores, context = requant_vectors(1 << 30, 37, 8, 30), requant_vectors(1 << 30, 36, 8, 20)
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        got = compiled.attention_heads(q, k, v, scores, context, table_of(table, 8), vnni_here)
    finally:
        numba.set_num_threads(threads)
    assert np.array_equal(got, want)
