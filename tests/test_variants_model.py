"""Arithmetic variants in the integer model, its vectors and its reports (hwvit.variants end to end).

Each variant's kernel is tested against its reference in tests/test_variants_<module>.py; here:
chosen per layer (recipe) and model-wide (--variant), the forward runs it (numpy and torch
providers alike), the vector sets record it and `hwvit check` recomputes it, a team's own function
is taken and held to the block's guarantees, and `hwvit sweep --variants` puts variants side by side.
"""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from test_intvit import inputs_for, small_model

from hwvit import variants
from hwvit.cli import main
from hwvit.intvit import Trace
from hwvit.intvit.device import DeviceForward
from hwvit.quant import QuantConfig, quantize_model
from hwvit.quant.recipe import from_dict

ARGS = ["--model", "digits", "--calib-images", "32", "--limit", "1", "-q"]
EVERY = {family: variants.names(family) for family in variants.FAMILIES}


def test_every_family_lists_hwvits_own_first_and_the_published_ones():
    assert EVERY["requant"][0] == "half_up" and {"half_away", "half_even", "floor", "gemmlowp", "ibert"} <= set(
        EVERY["requant"]
    )
    assert EVERY["gelu"][0] == "lut" and {"ibert", "shiftgelu", "shiftgelu_exact", "tanh_lut"} <= set(EVERY["gelu"])
    assert EVERY["softmax"][0] == "hwvit"
    assert {"ibert", "shiftmax", "shiftmax_exact", "softermax", "ita", "log2", "log2_exact"} <= set(EVERY["softmax"])
    assert EVERY["layernorm"][0] == "hwvit"
    assert {"ibert", "ivit", "ivit_exact", "no_eps", "ptf", "ptf_exact"} <= set(EVERY["layernorm"])


def _records(int_model, x):
    tr = Trace(records=True)
    int_model.forward(x, trace=tr)
    return {r.path: r for r in tr.records}


def test_recipe_chooses_per_layer_and_the_forward_runs_it():
    model = small_model("vit-b16")
    recipe = from_dict(
        {
            "default": {"gelu": "shiftgelu_exact"},
            "layers": {
                "layers.0.attn.softmax": {"softmax": "ibert"},
                "layers.1.norm1": {"layernorm": "ivit"},
                "layers.0.mlp.fc1": {"requant": "gemmlowp"},
                "layers.1.mlp.gelu": {"gelu": "shiftgelu"},
            },
        }
    )
    int_model = quantize_model(model, inputs_for(model, 16, 1), recipe=recipe)
    recs = _records(int_model, inputs_for(model, 2, 2).numpy())
    assert recs["layers.0.attn.softmax"].kind == "softmax_ibert"
    assert recs["layers.0.attn.softmax"].params["variant"] == "ibert"
    assert recs["layers.1.attn.softmax"].kind == "softmax"  # hwvit's own elsewhere
    assert recs["layers.1.norm1"].kind == "layernorm_ivit" and recs["layers.0.norm1"].kind == "layernorm"
    assert recs["layers.0.mlp.fc1"].params["rounding"] == "gemmlowp"
    assert recs["layers.1.mlp.fc1"].params["rounding"] == "half_up"
    assert recs["layers.0.mlp.gelu"].kind == "gelu" and recs["layers.0.mlp.gelu"].params["variant"] == "shiftgelu_exact"
    # I-ViT's released ShiftGELU works on rows (the sigmoid on each row's maximum): its own kind, rows
    # of the hidden features, the kernel's output on them
    row_gelu = recs["layers.1.mlp.gelu"]
    assert row_gelu.kind == "gelu_shiftgelu" and row_gelu.params["variant"] == "shiftgelu"
    assert row_gelu.tensors["x"].data.shape[-1] == int_model.blocks[1].fc1.w.shape[0]  # hidden features
    gp = int_model.blocks[1].gelu.arith.params
    got = variants.get("gelu", "shiftgelu").kernel(row_gelu.tensors["x"].data, gp)
    assert np.array_equal(got, row_gelu.tensors["y"].data)
    # the softmax output is what the variant's kernel gives on the recorded input
    sm = recs["layers.0.attn.softmax"]
    arith = int_model.blocks[0].attn.softmax.arith
    assert np.array_equal(
        variants.get("softmax", "ibert").kernel(sm.tensors["x"].data, arith.params), sm.tensors["y"].data
    )
    # the GELU table is the variant's kernel at every input code
    gelu = int_model.blocks[0].gelu
    half = 1 << (gelu.in_bits - 1)
    v = variants.get("gelu", "shiftgelu_exact")
    from hwvit.variants.base import GeluContext

    want = v.kernel(np.arange(-half, half), v.prepare(GeluContext(gelu.s_in, gelu.in_bits, gelu.s_out, gelu.out_bits)))
    assert np.array_equal(gelu.table, want)
    # a variant's output scale feeds the next requant: I-BERT's probabilities are at 1/2^bits
    assert int_model.blocks[0].attn.softmax.s_out == v_scale("softmax", "ibert", int_model.blocks[0].attn.softmax)
    assert int_model.blocks[1].attn.softmax.s_out == 1 / 255


