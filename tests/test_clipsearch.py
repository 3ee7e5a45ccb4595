"""Calibration clip searches (hwvit.quant.clipsearch, hwvit.quant.calibrate methods mse and entropy)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hwvit.quant.calibrate import calibrate
from hwvit.quant.clipsearch import entropy_clip, mse_clip, quant_mse


def _quant_mse_slow(x, clip, bits):
    """One element at a time: round half away from zero, saturate, dequantize."""
    qmax = 2 ** (bits - 1) - 1
    s = clip / qmax
    total = 0.0
    for v in x:
        r = abs(v) / s
        q = min(int(r + 0.5), qmax) * (1 if v >= 0 else -1)
        total += (v - q * s) ** 2
    return total / len(x)


@pytest.mark.parametrize("bits", [4, 6, 8])
@pytest.mark.parametrize("dist", ["normal", "t2", "uniform", "laplace"])
def test_mse_clip_never_worse_than_minmax(bits, dist):
    rng = np.random.default_rng(bits)
    x = {
        "normal": rng.normal(size=5000),
        "t2": rng.standard_t(2, 5000),
        "uniform": rng.uniform(-1, 1, 5000),
        "laplace": rng.laplace(size=5000),
    }[dist]
    c = mse_clip(x, bits)
    top = float(np.abs(x).max())
    assert 0 < c <= top
    assert quant_mse(x, c, bits) <= quant_mse(x, top, bits)
    assert quant_mse(x[:300], c, bits) == pytest.approx(_quant_mse_slow(x[:300], c, bits), rel=1e-12)
    if dist == "t2":  # on a heavy tail the search clips: strictly better than min/max
        assert quant_mse(x, c, bits) < quant_mse(x, top, bits)


def test_percentile_and_entropy_clip_under_one_percent_of_heavy_tail():
    x = np.random.default_rng(0).standard_t(2, 100_000)  # Student t, 2 degrees of freedom: heavy tails
    a = np.abs(x)
    c_ent = entropy_clip(x, 8)
    assert c_ent < a.max()  # it does clip the tail...
    assert np.mean(a > c_ent) < 0.01  # ...but less than 1% of the elements
    model = _Rec()
    r = calibrate(model, torch.tensor(x, dtype=torch.float32).reshape(10, -1), "percentile", percentile=99.9)
    assert np.mean(a > r["x"]) < 0.01
    r = calibrate(model, torch.tensor(x, dtype=torch.float32).reshape(10, -1), "entropy")
    assert np.mean(a > r["x"]) < 0.01 and r["x"] < a.max()
    r_mse = calibrate(model, torch.tensor(x, dtype=torch.float32).reshape(10, -1), "mse")
    r_max = calibrate(model, torch.tensor(x, dtype=torch.float32).reshape(10, -1), "minmax")
    assert quant_mse(x, r_mse["x"], 8) <= quant_mse(x, r_max["x"], 8)


class _Rec(torch.nn.Module):
    """A model that records its input under the name 'x'."""

    def forward(self, x, record=None):
        if record is not None:
            record("x", x)
        return x


def test_entropy_keeps_a_light_tailed_range():
    # A uniform tensor has no tail worth clipping: KL must not cut it to the first candidate
    # (1/16 of the max with 8 bits), which a Q built from the folded P would always choose.
    x = np.random.default_rng(1).uniform(-1, 1, 50_000)
    assert entropy_clip(x, 8) > 0.9
