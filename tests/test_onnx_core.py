"""A quantized ONNX file's own model on the RTL core (rtl/vit_core.v, docs/core.md): every test
ViT's files (round half to even, an int8 bias after each 3-D linear, the 1/sqrt(d) table after
Q.K^T or HF's tables on Q and K; 7-bit probabilities at symmetric int8; activation zero points in
the others) compile, and their logits come out of the core bit-exact (Verilator, make test-onnx);
an arithmetic the core does not have (the round_each softmax) is refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from hwvit.cli import main

pytestmark = pytest.mark.xdist_group("onnx")  # one worker makes the session's files

# the core parameters each configuration's model needs (docs/core.md)
SIZES = {
    "symmetric": {"GEMM_ROUNDING": 2, "ADD_ROUNDING": 2, "SOFTMAX_BITS": 7},
    "default": {"GEMM_ROUNDING": 2, "ADD_ROUNDING": 2, "ZERO_POINTS": 1},
    "uint8": {"GEMM_ROUNDING": 2, "ADD_ROUNDING": 2, "ZERO_POINTS": 1},
}
KEYS = ("GEMM_ROUNDING", "ADD_ROUNDING", "SOFTMAX_BITS", "ZERO_POINTS")


def _compile(path, out):
    """`hwvit compile --checkpoint path --out out`: (the compiled dir, the core parameters it names)."""
    from hwvit.core.coredir import read_core_dir

    res = CliRunner().invoke(main, ["compile", "--checkpoint", str(path), "--out", str(out)])
    assert res.exit_code == 0, res.output
    sizes = yaml.safe_load((out / "manifest.yaml").read_text())["sizes"]
    return read_core_dir(out), {k: sizes[k] for k in KEYS if k in sizes}


def test_compile_the_files_refuse_round_each(onnx_zoo, tmp_path):
    """The symmetric and default digits files and the HF-shaped file compile, naming the core
    parameters their models need; the HF file's Q and K tables are GELU STREAMs over their columns
    of the qkv buffer, after their projections and bias adds, before Q.K^T. `--variant
    softmax=round_each` (the file's runtime's rounding) is refused in one line; nothing written."""
    from hwvit.core import isa
    from hwvit.onnx import build

    for config in ("symmetric", "default"):
        assert _compile(onnx_zoo.file("digits", config), tmp_path / config)[1] == SIZES[config]
    core, sizes = _compile(onnx_zoo.file("hf", "symmetric"), tmp_path / "hf")
    assert sizes == SIZES["symmetric"]
    names = [ins.name for ins in core.program]
    cfg = build.load(onnx_zoo.file("hf", "symmetric")).int_model.config
    qkv, tokens, inner = core.region("qkv")[0], cfg.num_tokens, cfg.inner_dim
    for j, name in enumerate(("q_table", "k_table")):
        i = names.index(f"layers.0.attn.{name}")
        ins = core.program[i]
        assert core.program[i - 1].op == isa.OP_LOAD and ins.unit == isa.U_GELU and ins.a == ins.d
        assert ins.n == (inner, tokens, 1, 1) and ins.d == isa.Gen(qkv + j * inner, (1, 3 * inner, 0, 0))
        assert names.index("layers.0.attn.v.bias") < i < names.index("layers.0.attn.h0.qk")
    no = tmp_path / "no"
    args = ["compile", "--checkpoint", str(onnx_zoo.file("digits", "symmetric")), "--variant", "softmax=round_each"]
    res = CliRunner().invoke(main, [*args, "--out", str(no)])
    message = res.output.strip()
    assert res.exit_code != 0 and len(message.splitlines()) == 1 and "softmax=round_each" in message, message
    assert not no.exists()


@pytest.mark.onnx
@pytest.mark.parametrize(
    ("name", "config"),
    [("digits", "symmetric"), ("digits", "default"), ("digits", "uint8"), ("second", "uint8"), ("hf", "symmetric"),
     ("hf", "uint8")],
)  # fmt: skip
def test_file_on_the_core_verilator(onnx_zoo, tmp_path, name, config):
    """Held-out images through the core (Verilator, 8 x 8; ten of digits, four of the random-weight
    ViTs): every logit equal to the file's integer model's, the cycles the cycle model's (at the
    file's probability width)."""
    from hwvit import toolchain
    from hwvit.core import cycles
    from hwvit.core import run as crun
    from hwvit.onnx import build

    toolchain.require("verilator")
    path = onnx_zoo.file(name, config)
    core, sizes = _compile(path, tmp_path / "core")
    assert sizes == SIZES[config]
    model = build.load(path).int_model
    x, labels = onnx_zoo.data(name, 10 if name == "digits" else 4)
    run = crun.run_images(core, model, model.quantize_input(x), "verilator", 8, 8)
    np.testing.assert_array_equal(run.got, run.expected)
    if labels is not None:
        assert (run.got.argmax(axis=1) == labels).sum() >= 9
    want = cycles.program_cycles(core.program, 8, 8, softmax_bits=sizes.get("SOFTMAX_BITS", 8))
    assert all(c["total"] == want["total"] for c in run.cycles)