def v_scale(family, name, layer):
    from hwvit.variants.base import SoftmaxContext

    v = variants.get(family, name)
    ctx = SoftmaxContext(layer.s_in, layer.in_bits, layer.out_bits)
    return v.out_scale(ctx, v.prepare(ctx))


@pytest.mark.parametrize("family", ["requant", "gelu", "softmax", "layernorm"])
def test_every_variant_runs_in_the_model_on_numpy_and_torch_alike(family):
    """Each variant of the family model-wide: the torch provider's forward equals numpy's on every
    record (the variant kernels run on the host for both)."""
    model = small_model("vit-b16")
    calib, x = inputs_for(model, 16, 1), inputs_for(model, 2, 2).numpy()
    for name in EVERY[family][1:]:
        int_model = quantize_model(model, calib, QuantConfig(**{family: name}))
        cpu, dev = Trace(records=True, values=True), Trace(records=True, values=True)
        want = int_model.forward(x, trace=cpu)
        got = DeviceForward(int_model, "cpu")(x, trace=dev)
        assert np.array_equal(got, want), name
        assert [(r.kind, r.path, r.params) for r in dev.records] == [(r.kind, r.path, r.params) for r in cpu.records]
        for g, w in zip(dev.records, cpu.records, strict=True):
            assert all(np.array_equal(g.tensors[k].data, t.data) for k, t in w.tensors.items()), (name, w.path)


