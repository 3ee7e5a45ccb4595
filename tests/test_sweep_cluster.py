"""`hwvit sweep --cluster`: one Dask task per grid point, the same rows as a run here."""

from __future__ import annotations

import json

from click.testing import CliRunner

from hwvit.cli import main

ARGS = ["sweep", "--model", "digits", "--quick", "--limit", "24", "--calib-images", "48", "-q"]


def _rows(out) -> list[dict]:
    rows = json.loads((out / "sweep.json").read_text())["rows"]
    for r in rows:
        r.pop("seconds")
    return rows


def test_sweep_on_a_local_cluster_gives_the_rows_of_a_run_here(tmp_path):
    here = CliRunner().invoke(main, [*ARGS, "--out", str(tmp_path / "here")])
    assert here.exit_code == 0, here.output
    there = CliRunner().invoke(main, [*ARGS, "--cluster", "local:2", "--out", str(tmp_path / "there")])
    assert there.exit_code == 0, there.output
    rows = _rows(tmp_path / "here")
    assert len(rows) == 6 and rows == _rows(tmp_path / "there")


def test_sweep_cluster_opt_without_cluster_is_refused(tmp_path):
    res = CliRunner().invoke(main, [*ARGS, "--cluster-opt", "jobs=2", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "--cluster-opt applies to --cluster only" in res.output
