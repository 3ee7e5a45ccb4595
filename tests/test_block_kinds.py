"""The block-kind registry (hwvit.blocks): one module per kind, and everything iterating it.

- every built-in kind declares a whole kind, and the old per-kind tables are views of it;
- a toy kind added the documented way (one Python module, one Verilog file: examples/blocks/,
  docs/blocks.md) runs end to end through the CLI: random set, check, bind template, lint,
  synthesis, simulation on Icarus and Verilator, bit-exact; a broken copy of its Verilog fails
  with a mismatch line;
- a bad block module gets one line and a non-zero exit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hwvit import blocks, covbins, record
from hwvit.byo import kinds as byo_kinds

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "examples" / "blocks"
BUILTIN = ("requant", "gemm", "gelu", "softmax", "layernorm", "residual_add", "divu", "isqrt")


def test_builtin_kinds_in_seed_order():
    assert blocks.names()[: len(BUILTIN)] == BUILTIN
    assert [blocks.get(k).seed for k in BUILTIN] == list(range(len(BUILTIN)))
    for name in BUILTIN:
        spec = blocks.get(name)
        assert Path(spec.source).name == f"{name}.py"
        assert (ROOT / spec.rtl[0]).name == f"{name}.v" and all((ROOT / p).is_file() for p in spec.rtl)
        assert spec.testbench == f"sim/test_{name}.py" and (ROOT / spec.testbench).is_file()
        assert set(spec.bins) >= {"out_stall"}


def test_old_tables_are_views_of_the_registry():
    assert record.KINDS == blocks.names()
    assert record.UNIT_KINDS == ("divu", "isqrt")
    assert record.LUT_TENSOR == {"gelu": "table", "softmax": "exp_table"}
    assert record.CONTRACT["softmax"] is blocks.get("softmax").contract
    assert covbins.RESET_STATES["gemm"] == blocks.get("gemm").reset_states
    with_verilog = [k for k, spec in blocks.kinds().items() if spec.variant and spec.ports is not None]
    want = ["gelu", "layernorm", "requant", "residual_add", "softmax", *with_verilog]
    assert sorted(byo_kinds.KINDS) == sorted(want)  # the arithmetic variants with a Verilog twin too


@pytest.mark.parametrize("name", BUILTIN)
def test_unknown_kind_names_the_known_ones(name):
    with pytest.raises(ValueError, match=f"unknown block kind 'nope'; choose from {', '.join(BUILTIN)}"):
        blocks.get("nope")
    assert blocks.get(name).name == name


def _toy_env(folder: Path) -> dict[str, str]:
    return {**os.environ, blocks.ENV: str(folder / "relu_toy.py")}


def _hwvit(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    code = "import sys; from hwvit.cli import main; sys.argv[0] = 'hwvit'; main()"
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=600)


def test_toy_kind_kernel_equals_its_reference(monkeypatch):
    monkeypatch.setenv(blocks.ENV, str(TOY / "relu_toy.py"))
    spec = blocks.get("relu_toy")
    rng = np.random.default_rng(5)
    for bits in (2, 8, 32):
        x = rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), 2000)
        x[:2] = [-(1 << (bits - 1)), (1 << (bits - 1)) - 1]
        assert spec.kernel(x, bits).tolist() == spec.reference(x.tolist())
    rec = spec.random(np.random.default_rng(1), 40, {"bits": 8})
    assert rec.tensors["x"].data[:5].tolist() == [-128, -1, 0, 1, 127]
    monkeypatch.delenv(blocks.ENV)
    assert "relu_toy" not in blocks.names()  # the registry follows the environment


def test_toy_kind_end_to_end(tmp_path):
    """The worked example of docs/blocks.md: a kind from one module and one Verilog file, through
    every command that iterates the registry, on both simulators."""
    toy = tmp_path / "toy"
    shutil.copytree(TOY, toy)
    env = _toy_env(toy)
    sets = tmp_path / "sets"
    res = _hwvit(env, "vectors-random", "relu_toy", "--cases", "300", "--seed", "3", "--out", str(sets / "relu"))
    assert res.returncode == 0, res.stderr
    res = _hwvit(env, "check", str(sets))
    assert res.returncode == 0 and "1 set" in res.stdout + res.stderr, res.stdout + res.stderr
    res = _hwvit(env, "bind", "template", "relu_toy")
    assert res.returncode == 0 and "kind: relu_toy" in res.stdout and "BITS: {from: bits}" in res.stdout
    res = _hwvit(env, "synth", "--block", "relu_toy", "--out", str(tmp_path / "synth.md"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "relu_toy" in (tmp_path / "synth.md").read_text()

    from hwvit import synth

    assert synth.lint([str(toy / "relu_toy.v")], {"BITS": 8}) == []
    builds = str(tmp_path / "builds")
    res = _hwvit(env, "sim", str(sets), "--simulator", "both", "--build-dir", builds)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert out.count("PASS") >= 2 and "icarus" in out and "verilator" in out, out

    # A broken block: negative inputs pass through. The same set must now fail, naming an element.
    verilog = toy / "relu_toy.v"
    verilog.write_text(verilog.read_text().replace("in_data_i[BITS-1] ? {BITS{1'b0}} : in_data_i", "in_data_i"))
    res = _hwvit(env, "sim", str(sets), "--simulator", "icarus", "--build-dir", builds)
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "FAIL" in out, out
    assert "first y[0] expected 0 got -128" in out, out  # element 0 of the edges: the bottom rail


def test_bad_block_module_is_one_line(tmp_path):
    bad = tmp_path / "bad_kind.py"
    bad.write_text("raise RuntimeError('no such thing')\n")
    res = _hwvit({**os.environ, blocks.ENV: str(bad)}, "vectors-random", "requant", "--out", str(tmp_path / "o"))
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "cannot load block module" in lines[0] and "no such thing" in lines[0], res.stderr
    missing = _hwvit({**os.environ, blocks.ENV: str(tmp_path / "nope.py")}, "vectors-random", "requant")
    assert missing.returncode != 0 and "no such file" in missing.stderr and "Traceback" not in missing.stderr


def test_duplicate_kind_or_seed_is_refused(tmp_path, monkeypatch):
    text = (TOY / "relu_toy.py").read_text()
    twin = tmp_path / "twin.py"
    twin.write_text(text.replace('name="relu_toy"', 'name="gelu"'))
    monkeypatch.setenv(blocks.ENV, str(twin))
    with pytest.raises(blocks.BlockError, match="block kind 'gelu' is declared twice"):
        blocks.kinds()
    twin.write_text(text.replace("seed=1000", "seed=3"))
    monkeypatch.setenv(blocks.ENV, os.pathsep.join([str(twin), ""]))
    with pytest.raises(blocks.BlockError, match="seed 3 of 'relu_toy' is 'softmax'"):
        blocks.kinds()
