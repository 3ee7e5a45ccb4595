"""`hwvit sensitivity`: the sorted table, and its proposed recipe meets its target through compare."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hwvit.cli import main
from hwvit.quant.recipe import load

DATA = ["--model", "digits", "--limit", "60", "--calib-images", "32"]
GROUPS = "embed.*,layers.*.attn.*,layers.*.mlp.*,head"
TARGET = 1.0  # percentage points of top-1


@pytest.fixture(scope="session")  # session: kept when xdist runs other modules between its tests
def sens(tmp_path_factory):
    out = tmp_path_factory.mktemp("sens") / "s"
    res = CliRunner().invoke(
        main,
        [
            "sensitivity",
            *DATA,
            "--bits",
            "2",
            "--groups",
            GROUPS,
            "--target-top1-drop",
            str(TARGET),
            "--out",
            str(out),
            "-q",
        ],
    )
    assert res.exit_code == 0, res.output
    return out, json.loads((out / "sensitivity.json").read_text())


def test_table_sorted_and_complete(sens):
    out, doc = sens
    rows = doc["rows"]
    assert [r["group"] for r in rows] != [] and sorted(r["group"] for r in rows) == sorted(GROUPS.split(","))
    keys = [(r["d_acc"], r["d_sqnr_db"]) for r in rows]
    assert keys == sorted(keys)  # most sensitive (largest loss) first
    assert all(r["bits"] == 2 for r in rows)
    assert all(r["d_sqnr_db"] < 0 for r in rows)  # 2-bit weights anywhere lose logits SQNR
    md = (out / "sensitivity.md").read_text()
    assert all(r["group"] in md for r in rows) and (out / "sensitivity.png").stat().st_size > 5000


def test_proposed_recipe_meets_target_through_compare(sens):
    out, doc = sens
    recipe = load(out / "recipe.yaml")  # the written recipe reads back
    prop = doc["proposal"]
    assert recipe.weight_bits == 2 and len(prop["wide_groups"]) < len(doc["rows"])
    wide = {g for g, over in recipe.layers if over == {"weight_bits": 8}}
    assert wide and all(g.startswith(("embed", "layers", "head")) for g in wide)
    res = CliRunner().invoke(main, ["compare", *DATA, "--recipe", str(out / "recipe.yaml"), "--json"])
    assert res.exit_code == 0, res.output
    top1 = json.loads(res.output)["top1_int"]
    res = CliRunner().invoke(main, ["compare", *DATA, "--json"])
    top1_8 = json.loads(res.output)["top1_int"]
    assert top1_8 == pytest.approx(doc["meta"]["baseline_acc"])
    assert 100 * (top1_8 - top1) <= TARGET + 1e-9


def test_act_bits_knob(tmp_path):
    # --knob act_bits: each row narrows only its group's activation points (recipe act_bits)
    from hwvit import pipeline
    from hwvit.analysis.sensitivity import Evaluator
    from hwvit.quant import quantize_model

    source = pipeline.load_source("digits")
    calib = pipeline.calibration_inputs(source, 16)
    ev = Evaluator(source.model, calib, None, None, knob="act_bits")
    paths = ev.paths()
    assert paths[:3] == ["input", "embed", "tokens"] and "logits" in paths and "head" not in paths
    assert not any(p.endswith((".probs", ".softmax")) for p in paths) and len(paths) == len(set(paths))
    m = quantize_model(source.model, calib, recipe=ev.recipe(8, {"layers.0.mlp.fc1": 4}))
    assert {p: b for p, b in m.point_bits.items() if b != 8} == {"layers.0.mlp.fc1": 4}
    rise = quantize_model(source.model, calib, recipe=ev.recipe(4, {"layers.0.mlp.fc1": 8}))
    assert rise.bits_at("layers.0.mlp.fc1") == 8 and rise.bits_at("layers.1.add2") == 4
    out = tmp_path / "s"
    args = ["sensitivity", "--model", "digits", "--limit", "20", "--calib-images", "16", "--knob", "act_bits"]
    res = CliRunner().invoke(main, [*args, "--bits", "3", "--groups", "layers.0.*,logits", "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "sensitivity.json").read_text())
    assert doc["meta"]["knob"] == "act_bits" and doc["meta"]["description"].startswith("Activations")
    rows = {r["group"]: r for r in doc["rows"]}
    assert rows["logits"]["layers"] == ["logits"] and "layers.0.mlp.fc1" in rows["layers.0.*"]["layers"]
    assert all(r["d_sqnr_db"] < 0 for r in rows.values())  # 3-bit activations lose logits SQNR
