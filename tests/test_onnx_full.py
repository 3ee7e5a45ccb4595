"""make test-onnx: every test model in every quantize_static configuration, calibrated on 256
images and compared with onnxruntime on its whole evaluation split (the digits held-out split:
449 images; the second ViT: 200 random images). tests/test_onnx.py is the part make test runs.
"""

from __future__ import annotations

import pytest
from onnx_zoo import gemm_figures

from hwvit.onnx.make import CONFIGS

pytestmark = [pytest.mark.onnx, pytest.mark.xdist_group("onnx")]


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("name", ["digits", "second"])
def test_gemms_and_agreement(onnx_zoo, name, config):
    """The GEMMs alone within 1 LSB of onnxruntime on at most 5 per million of their outputs of the
    digits ViT (the file's float path, graph optimizations off; at symmetric int8 its fused integer
    kernels too), 10 per million of the second ViT's (random weights: wider sums, more of onnxruntime's
    float32 rounding; about 5 measured);
    the GELU tables equal onnxruntime everywhere; top-1 agreement with onnxruntime at least 99.5%
    on the digits held-out split, graph optimizations off and on."""
    imported, side = onnx_zoo.side(name, config, images=None)
    for level in ("off", "on") if config == "symmetric" else ("off",):
        gemms, per_million, max_lsb = gemm_figures(side, level)
        assert gemms == 2 + 5 * imported.int_model.config.depth
        assert max_lsb <= 1 and per_million <= (5 if name == "digits" else 10), (level, per_million)
    assert all(d.differ == 0 for d in side.isolated["off"] if d.point.endswith("mlp.gelu"))
    if name == "digits":
        assert side.agreement["off"] >= 0.995 and side.agreement["on"] >= 0.995, side.agreement
        assert side.top1["hwvit"] >= 0.96
    else:  # random weights: near-tied logits are common
        assert side.agreement["off"] >= 0.97, side.agreement
