"""`hwvit sim`: one line per set, `N passed, M failed`, exit 0 only when every set is bit-exact."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from hwvit import vectors
from hwvit.cli import main
from hwvit.record import Tensor


@pytest.mark.xdist_group("requant")
def test_sim_reports_good_bad_and_mismatching_sets(tmp_path):
    good = vectors.random_record("requant", cases=64, seed=1)
    vectors.write_set(good, tmp_path / "tree" / "a_good")
    wrong = vectors.random_record("requant", cases=64, seed=2)
    y = wrong.tensors["y"]
    data = y.data.copy()
    data[7] = data[7] - 1 if data[7] > y.fmt.lo else data[7] + 1
    wrong.tensors["y"] = Tensor(data, y.bits, y.signed, y.role, y.scale)
    vectors.write_set(wrong, tmp_path / "tree" / "b_mismatch")
    broken = vectors.write_set(vectors.random_record("requant", cases=64, seed=3), tmp_path / "tree" / "c_broken")
    hex_file = broken / "acc.hex"
    hex_file.write_bytes(hex_file.read_bytes()[:-9])  # truncated: one line short

    res = CliRunner().invoke(
        main, ["sim", str(tmp_path / "tree"), "--simulator", "icarus", "-j", "2"], catch_exceptions=False
    )
    lines = res.output.strip().splitlines()
    assert res.exit_code == 1, res.output
    assert lines[-1] == "1 passed, 2 failed"
    assert lines[0].startswith("PASS requant") and "a_good" in lines[0]
    assert lines[1].startswith("FAIL requant") and "b_mismatch" in lines[1]
    assert "y[7]" in lines[1] and f"expected {int(data[7])}" in lines[1]
    assert lines[2].startswith("FAIL") and "c_broken" in lines[2] and "bad vector set" in lines[2]


def test_sim_on_a_directory_without_sets(tmp_path):
    res = CliRunner().invoke(main, ["sim", str(tmp_path)])
    assert res.exit_code != 0 and "no vector sets" in res.output


# One short set per testbench family: the one-stream blocks (requant), softmax, LayerNorm, GEMM,
# the request/result units (divu; isqrt shares its bench, sim/servetb.py, and its own reset test).
STRESS_SETS = {
    "requant": {"cases": 64},
    "softmax": {"cases": 4, "row_len": 12},
    "layernorm": {"cases": 4, "c": 16},
    "gemm": {"cases": 6, "k": 12, "n": 8},
    "divu": {"cases": 24, "n_bits": 20, "d_bits": 12},
}


def tb_states(kind: str) -> tuple[str, ...]:
    from hwvit import covbins

    return covbins.RESET_STATES[kind]


@pytest.mark.xdist_group("stress")
def test_sim_stress_runs_every_variant(tmp_path):
    """--stress: the stalled run, the mid-stream reset and the unstalled cycle check, per set."""
    for i, (kind, params) in enumerate(STRESS_SETS.items()):
        record = vectors.random_record(kind, seed=20 + i, **params)
        vectors.write_set(record, tmp_path / "tree" / f"{i}_{kind}")
    res = CliRunner().invoke(
        main, ["sim", str(tmp_path / "tree"), "--stress", "--simulator", "icarus"], catch_exceptions=False
    )
    lines = res.output.strip().splitlines()
    assert res.exit_code == 0, res.output
    assert lines[-1] == f"{len(STRESS_SETS)} passed, 0 failed"
    for line, kind in zip(lines, STRESS_SETS):
        variants = "stalls, reset, back_to_back, cycles" if kind == "gemm" else "stalls, reset, cycles"
        assert line.startswith(f"PASS {kind}") and line.endswith(f"[{variants}]"), line


@pytest.mark.xdist_group("stress")
def test_stress_on_verilator_and_its_failures(tmp_path, monkeypatch):
    """Verilator too; a timing model that allows one clock fewer, and a wrong expected value, fail."""
    from hwvit import simulate

    set_dir = vectors.write_set(vectors.random_record("softmax", cases=4, seed=3, row_len=12), tmp_path / "s")
    good = simulate.run_stress(set_dir, "verilator")
    assert good.passed and good.extra["variants"] == ["stalls", "reset", "cycles"], good.message
    # The bins of every variant summed: the reset test's two resets in each state count.
    assert all(good.extra["bins"][f"reset_{state}"] == 2 for state in tb_states("softmax")), good.extra["bins"]
    tb = simulate.tb_module("softmax")
    exact = tb.unstalled_cycles(vectors.read(set_dir), {})
    monkeypatch.setattr(tb, "unstalled_cycles", lambda vset, params: exact - 1)
    slow = simulate.run_stress(set_dir, "verilator")
    assert not slow.passed and slow.message.startswith("cycles: ") and f"allows {exact - 1}" in slow.message

    record = vectors.random_record("requant", cases=64, seed=4)
    y = record.tensors["y"]
    data = y.data.copy()
    data[9] = data[9] - 1 if data[9] > y.fmt.lo else data[9] + 1
    record.tensors["y"] = Tensor(data, y.bits, y.signed, y.role, y.scale)
    bad = simulate.run_stress(vectors.write_set(record, tmp_path / "bad"), "verilator")
    assert not bad.passed and bad.message.startswith("stalls: ") and "y[9]" in bad.message
