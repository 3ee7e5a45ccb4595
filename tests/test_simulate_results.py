"""hwvit.simulate.results: a testbench's JSON result read back, and the FAIL results of runs that
ended without one (no simulator needed)."""

from __future__ import annotations

import json

from hwvit.simulate.results import failed, lost, no_simulator, read_result
from hwvit.vectors import VectorSetError


def test_read_result_and_its_coverage_file(tmp_path):
    first = {"tensor": "y", "index": [0, 3], "expected": 5, "got": 4}
    fields = {"passed": False, "elements": 12, "mismatches": 1, "first": first, "cycles": 40, "message": "1 mismatch"}
    (tmp_path / "result.json").write_text(json.dumps(fields))
    res = read_result(tmp_path, "gelu", tmp_path / "set", "icarus")
    assert (res.kind, res.set_dir, res.simulator) == ("gelu", str(tmp_path / "set"), "icarus")
    assert (res.passed, res.elements, res.mismatches, res.first, res.cycles) == (False, 12, 1, first, 40)
    assert "coverage_dat" not in res.extra
    (tmp_path / "coverage.dat").write_text("")  # a Verilator coverage build writes it as the run ends
    assert read_result(tmp_path, "gelu", tmp_path, "verilator").extra["coverage_dat"] == str(tmp_path / "coverage.dat")


def test_runs_without_a_result_fail_and_say_why(tmp_path):
    res = read_result(tmp_path, "softmax", tmp_path, "verilator")
    assert not res.passed and res.message == f"testbench wrote no result; see {tmp_path / 'sim.log'}"
    res = no_simulator("softmax", tmp_path, "icarus", SystemExit(1))
    assert not res.passed and res.message == "simulator failed: 1"
    assert failed("s", "icarus", VectorSetError("y.hex: 3 lines, expected 4")).message == (
        "bad vector set: y.hex: 3 lines, expected 4"
    )
    res = failed("s", "icarus", RuntimeError("build failed\nthe whole log"))
    assert (res.kind, res.passed, res.message) == ("?", False, "RuntimeError: build failed")
    assert lost("s", "verilator", KeyError("w1")).message == "task lost: KeyError: 'w1'"
