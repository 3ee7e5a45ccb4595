"""The mismatch line of a block with a planted bug, on both simulators (issue 26): block and set,
vector and element, expected and got, the operands that made the element, the time and cycle of
its output handshake, and a command that reruns only that vector (and fails the same way).

The bug: a copy of the repository's rtl/ and sim/ whose requant.v flips the LSB of one output value
(an unsaturated one of the set) wherever it comes out: in the requantizer, and in the GEMM
engine, whose output stage is a row of requant.v instances.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from hwvit import simulate, toolchain, vectors
from hwvit.cli import main
from hwvit.textfiles import count

ORIGINAL = "assign out_data_o = out_q;"


def plant(v: int) -> str:
    return f"assign out_data_o = (out_q == 8'd{v & 0xFF}) ? out_q ^ 8'd1 : out_q;  // planted bug"


def _operands(kind: str, t: dict, i: int, j: int, shown: int) -> str:
    """What the line must say made y[i] (requant: all of it) or y[i, j] (gemm: its bias and
    requant; the A row and W column are checked apart), element ``i`` named ``shown`` (0 in the
    rerun's one-vector set)."""
    if kind == "requant":
        acc, mult, shift = (int(t[n][i]) for n in ("acc", "multiplier", "shift"))
        return f"acc[{shown}] {acc}, requant multiplier[{shown}] {mult}, shift[{shown}] {shift}"
    bias, mult, shift = (int(t[n][j]) for n in ("bias", "multiplier", "shift"))
    return f"+ bias[{j}] {bias}; requant multiplier[{j}] {mult}, shift[{j}] {shift}"


@pytest.mark.parametrize("kind", ["requant", "gemm"])
def test_planted_bug_gives_a_line_to_act_on(kind, simulator, tmp_path, monkeypatch):
    record = vectors.random_record(kind, 16 if kind == "gemm" else 64, seed=5)
    t = {name: tensor.data for name, tensor in record.tensors.items()}
    y = t["y"].reshape(-1)
    rows = t["y"].reshape(len(t["y"]), -1)
    # an unsaturated value that some vector lacks (that vector's rerun must pass)
    v = next(int(c) for c in y if abs(int(c)) < 100 and not np.all(np.any(rows == c, axis=1)))
    flat = int(np.flatnonzero(y == v)[0])
    bad = v ^ 1
    nd = [flat] if kind == "requant" else [flat // t["y"].shape[1], flat % t["y"].shape[1]]
    i, j = nd[0], nd[-1]

    tree = tmp_path / "tree"
    for part in ("rtl", "sim"):
        shutil.copytree(toolchain.repo().root / part, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
    rtl = tree / "rtl" / "requant.v"
    text = rtl.read_text()
    assert text.count(ORIGINAL) == 1
    rtl.write_text(text.replace(ORIGINAL, plant(v)))
    monkeypatch.setattr(toolchain, "repo", lambda: toolchain.Repo(tree))

    set_dir = vectors.write_set(record, tmp_path / "set")
    result = simulate.run(set_dir, simulator)
    assert not result.passed and result.mismatches >= int(np.count_nonzero(y == v))
    first = result.first
    assert (first["tensor"], first["index"], first["expected"], first["got"], first["vector"]) == ("y", flat, v, bad, i)
    assert _operands(kind, t, i, j, i) in first["operands"], first["operands"]
    if kind == "gemm":  # the A row and the W column, by index and leading values
        assert first["operands"].startswith(f"A row {i} [{int(t['a'][i, 0])}, {int(t['a'][i, 1])}, ")
        assert f". W column {j} (w[{j}] [{int(t['w'][j, 0])}, " in first["operands"]
    # the handshake: after reset, within the run
    assert 0 < first["cycle"] <= result.cycles + 50 and first["time_ns"] == 10 * first["cycle"]
    rerun = f"hwvit sim {set_dir} --simulator {simulator} --vector {i}"
    assert first["rerun"] == rerun
    where = ", ".join(map(str, nd))
    for text in (f"{kind} random", str(set_dir), f"y[{where}] expected {v} got {bad}", first["operands"], rerun):
        assert text in result.message, (text, result.message)
    assert f"output handshake at {first['time_ns']} ns (cycle {first['cycle']})" in result.message

    # the rerun command runs that vector alone (an element, a row of A) and fails the same way
    res = CliRunner().invoke(main, rerun.split()[1:])
    assert res.exit_code == 1, res.output
    in_row = int(np.count_nonzero(t["y"][i] == v)) if kind == "gemm" else 1
    assert f"FAIL {kind}" in res.output and f": {count(in_row, 'mismatch')}; first" in res.output, res.output
    one = "0" if kind == "requant" else f"0, {j}"
    assert f"y[{one}] expected {v} got {bad}" in res.output
    assert "vector 0: " in res.output and _operands(kind, t, i, j, 0) in res.output
    # a vector without the planted value passes
    ok = next(r for r in range(len(t["y"])) if not np.any(t["y"][r] == v))
    res = CliRunner().invoke(main, [*rerun.split()[1:-1], str(ok)])
    assert res.exit_code == 0 and "1 passed, 0 failed" in res.output, res.output