def test_requant_onnxruntime_compiles(onnx_zoo, tmp_path):
    """`--variant requant=onnxruntime`: the uint8 file's model (onnxruntime's requant at every GEMM,
    its uint8 QLinearAdd at every residual and bias add) names GEMM_ROUNDING 5 and ADD_ROUNDING 6; a
    model whose adds are rounded two ways (a bias add the file's way, the rest onnxruntime's) is
    refused in one line naming it."""
    from dataclasses import replace

    from hwvit.core.compile import CoreCompileError, core_roundings
    from hwvit.onnx import build

    path = onnx_zoo.file("digits", "uint8")
    out = tmp_path / "core"
    res = CliRunner().invoke(main, ["compile", "--checkpoint", str(path), "--variant", "requant=onnxruntime",
                                    "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    sizes = yaml.safe_load((out / "manifest.yaml").read_text())["sizes"]
    assert {k: sizes[k] for k in KEYS if k in sizes} == {"GEMM_ROUNDING": 5, "ADD_ROUNDING": 6, "ZERO_POINTS": 1}
    m = build.load(path, requant="onnxruntime").int_model
    blk = m.blocks[1]
    fc1 = replace(blk.fc1, bias_add=replace(blk.fc1.bias_add, rounding="half_even"))
    mixed = replace(m, blocks=[*m.blocks[:1], replace(blk, fc1=fc1), *m.blocks[2:]])
    with pytest.raises(CoreCompileError, match=r"layers\.1\.mlp\.fc1\.bias rounds requant=half_even"):
        core_roundings(mixed)


@pytest.mark.onnx
def test_requant_onnxruntime_on_the_core_verilator(onnx_zoo, tmp_path):
    """The uint8 file's requant=onnxruntime model through the core (Verilator, 8 x 8, four held-out
    images): every logit equal to the model's, which equals onnxruntime's deployed GEMMs and adds."""
    from hwvit import toolchain
    from hwvit.core import run as crun
    from hwvit.onnx import build

    toolchain.require("verilator")
    path = onnx_zoo.file("digits", "uint8")
    res = CliRunner().invoke(main, ["compile", "--checkpoint", str(path), "--variant", "requant=onnxruntime",
                                    "--out", str(tmp_path / "core")])  # fmt: skip
    assert res.exit_code == 0, res.output
    from hwvit.core.coredir import read_core_dir

    model = build.load(path, requant="onnxruntime").int_model
    x, _ = onnx_zoo.data("digits", 4)
    run = crun.run_images(read_core_dir(tmp_path / "core"), model, model.quantize_input(x), "verilator", 8, 8)
    np.testing.assert_array_equal(run.got, run.expected)
