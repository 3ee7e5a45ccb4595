"""An imported ONNX file's arithmetic on the RTL core (docs/core.md): its GEMMs' requant and its
residual adds rounded half to even (rtl/vit_core.v GEMM_ROUNDING = 2, ADD_ROUNDING = 2),
activation zero points (ZERO_POINTS = 1, each instruction's in f27), 7-bit probabilities
(SOFTMAX_BITS = 7), an int8 bias added after a 3-D linear layer's requant and a table after Q.K^T
(hwvit.core.compile: a residual_add STREAM and a GELU-unit STREAM), bit-exact against hwvit's
integer model; `hwvit compile` names those parameters in its sizes only where a model needs them.

The test model is the seeded one-layer TINY model (tests/core_models.py) with every GEMM
requant and residual add multiplier rounded to a power of two (ties are then frequent: one in two
residual sums of two odd-weighted codes), seeded int8 biases after qkv, proj, fc1 and fc2, a 3/4
table after Q.K^T, 7-bit probabilities and zero points of both signs at every requant and add
(ZEROS), in three roundings: every one half to even, and each class alone half up. The stepped
image meets a GEMM tie (Q.K^T) and add ties: the stepped run compares every checked instruction's
output, so a core that ignored either rounding parameter fails it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner
from core_models import TINY, tiny_source

from hwvit import pipeline, toolchain
from hwvit.cli import main
from hwvit.core import compile as ccompile
from hwvit.core import cycles
from hwvit.core import run as crun
from hwvit.core.coredir import read_core_dir, write_core_dir
from hwvit.intvit import Trace

pytestmark = pytest.mark.xdist_group("vit_core")

IMAGES = 8
IMAGE = 0  # the held-out image whose run meets a GEMM tie (Q.K^T) and add ties


# Zero points as an asymmetric file's: each requant's output one (its consumers' inputs: Q, K and V
# the qkv bias add's output one, negative, so Q.K^T and P.V read operand zero points with the sign
# bit set), each add's (za, zb, zy)
ZEROS = {
    "embed": 4, "pos_add": (4, -3, 2), "qkv": 3, "qkv.bias": (3, -6, -5), "scores": -7, "context": 6,
    "proj": -5, "proj.bias": (-5, 4, -1), "add1": (2, -1, 2), "fc1": 7, "fc1.bias": (7, -2, 3), "fc2": -2,
    "fc2.bias": (-2, 1, -4), "add2": (2, -4, 2), "head": -3,
}  # fmt: skip


def _pow2_requant(rq, rounding, zero=0):
    """``rq`` dividing by the power of two nearest its ratio (M = 2^30), rounded ``rounding``, its
    output zero point ``zero``."""
    t = np.rint(-np.log2(np.asarray(rq.mult, np.float64) / 2.0 ** np.asarray(rq.shift))).astype(np.int64)
    mult, shift = np.full(np.shape(rq.mult), 1 << 30, np.int64), 30 + t
    if np.ndim(rq.mult) == 0:
        mult, shift = int(mult), int(shift)
    return replace(rq, mult=mult, shift=shift, rounding=rounding, zero=zero)


def _pow2_add(add, rounding, zeros=(0, 0, 0)):
    """``add`` with each multiplier the power of two at or below it, rounded ``rounding``, its zero
    points ``zeros`` (za, zb, zy)."""
    return replace(add, mult_a=1 << (int(add.mult_a).bit_length() - 1),
                   mult_b=1 << (int(add.mult_b).bit_length() - 1), rounding=rounding, zero_a=zeros[0],
                   zero_b=zeros[1], zero_out=zeros[2])  # fmt: skip


def _bias_add(layer, rounding, seed, zeros):
    """An imported model's int8 bias after ``layer``'s requant (seeded codes of both signs at a
    quarter of its output scale): the add rescales both to the output scale."""
    from hwvit.intvit.layers import IntResidual
    from hwvit.quant.params import residual_params

    n = layer.w.shape[0]
    codes = np.random.default_rng(seed).integers(-40, 41, n)
    s = layer.requant.s_out
    ma, mb, shift = residual_params(s, s / 4, s)
    add = IntResidual(mult_a=int(ma), mult_b=int(mb), shift=int(shift), s_a=s, s_b=s / 4, s_out=s, out_bits=8,
                      rounding=rounding)  # fmt: skip
    return replace(layer, post_bias=codes, bias_add=_pow2_add(add, rounding, zeros))


def _scores_table(scores):
    """A table after Q.K^T, as an imported model's separately quantized 1/sqrt(d) Mul: 3/4 of each code."""
    from hwvit.intvit.layers import IntGelu

    codes = np.arange(-128, 128)
    return IntGelu(table=np.rint(0.75 * codes).astype(np.int64), in_bits=8, out_bits=8, s_in=scores.s_out,
                   s_out=scores.s_out)  # fmt: skip


