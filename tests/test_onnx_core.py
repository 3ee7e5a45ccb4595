"""A quantized ONNX file's own model on the RTL core (rtl/vit_core.v, docs/core.md): the digits
files of every quantize_static configuration (round half to even, an int8 bias after each 3-D
linear, the 1/sqrt(d) table after Q.K^T; 7-bit probabilities at symmetric int8; activation zero
points in the others) compile, and their logits come out of the core bit-exact (Verilator, make
test-onnx); the HF-shaped file, whose Q and K are each scaled by a table, is refused in one line
naming it."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from hwvit.cli import main
from hwvit.onnx.make import CONFIGS

pytestmark = pytest.mark.xdist_group("onnx")  # one worker makes the session's files

# the core parameters each configuration's model needs (docs/core.md)
SIZES = {
    "symmetric": {"GEMM_ROUNDING": 2, "ADD_ROUNDING": 2, "SOFTMAX_BITS": 7},
    "default": {"GEMM_ROUNDING": 2, "ADD_ROUNDING": 2, "ZERO_POINTS": 1},
    "uint8": {"GEMM_ROUNDING": 2, "ADD_ROUNDING": 2, "ZERO_POINTS": 1},
}
KEYS = ("GEMM_ROUNDING", "ADD_ROUNDING", "SOFTMAX_BITS", "ZERO_POINTS")


def _compile(path, out) -> dict:
    res = CliRunner().invoke(main, ["compile", "--checkpoint", str(path), "--out", str(out)])
    assert res.exit_code == 0, res.output
    sizes = yaml.safe_load((out / "manifest.yaml").read_text())["sizes"]
    return {k: sizes[k] for k in KEYS if k in sizes}


def test_compile_the_files_refuse_hf_tables(onnx_zoo, tmp_path):
    """`hwvit compile --checkpoint`: the symmetric and the default file's directories name the core
    parameters their models need; the HF-shaped file is refused in one line naming its Q table, and
    nothing is written."""
    for config in ("symmetric", "default"):
        assert _compile(onnx_zoo.file("digits", config), tmp_path / config) == SIZES[config]
    no = tmp_path / "no"
    res = CliRunner().invoke(main, ["compile", "--checkpoint", str(onnx_zoo.file("hf", "symmetric")),
                                    "--out", str(no)])  # fmt: skip
    message = res.output.strip()
    assert res.exit_code != 0 and len(message.splitlines()) == 1, message
    assert "a table after the Q or K projection (layers.0.attn.q_table)" in message
    assert not no.exists()


@pytest.mark.onnx
@pytest.mark.parametrize("config", list(CONFIGS))
def test_file_on_the_core_verilator(onnx_zoo, tmp_path, config):
    """Ten held-out images through the core (Verilator, 8 x 8): every logit equal to the file's
    integer model's, the cycles the cycle model's (at the file's probability width)."""
    from hwvit import toolchain
    from hwvit.core import cycles
    from hwvit.core import run as crun
    from hwvit.core.coredir import read_core_dir
    from hwvit.onnx import build

    toolchain.require("verilator")
    path = onnx_zoo.file("digits", config)
    out = tmp_path / "core"
    assert _compile(path, out) == SIZES[config]
    model = build.load(path).int_model
    x, labels = onnx_zoo.data("digits", 10)
    core = read_core_dir(out)
    run = crun.run_images(core, model, model.quantize_input(x), "verilator", 8, 8)
    np.testing.assert_array_equal(run.got, run.expected)
    assert (run.got.argmax(axis=1) == labels).sum() >= 9
    want = cycles.program_cycles(core.program, 8, 8, softmax_bits=SIZES[config].get("SOFTMAX_BITS", 8))
    assert all(c["total"] == want["total"] for c in run.cycles)
