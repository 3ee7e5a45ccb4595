"""hwvit.ops.frozen: work derived from inputs that cannot change is kept, from anything else redone.

The kernels check a layer's parameters once when they are read-only; a writable parameter changed
in place between two calls must give the second call's result, never a stale one."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from hwvit import ops
from hwvit.ops import frozen
from hwvit.ops.reference import gelu_ref, gemm_ref, layernorm_ref, requant_ref, residual_add_ref, softmax_ref


def test_derived_keeps_work_only_for_immutable_inputs():
    made = []

    def make():
        made.append(1)
        return len(made)

    fixed = frozen.read_only(np.arange(4))
    assert frozen.derived((fixed, 3, None, (2, 5)), "t", make) == frozen.derived((fixed, 3, None, (2, 5)), "t", make)
    assert len(made) == 1 and frozen.held(fixed)
    frozen.derived((fixed, 4, None, (2, 5)), "t", make)  # another scalar: another entry
    assert len(made) == 2
    writable = np.arange(4)
    frozen.derived((writable,), "t", make)
    frozen.derived((writable,), "t", make)
    assert len(made) == 4 and not frozen.held(writable)
    view = writable[:]
    view.flags.writeable = False  # a read-only view of memory someone can still write
    assert not frozen.frozen(view) and not frozen.immutable(view)
    assert not frozen.immutable((1, np.zeros(2)))  # arrays inside a tuple are never keys
    assert frozen.immutable((1, (2, "x"))) and frozen.immutable(None) and not frozen.immutable([1])
    # ``otherwise``: called in make's place where an input could change (the joined qkv: None), and
    # only there; a torch tensor or a list is never a key either
    assert frozen.derived((writable, 3), "t", make, otherwise=lambda: "fresh") == "fresh"
    assert frozen.derived(([1, 2],), "t", make, otherwise=lambda: "fresh") == "fresh"
    assert len(made) == 4
    assert frozen.derived((fixed, 3, None, (2, 5)), "t", make, otherwise=lambda: "fresh") == 1


def test_an_error_is_raised_every_time_and_a_dead_array_leaves_the_cache():
    fixed = frozen.read_only(np.arange(3))

    def bad():
        raise ValueError("no")

    for _ in range(2):
        with pytest.raises(ValueError, match="no"):
            frozen.derived((fixed,), "bad", bad)
    frozen.derived((fixed,), "ok", lambda: 1)
    mine = [key for key, (refs, _) in frozen._cache.items() if any(r() is fixed for r in refs)]
    assert len(mine) == 1  # "ok" kept, "bad" not
    del fixed
    gc.collect()
    assert mine[0] not in frozen._cache  # (other tests' dead arrays may leave with it: count only this one)


def test_writable_parameters_changed_in_place_are_read_again():
    """ops.linear, residual_add and layernorm with writable bias, multipliers, gamma changed between
    calls: each call equals the reference of the values it was given."""
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (5, 12)).astype(np.int8)
    w = frozen.read_only(rng.integers(-128, 128, (7, 12)).astype(np.int8))
    # int32: the kernels work on int64 copies, which a stale cache would keep
    bias = rng.integers(-1000, 1000, 7).astype(np.int32)
    mult, shift = rng.integers(1 << 29, 1 << 30, 7).astype(np.int32), np.full(7, 20, np.int32)
    for _ in range(2):
        got = ops.linear(a, w, bias, mult, shift, 8)
        acc = gemm_ref(a.tolist(), w.tolist(), bias.tolist())
        assert got.tolist() == [requant_ref(row, mult.tolist(), shift.tolist(), 8) for row in acc]
        bias += 5000
        mult[0] //= 3
    x, y = rng.integers(-128, 128, (2, 3, 8)).astype(np.int8)
    ma = rng.integers(1 << 20, 1 << 21, 8).astype(np.int32)
    for _ in range(2):
        got = ops.residual_add(x, y, ma, 1 << 20, 21)
        want = [residual_add_ref(r.tolist(), s.tolist(), ma.tolist(), 1 << 20, 21) for r, s in zip(x, y)]
        assert got.tolist() == want
        ma[3] = 0
    gamma, beta = (rng.integers(-(1 << v), 1 << v, 8).astype(np.int32) for v in (12, 20))
    for _ in range(2):
        got = ops.layernorm(x, gamma, beta, 1 << 10, 1 << 30, 34)
        want = [layernorm_ref(r.tolist(), gamma.tolist(), beta.tolist(), 1 << 10, 1 << 30, 34) for r in x]
        assert got.tolist() == want
        gamma[::2] *= -1


def test_tables_are_checked_once_when_read_only_and_read_again_when_writable():
    """ops.gelu and ops.softmax keep a read-only table's checked form (the int8 copy the AVX2 lookup
    takes, the softmax table with its trailing 0), and read a writable table changed in place anew,
    on the AVX2 lookup path (int8, 4096+ elements) and the row kernel."""
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, (64, 80)).astype(np.int8)  # 5120 elements: the AVX2 lookup
    table = rng.integers(-128, 128, 256).astype(np.int64)
    for _ in range(2):
        got = ops.gelu(x, table, 8, narrow=True)
        assert got.reshape(-1).tolist() == gelu_ref(x.reshape(-1).tolist(), table.tolist(), 8)
        table[:128] = -table[:128] - 1  # -t - 1 stays in int8
    fixed = frozen.read_only(table)
    assert ops.gelu(x, fixed, 8, narrow=True).tolist() == ops.gelu(x, fixed, 8, narrow=True).tolist()
    assert frozen.held(fixed)
    rows = rng.integers(-128, 128, (6, 19)).astype(np.int8)
    exp_table = np.array([round(2**23 * np.exp(-d / 16)) for d in range(40)], dtype=np.int64)
    for _ in range(2):
        got = ops.softmax(rows, exp_table, 8, 8)
        assert got.tolist() == [softmax_ref(r.tolist(), exp_table.tolist(), 8) for r in rows]
        exp_table[1:] //= 3  # T[0] stays 2^23
    fixed = frozen.read_only(exp_table)
    ops.softmax(rows, fixed, 8, 8)
    assert frozen.held(fixed)
