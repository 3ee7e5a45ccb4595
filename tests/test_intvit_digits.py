"""Issue-level accuracy of the integer model on the shipped digits demo (held-out split)."""

from __future__ import annotations

import pytest

from hwvit import pipeline
from hwvit.analysis.compare import compare
from hwvit.quant import QuantConfig, quantize_model

# One xdist worker runs the module, so its 12-17 s fixture is computed once (split over two
# workers, each computed it).
pytestmark = pytest.mark.xdist_group("intvit_digits")


@pytest.fixture(scope="session")  # session: kept when xdist runs other modules between its tests
def digits_result():
    source = pipeline.load_source("digits")
    int_model = quantize_model(source.model, pipeline.calibration_inputs(source, 256), QuantConfig())
    x_test, y_test = pipeline.eval_inputs(source)
    return compare(source.model, int_model, x_test, y_test, name="digits")


def test_float_accuracy_of_the_demo(digits_result):
    assert digits_result.images >= 400
    assert digits_result.top1_float >= 0.95


def test_int8_top1_within_0p3_points_of_float(digits_result):
    gap = abs(digits_result.top1_int - digits_result.top1_float)
    assert gap <= 0.003 + 1e-12, f"int8 {digits_result.top1_int:.4f} vs float {digits_result.top1_float:.4f}"


def test_logits_sqnr_at_least_30_db(digits_result):
    assert digits_result.logits_sqnr_db >= 30.0


def test_every_layer_tracks_float(digits_result):
    for row in digits_result.layers:
        assert row["cosine"] > 0.99, f"{row['path']}: cosine {row['cosine']:.4f}"
