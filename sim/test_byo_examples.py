"""examples/byo on both simulators: AXI4-Stream blocks (own names, extra stage, active-high reset)
pass their vector sets with random stalls on both sides and a reset mid-stream; the copy with one
arithmetic bug fails naming block, set, first mismatching index, expected and got.

The valid/ready path of the same testbench (sim/byotb.py) runs the reference blocks through the
templates of `hwvit bind template`: every kind on Icarus, requant on Verilator too.
"""

from __future__ import annotations

import difflib
import shlex
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from hwvit import blocks, ops, toolchain, vectors
from hwvit.byo import run as byo
from hwvit.byo.template import template
from hwvit.cli import main
from hwvit.record import Tensor

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "byo"
# the team's shell around hwvit's reference softmax (its Verilog as the softmax kind lists it)
SOFTMAX_RTL = [EXAMPLES / "softmax" / "team_softmax.v", *(ROOT / p for p in blocks.get("softmax").rtl)]
GELU_RTL = [EXAMPLES / "gelu" / "team_gelu.v"]


def _check(design, set_dir, simulator, beats: int) -> None:
    """run_vectors then reset_midstream; both bit-exact (values, and row ends where the output has
    tlast/last), element counts as expected."""
    res = byo.run(design, set_dir, simulator)
    assert res.passed, res.message
    assert res.elements == beats, res.elements
    res = byo.run(design, set_dir, simulator, testcase="reset_midstream")
    assert res.passed, res.message
    before = res.extra["before_reset"]
    assert 0 < before < beats
    assert res.elements == beats + before, res.elements


@pytest.mark.xdist_group("byo_softmax")
def test_softmax_axis_tlast_rows(tmp_path, simulator):
    """40 random rows of 13 and 30 hard rows of 7 (all minimum, one huge, ties, ...): p and tlast."""
    record = vectors.random_record("softmax", 40, seed=21, row_len=13)
    a = vectors.write_set(record, tmp_path / "random")
    x = np.array(
        [[-128] * 7, [127] * 7, [-128, 127, -128, -128, -128, -128, -128], [0, 5, 0, 5, 0, 5, 0]] * 7
        + [[3, -3, 100, -100, 127, -128, 0]] * 2
    )
    table = record.tensors["exp_table"].data
    hard = vectors.random_record("softmax", 30, seed=22, row_len=7, exp_table=table)
    hard.tensors["x"] = Tensor(x, 8, True, "input")
    hard.tensors["p"] = Tensor(ops.softmax(x, table, out_bits=8, in_bits=8), 8, False, "output")
    b = vectors.write_set(hard, tmp_path / "hard")
    design = byo.prepare(SOFTMAX_RTL, EXAMPLES / "softmax" / "bind.yaml", None, [a, b])
    _check(design, a, simulator, 40 * 13)
    _check(design, b, simulator, 30 * 7)


@pytest.mark.xdist_group("byo_gelu")
def test_gelu_axis(tmp_path, simulator):
    """1000 random cases (edge cases first) and a random 6-bit in, 12-bit out table."""
    a = vectors.write_set(vectors.random_record("gelu", 1000, seed=23), tmp_path / "g8")
    design = byo.prepare(GELU_RTL, EXAMPLES / "gelu" / "bind.yaml", None, [a])
    _check(design, a, simulator, 1000)
    b = vectors.write_set(vectors.random_record("gelu", 300, seed=24, in_bits=6, out_bits=12), tmp_path / "g6")
    design = byo.prepare(GELU_RTL, EXAMPLES / "gelu" / "bind.yaml", None, [b])
    res = byo.run(design, b, simulator)
    assert res.passed and res.elements == 300, res.message


