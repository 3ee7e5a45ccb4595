"""What made a vector set (manifest ``provenance``) and `hwvit check DIR --against OTHER`."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from click.testing import CliRunner

from hwvit import vectors
from hwvit.cli import main
from hwvit.vectors import provenance as prov
from hwvit.vectors.against import compare_trees

OPTIONS = {"model": {"dim": 64}, "quant": {"act_bits": 8}, "seed": 0}


def _records():
    out = []
    for kind, path in (("layernorm", "layers.0.norm1"), ("gelu", "layers.0.mlp.gelu"), ("requant", "pool")):
        rec = vectors.random_record(kind, 4, 3)
        rec.path = path
        out.append(rec)
    return out


def _made(calibration=None, options=OPTIONS):
    calibration = np.zeros((2, 3), np.float32) if calibration is None else calibration
    model = torch.nn.Linear(3, 2)
    torch.nn.init.constant_(model.weight, 0.5)
    torch.nn.init.constant_(model.bias, 0.25)
    return prov.provenance(model, calibration, np.ones((1, 3), np.float32), options)


def _tree(root: Path, records, made) -> Path:
    vectors.write_sets(records, root, seed=0, source_sha256="cd" * 32, model_config=OPTIONS, provenance=made)
    return root


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_digests_cover_dtype_shape_and_values():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert prov.array_sha256(a) == prov.array_sha256(torch.from_numpy(a)) == prov.array_sha256(a.T.copy().T)
    assert prov.array_sha256(a) != prov.array_sha256(a.reshape(3, 2))
    assert prov.array_sha256(a) != prov.array_sha256(a.astype(np.float64))
    b = a.copy()
    b[1, 2] = np.nextafter(b[1, 2], np.float32(9))
    assert prov.array_sha256(a) != prov.array_sha256(b)
    m = torch.nn.Linear(3, 2)
    m2 = copy.deepcopy(m)
    assert prov.weights_sha256(m) == prov.weights_sha256(m2)
    with torch.no_grad():
        m2.bias[0] += 1e-6
    assert prov.weights_sha256(m) != prov.weights_sha256(m2)


def test_manifest_records_what_made_the_set(tmp_path):
    made = _made()
    root = _tree(tmp_path / "a", _records(), made)
    man = vectors.read(root / "pool").manifest
    assert man["provenance"] == made and man["provenance"]["options"] == OPTIONS
    assert list(man)[-2:] == ["provenance", "tensors"]
    # a set without provenance (vectors-random) reads as before
    plain = vectors.write_set(vectors.random_record("gelu", 3, 1), tmp_path / "plain")
    assert "provenance" not in vectors.read(plain).manifest


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda p: p.pop("options"), "provenance must map exactly"),
        (lambda p: p.update(weights_sha256="xyz"), "provenance weights_sha256 is not a sha256"),
        (lambda p: p.update(options=[1, 2]), "provenance options is not a mapping"),
    ],
)
def test_bad_provenance_is_rejected(tmp_path, edit, message):
    root = _tree(tmp_path / "a", _records()[:1], _made())
    path = root / "layers.0.norm1" / "manifest.yaml"
    man = yaml.safe_load(path.read_text())
    edit(man["provenance"])
    path.write_text(yaml.safe_dump(man, sort_keys=False))
    r = run("check", root)
    assert r.exit_code == 1 and message in r.output and "Traceback" not in r.output


def test_identical_trees(tmp_path):
    a = _tree(tmp_path / "a", _records(), _made())
    b = _tree(tmp_path / "b", _records(), _made())
    r = run("check", a, "--against", b)
    assert r.exit_code == 0, r.output
    assert r.output == f"3 sets identical to {b}\n"
    r = run("check", a / "pool", "--against", b / "pool", "-v")
    assert r.exit_code == 0 and r.output == f"same .\n1 set identical to {b / 'pool'}\n"


def test_differences_name_field_tensor_element_and_inputs(tmp_path):
    a = _tree(tmp_path / "a", _records(), _made())
    other = _records()
    ln = other[0]  # layers.0.norm1: one more in its multiplier, one more in y[2, 1]
    ln.params["multiplier"] += 1
    y = ln.tensors["y"].data
    y[2, 1] = y[2, 1] + 1 if y[2, 1] < 127 else y[2, 1] - 1
    b = _tree(tmp_path / "b", other, _made(calibration=np.ones((2, 3), np.float32)))
    r = run("check", a, "--against", b)
    assert r.exit_code == 1
    lines = r.output.splitlines()
    want_y = (int(_records()[0].tensors["y"].data[2, 1]), int(y[2, 1]))
    m = _records()[0].params["multiplier"]
    # sets in name order: gelu, norm1, pool; gelu and pool differ only in what made them (no element)
    assert lines[0].startswith("DIFF layers.0.mlp.gelu: field provenance.calibration_sha256 (")
    assert "tensor" not in lines[0] and "tensor" not in lines[2]
    assert lines[1] == (
        f"DIFF layers.0.norm1: field params.multiplier ({m} vs {m + 1}); tensor y[2, 1] ({want_y[0]} vs {want_y[1]})"
    )
    assert lines[3] == "first difference: layers.0.mlp.gelu"
    assert lines[4].startswith("  made by: hwvit ") and "calibration inputs " in lines[4]
    assert lines[6] == "  made differently: provenance.calibration_sha256"
    assert lines[-1] == f"Error: 3 of 3 sets differ from {b}"


def test_alike_inputs_point_at_the_machine(tmp_path):
    a = _tree(tmp_path / "a", _records(), _made())
    other = _records()
    other[2].tensors["y"].data.flat[0] ^= 1
    b = _tree(tmp_path / "b", other, _made())
    (d,) = [d for d in compare_trees(a, b) if d.differs]
    assert d.name == "pool" and d.field is None and d.element[:2] == ("y", "[0]")
    assert d.made_apart == [] and "the difference comes from the machines" in d.made_lines()[-1]


def test_options_missing_sets_and_invalid_sets(tmp_path):
    a = _tree(tmp_path / "a", _records(), _made())
    b = _tree(tmp_path / "b", _records()[1:], _made(options={**OPTIONS, "quant": {"act_bits": 6}}))
    (b / "pool" / "y.hex").write_text("zz\n")
    diffs = {d.name: d for d in compare_trees(a, b)}
    assert diffs["layers.0.norm1"].problem == f"only in {a}, not in {b}"
    assert diffs["pool"].problem.startswith(f"invalid set {b / 'pool'}: y.hex")
    gelu = diffs["layers.0.mlp.gelu"]
    assert gelu.field == ("provenance.options.quant.act_bits", 8, 6)
    assert gelu.made_apart == ["provenance.options.quant.act_bits"]
    r = run("check", a, "--against", tmp_path / "nothing")
    assert r.exit_code == 2  # click: OTHER must exist
    (tmp_path / "empty").mkdir()
    r = run("check", a, "--against", tmp_path / "empty")
    assert r.exit_code == 1 and r.output == f"Error: {tmp_path / 'empty'}: no vector set (manifest.yaml) found\n"


def test_a_set_without_provenance_compares(tmp_path):
    a = tmp_path / "a"
    vectors.write_set(vectors.random_record("gelu", 300, 1), a)
    shutil.copytree(a, tmp_path / "b")
    r = run("check", a, "--against", tmp_path / "b")
    assert r.exit_code == 0 and r.output.endswith("1 set identical to " + str(tmp_path / "b") + "\n")
    vectors.write_set(vectors.random_record("gelu", 300, 2), tmp_path / "c", seed=2)
    (d,) = compare_trees(a, tmp_path / "c")
    assert d.field == ("seed", None, 2) and d.made_apart == ["seed"] and d.element[0] == "x"
    vectors.write_set(vectors.random_record("gelu", 300, 2), tmp_path / "d")
    (d,) = compare_trees(a, tmp_path / "d")
    assert d.made_apart == [] and d.made_lines()[-1].endswith("(no provenance: weights, images and options unknown)")
