"""hwvit.quant.params: multipliers, residual shifts, weights and biases (tables: test_ops_softmax / _elementwise)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from hwvit.quant import (
    bias_int,
    quantize_multiplier,
    quantize_multipliers,
    quantize_weights,
    residual_params,
    weight_scales,
)


def test_quantize_multiplier_range_and_error():
    rng = np.random.default_rng(60)
    reals = np.concatenate(
        [
            np.exp(rng.uniform(math.log(2.0**-32), math.log(2.0**31 - 1), 5_000)),
            [2.0**-32, 0.5, 1.0, 1.5, 2.0**30, 2.0**31 - 1, 1 - 2**-40, 2.0**-32 * (1 - 2**-40)],
        ]
    )
    for real in reals:
        m, s = quantize_multiplier(float(real))
        assert isinstance(m, int) and isinstance(s, int)
        assert 0 <= s <= 62
        if real >= 2.0**-32:
            assert 2**30 <= m <= 2**31 - 1, real
            assert abs(Fraction(m, 2**s) - Fraction(float(real))) <= Fraction(float(real)) * Fraction(1, 2**31)
        else:
            assert s == 62 and m < 2**30 + 1
    assert quantize_multiplier(1.0) == (2**30, 30)
    assert quantize_multiplier(0.5) == (2**30, 31)
    assert quantize_multiplier(1 - 2**-40) == (2**30, 30)  # rounds up to 2^31 -> one shift less


def test_quantize_multiplier_special_values():
    assert quantize_multiplier(0.0) == (0, 0)
    # Tiny values keep s = 62 and lose significant bits: M = round(m * 2^62).
    assert quantize_multiplier(2.0**-40) == (2**22, 62)
    assert quantize_multiplier(2.0**-64) == (0, 62)
    assert quantize_multiplier(3 * 2.0**-63) == (2, 62)  # 1.5 rounds half up
    for bad in (-1.0, float("nan"), float("inf"), 2.0**31):
        with pytest.raises(ValueError):
            quantize_multiplier(bad)


def test_quantize_multipliers_vectorized():
    reals = np.array([0.0, 1e-3, 0.75, 3.0, 1e-12])
    m, s = quantize_multipliers(reals)
    assert m.dtype == np.int64 and m.shape == (5,)
    assert list(zip(m.tolist(), s.tolist())) == [quantize_multiplier(float(r)) for r in reals]
    m2, s2 = quantize_multiplier(reals)  # arrays go through the vectorized path
    assert np.array_equal(m, m2) and np.array_equal(s, s2)
    m3, _ = quantize_multiplier(torch.tensor([0.25, 0.5]))
    assert m3.tolist() == [2**30, 2**30]


def test_residual_params_largest_common_shift():
    rng = np.random.default_rng(61)
    for _ in range(500):
        s_a, s_b, s_out = (float(v) for v in np.exp(rng.uniform(-8, 3, 3)))
        ma, mb, s = residual_params(s_a, s_b, s_out)
        assert 1 <= s <= 62 and 0 <= ma < 2**31 and 0 <= mb < 2**31
        ra = Fraction(s_a) / Fraction(s_out)
        rb = Fraction(s_b) / Fraction(s_out)
        assert ma == math.floor(ra * 2**s + Fraction(1, 2)) and mb == math.floor(rb * 2**s + Fraction(1, 2))
        if s < 62:  # one more bit of shift would overflow the larger multiplier
            assert math.floor(max(ra, rb) * 2 ** (s + 1) + Fraction(1, 2)) > 2**31 - 1
    assert residual_params(1.0, 1.0, 1.0) == (2**30, 2**30, 30)
    with pytest.raises(ValueError):
        residual_params(1.0, 1.0, 2**-31)
    with pytest.raises(ValueError):
        residual_params(0.0, 1.0, 1.0)


def test_weights_per_output_channel():
    rng = np.random.default_rng(62)
    w = rng.normal(0, 0.05, (16, 40))
    w[3] = 0.0  # a dead channel
    w[5, 7] = -0.9  # an outlier sets that channel's scale
    q, scales = quantize_weights(w)
    assert q.dtype == np.int8 and q.shape == w.shape and scales.shape == (16,)
    assert int(q.min()) >= -127 and int(q.max()) <= 127
    live = [i for i in range(16) if i != 3]
    assert np.all(np.abs(q[live]).max(axis=1) == 127)
    assert scales[3] == 1.0 and np.all(q[3] == 0)
    np.testing.assert_allclose(scales[live], np.abs(w[live]).max(axis=1) / 127)
    assert np.all(np.abs(q * scales[:, None] - w) <= scales[:, None] / 2 + 1e-12)
    assert q[5, 7] == -127
    # conv weights (N, C, kh, kw): per N
    wc = rng.normal(0, 0.1, (8, 3, 4, 4))
    qc, sc = quantize_weights(torch.from_numpy(wc).float())
    assert qc.shape == wc.shape
    np.testing.assert_allclose(sc, np.abs(torch.from_numpy(wc).float().double().numpy()).reshape(8, -1).max(1) / 127)
    np.testing.assert_allclose(weight_scales(w, bits=4)[live], np.abs(w[live]).max(axis=1) / 7)


def test_bias_int():
    s_w = np.array([0.25, 0.5, 0.125, 0.125])  # binary fractions: the ratios below are exact
    b = bias_int(np.array([1.0, -0.5, 0.46875, -0.46875]), 0.5, s_w)
    assert b.tolist() == [8, -2, 8, -8]  # +-7.5 round half away from zero
    with pytest.raises(OverflowError):
        bias_int(np.array([1.0]), 1e-6, np.array([1e-4]))  # 1e10 is beyond int32
    with pytest.raises(ValueError):
        bias_int(np.array([1.0]), 0.1, np.array([0.0]))
    with pytest.raises(ValueError):
        bias_int(np.array([np.nan]), 0.1, np.array([0.1]))
