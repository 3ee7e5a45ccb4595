"""gelu, residual_add, mean_pool: fast kernels vs references, and accuracy vs float64."""

from __future__ import annotations

import importlib
import math
from fractions import Fraction

import numpy as np
import pytest

from hwvit import ops
from hwvit.ops.reference import gelu_ref, mean_pool_ref, residual_add_ref
from hwvit.quant import gelu_table, quantize_multiplier, residual_params


def _gelu(v: float) -> float:
    return 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0)))


# ---------------------------------------------------------------------------------------- gelu


def test_gelu_matches_reference():
    rng = np.random.default_rng(50)
    cases = 0
    for in_bits, out_bits in [(8, 8), (8, 8), (4, 6), (10, 12), (8, 16)]:
        table = gelu_table(float(rng.uniform(0.01, 0.1)), float(rng.uniform(0.005, 0.05)), in_bits, out_bits)
        lo, hi = -(2 ** (in_bits - 1)), 2 ** (in_bits - 1) - 1
        x = np.concatenate([rng.integers(lo, hi + 1, 2_500), [lo, hi, 0, -1, 1]])
        assert ops.gelu(x, table, in_bits).tolist() == gelu_ref(x.tolist(), table.tolist(), in_bits)
        cases += x.size
    assert cases >= 10_000
    x = np.arange(-128, 128).reshape(16, 16)  # any shape
    assert ops.gelu(x, table=gelu_table(0.05, 0.02)).shape == (16, 16)
    t = gelu_table(0.05, 0.02)
    for view in (x.T, x[:, ::3].astype(np.int8), x[::-2]):  # strided, narrow dtype: same lookups
        assert ops.gelu(view, t).tolist() == [gelu_ref(r, t.tolist()) for r in view.tolist()]
    assert ops.gelu(np.zeros((0, 4), dtype=np.int64), t).shape == (0, 4)


def test_gelu_int8_vector_lookup_equals_the_reference(monkeypatch):
    """int8 x, 8-bit table, narrow: the AVX2 kernel (native.lookup_i8: vpshufb per 16-entry row)
    from _VECTOR_MIN elements. Every index, every table entry at both rails, lengths around the
    kernel's 32-element step and the threshold, strided views: equal to gelu_ref and to the numba
    lookup (the same call with the threshold out of reach)."""
    from hwvit.ops import native

    gelu_module = importlib.import_module("hwvit.ops.gelu")  # hwvit.ops.gelu is also the function

    assert native.unavailable() is None  # AVX2 and a C compiler: the build machine's CPUs have both
    rng = np.random.default_rng(51)
    every = np.arange(-128, 128, dtype=np.int8)
    tables = [gelu_table(0.05, 0.02), rng.integers(-128, 128, 256), np.where(np.arange(256) % 2, 127, -128)]
    calls = []
    monkeypatch.setattr(native, "lookup_i8", lambda x, t, real=native.lookup_i8: calls.append(x.size) or real(x, t))
    for table in tables:
        for n in (4096, 4097, 4127, 4128, 5000, 197 * 3072):
            x = np.concatenate([every, rng.integers(-128, 128, n - 256).astype(np.int8)])
            y = ops.gelu(x, table, 8, narrow=True)
            assert y.dtype == np.int8 and calls[-1] == n
            assert y.tolist() == gelu_ref(x.tolist(), table.tolist(), 8)
            monkeypatch.setattr(gelu_module, "_VECTOR_MIN", 1 << 62)
            assert np.array_equal(ops.gelu(x, table, 8, narrow=True), y)  # the numba lookup
            monkeypatch.setattr(gelu_module, "_VECTOR_MIN", 1 << 12)
        x = rng.integers(-128, 128, (128, 96)).astype(np.int8)
        for view in (x.T, x[:, ::3], x[::-1]):
            assert ops.gelu(view, table, 8, narrow=True).tolist() == [
                gelu_ref(r, table.tolist()) for r in view.tolist()
            ]
    assert len(calls) == 3 * (6 + 3)  # every call above from 4096 elements (x[:, ::3]: 4096) took the kernel


