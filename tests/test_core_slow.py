"""Opt-in (-m slow): a ViT-B/16-shaped model through the RTL core on Verilator, logits bit-exact.

224 x 224 x 3 input, 16 x 16 patches (197 tokens), dim 768, 12 heads, MLP 3072, separate q/k/v,
random weights, all 12 blocks: one image is ~306 M cycles on the 8 x 8 core (`hwvit core estimate
--model vit-b16` gives the same figure), about a quarter of an hour of Verilator on one core of the
2-core EPYC. The simulated cycles per second are printed.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hwvit import toolchain
from hwvit.core import cycles
from hwvit.core import run as crun
from hwvit.core.compile import compile_model
from hwvit.core.coredir import read_core_dir, write_core_dir
from hwvit.float.config import load_preset
from hwvit.float.model import ViT
from hwvit.quant import QuantConfig, quantize_model


@pytest.mark.slow
def test_vit_b16_shaped_image_on_verilator(tmp_path):
    toolchain.require("verilator")
    cfg = load_preset("vit-b16")
    torch.manual_seed(0)
    model = quantize_model(ViT(cfg).eval(), torch.randn(2, 3, 224, 224), QuantConfig())
    core_dir = write_core_dir(compile_model(model), tmp_path / "core", {"preset": "vit-b16"})
    core = read_core_dir(core_dir)
    xq = model.quantize_input(torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1)).numpy())
    run = crun.run_images(core, model, xq, "verilator", 8, 8)
    np.testing.assert_array_equal(run.got, run.expected)
    total = run.cycles[0]["total"]
    assert total == cycles.program_cycles(core.program, 8, 8)["total"]
    print(
        f"\nViT-B/16-shaped, 12 blocks, 8x8: {total:,} cycles, {total / run.cpu_s:,.0f} cycles/s (Verilator CPU time)"
    )
