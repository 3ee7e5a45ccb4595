"""The digits demo: the fixed split, the shipped checkpoint and its accuracy, training and its CLI."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml
from click.testing import CliRunner
from sklearn.datasets import load_digits

from hwvit.cli import main
from hwvit.float import digits, load_float, load_preset


def test_split_is_fixed_disjoint_and_scaled():
    x_tr, y_tr, x_te, y_te = digits.load_digits_split()
    assert x_tr.shape == (1348, 1, 8, 8) and x_te.shape == (449, 1, 8, 8)
    assert x_tr.dtype == torch.float32 and y_tr.dtype == torch.int64
    assert float(x_tr.min()) == 0.0 and float(x_tr.max()) == 1.0
    raw = load_digits()  # train + test is a partition of the whole set (as a multiset of images)
    full = sorted(row.tobytes() for row in (raw.images / 16.0).astype(np.float32).reshape(-1, 64))
    split = sorted(r.numpy().tobytes() for r in torch.cat([x_tr, x_te]).reshape(-1, 64))
    assert split == full
    assert sorted(torch.cat([y_tr, y_te]).tolist()) == sorted(raw.target.tolist())
    again = digits.load_digits_split()
    assert torch.equal(again[2], x_te) and torch.equal(again[3], y_te)
    other = digits.load_digits_split(seed=1)
    assert not torch.equal(other[3], y_te)


def test_shipped_checkpoint_loads_and_reaches_95_percent():
    model = digits.load_demo_model()
    assert model.cfg == load_preset("digits")
    assert not model.training
    acc = digits.demo_accuracy()
    assert acc >= 0.95, f"float test accuracy {acc:.4f}"
    meta = digits.demo_meta()
    assert meta["command"].startswith("hwvit train-demo") and meta["split_seed"] == 0
    assert abs(acc - meta["test_accuracy"]) <= 1.0 / 449  # the recorded figure, within one image
    assert meta["config"] == load_preset("digits").to_dict()


def test_training_is_deterministic_and_restores_threads():
    threads = torch.get_num_threads()
    a, _ = digits.train(seed=3, epochs=1)
    b, _ = digits.train(seed=3, epochs=1)
    assert torch.get_num_threads() == threads
    sa, sb = a.state_dict(), b.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    c, _ = digits.train(seed=4, epochs=1)
    assert not torch.equal(c.state_dict()["head.weight"], sa["head.weight"])
    with pytest.raises(ValueError, match="epochs must be a positive integer"):
        digits.train(epochs=0)


def test_cli_train_demo_writes_checkpoint_and_record(tmp_path):
    out = tmp_path / "d.safetensors"
    result = CliRunner().invoke(main, ["train-demo", "--out", str(out), "--epochs", "1", "--seed", "2", "-q"])
    assert result.exit_code == 0, result.output
    assert "float test accuracy" in result.output and str(out) in result.output
    model = load_float(out, family="hwvit")
    assert model.cfg == load_preset("digits")
    meta = yaml.safe_load(out.with_suffix(".yaml").read_text())
    assert meta["command"] == "hwvit train-demo --seed 2 --epochs 1" and meta["epochs"] == 1
    assert 0.0 <= meta["test_accuracy"] <= 1.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.safetensors", "d.yaml"]  # no temp files left


def test_cli_train_demo_bad_output_is_one_line(tmp_path):
    result = CliRunner().invoke(main, ["train-demo", "--out", str(tmp_path / "d.pt"), "--epochs", "1", "-q"])
    assert result.exit_code == 1
    assert "must be a .safetensors file" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(main, ["train-demo", "--epochs", "0"])
    assert result.exit_code == 2