@pytest.mark.parametrize("bad", [-129, 128, -(2**40), 2**40])
def test_gelu_refuses_inputs_outside_the_table(bad):
    x = np.zeros(1000, dtype=np.int64)
    x[777] = bad
    with pytest.raises(ValueError, match=rf"x: values must lie in \[-128, 127\], got \[{min(bad, 0)}, {max(bad, 0)}\]"):
        ops.gelu(x, gelu_table(0.05, 0.02))


@pytest.mark.parametrize(
    "s_in, s_out, out_bits",
    [(0.05, 0.02, 8), (0.02, 0.01, 8), (0.1, 0.05, 8), (0.03, 0.001, 8), (0.0625, 0.03125, 8), (0.05, 0.0005, 16)],
)
def test_gelu_table_error_at_most_half_lsb(s_in, s_out, out_bits):
    table = gelu_table(s_in, s_out, 8, out_bits)
    q = np.arange(-128, 128)
    y = ops.gelu(q, table)
    exact = np.array([_gelu(v * s_in) for v in q]) / s_out
    hi = 2 ** (out_bits - 1) - 1
    inside = (exact > -hi - 1) & (exact < hi)
    assert inside.sum() > 100
    assert np.abs(y - exact)[inside].max() <= 0.5 + 1e-9
    assert np.all(y[exact >= hi] == hi)  # saturated where the real value is beyond the range
    # Entries are the nearest integers (half away from zero) to the float64 values, recomputed
    # here in exact rationals.
    for i in (0, 64, 128, 200, 255):
        v = Fraction(_gelu(float(q[i]) * s_in)) / Fraction(s_out)
        r = math.floor(abs(v) + Fraction(1, 2)) * (1 if v >= 0 else -1)
        assert int(y[i]) == max(-hi - 1, min(hi, r))


@pytest.mark.parametrize(
    "x, table, in_bits",
    [
        (np.array([128]), np.zeros(256, np.int64), 8),
        (np.array([0.0]), np.zeros(256, np.int64), 8),
        (np.array([0]), np.zeros(255, np.int64), 8),  # wrong table length
        (np.array([0]), np.full(256, 2**15), 8),  # entries beyond 16 bits
        (np.array([0]), np.zeros(2, np.int64), 1),
    ],
)
def test_gelu_rejects_bad_input(x, table, in_bits):
    with pytest.raises(ValueError):
        ops.gelu(x, table, in_bits)


# ------------------------------------------------------------------------------- residual_add

EDGE_M = [0, 1, 2**30, 2**31 - 1]


def test_residual_add_matches_reference():
    rng = np.random.default_rng(51)
    cases = 0
    for trial in range(170):
        n = int(rng.integers(1, 120))
        a = rng.integers(-128, 128, n)
        b = rng.integers(-128, 128, n)
        a[0], b[0] = -128, -128
        a[-1], b[-1] = 127, 127
        if trial % 3 == 0:  # per channel
            ma = rng.choice(EDGE_M + list(rng.integers(2**29, 2**31, 3)), n)
            mb = rng.choice(EDGE_M + list(rng.integers(2**29, 2**31, 3)), n)
            s = rng.choice([1, 2, 31, 40, 62] + list(rng.integers(1, 63, 3)), n)
            want = residual_add_ref(a.tolist(), b.tolist(), ma.tolist(), mb.tolist(), s.tolist(), 8)
        else:
            ma = int(rng.choice(EDGE_M + [int(rng.integers(2**29, 2**31))]))
            mb = int(rng.choice(EDGE_M + [int(rng.integers(2**29, 2**31))]))
            s = int(rng.choice([1, 31, 62, int(rng.integers(1, 63))]))
            want = residual_add_ref(a.tolist(), b.tolist(), ma, mb, s, 8)
        assert ops.residual_add(a, b, ma, mb, s, 8).tolist() == want
        cases += n
    for out_bits in (2, 12, 16):
        a = rng.integers(-128, 128, 600)
        b = rng.integers(-128, 128, 600)
        got = ops.residual_add(a, b, 2**31 - 1, 2**30, 23, out_bits)
        assert got.tolist() == residual_add_ref(a.tolist(), b.tolist(), 2**31 - 1, 2**30, 23, out_bits)
        cases += 600
    assert cases >= 10_000
    # Broadcast: position embeddings (T, D) added to a batch (B, T, D).
    pos = rng.integers(-128, 128, (5, 8))
    xb = rng.integers(-128, 128, (3, 5, 8))
    got = ops.residual_add(xb, pos, 2**30, 2**30 + 5, 31)
    for i in range(3):
        for t in range(5):
            want = residual_add_ref(xb[i, t].tolist(), pos[t].tolist(), 2**30, 2**30 + 5, 31, 8)
            assert got[i, t].tolist() == want