def _twin(m, gemm: str, add: str):
    """``m`` with power-of-two multipliers, its GEMMs rounded ``gemm`` and its adds ``add``; an int8
    bias added after each linear layer of the block, a table after Q.K^T, 7-bit probabilities and
    zero points (ZEROS), as an imported model has."""
    from hwvit.quant.layers import int_softmax

    def lin(layer, name, seed=None):
        layer = replace(layer, requant=_pow2_requant(layer.requant, gemm, ZEROS[name]))
        return layer if seed is None else _bias_add(layer, add, seed, ZEROS[f"{name}.bias"])

    blocks = []
    for b in m.blocks:
        a = b.attn
        softmax = int_softmax(a.softmax.s_in, 8, 7)  # 7-bit probabilities: a symmetric int8 file's
        z = ZEROS["qkv.bias"][2]
        scores, context = (_pow2_requant(getattr(a, n), gemm, ZEROS[n]) for n in ("scores", "context"))
        attn = replace(a, qkv=lin(a.qkv, "qkv", 1), proj=lin(a.proj, "proj", 2), softmax=softmax, scores=scores,
                       context=context, scores_table=_scores_table(a.scores), zero_q=z, zero_k=z, zero_v=z)  # fmt: skip
        add1, add2 = (_pow2_add(getattr(b, n), add, ZEROS[n]) for n in ("add1", "add2"))
        blocks.append(replace(b, attn=attn, fc1=lin(b.fc1, "fc1", 3), fc2=lin(b.fc2, "fc2", 4), add1=add1, add2=add2))
    pe = m.embed.patch_embed
    embed = replace(m.embed, patch_embed=replace(pe, proj=lin(pe.proj, "embed")),
                    pos_add=_pow2_add(m.embed.pos_add, add, ZEROS["pos_add"]))  # fmt: skip
    return replace(m, embed=embed, blocks=blocks, readout=replace(m.readout, head=lin(m.readout.head, "head")))


@pytest.fixture(scope="module")
def half_even(tmp_path_factory):
    """(half-even model, its compiled dir, IMAGES quantized held-out inputs, the two half-up twins)."""
    from hwvit.quant import QuantConfig, quantize_model

    source, data = tiny_source(biases=True)
    m = quantize_model(source.model, data.calib, QuantConfig())
    x, _ = pipeline.eval_inputs(source, IMAGES)
    xq = m.quantize_input(x.numpy())
    model = _twin(m, "half_even", "half_even")
    out = tmp_path_factory.mktemp("core") / "half_even"
    compiled = ccompile.compile_model(model)
    assert {k: compiled.sizes.get(k) for k in ("GEMM_ROUNDING", "ADD_ROUNDING", "SOFTMAX_BITS", "ZERO_POINTS")} == {
        "GEMM_ROUNDING": 2,
        "ADD_ROUNDING": 2,
        "SOFTMAX_BITS": 7,
        "ZERO_POINTS": 1,
    }
    write_core_dir(compiled, out, {"preset": "digits", "config": dict(TINY), "note": "test model"})
    return (
        model,
        read_core_dir(out),
        xq,
        {"gemm": _twin(m, "half_up", "half_even"), "add": _twin(m, "half_even", "half_up")},
    )


def _differing_points(a, b, x) -> set[str]:
    ta, tb = Trace(values=True), Trace(values=True)
    a.forward(x, trace=ta, quantized=True)
    b.forward(x, trace=tb, quantized=True)
    return {k for k in ta.values if not np.array_equal(ta.values[k][0], tb.values[k][0])}


def test_the_image_meets_ties_of_both_classes(half_even):
    """The half-up twins part from the half-even model on the stepped image: the GEMM twin at the
    scores (a Q.K^T tie: its inputs, q and k, the same), the add twin at the position add."""
    model, _, xq, twins = half_even
    x = xq[IMAGE : IMAGE + 1]
    gemm = _differing_points(model, twins["gemm"], x)
    assert "layers.0.attn.scores" in gemm and not {"pos_add", "layers.0.attn.qkv"} & gemm, gemm
    assert "pos_add" in _differing_points(model, twins["add"], x)


