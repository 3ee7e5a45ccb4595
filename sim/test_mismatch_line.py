"""The mismatch line of a block with a planted bug, on both simulators (issue 26): block and set,
vector and element, expected and got, the operands that made the element, the time and cycle of
its output handshake, and a command that reruns only that vector (and fails the same way).

The bug: a copy of the repository's rtl/ and sim/ whose requant.v flips the LSB of one output
value (the set's first unsaturated one), wherever it comes out.
"""

from __future__ import annotations

import shutil

import numpy as np
from click.testing import CliRunner

from hwvit import simulate, toolchain, vectors
from hwvit.cli import main

ORIGINAL = "assign out_data_o = out_q;"


def plant(v: int) -> str:
    return f"assign out_data_o = (out_q == 8'd{v & 0xFF}) ? out_q ^ 8'd1 : out_q;  // planted bug"


def test_planted_bug_gives_a_line_to_act_on(simulator, tmp_path, monkeypatch):
    tree = tmp_path / "tree"
    for part in ("rtl", "sim"):
        shutil.copytree(toolchain.repo().root / part, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
    record = vectors.random_record("requant", 64, seed=5)
    y = record.tensors["y"].data
    v = int(y[np.flatnonzero(np.abs(y) < 100)[0]])
    hits = np.flatnonzero(y == v)
    i, bad = int(hits[0]), v ^ 1
    rtl = tree / "rtl" / "requant.v"
    text = rtl.read_text()
    assert text.count(ORIGINAL) == 1
    rtl.write_text(text.replace(ORIGINAL, plant(v)))
    monkeypatch.setattr(toolchain, "repo", lambda: toolchain.Repo(tree))
    set_dir = vectors.write_set(record, tmp_path / "set")
    result = simulate.run(set_dir, simulator)
    assert not result.passed and result.mismatches == hits.size
    first = result.first
    assert (first["tensor"], first["index"], first["expected"], first["got"], first["vector"]) == ("y", i, v, bad, i)
    acc, mult, shift = (int(record.tensors[n].data[i]) for n in ("acc", "multiplier", "shift"))
    assert first["operands"] == f"acc[{i}] {acc}, requant multiplier[{i}] {mult}, shift[{i}] {shift}"
    assert first["time_ns"] > 0 and first["cycle"] == first["time_ns"] // 10
    rerun = f"hwvit sim {set_dir} --simulator {simulator} --vector {i}"
    assert first["rerun"] == rerun
    for text in ("requant random", str(set_dir), f"y[{i}] expected {v} got {bad}", first["operands"], rerun):
        assert text in result.message, (text, result.message)
    assert f"output handshake at {first['time_ns']} ns (cycle {first['cycle']})" in result.message

    # the rerun command runs that vector alone and fails the same way; another vector passes
    res = CliRunner().invoke(main, rerun.split()[1:])
    assert res.exit_code == 1, res.output
    assert "FAIL requant" in res.output and ": 1 elements" in res.output
    assert f"acc[0] {acc}, requant multiplier[0] {mult}, shift[0] {shift}" in res.output
    assert f"y[0] expected {v} got {bad}" in res.output
    ok = int(np.flatnonzero(y != v)[0])
    res = CliRunner().invoke(main, [*rerun.split()[1:-1], str(ok)])
    assert res.exit_code == 0 and "1 passed, 0 failed" in res.output, res.output
