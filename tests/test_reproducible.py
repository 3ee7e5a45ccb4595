"""Calibration and the tables it feeds give the same integers on every machine (issue 60).

The calibrated ranges come from a float64 forward rounded up to a grid (hwvit.quant.calibrate);
the exp and GELU tables and SimpleViT's position table are the exact values rounded, with the
float64 fast path checked against mpmath near every rounding boundary. Each is held against a
slow reference here; tests/test_golden_vectors.py runs the demo under other CPUs' kernels.
"""

from __future__ import annotations

import copy
import math

import mpmath
import numpy as np
import pytest
import torch

from hwvit import pipeline
from hwvit.float.config import sincos2d_table
from hwvit.ops.requant import quantize
from hwvit.quant import params as qp
from hwvit.quant.calibrate import RANGE_BITS, calibrate, on_grid


def _significant_bits(v: float) -> int:
    f, _ = math.frexp(v)
    m = int(math.ldexp(f, 60))  # exact: f has at most 53 bits
    return 60 - (m & -m).bit_length() + 1


@pytest.mark.parametrize("v", [1e-300, 1e-8, 0.1, 0.5, 1.0, 1.0 + 2**-52, 3.0, 2**12 - 1, 2**12 + 1, 123456.789, 1e300])
def test_on_grid_rounds_up_by_less_than_its_step(v):
    g = on_grid(v)
    assert g >= v and (g - v) / v < 2.0 ** (1 - RANGE_BITS)
    assert _significant_bits(g) <= RANGE_BITS
    assert on_grid(g) == g  # a grid point stays
    assert on_grid(np.array([v, 0.0, g])).tolist() == [g, 0.0, g]  # the array form agrees


def test_on_grid_is_the_smallest_grid_point_above():
    rng = np.random.default_rng(0)
    for v in rng.uniform(0.5, 1.0, 200) * 2.0 ** rng.integers(-30, 30, 200):
        g = on_grid(float(v))
        step = math.ldexp(1.0, math.frexp(g)[1] - RANGE_BITS)
        assert g - step < v <= g or g == math.ldexp(0.5, math.frexp(g)[1])


@pytest.fixture(scope="module")
def digits():
    source = pipeline.load_source("digits")
    return source.model, pipeline.calibration_inputs(source, 24)


def test_calibration_is_the_float64_maximum_on_the_grid(digits):
    """The slow reference: a float64 copy of the model run on every image at once."""
    model, x = digits
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ref64 = copy.deepcopy(model).double()
    top: dict[str, float] = {}
    with torch.no_grad():
        ref64(x.double(), record=lambda p, t: top.__setitem__(p, max(top.get(p, 0.0), float(t.abs().max()))))
    got = calibrate(model, x, batch_size=5)
    assert got == {p: on_grid(v) for p, v in top.items()}
    # the model is untouched: float32, the same values
    after = model.state_dict()
    assert all(after[k].dtype == torch.float32 and torch.equal(after[k], before[k]) for k in before)


def test_calibration_does_not_depend_on_the_batching(digits):
    """Batches of 5 and of 24 images take different BLAS blockings (float64 sums in other orders);
    the ranges agree to the last bit, and each method's ranges lie on the grid."""
    model, x = digits
    channels: dict[str, np.ndarray] = {}
    for method in ("minmax", "percentile"):
        a = calibrate(model, x, method, batch_size=5, channels=channels if method == "minmax" else None)
        b = calibrate(model, x, method, batch_size=24)
        assert a == b
        assert all(on_grid(v) == v for v in a.values())
    assert channels and all(np.array_equal(on_grid(c), c) for c in channels.values())


def _round_half_up(v) -> int:
    return int(mpmath.floor(v + mpmath.mpf(1) / 2))


@pytest.mark.parametrize("s_in", [0.0123, 0.05, 1 / 16, 0.31])
def test_exp_table_is_the_exact_value_rounded(s_in):
    with mpmath.workprec(200):
        want = [_round_half_up(qp.EXP_ONE * mpmath.exp(-d * mpmath.mpf(s_in))) for d in range(256)]
    assert qp.exp_table(s_in).tolist() == want


@pytest.mark.parametrize(("s_in", "s_out", "bits"), [(0.05, 0.02, 8), (0.011, 0.004, 8), (0.3, 0.1, 6)])
def test_gelu_table_is_the_exact_value_rounded(s_in, s_out, bits):
    half = 1 << (bits - 1)
    with mpmath.workprec(200):
        want = []
        for q in range(-half, half):
            v = q * mpmath.mpf(s_in)
            y = v * mpmath.erfc(-v / mpmath.sqrt(2)) / 2 / mpmath.mpf(s_out)
            r = int(mpmath.sign(y)) * _round_half_up(abs(y))
            want.append(min(max(r, -half), half - 1))
    assert qp.gelu_table(s_in, s_out, bits, bits).tolist() == want


def test_a_near_tie_is_decided_exactly():
    """An exp table entry whose float64 value lies 2^-40 from x.5: the exact value decides, and a
    float64 estimate one ulp on the wrong side (what a vector library's exp may return) cannot move it."""
    target = (5_000_000 + 0.5 + 2.0**-40) / qp.EXP_ONE  # exp(-s) just above a half-integer step
    with mpmath.workprec(200):
        s = float(-mpmath.log(mpmath.mpf(target)))
        exact = qp.EXP_ONE * mpmath.exp(-mpmath.mpf(s))
        want = _round_half_up(exact)
    estimate = qp.EXP_ONE * np.exp(-s)
    assert abs(estimate - math.floor(estimate) - 0.5) < qp._CLOSE  # the check is exercised
    assert qp.exp_table(s, 2).tolist() == [qp.EXP_ONE, want]
    for wrong in (np.nextafter(math.floor(estimate) + 0.5, 0), math.floor(estimate) + 0.5 + 2**-30):
        y = qp._exact_where_close(np.array([wrong]), lambda i: exact)
        assert math.floor(y[0] + 0.5) == want


def test_exp_shift_mult_uses_log2_e_rounded():
    with mpmath.workprec(200):
        assert qp.LOG2E == float(mpmath.log(mpmath.e, 2))


@pytest.mark.parametrize(("grid", "dim"), [(4, 64), (6, 96)])
def test_sincos_table_is_the_exact_value_rounded_to_float32(grid, dim):
    q = dim // 4
    with mpmath.workprec(200):
        omega = [mpmath.power(10000, -mpmath.mpf(j) / (q - 1)) for j in range(q)]
        rows = []
        for p in range(grid * grid):
            y, x = divmod(p, grid)
            row = [
                f(pos * w)
                for f, pos in ((mpmath.sin, x), (mpmath.cos, x), (mpmath.sin, y), (mpmath.cos, y))
                for w in omega
            ]
            rows.append(row)
        want = np.array([[float(quantize_to_float32(v)) for v in row] for row in rows], dtype=np.float32)
    got = sincos2d_table(grid, dim)
    assert got.dtype == torch.float32 and np.array_equal(got.numpy(), want)


def quantize_to_float32(v):
    with mpmath.workprec(24):
        return +v


def test_gelu_through_quantize_is_unchanged_away_from_ties():
    """The table is ``quantize(g / s_out, 1)``: the same float steps as ``quantize(g, s_out)``."""
    x = np.arange(-128, 128) * 0.05
    g = np.array([0.5 * v * math.erfc(-v / math.sqrt(2.0)) for v in x])
    assert np.array_equal(qp.gelu_table(0.05, 0.02), quantize(g, 0.02, 8))