def test_zero_points_in_f27_round_trip(half_even):
    """Every instruction's zero points survive the program word (f27: three signed bytes, za first);
    the extremes too; a zero point outside int8 is refused."""
    from hwvit.core import isa

    _, core, _, _ = half_even
    assert any(any(ins.zeros) for ins in core.program)
    assert {ins.zeros for ins in core.program if ins.name == "layers.0.attn.qkv.bias"} == {ZEROS["qkv.bias"]}
    for ins in [*core.program, isa.Instr(op=isa.OP_GEMM, zeros=(-128, 127, -1))]:
        back = isa.from_fields(isa.word_fields(ins.word()))
        assert back.zeros == ins.zeros and back.word() == ins.word()
    assert isa.Instr(op=isa.OP_GEMM, zeros=(-128, 127, -1)).fields()[27] == 0xFF7F80
    with pytest.raises(ValueError, match="not int8"):
        isa.Instr(op=isa.OP_GEMM, zeros=(0, 128, 0)).word()


def test_program_of_the_imported_parts(half_even):
    """Each linear layer with a bias add is its GEMM (unchecked: the trace holds the sum) then an
    in-place residual_add STREAM over its rows with the bias constant read again for every row; the
    Q.K^T GEMMs are followed by a LOAD of the table into the GELU unit and a GELU STREAM over every
    head's scores in place."""
    from hwvit.core import isa

    model, core, _, _ = half_even
    prog = {ins.name: (i, ins) for i, ins in enumerate(core.program)}
    for name in ("layers.0.attn.qkv", "layers.0.attn.proj", "layers.0.mlp.fc1", "layers.0.mlp.fc2"):
        i, gemm = prog[name]
        j, add = prog[f"{name}.bias"]
        n = gemm.n[2]
        assert j == i + 1 and gemm.check is None and add.check == {"value": name, "index": [0]}
        assert (add.op, add.unit, add.n, add.a, add.d) == (
            isa.OP_STREAM,
            isa.U_ADD,
            (n, gemm.n[0], 1, 1),
            add.d,
            isa.Gen(gemm.d.base, (1, gemm.d.strides[0], 0, 0)),
        )
        assert add.b.strides == (1, 0, 0, 0)
        assert core.manifest["regions"][f"{name}.bias"] == [add.b.base, n]
    i, table = prog["layers.0.attn.scores_table"]
    assert core.program[i - 1].op == isa.OP_LOAD and core.program[i - 1].unit == isa.U_GELU
    heads, t = model.blocks[0].attn.heads, model.config.num_tokens
    assert table.unit == isa.U_GELU and table.n == (heads * t * t, 1, 1, 1) and table.a == table.d
    assert all(ins.check is None for ins in core.program if ins.name.endswith(".qk"))


@pytest.mark.parametrize("simulator", ["icarus", pytest.param("verilator", marks=pytest.mark.slow)])
def test_half_even_core_bit_exact(half_even, simulator):
    """Four images' logits equal the integer model's on 4 x 4; the stepped image's every checked
    instruction output equals its trace (Verilator: a build of its own, -m slow)."""
    toolchain.require(simulator)
    model, core, xq, _ = half_even
    run = crun.run_images(core, model, xq[:4], simulator, 4, 4)
    np.testing.assert_array_equal(run.got, run.expected)
    assert run.cycles[0]["total"] == cycles.program_cycles(core.program, 4, 4, softmax_bits=7)["total"]
    assert run.perf == [cycles.instr_cycles(ins, 4, 4, softmax_bits=7) for ins in core.program[:-1]]
    stepped = crun.find_mismatch(core, model, xq[IMAGE], simulator, 4, 4)
    assert stepped is not None and stepped["instruction"] is None, stepped


def test_compile_names_the_roundings(tmp_path):
    """`hwvit compile --variant requant=half_even`: GEMM_ROUNDING 2 in the sizes, no ADD_ROUNDING
    (hwvit's adds round half up); a plain model names neither (its directory as before); a model
    whose GEMMs round two ways is refused in one line naming the odd layer."""
    import yaml

    from hwvit.cli.loading import build_models
    from hwvit.quant import QuantConfig

    res = CliRunner().invoke(main, ["compile", "--model", "digits", "--variant", "requant=half_even",
                                    "--out", str(tmp_path / "he")])  # fmt: skip
    assert res.exit_code == 0, res.output
    sizes = yaml.safe_load((tmp_path / "he" / "manifest.yaml").read_text())["sizes"]
    assert sizes["GEMM_ROUNDING"] == 2 and "ADD_ROUNDING" not in sizes
    _, _, plain = build_models({"preset": "digits"}, QuantConfig(), 256, 0)
    assert not {"GEMM_ROUNDING", "ADD_ROUNDING"} & set(ccompile.compile_model(plain, images=False).sizes)
    odd = replace(plain, readout=replace(plain.readout, head=replace(
        plain.readout.head, requant=replace(plain.readout.head.requant, rounding="half_even"))))  # fmt: skip
    with pytest.raises(ccompile.CoreCompileError, match=r"head rounds requant=half_even, embed.proj requant=half_up"):
        ccompile.compile_model(odd, images=False)
