"""Quantization recipes (hwvit.quant.recipe, --recipe on compare and vectors)."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from hwvit.cli import main
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


@pytest.fixture(scope="module")
def vector_trees(tmp_path_factory):
    root = tmp_path_factory.mktemp("rec")
    recipe = root / "r.yaml"
    recipe.write_text(f"layers:\n  '{TARGET}': {{weight_bits: 4}}\n")
    runner = CliRunner()
    for name, extra in (("plain", []), ("r4", ["--recipe", str(recipe)])):
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
