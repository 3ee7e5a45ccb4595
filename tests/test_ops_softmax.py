"""softmax: fast kernel vs plain-Python reference, and accuracy vs float64 softmax of the same inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hwvit import ops
from hwvit.ops.reference import softmax_ref
from hwvit.quant import exp_shift_mult, exp_table


def _row(rng, kind: int, n: int, s_in: float) -> np.ndarray:
    """Rows of one of six kinds: the random ones and the hard ones of the accuracy criteria."""
    if kind == 0:  # uniform over the whole int8 range
        return rng.integers(-128, 128, n)
    if kind == 1:  # attention-like: real logits N(0, sigma) quantized at s_in
        return np.clip(np.round(rng.normal(0, rng.uniform(0.5, 3), n) / s_in), -128, 127).astype(np.int64)
    if kind == 2:  # all equal
        return np.full(n, rng.integers(-128, 128))
    if kind == 3:  # one huge, the rest far below
        x = np.full(n, rng.choice([-128, -100, -60]))
        x[rng.integers(n)] = 127
        return x
    if kind == 4:  # all very negative, tight spread
        return rng.integers(-128, -120, n)
    return np.full(n, -128)  # all -128


def test_softmax_matches_reference():
    rng = np.random.default_rng(20)
    rows = 0
    for trial in range(10_400):
        n = int(rng.integers(1, 24))
        s_in = float(rng.uniform(0.01, 0.5))
        kind = trial % 6
        out_bits = int(rng.choice([8, 8, 4, 12, 16, 1]))
        x = _row(rng, kind, n, s_in)
        if trial % 10 == 7:  # shift-and-add exp
            mult = exp_shift_mult(s_in)
            got = ops.softmax(x, None, out_bits=out_bits, exp="shift", exp_mult=mult)
            want = softmax_ref(x.tolist(), None, out_bits, exp="shift", exp_mult=mult)
        else:
            table = exp_table(s_in, int(rng.choice([256, 256, 64, 1])))  # short tables drop the tail
            got = ops.softmax(x, table, out_bits=out_bits)
            want = softmax_ref(x.tolist(), table.tolist(), out_bits)
        assert got.tolist() == want, (x.tolist(), s_in, out_bits)
        rows += 1
    assert rows >= 10_000


def test_softmax_batched_rows_and_long_rows_match_reference():
    rng = np.random.default_rng(21)
    table = exp_table(0.04)
    x = rng.integers(-128, 128, (3, 4, 197))
    got = ops.softmax(x, table)
    assert got.shape == x.shape
    for i in range(3):
        for j in range(4):
            assert got[i, j].tolist() == softmax_ref(x[i, j].tolist(), table.tolist())
    long_row = rng.integers(-128, 128, 4096)  # the longest row: S up to 2^35
    assert ops.softmax(long_row, table).tolist() == softmax_ref(long_row.tolist(), table.tolist())
    assert ops.softmax(np.full(4096, 5), table).tolist() == softmax_ref([5] * 4096, table.tolist())
    # 16-bit inputs with a 2^16-entry table.
    x16 = rng.integers(-(2**15), 2**15, (2, 50))
    t16 = exp_table(0.001, 1 << 16)
    got16 = ops.softmax(x16, t16, in_bits=16)
    assert [got16[i].tolist() for i in range(2)] == [softmax_ref(r, t16.tolist()) for r in x16.tolist()]


@pytest.mark.parametrize("rows", [15, 16, 17, 37, 100])
def test_softmax_many_rows_each_match_reference(rows):
    """Rows are computed in chunks of 16 sharing one exp buffer: counts below, at and past a chunk,
    every row kind in one batch, a short table (d past its end reads 0) and the shift-and-add exp."""
    rng = np.random.default_rng(23 + rows)
    s_in = 0.07
    x = np.stack([_row(rng, r % 6, 29, s_in) for r in range(rows)])
    table = exp_table(s_in, 64)
    got = ops.softmax(x, table)
    assert [r.tolist() for r in got] == [softmax_ref(r, table.tolist()) for r in x.tolist()]
    mult = exp_shift_mult(s_in)
    got = ops.softmax(x, None, exp="shift", exp_mult=mult)
    assert [r.tolist() for r in got] == [softmax_ref(r, None, exp="shift", exp_mult=mult) for r in x.tolist()]


def test_softmax_accuracy_vs_float():
    """Max error <= 1 LSB vs float64 softmax; every row sums to exactly Q (so the mean bias is 0)."""
    rng = np.random.default_rng(22)
    worst = 0.0
    sums = []
    rows = 0
    # Group rows by (s_in, length) so the fast path runs vectorized over many rows at once.
    for group in range(1_000):
        s_in = float(rng.uniform(0.01, 0.5))
        n = int(rng.integers(1, 257))
        table = exp_table(s_in)
        x = np.stack([_row(rng, (group + r) % 6, n, s_in) for r in range(12)])
        p = ops.softmax(x, table)
        z = (x - x.max(axis=-1, keepdims=True)) * s_in
        f = np.exp(z)
        f = 255 * f / f.sum(axis=-1, keepdims=True)
        worst = max(worst, float(np.abs(p - f).max()))
        sums.extend((p.sum(axis=-1) - 255).tolist())
        rows += x.shape[0]
    assert rows >= 10_000
    assert worst <= 1.0, worst
    mean_bias = float(np.mean(sums))  # (row sum / Q - 1) in LSB
    assert abs(mean_bias) <= 0.5
    assert max(abs(v) for v in sums) == 0  # the contract: P_(N-1) = Q exactly


def test_softmax_simple_values():
    table = exp_table(0.1)
    assert ops.softmax(np.array([7]), table).tolist() == [255]
    assert ops.softmax(np.array([3, 3, 3]), table).tolist() == [85, 85, 85]
    assert ops.softmax(np.array([3, 3]), table, out_bits=1).tolist() == [1, 0]  # P_0 = round(0.5) = 1
    # far tail beyond a short table gives exactly zero
    assert ops.softmax(np.array([100, -100]), exp_table(0.1, 64)).tolist() == [255, 0]


def test_exp_table_values():
    for s_in in (0.01, 0.05, 0.5):
        t = exp_table(s_in)
        assert t.shape == (256,) and t.dtype == np.int64
        assert t[0] == 2**23
        assert np.all(np.diff(t) <= 0) and t.min() >= 0
        for d in range(256):
            assert t[d] == math.floor(2**23 * math.exp(-d * s_in) + 0.5)
    assert exp_table(0.05, 16).shape == (16,)
    assert exp_shift_mult(0.05) == round(0.05 * math.log2(math.e) * 2**16)


@pytest.mark.parametrize(
    "kwargs, error",
    [
        (dict(x=np.array([1.5]), exp_table=exp_table(0.1)), ValueError),  # float input
        (dict(x=np.array([128]), exp_table=exp_table(0.1)), ValueError),  # beyond int8
        (dict(x=np.zeros((2, 0), np.int64), exp_table=exp_table(0.1)), ValueError),  # empty row
        (dict(x=np.zeros(4097, np.int64), exp_table=exp_table(0.1)), ValueError),  # row too long
        (dict(x=np.array([1]), exp_table=np.array([2**15, 1])), ValueError),  # T[0] != 2^23
        (dict(x=np.array([1]), exp_table=exp_table(0.1, 512)), ValueError),  # L > 2^in_bits
        (dict(x=np.array([1]), exp_table=np.array([2**23, 2**24])), ValueError),  # entry beyond 24 bits
        (dict(x=np.array([1]), exp_table=None, exp="shift"), ValueError),  # no exp_mult
        (dict(x=np.array([1]), exp_table=exp_table(0.1), exp="poly"), ValueError),
        (dict(x=np.array([1]), exp_table=exp_table(0.1), out_bits=17), ValueError),
    ],
)
def test_softmax_rejects_bad_input(kwargs, error):
    with pytest.raises(error):
        ops.softmax(**kwargs)
