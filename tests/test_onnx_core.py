"""A quantized ONNX file's own model on the RTL core (rtl/vit_core.v, docs/core.md): the symmetric
int8 digits file (round half to even, an int8 bias after each 3-D linear, the 1/sqrt(d) table after
Q.K^T, 7-bit probabilities) compiles, and its logits come out of the core bit-exact (Verilator,
make test-onnx); a file with activation zero points is refused in one line naming them."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from hwvit.cli import main

pytestmark = pytest.mark.xdist_group("onnx")  # one worker makes the session's files


def test_compile_a_symmetric_file_refuse_zero_points(onnx_zoo, tmp_path):
    """`hwvit compile --checkpoint`: the symmetric file's directory names the core parameters its
    model needs; onnxruntime's default file (asymmetric activations) is refused in one line naming
    the activation zero points, and nothing is written."""
    out = tmp_path / "core"
    res = CliRunner().invoke(main, ["compile", "--checkpoint", str(onnx_zoo.file("digits", "symmetric")),
                                    "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    sizes = yaml.safe_load((out / "manifest.yaml").read_text())["sizes"]
    assert {k: sizes[k] for k in ("GEMM_ROUNDING", "ADD_ROUNDING", "SOFTMAX_BITS")} == {
        "GEMM_ROUNDING": 2,
        "ADD_ROUNDING": 2,
        "SOFTMAX_BITS": 7,
    }
    no = tmp_path / "no"
    res = CliRunner().invoke(main, ["compile", "--checkpoint", str(onnx_zoo.file("digits", "default")),
                                    "--out", str(no)])  # fmt: skip
    message = res.output.strip()
    assert res.exit_code != 0 and "uses activation zero points" in message and len(message.splitlines()) == 1
    assert not no.exists()


@pytest.mark.onnx
def test_symmetric_file_on_the_core_verilator(onnx_zoo, tmp_path):
    """Ten held-out images through the core (Verilator, 8 x 8): every logit equal to the file's
    integer model's, the cycles the cycle model's at 7-bit probabilities."""
    from hwvit import toolchain
    from hwvit.core import cycles
    from hwvit.core import run as crun
    from hwvit.core.coredir import read_core_dir
    from hwvit.onnx import build

    toolchain.require("verilator")
    path = onnx_zoo.file("digits", "symmetric")
    out = tmp_path / "core"
    res = CliRunner().invoke(main, ["compile", "--checkpoint", str(path), "--out", str(out)])
    assert res.exit_code == 0, res.output
    model = build.load(path).int_model
    x, labels = onnx_zoo.data("digits", 10)
    run = crun.run_images(read_core_dir(out), model, model.quantize_input(x), "verilator", 8, 8)
    np.testing.assert_array_equal(run.got, run.expected)
    assert (run.got.argmax(axis=1) == labels).sum() >= 9
    core = read_core_dir(out)
    assert all(c["total"] == cycles.program_cycles(core.program, 8, 8, softmax_bits=7)["total"] for c in run.cycles)
