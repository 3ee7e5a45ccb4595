"""layernorm: fast kernel vs plain-Python reference, accuracy vs float64 LayerNorm, width claims."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hwvit import ops
from hwvit.ops.reference import layernorm_ref
from hwvit.quant import layernorm_params


def test_constants():
    assert (ops.LN_T, ops.LN_K, ops.LN_F) == (11, 43, 10)


def _rows(rng, count, c, spread):
    """Rows whose values span ``spread`` LSB (0: all equal, 1-2: tiny, 255: the full int8 range)."""
    lo = rng.integers(-128, 128 - spread, (count, 1))
    return lo + rng.integers(0, spread + 1, (count, c))


def test_layernorm_matches_reference():
    rng = np.random.default_rng(30)
    rows = 0
    for trial in range(420):
        c = int(rng.choice([1, 2, 3, 5, 8, 16, 17, 32]))
        spread = int(rng.choice([0, 1, 2, 3, 10, 60, 255]))
        x = _rows(rng, 25, c, spread)
        if trial % 7 == 0:
            x[0] = -128  # all at the edge
            x[1, :] = 127
            x[1, 0] = -128  # one outlier
        g = rng.integers(-(2**14) + 1, 2**14, c)
        b = rng.integers(-(2**30) + 1, 2**30, c)
        if trial % 5 == 0:
            g[:] = rng.choice([2**14 - 1, -(2**14) + 1])
            b[:] = rng.choice([2**30 - 1, -(2**30) + 1])
        eps = int(rng.choice([0, 1, 1000, 2**61, int(rng.integers(0, 2**40))]))
        mult = int(rng.choice([0, 2**30, 2**31 - 1, int(rng.integers(2**30, 2**31))]))
        shift = int(rng.choice([0, 1, 31, 62, int(rng.integers(20, 45))]))
        out_bits = int(rng.choice([8, 8, 4, 16]))
        got = ops.layernorm(x, g, b, eps, mult, shift, out_bits)
        for r in range(x.shape[0]):
            want = layernorm_ref(x[r].tolist(), g.tolist(), b.tolist(), eps, mult, shift, out_bits)
            assert got[r].tolist() == want, (x[r].tolist(), eps, mult, shift)
        rows += x.shape[0]
    assert rows >= 10_000
    # Wide rows, per-channel requant parameters broadcast along C.
    for c in (768, 4096):
        x = _rows(rng, 3, c, 255)
        g = rng.integers(-(2**14) + 1, 2**14, c)
        b = rng.integers(-(2**30) + 1, 2**30, c)
        got = ops.layernorm(x, g, b, 12345, 2**30 + 7, 38, 8)
        for r in range(3):
            assert got[r].tolist() == layernorm_ref(x[r].tolist(), g.tolist(), b.tolist(), 12345, 2**30 + 7, 38, 8)


def _float_layernorm(x, s_x, gamma, beta, eps):
    v = x * s_x
    mean = v.mean(axis=-1, keepdims=True)
    var = v.var(axis=-1, keepdims=True)
    return (v - mean) / np.sqrt(var + eps) * gamma + beta


@pytest.mark.parametrize("c", [16, 64, 768])
def test_layernorm_accuracy_vs_float(c):
    """<= 1 LSB vs float64 LayerNorm of the same int inputs with the float gamma/beta.

    s_out is calibrated as the model does it, on rows of ordinary spread; the tested rows then
    include tiny spreads (1-2 LSB), all-equal rows and eps from 1e-12 to 1e-3. Rows whose
    outputs overflow the calibrated range saturate in both.
    """
    rng = np.random.default_rng(31 + c)
    worst = 0.0
    for _ in range(40):
        s_x = float(rng.uniform(0.005, 0.2))
        eps = float(rng.choice([1e-5, 1e-6, 1e-12, 1e-3]))
        gamma = rng.normal(1.0, 0.3, c) * rng.choice([1.0, 0.05, 4.0])
        beta = rng.normal(0.0, 0.2, c) * rng.choice([1.0, 0.0, 10.0])
        calib = _float_layernorm(_rows(rng, 20, c, 100), s_x, gamma, beta, eps)
        s_out = float(np.abs(calib).max()) / 127 * rng.choice([1.0, 0.5])  # 0.5: more outputs saturate
        spread = int(rng.choice([0, 1, 2, 3, 8, 40, 255]))
        x = _rows(rng, 40, c, spread)
        ref = _float_layernorm(x, s_x, gamma, beta, eps)
        p = layernorm_params(gamma, beta, eps, c, s_x, s_out)
        y = ops.layernorm(x, **p)
        want = np.clip(ref / s_out, -128, 127)
        worst = max(worst, float(np.abs(y - want).max()))
    assert worst <= 1.0, worst


def test_layernorm_small_eps_is_not_rounded_away():
    """C = 16, one element 1 LSB off (V = 15): eps worth 0.2-0.7 units of V must still count."""
    worst = 0.0
    for s_x in np.linspace(0.02, 0.09, 60):
        eps = 1e-5  # eps * C^2 / s_x^2 from 3.2 down to 0.32 units of V
        gamma = np.full(16, 2.0)
        beta = np.zeros(16)
        x = np.zeros((1, 16), np.int64)
        x[0, 3] = 1
        ref = _float_layernorm(x, s_x, gamma, beta, eps)
        s_out = float(np.abs(ref).max()) / 127
        y = ops.layernorm(x, **layernorm_params(gamma, beta, eps, 16, s_x, s_out))
        worst = max(worst, float(np.abs(y - ref / s_out).max()))
    assert worst <= 0.55, worst


def test_layernorm_normalized_value_fits_17_bits():
    """y = round((x - mean)/std * 2^10) peaks at sqrt(C-1) * 2^10 for one outlier: < 2^16 at C = 4096."""
    c = 4096
    worst = 0
    for delta in (1, 2, 3, 127, 255):
        row = [-128] * c
        row[0] = -128 + delta
        sx, sxx = sum(row), sum(v * v for v in row)
        sig = math.isqrt((c * sxx - sx * sx) << 22)
        inv = ((1 << 43) + sig // 2) // sig
        y = ((c * row[0] - sx) * inv + (1 << 21)) >> 22
        worst = max(worst, abs(y))
    assert worst < 2**16
    # acc = y*G + B stays in signed 32 at the extremes: the kernel accepts them without overflow.
    x = np.full((1, c), -128)
    x[0, 0] = 127
    g = np.full(c, 2**14 - 1)
    b = np.full(c, 2**30 - 1)
    got = ops.layernorm(x, g, b, 0, 2**31 - 1, 62, 16)
    assert got.tolist() == [layernorm_ref(x[0].tolist(), g.tolist(), b.tolist(), 0, 2**31 - 1, 62, 16)]


def test_layernorm_all_equal_rows_give_beta():
    x = np.full((2, 16), 42)
    g = np.arange(16) * 100
    b = np.arange(16) * 1000
    # sig = 0 (eps_int = 0): inv = 0, y = 0, out = requant(B)
    assert ops.layernorm(x, g, b, 0, 2**30, 30, 16).tolist() == [list(range(0, 16000, 1000))] * 2


def test_layernorm_params():
    rng = np.random.default_rng(32)
    gamma = rng.normal(1, 0.2, 64)
    beta = rng.normal(0, 0.1, 64)
    p = layernorm_params(gamma, beta, 1e-5, 64, 0.05, 0.03)
    assert set(p) == {"gamma", "beta", "eps_int", "multiplier", "shift"}
    assert int(np.abs(p["gamma"]).max()) == 2**14 - 1  # gamma dominates s_g here
    assert p["eps_int"] == round(1e-5 * 64 * 64 / 0.05**2 * 2**22)
    s_g = float(np.abs(gamma).max()) / (2**14 - 1)
    assert p["multiplier"] * 2.0 ** -p["shift"] == pytest.approx(s_g / 2**10 / 0.03, rel=2**-30)
    # beta dominates: |B| reaches 2^30 - 1 exactly and no more (signed 31)
    p = layernorm_params(np.full(8, 0.01), np.linspace(-3, 3, 8), 1e-5, 8, 0.05, 0.03)
    assert int(np.abs(p["beta"]).max()) == 2**30 - 1
    assert p["gamma"].tolist() == [round(0.01 / (3 * 2**10 / (2**30 - 1)))] * 8
    # eps clipped to 2^61; all-zero gamma/beta use s_g = 1
    assert layernorm_params(np.ones(4), np.zeros(4), 1e9, 4, 1e-6, 1.0)["eps_int"] == 2**61
    z = layernorm_params(np.zeros(4), np.zeros(4), 1e-5, 4, 0.1, 0.1)
    assert z["gamma"].tolist() == [0] * 4 and z["beta"].tolist() == [0] * 4
    with pytest.raises(ValueError):
        layernorm_params(np.ones(3), np.zeros(4), 1e-5, 4, 0.1, 0.1)
    with pytest.raises(ValueError):
        layernorm_params(np.ones(4), np.zeros(4), 1e-5, 4, 0.0, 0.1)


@pytest.mark.parametrize(
    "args, error",
    [
        ((np.array([[1.0, 2.0]]), [1, 1], [0, 0], 0, 1, 0), ValueError),  # float x
        ((np.array([[128, 0]]), [1, 1], [0, 0], 0, 1, 0), ValueError),  # x beyond int8
        ((np.array([[1, 2]]), [2**14, 1], [0, 0], 0, 1, 0), ValueError),  # G beyond signed 15
        ((np.array([[1, 2]]), [1, 1], [2**30, 0], 0, 1, 0), ValueError),  # B beyond signed 31
        ((np.array([[1, 2]]), [1, 1, 1], [0, 0, 0], 0, 1, 0), ValueError),  # gamma length
        ((np.array([[1, 2]]), [1, 1], [0, 0], 2**61 + 1, 1, 0), ValueError),  # eps beyond 2^61
        ((np.zeros((1, 4097), np.int64), [1] * 4097, [0] * 4097, 0, 1, 0), ValueError),  # C > 4096
    ],
)
def test_layernorm_rejects_bad_input(args, error):
    with pytest.raises(error):
        ops.layernorm(*args)