@pytest.mark.xdist_group("byo_gelu")
def test_gelu_bug_is_named(tmp_path, simulator, monkeypatch):
    """The mismatch line of a team's block carries what hwvit's own blocks' lines carry: the
    element, its operands, the clock of its output handshake and a command that reruns that vector
    alone through the same --rtl and --bind, and fails the same way."""
    good, bad = EXAMPLES / "gelu" / "team_gelu.v", EXAMPLES / "gelu" / "team_gelu_bug.v"
    changed = [
        ln
        for ln in difflib.unified_diff(good.read_text().splitlines(), bad.read_text().splitlines(), n=0)
        if ln[:1] in "+-" and not ln.startswith(("+++", "---"))
    ]
    assert len(changed) == 2, changed  # one line out, one line in: one deliberate bug
    record = vectors.random_record("gelu", 64, seed=25)
    set_dir = vectors.write_set(record, tmp_path / "layers.1.mlp.gelu")
    monkeypatch.chdir(ROOT)  # the rerun command names the files as given, here relative to the checkout
    bind, rtl = "examples/byo/gelu/bind.yaml", "examples/byo/gelu/team_gelu_bug.v"
    design = byo.prepare([rtl], bind, None, [set_dir])
    res = byo.run(design, set_dir, simulator)
    assert not res.passed
    # The bug reads entry x instead of x + 2^(XW-1): the first element where those differ.
    x, y, table = record.tensors["x"].data, record.tensors["y"].data, record.tensors["table"].data
    got = table[x & 0xFF]
    wrong = np.flatnonzero(got != y)
    first = int(wrong[0])
    f = res.first
    assert (f["tensor"], f["index"], f["vector"]) == ("y", first, first)
    assert (f["expected"], f["got"]) == (int(y[first]), int(got[first]))
    k = int(x[first]) + 128
    assert f["operands"] == f"x[{first}] {int(x[first])} -> table[{k}] {int(table[k])}"
    assert f["time_ns"] == 10 * f["cycle"] and 0 < f["cycle"] <= res.cycles + 300, f
    rerun = f"hwvit sim {set_dir} --rtl {rtl} --bind {bind} --simulator {simulator} --vector {first}"
    assert f["rerun"] == rerun
    for text in (
        f"team_gelu (gelu) random ({set_dir}): {len(wrong)} mismatches; first y[{first}]",
        f"expected {int(y[first])} got {int(got[first])}; vector {first}: {f['operands']}",
        f"output handshake at {f['time_ns']} ns (cycle {f['cycle']})",
        f"rerun this vector: {rerun}",
    ):
        assert text in res.message, (text, res.message)
    # the rerun command runs that element alone through the team's block and fails the same way
    out = CliRunner().invoke(main, shlex.split(rerun)[1:])
    assert out.exit_code == 1, out.output
    assert f"1 mismatch; first y[0] expected {int(y[first])} got {int(got[first])}; vector 0: x[0] " in out.output


def test_requant_axis_tuser_icarus(tmp_path):
    """Three fields in one beat: acc and M packed in a 64-bit tdata, the shift in tuser; active-low reset."""
    toolchain.require("icarus")
    set_dir = vectors.write_set(vectors.random_record("requant", 400, seed=27, out_bits=6), tmp_path / "rq")
    rtl = [EXAMPLES / "requant" / "team_requant.v", ROOT / "rtl" / "requant.v", ROOT / "rtl" / "round_sat.v"]
    design = byo.prepare(rtl, EXAMPLES / "requant" / "bind.yaml", None, [set_dir])
    assert design.bind.input["fields"]["shift"] == {"signal": "tuser", "offset": 0}
    _check(design, set_dir, "icarus", 400)


REFERENCE = ("requant", "residual_add", "gelu", "softmax", "layernorm")  # each with its kind's Verilog
SETS = {
    "requant": (300, {}),
    "residual_add": (300, {}),
    "gelu": (300, {}),
    "softmax": (20, {"row_len": 9}),
    "layernorm": (6, {"c": 16}),
}


def _reference(kind: str, tmp_path: Path, simulator: str) -> None:
    path = tmp_path / "bind.yaml"
    path.write_text(template(kind))
    cases, extra = SETS[kind]
    set_dir = vectors.write_set(vectors.random_record(kind, cases, seed=26, **extra), tmp_path / "set")
    design = byo.prepare(blocks.get(kind).rtl_paths(toolchain.repo().root), path, None, [set_dir])
    beats = cases * extra.get("row_len", extra.get("c", 1))
    _check(design, set_dir, simulator, beats)


@pytest.mark.parametrize("kind", list(REFERENCE))
def test_reference_valid_ready_icarus(kind, tmp_path):
    toolchain.require("icarus")
    _reference(kind, tmp_path, "icarus")


@pytest.mark.xdist_group("requant")
def test_reference_valid_ready_verilator(tmp_path):
    toolchain.require("verilator")
    _reference("requant", tmp_path, "verilator")


def test_row_ends_are_checked_icarus(tmp_path):
    """A `last` that is not the row end (here in_ready_o of the reference softmax) fails on `last`."""
    toolchain.require("icarus")
    path = tmp_path / "bind.yaml"
    data = yaml.safe_load(template("softmax"))
    data["output"]["last"] = "in_ready_o"
    path.write_text(yaml.safe_dump(data))
    set_dir = vectors.write_set(vectors.random_record("softmax", 4, seed=28, row_len=6), tmp_path / "set")
    rtl = toolchain.repo().rtl
    design = byo.prepare([rtl.parent / p for p in blocks.get("softmax").rtl], path, None, [set_dir])
    res = byo.run(design, set_dir, "icarus")
    assert not res.passed and res.first["tensor"] == "last", res.message
    assert res.elements == 24  # the probabilities themselves were all right
