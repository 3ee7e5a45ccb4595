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
