"""Isolated error, clip rate and range use per point (hwvit.analysis.compare, hwvit.analysis.isolate)."""

from __future__ import annotations

import numpy as np
import pytest

from hwvit import pipeline
from hwvit.analysis.compare import compare
from hwvit.analysis.isolate import Forcer, point_range, quantize_at
from hwvit.intvit import Trace
from hwvit.quant import QuantConfig, quantize_model


@pytest.fixture(scope="module")
def setup():
    source = pipeline.load_source("digits")
    int_model = quantize_model(source.model, pipeline.calibration_inputs(source, 32), QuantConfig())
    x, y = pipeline.eval_inputs(source, 8)
    return source, int_model, x, y, compare(source.model, int_model, x, y, name="digits")


def test_first_layer_isolated_equals_accumulated(setup):
    # embed.proj's only input is the quantized image: it is the only quantized layer on its path,
    # so the error it adds by itself is all the error there is at its output.
    *_, result = setup
    row = next(r for r in result.layers if r["path"] == "embed.proj")
    assert row["isolated_sqnr_db"] == pytest.approx(row["sqnr_db"], abs=1e-9)
    assert row["isolated_max_err_lsb"] == pytest.approx(row["max_err_lsb"], abs=1e-9)
    # Deeper points inherit error: their accumulated SQNR is below their isolated one somewhere.
    assert any(r["sqnr_db"] < r["isolated_sqnr_db"] - 3.0 for r in result.layers)


def test_only_one_layer_quantized(setup):
    # Force every point except layers.1.mlp.fc1 to the quantized float value: fc1 is then the only
    # layer whose error reaches its output, and that error is its isolated error.
    source, int_model, x, _, result = setup
    target = "layers.1.mlp.fc1"
    floats = {}
    with __import__("torch").no_grad():
        source.model(x, record=lambda p, t: floats.__setitem__(p, t.detach().double().numpy()))
    forcer = Forcer(floats, int_model.bits_at)
    tr = Trace(values=True, force=lambda p, q, s: q if p == target else forcer(p, q, s))
    int_model.forward(x.numpy(), trace=tr)
    q, scale = tr.values[target]
    ref = floats[target].reshape(-1)
    err = ref - q.reshape(-1) * scale
    sqnr = 10 * np.log10(np.sum(ref**2) / np.sum(err**2))
    row = next(r for r in result.layers if r["path"] == target)
    assert sqnr == pytest.approx(row["isolated_sqnr_db"], abs=1e-9)


def test_clip_rate_and_range_used(setup):
    *_, result = setup
    for row in result.layers:
        assert 0.0 <= row["clip_rate"] <= 1.0 and 0.0 <= row["range_used"] <= 1.0
        assert row["elements"] > 0 and row["scale"] > 0
    # min/max calibration on these same images' distribution leaves the input (x in [0,1]) unclipped
    assert next(r for r in result.layers if r["path"] == "input")["clip_rate"] == 0.0


def test_quantize_at_counts_clips():
    q, clipped = quantize_at(np.array([-3.0, -0.26, 0.25, 0.74, 2.0]), 0.5, *point_range("x", 3))
    assert q.tolist() == [-4, -1, 1, 1, 3] and clipped == 2  # -3/0.5 = -6 < -4 and 2/0.5 = 4 > 3