def test_residual_add_tracks_real_sum():
    """With residual_params, y = round((a*s_a + b*s_b) / s_out) up to the 2^-31 multiplier error."""
    rng = np.random.default_rng(52)
    for _ in range(50):
        s_a, s_b = (float(v) for v in rng.uniform(0.001, 0.2, 2))
        s_out = float(rng.uniform(0.5, 2.0)) * (s_a + s_b)
        ma, mb, s = residual_params(s_a, s_b, s_out)
        a = rng.integers(-128, 128, 400)
        b = rng.integers(-128, 128, 400)
        y = ops.residual_add(a, b, ma, mb, s, 8)
        exact = (a * s_a + b * s_b) / s_out
        inside = np.abs(exact) < 127
        assert np.all(np.abs(y - exact)[inside] <= 0.5 + 1e-6)


@pytest.mark.parametrize(
    "args",
    [
        (np.array([128]), np.array([0]), 1, 1, 1),  # a beyond int8
        (np.array([0]), np.array([-129]), 1, 1, 1),
        (np.array([0]), np.array([0]), 2**31, 1, 1),  # multiplier beyond 31 bits
        (np.array([0]), np.array([0]), 1, 1, 0),  # shift 0 is outside [1, 62]
        (np.array([0]), np.array([0]), 1, 1, 63),
        (np.zeros(3, np.int64), np.zeros(4, np.int64), 1, 1, 1),  # shapes do not broadcast
        (np.array([0.5]), np.array([0]), 1, 1, 1),
    ],
)
def test_residual_add_rejects_bad_input(args):
    with pytest.raises(ValueError):
        ops.residual_add(*args)


# --------------------------------------------------------------------------------- mean_pool


def test_mean_pool_matches_reference():
    rng = np.random.default_rng(53)
    channels = 0
    for trial in range(100):
        tokens, d = int(rng.integers(1, 200)), int(rng.integers(1, 200))
        x = rng.integers(-128, 128, (tokens, d))
        if trial % 4 == 0:
            x[:] = rng.choice([-128, 127])
        mult, shift = quantize_multiplier(float(rng.uniform(0.5, 2.0)) / tokens)
        got = ops.mean_pool(x, mult, shift, 8, axis=0)
        assert got.tolist() == mean_pool_ref(x.tolist(), mult, shift, 8)
        channels += d
    # axis=-2 on a batch (B, T, D), per-channel multipliers
    x = rng.integers(-128, 128, (4, 197, 64))
    mult = rng.integers(2**30, 2**31, 64)
    shift = rng.integers(30, 45, 64)
    got = ops.mean_pool(x, mult, shift)
    assert got.shape == (4, 64)
    for i in range(4):
        assert got[i].tolist() == mean_pool_ref(x[i].tolist(), mult.tolist(), shift.tolist(), 8)
        channels += 64
    assert channels >= 10_000
    # the mean itself: M * 2^-s = 1/N with s_out = s_x gives round(mean)
    x = rng.integers(-128, 128, (50, 30))
    m, s = quantize_multiplier(1 / 50)
    mean = x.mean(axis=0)
    assert np.all(np.abs(ops.mean_pool(x, m, s, axis=0) - mean) <= 0.5 + 1e-6)


def test_mean_pool_rejects_bad_input():
    with pytest.raises(ValueError):
        ops.mean_pool(np.array([[128]]), 1, 0)
    with pytest.raises(ValueError):
        ops.mean_pool(np.zeros((0, 4), np.int64), 1, 0)
    with pytest.raises(ValueError):
        ops.mean_pool(np.zeros((3, 4), np.int64), 1, 0, axis=2)