def test_unknown_variant_is_one_line_naming_the_known_ones(tmp_path):
    res = CliRunner().invoke(main, ["vectors", *ARGS, "--variant", "softmax=nope", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    known = ", ".join(EVERY["softmax"])
    assert f"--variant softmax=nope: unknown softmax variant 'nope'; known: {known}" in res.output
    res = CliRunner().invoke(main, ["vectors", *ARGS, "--variant", "fft=fast", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "block 'fft' has no variants" in res.output
    bad = tmp_path / "r.yaml"
    bad.write_text("layers:\n  'layers.0.attn.softmax': {softmax: nope}\n")
    res = CliRunner().invoke(main, ["vectors", *ARGS, "--recipe", str(bad), "--out", str(tmp_path / "o")])
    assert res.exit_code == 1 and len(res.output.strip().splitlines()) == 1
    assert f"layers.'layers.0.attn.softmax': unknown softmax variant 'nope'; known: {known}" in res.output


@pytest.fixture(scope="module")
def variant_sets(tmp_path_factory):
    root = tmp_path_factory.mktemp("var") / "sets"
    extra = ["--variant", "softmax=shiftmax", "--variant", "gelu=ibert", "--variant", "layernorm=ibert"]
    extra += ["--variant", "requant=half_even"]
    res = CliRunner().invoke(main, ["vectors", *ARGS, *extra, "--out", str(root)])
    assert res.exit_code == 0, res.output
    return root


def _manifest(set_dir):
    return yaml.safe_load((set_dir / "manifest.yaml").read_text())


def test_vector_sets_record_the_variant_and_check_recomputes_it(variant_sets):
    sm = _manifest(variant_sets / "layers.0.attn.softmax")
    assert sm["kind"] == "softmax_shiftmax" and sm["params"]["variant"] == "shiftmax"
    assert _manifest(variant_sets / "layers.0.norm1")["kind"] == "layernorm_ibert"
    assert _manifest(variant_sets / "layers.0.mlp.gelu")["params"]["variant"] == "ibert"
    assert _manifest(variant_sets / "layers.0.mlp.fc1")["params"]["rounding"] == "half_even"
    res = CliRunner().invoke(main, ["check", str(variant_sets)])
    assert res.exit_code == 0 and "sets valid" in res.output, res.output


@pytest.mark.parametrize(
    "path, tensor, message",
    [
        ("layers.0.attn.softmax", "y", "softmax_shiftmax: y[0][0] is"),
        ("layers.0.norm1", "y", "layernorm_ibert: y[0][0] is"),
        ("layers.0.mlp.gelu", "table", "gelu (ibert): table[0] is"),
        ("layers.0.mlp.fc1", "y", "gemm: y[0][0] is"),
    ],
)
def test_check_catches_an_output_the_variant_does_not_give(variant_sets, tmp_path, path, tensor, message):
    """A set whose outputs are not its recorded variant's: re-written with one value changed (its
    hashes made right, so only the recomputation can tell)."""
    from hwvit import vectors
    from hwvit.record import BlockRecord, Tensor

    vset = vectors.read(variant_sets / path)
    tensors = dict(vset.tensors)
    t = tensors[tensor]
    data = t.data.copy()
    flat = data.reshape(-1)
    lo = -(1 << (t.bits - 1)) if t.signed else 0
    flat[0] = flat[0] + 1 if flat[0] < (1 << (t.bits - (1 if t.signed else 0))) - 1 else lo
    tensors[tensor] = Tensor(data, t.bits, t.signed, t.role, t.scale)
    out = vectors.write_set(BlockRecord(vset.kind, vset.path, dict(vset.params), tensors), tmp_path / "bad" / "s")
    res = CliRunner().invoke(main, ["check", str(out.parent)])
    assert res.exit_code != 0 and message in res.output, res.output


def test_random_sets_of_a_variant_kind(tmp_path):
    out = tmp_path / "r" / "sm"
    res = CliRunner().invoke(main, ["vectors-random", "softmax_ibert", "--cases", "40", "--out", str(out)])
    assert res.exit_code == 0, res.output
    m = _manifest(out)
    assert m["kind"] == "softmax_ibert" and m["params"]["rows"] == 40
    assert CliRunner().invoke(main, ["check", str(out.parent)]).exit_code == 0


def test_sim_says_a_kind_has_no_verilog_yet(tmp_path, monkeypatch):
    """A kind that declares no Verilog (a team's own function; a new arithmetic before its datapath
    joins the row engine): `hwvit sim` refuses its sets in one line naming it. Every built-in kind but
    the team's own functions has its block."""
    import dataclasses

    from hwvit import blocks

    specs = blocks.kinds()
    assert sorted(k for k, s in specs.items() if not s.rtl) == ["layernorm_custom", "softmax_custom"]
    out = tmp_path / "r" / "ln"
    res = CliRunner().invoke(main, ["vectors-random", "layernorm_ptf", "--cases", "4", "--out", str(out)])
    assert res.exit_code == 0, res.output
    bare = dataclasses.replace(specs["layernorm_ptf"], rtl=())
    monkeypatch.setattr(blocks, "kinds", lambda: {**specs, "layernorm_ptf": bare})
    res = CliRunner().invoke(main, ["sim", str(out), "--simulator", "icarus"])
    assert res.exit_code != 0 and "layernorm_ptf has no Verilog block yet" in res.output, res.output


def test_sim_refuses_a_ptf_set_outside_the_binary64_domain(tmp_path):
    """layernorm_ptf's Verilog computes on a binary64 unit without subnormals, exact for scales and
    constants within 2^-400..2^400 (rtl/layernorm_ptf.v's header): `hwvit sim` refuses a set outside
    that in one line naming the constant, where it would otherwise report a mismatch; inside, the
    same rows at a scale of 2^-400 run."""
    from hwvit import blocks, vectors
    from hwvit.variants.fqvit_released import ptf_params

    spec = blocks.get("layernorm_ptf")
    x = np.array([[3, -5, 8, 0], [100, -40, 12, -37]], dtype=np.int64)
    alpha = np.array([0, 1, 2, 3])
    for name, s in (("out", 2.0**-401), ("in", 2.0**-400)):
        vp = ptf_params([1.0, -0.5, 2.0, 0.75], [0.1, -0.2, 0.3, 0.0], s, alpha, 0.0417, 8, 8)
        y = variants.get("layernorm", "ptf").kernel(x, vp)
        rec = spec.traced("ptf.domain", x, y, vp, 8, 8, {"x": s, "y": 0.0417})
        vectors.write_set(rec, tmp_path / name, seed=0)
    res = CliRunner().invoke(main, ["sim", str(tmp_path / "out"), "--simulator", "icarus"])
    assert res.exit_code != 0, res.output
    line = [ln for ln in res.output.splitlines() if "domain" in ln]
    assert len(line) == 1 and "s_f64[0]" in line[0] and "2^-400..2^400" in line[0], res.output
    assert "Traceback" not in res.output
    res = CliRunner().invoke(main, ["sim", str(tmp_path / "in"), "--simulator", "icarus"])
    assert res.exit_code == 0 and "PASS" in res.output, res.output


def test_ptf_quantizes_the_residual_stream_per_channel(tmp_path):
    """FQ-ViT's power-of-two factor in the model: every residual add that feeds a PTF LayerNorm
    writes channel c at s * 2^alpha_c (alpha from the calibration's channel ranges, not all 0), the
    next add reads that stream with per-channel multipliers, and the LayerNorm's recorded alpha is
    the stream's. The sets record both kinds and `hwvit check` recomputes them."""
    from hwvit import pipeline
    from hwvit.intvit import trace_model
    from hwvit.quant import QuantConfig, quantize_model

    source = pipeline.load_source("digits")
    calib = pipeline.calibration_inputs(source, 48)
    model = quantize_model(source.model, calib, QuantConfig(layernorm="ptf"))
    for i, blk in enumerate(model.blocks):
        assert blk.add1.alpha_out is not None and blk.add1.alpha_out.max() > 0, i
        assert np.ndim(blk.add2.mult_a) == 1 and np.array_equal(blk.add2.alpha_a, blk.add1.alpha_out)
        assert np.array_equal(blk.norm2.arith.params["alpha"], blk.add1.alpha_out)
    last = model.blocks[-1].add2
    assert model.readout.norm is None or np.array_equal(model.readout.norm.arith.params["alpha"], last.alpha_out)
    x, _ = pipeline.eval_inputs(source, 1)
    _, records, values = trace_model(model, x.numpy())
    kinds = {r.kind for r in records}
    assert {"residual_add_channels", "layernorm_ptf"} <= kinds and "residual_add" not in kinds
    q, scale = values["layers.0.add1"]
    add1 = model.blocks[0].add1
    assert np.ndim(scale) == 1 and np.allclose(scale, add1.s_out * 2.0**add1.alpha_out)
    # every traced point of the stream is within a few LSB of the float model (the scales are right)
    from hwvit.analysis.compare import compare

    layers = {row["path"]: row for row in compare(source.model, model, x).layers}
    for point in ("tokens", "layers.0.add1", "layers.0.add2"):
        assert layers[point]["sqnr_db"] > 25, (point, layers[point])
    from hwvit import vectors

    vectors.write_sets(records, tmp_path / "sets", seed=0)
    res = CliRunner().invoke(main, ["check", str(tmp_path / "sets")])
    assert res.exit_code == 0 and "sets valid" in res.output, res.output


TEAM = textwrap.dedent(
    """
    import numpy as np

    def softmax(x, ctx):
        '''A team's softmax: exact exp table in float at build time, integer division.'''
        d = x.max(axis=-1, keepdims=True) - x
        e = np.floor(2.0 ** 16 * np.exp(-d * ctx.s_in)).astype(np.int64)
        q = (1 << ctx.out_bits) - 1
        return (e * q) // e.sum(axis=-1, keepdims=True)

    def floats(x, ctx):
        return x * 0.5

    calls = [0]

    def moody(x, ctx):
        calls[0] += 1
        return np.zeros_like(x) + (calls[0] % 2)

    def wide(x, ctx):
        return np.full_like(x, 1 << 20)
    """
)


@pytest.fixture
def team_module(tmp_path, monkeypatch):
    (tmp_path / "teamarith.py").write_text(TEAM)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("teamarith", None)
    yield "teamarith"
    sys.modules.pop("teamarith", None)


def test_a_teams_function_gets_vectors_and_report_rows(team_module, tmp_path):
    spec = f"softmax={team_module}:softmax"
    out = tmp_path / "sets"
    res = CliRunner().invoke(main, ["vectors", *ARGS, "--variant", spec, "--out", str(out)])
    assert res.exit_code == 0, res.output
    m = _manifest(out / "layers.0.attn.softmax")
    assert m["kind"] == "softmax_custom" and m["params"]["variant"] == f"{team_module}:softmax"
    assert CliRunner().invoke(main, ["check", str(out)]).exit_code == 0
    res = CliRunner().invoke(
        main, ["compare", *ARGS[:4], "--limit", "16", "--variant", spec, "--out", str(tmp_path / "c")]
    )
    assert res.exit_code == 0, res.output
    assert "layers.0.attn.probs" in (tmp_path / "c" / "report.md").read_text()


@pytest.mark.parametrize(
    "fn, message",
    [
        ("floats", "returned float64 values; a variant returns integers"),
        ("moody", "gave two different results for the same input"),
        ("wide", "returned 1048576..1048576, outside unsigned 8 bits [0, 255]"),
        ("nothere", "has no function 'nothere'"),
    ],
)
def test_a_teams_function_that_breaks_the_contract_is_one_line(team_module, tmp_path, fn, message):
    res = CliRunner().invoke(
        main, ["vectors", *ARGS, "--variant", f"softmax={team_module}:{fn}", "--out", str(tmp_path / "o")]
    )
    assert res.exit_code != 0
    lines = [ln for ln in res.output.strip().splitlines() if ln.strip()]
    assert message in lines[-1] and "Traceback" not in res.output, res.output


def test_sweep_puts_variants_side_by_side(tmp_path):
    out = tmp_path / "sw"
    res = CliRunner().invoke(
        main,
        [
            "sweep", "--model", "digits", "--limit", "24", "--calib-images", "32", "--act-bits", "8",
            "--softmax-bits", "8", "--exp-entries", "256", "--percentiles", "99.99", "--no-shift",
            "--variants", "softmax=ibert,log2", "--variants", "layernorm=ivit", "--out", str(out), "-q",
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    md = (out / "sweep.md").read_text()
    assert "## Block arithmetic, side by side" in md
    assert "| | hwvit (baseline) | softmax=ibert | softmax=log2 | layernorm=ivit |" in md
    assert "| layers.0.attn.probs |" in md
    rows = yaml.safe_load((out / "sweep.json").read_text())["rows"]
    assert rows[0]["arithmetic"] == "hwvit"
    assert [r["arithmetic"] for r in rows if r["arithmetic"] != "hwvit"] == [
        "softmax=ibert",
        "softmax=log2",
        "layernorm=ivit",
    ]
    assert all("layers.0.attn.probs" in r["layers"] for r in rows)


def test_info_lists_every_block_and_variant():
    res = CliRunner().invoke(main, ["info"])
    assert res.exit_code == 0, res.output
    for family in variants.FAMILIES:
        assert f"{family} variants" in res.output and ", ".join(EVERY[family]) in res.output
    assert "softmax_ibert" in res.output and "relu_toy" not in res.output


def test_the_rtl_core_refuses_what_it_does_not_compute(tmp_path):
    """The core runs hwvit's softmax, LayerNorm and requant; a GELU variant is only a table for it."""
    for spec in ("softmax=ibert", "requant=floor", "layernorm=ivit"):
        res = CliRunner().invoke(
            main, ["compile", "--model", "digits", "--variant", spec, "--out", str(tmp_path / "c")]
        )
        assert res.exit_code != 0 and spec in res.output and "the core runs" in res.output, res.output
    res = CliRunner().invoke(
        main, ["compile", "--model", "digits", "--variant", "gelu=ibert", "--out", str(tmp_path / "g")]
    )
    assert res.exit_code == 0, res.output
