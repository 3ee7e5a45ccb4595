"""Quantization recipes (hwvit.quant.recipe, --recipe on compare and vectors)."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from hwvit.cli import main
from hwvit.core.compile import SUPPORTED
from hwvit.quant.recipe import from_dict, load

TARGET = "layers.1.mlp.fc1"
ARGS = ["--model", "digits", "--calib-images", "32", "--limit", "1", "-q"]


def _sets(root):
    """path -> (manifest, {tensor name: array}) of every set under ``root``."""
    out = {}
    for man in sorted(root.rglob("manifest.yaml")):
        m = yaml.safe_load(man.read_text())
        out[m["path"]] = (m, {t["name"]: np.load(man.parent / t["files"]["npy"]) for t in m["tensors"]})
    return out


@pytest.fixture(scope="session")  # session: kept when xdist runs other modules between its tests
def vector_trees(tmp_path_factory):
    root = tmp_path_factory.mktemp("rec")
    recipe = root / "r.yaml"
    recipe.write_text(f"layers:\n  '{TARGET}': {{weight_bits: 4}}\n")
    act6 = root / "a6.yaml"
    act6.write_text(f"layers:\n  '{TARGET}': {{act_bits: 6}}\n")
    runner = CliRunner()
    for name, extra in (("plain", []), ("r4", ["--recipe", str(recipe)]), ("a6", ["--recipe", str(act6)])):
        res = runner.invoke(
            main, ["vectors", *ARGS, "--blocks", "layers.*.mlp.*,layers.*.attn.proj", "--out", str(root / name), *extra]
        )
        assert res.exit_code == 0, res.output
    return root


def test_recipe_changes_that_layer_only(vector_trees):
    plain, r4 = _sets(vector_trees / "plain"), _sets(vector_trees / "r4")
    assert plain.keys() == r4.keys() and TARGET in r4
    m4, t4 = r4[TARGET]
    mp, tp = plain[TARGET]
    assert np.abs(t4["w"]).max() <= 7 and np.abs(tp["w"]).max() > 7  # 4-bit values in int8 storage
    assert m4["tensors"][[t["name"] for t in m4["tensors"]].index("w")]["bits"] == 8  # the RTL's int8 port
    assert not np.array_equal(t4["w"], tp["w"]) and not np.array_equal(t4["y"], tp["y"])
    for path, (m, tensors) in plain.items():
        if path == TARGET:
            continue
        # Every other layer keeps its parameters (weights, bias, multipliers) and, upstream of the
        # target, its whole vector set; downstream sets see the target's new outputs as inputs.
        params = [t["name"] for t in m["tensors"] if t["role"] == "parameter"]
        assert params
        for name in params:
            assert np.array_equal(tensors[name], r4[path][1][name]), (path, name)
        if path < TARGET:
            assert all(np.array_equal(tensors[n], r4[path][1][n]) for n in tensors), path
        assert m["params"] == r4[path][0]["params"]
    # the recipe is recorded in every manifest of the recipe run, and only there
    assert all(m["recipe"]["layers"] == {TARGET: {"weight_bits": 4}} for m, _ in r4.values())
    assert all("recipe" not in m for m, _ in plain.values())
    res = CliRunner().invoke(main, ["check", str(vector_trees / "r4")])
    assert res.exit_code == 0, res.output


def test_recipe_refusals(tmp_path):
    with pytest.raises(ValueError, match=r"weight_bits 9 unsupported; the RTL GEMM takes \[2, 8\]"):
        from_dict({"layers": {"head": {"weight_bits": 9}}})
    for bits in (1, 9, "6", True):
        with pytest.raises(ValueError, match=rf"act_bits {bits!r} unsupported; the RTL requant and GEMM take \[2, 8\]"):
            from_dict({"layers": {"head": {"act_bits": bits}}})
    with pytest.raises(ValueError, match="unknown key 'act_bit'"):
        from_dict({"layers": {"head": {"act_bit": 6}}})
    with pytest.raises(ValueError, match="softmax_bits 12 unsupported"):
        from_dict({"layers": {"layers.0.attn.softmax": {"softmax_bits": 12}}})
    bad = tmp_path / "bad.yaml"
    bad.write_text("layers: [1, 2\n")
    with pytest.raises(ValueError, match="cannot read recipe"):
        load(bad)
    typo = tmp_path / "typo.yaml"
    typo.write_text("layers:\n  'lyers.*': {weight_bits: 4}\n")
    res = CliRunner().invoke(main, ["compare", *ARGS, "--recipe", str(typo)])
    assert res.exit_code != 0 and "matches no layer" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(main, ["compare", *ARGS, "--recipe", str(typo), "--act-bits", "6"])
    assert res.exit_code != 0 and "--act-bits and --recipe" in res.output


GELU = "layers.1.mlp.gelu"  # fc1's consumer


def test_act_bits_narrow_that_layers_output_only(vector_trees):
    plain, a6 = _sets(vector_trees / "plain"), _sets(vector_trees / "a6")
    assert plain.keys() == a6.keys() and {TARGET, GELU} <= a6.keys()
    (m6, t6), (mp, tp) = a6[TARGET], plain[TARGET]
    # 6-bit requant: saturates to [-32, 31]; the calibrated scale puts max|x| at 31
    assert t6["y"].min() >= -32 and t6["y"].max() <= 31 and np.abs(tp["y"]).max() > 31
    assert np.abs(t6["y"]).max() > 15  # the 6-bit range is used, not a coarser one
    assert m6["params"]["out_bits"] == 6 and mp["params"]["out_bits"] == 8  # the RTL's OUT_BITS
    assert next(t for t in m6["tensors"] if t["name"] == "y")["bits"] == 6
    # the same weights and bias; the multipliers take the wider output scale (x4: 127/31)
    assert np.array_equal(t6["w"], tp["w"]) and np.array_equal(t6["bias"], tp["bias"])
    assert not np.array_equal(t6["multiplier"], tp["multiplier"]) or not np.array_equal(t6["shift"], tp["shift"])
    # the consumer's GELU table is indexed by the 6-bit values: 64 entries, 6-bit input port
    mg, tg = a6[GELU]
    assert mg["params"]["in_bits"] == 6 and len(tg["table"]) == 64 and plain[GELU][0]["params"]["in_bits"] == 8
    assert np.array_equal(tg["x"].reshape(-1), t6["y"].reshape(-1))
    for path, (m, tensors) in plain.items():
        if path < TARGET:  # upstream: byte-identical sets
            assert all(np.array_equal(tensors[n], a6[path][1][n]) for n in tensors), path
            assert m["params"] == a6[path][0]["params"]
    assert all(m["recipe"]["layers"] == {TARGET: {"act_bits": 6}} for m, _ in a6.values())
    res = CliRunner().invoke(main, ["check", str(vector_trees / "a6")])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_act_bits_sets_pass_on_the_rtl(vector_trees, simulator):
    # the RTL runs at the manifest's widths (gemm OUT_BITS 6, gelu IN_BITS 6) and stays bit-exact
    for path in (TARGET, GELU):
        res = CliRunner().invoke(main, ["sim", str(vector_trees / "a6" / path), "--simulator", simulator, "-q"])
        assert res.exit_code == 0 and "1 passed, 0 failed" in res.output, res.output


def test_act_bits_globs_and_widths():
    from hwvit import pipeline
    from hwvit.core.compile import CoreCompileError, compile_model
    from hwvit.quant import quantize_model

    source = pipeline.load_source("digits")
    calib = pipeline.calibration_inputs(source, 16)
    doc = {
        "layers": {
            "layers.0.attn.*": {"act_bits": 5},  # q, k, v, scores, context, proj (not probs)
            "head": {"act_bits": 4},  # the classifier's path names its output, logits
            "layers.0.attn.proj": {"act_bits": 7},  # later entries win
        }
    }
    m = quantize_model(source.model, calib, recipe=from_dict(doc))
    a = m.blocks[0].attn
    assert (a.scores.out_bits, a.context.out_bits, a.proj.out_bits, a.softmax.in_bits) == (5, 5, 7, 5)
    assert len(a.softmax.exp_table) == 32  # 5-bit scores: x - max <= 31
    assert m.readout.head.out_bits == 4 and m.bits_at("logits") == 4 and m.bits_at("layers.0.attn.probs") == 8
    assert m.blocks[1].attn.scores.out_bits == 8 and m.blocks[0].fc1.out_bits == 8
    x, _ = pipeline.eval_inputs(source, 4)
    logits = m.forward(x.numpy())
    assert logits.min() >= -8 and logits.max() <= 7
    # the core's requant is int8 only: a narrow layer is refused, naming it
    with pytest.raises(CoreCompileError, match=r"5-bit activations at layers\.0\.attn"):
        compile_model(m)
    with pytest.raises(ValueError, match="'layers.0.attn.probs' matches no layer"):
        quantize_model(source.model, calib, recipe=from_dict({"layers": {"layers.0.attn.probs": {"act_bits": 6}}}))


def test_isolated_error_grows_when_act_bits_drop():
    from hwvit import pipeline
    from hwvit.analysis.compare import compare
    from hwvit.quant import quantize_model

    source = pipeline.load_source("digits")
    calib = pipeline.calibration_inputs(source, 32)
    x, y = pipeline.eval_inputs(source, 8)
    rows = {}
    for bits in (8, 6, 4):
        m = quantize_model(source.model, calib, recipe=from_dict({"layers": {TARGET: {"act_bits": bits}}}))
        r = compare(source.model, m, x, y, name="digits")
        rows[bits] = {row["path"]: row for row in r.layers}
        assert r.recipe["layers"] == {TARGET: {"act_bits": bits}}  # the report records the recipe
    iso = [rows[b][TARGET]["isolated_sqnr_db"] for b in (8, 6, 4)]
    assert iso[0] > iso[1] + 6 and iso[1] > iso[2] + 6, iso  # ~6 dB per bit; at least 6 per 2 bits
    # upstream points are untouched by the recipe
    up = "layers.1.norm2"
    assert rows[4][up]["isolated_sqnr_db"] == rows[8][up]["isolated_sqnr_db"]


def test_compile_refuses_narrow_activations_and_records_a_recipe(tmp_path):
    narrow = tmp_path / "n.yaml"
    narrow.write_text(f"layers:\n  '{TARGET}': {{act_bits: 6}}\n")
    res = CliRunner().invoke(
        main, ["compile", "--model", "digits", "--recipe", str(narrow), "--out", str(tmp_path / "c")]
    )
    assert res.exit_code == 1 and "Traceback" not in res.output and not (tmp_path / "c").exists()
    assert res.output.strip().splitlines() == [
        f"Error: model 'digits' uses 6-bit activations at {TARGET} (recipe act_bits); the core runs {SUPPORTED}"
    ]
    w4 = tmp_path / "w4.yaml"
    w4.write_text(f"layers:\n  '{TARGET}': {{weight_bits: 4}}\n")
    res = CliRunner().invoke(main, ["compile", "--model", "digits", "--recipe", str(w4), "--out", str(tmp_path / "w")])
    assert res.exit_code == 0, res.output
    from hwvit.cli.core import _int_model
    from hwvit.core.coredir import read_core_dir

    _, m = _int_model(read_core_dir(tmp_path / "w"))  # `core run` rebuilds the recipe's model
    assert np.abs(m.blocks[1].fc1.w).max() <= 7


def test_clip_search_runs_at_the_points_width():
    # MSE calibration picks a range for the width it quantizes to: a 4-bit point gets the 4-bit
    # optimum, every other point keeps its 8-bit one
    from hwvit import pipeline
    from hwvit.quant import quantize_model
    from hwvit.quant.calibrate import calibrate

    source = pipeline.load_source("digits")
    calib = pipeline.calibration_inputs(source, 16)
    m8 = quantize_model(source.model, calib, recipe=from_dict({"default": {"calibration": "mse"}}))
    m4 = quantize_model(
        source.model, calib, recipe=from_dict({"default": {"calibration": "mse"}, "layers": {TARGET: {"act_bits": 4}}})
    )
    assert m4.ranges[TARGET] == calibrate(source.model, calib, "mse", bits=4)[TARGET] != m8.ranges[TARGET]
    assert all(m4.ranges[p] == m8.ranges[p] for p in m8.ranges if p != TARGET)
    assert m4.blocks[1].fc1.s_out == pytest.approx(m4.ranges[TARGET] / 7)  # 4 bits: range -> 2^3 - 1
