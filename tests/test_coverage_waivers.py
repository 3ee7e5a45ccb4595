"""Coverage waivers (sim/coverage_waivers.yaml): read and checked, stale or contradicted ones refused,
raw and after-waiver toggle % side by side. Expected counts are worked out by hand here."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hwvit import coverage, toolchain
from hwvit.cli import main

ROOT = toolchain.repo().root


def _toggle(file: str, point: str, hier: str = "top") -> str:
    fields = [("f", file), ("l", "5"), ("t", "toggle"), ("page", "v_toggle/m"), ("o", point), ("h", hier)]
    return "\x01" + "\x01".join(f"{k}\x02{v}" for k, v in fields)


def _write(tmp_path, text: str):
    (tmp_path / "rtl").mkdir(exist_ok=True)
    (tmp_path / "rtl" / "a.v").write_text("module a; reg [3:0] cnt_q; wire x; endmodule\n")
    path = tmp_path / "w.yaml"
    path.write_text(text)
    return path


def test_project_waivers_load_and_have_reasons():
    waivers = coverage.load_waivers(ROOT / coverage.WAIVERS, ROOT)
    assert waivers, "the waiver list is empty"
    for w in waivers:
        assert len(w.reason) > 80, w.label()  # a reason a reviewer can check, not a word
        assert w.lo is not None and w.hi >= w.lo


def test_waiver_naming_a_missing_signal_is_stale(tmp_path):
    path = _write(tmp_path, "- {file: rtl/a.v, signal: cnt_d, bits: 2-3, reason: gone}\n")
    with pytest.raises(coverage.WaiverError, match="stale: rtl/a.v has no signal cnt_d"):
        coverage.load_waivers(path, tmp_path)


@pytest.mark.parametrize(
    "entry, message",
    [
        ("- {file: rtl/b.v, signal: x, reason: r}", "no source rtl/b.v"),
        ("- {file: ../etc/passwd, signal: x, reason: r}", "no source ../etc/passwd"),
        ("- {file: rtl/a.v, signal: cnt_q, bits: 3-2, reason: r}", "LO <= HI"),
        ("- {file: rtl/a.v, signal: cnt_q, bits: 1}", "reason are required"),
        ("- {file: rtl/a.v, signal: x, reason: r, why: extra}", "expected file, signal"),
        ("{file: rtl/a.v}", "expected a list"),
    ],
)
def test_malformed_waivers_refused(tmp_path, entry, message):
    with pytest.raises(coverage.WaiverError, match=message):
        coverage.load_waivers(_write(tmp_path, entry + "\n"), tmp_path)


def _points(tmp_path, hit_bit3: bool = False) -> dict[str, int]:
    file = str(tmp_path / "rtl" / "a.v")
    points = {}
    for bit in range(4):
        for d in ("0->1", "1->0"):
            points[_toggle(file, f"cnt_q[{bit}]:{d}")] = 0 if bit >= 2 else 5
    points[_toggle(file, "x:0->1")] = 1
    points[_toggle(file, "x:1->0")] = 0
    if hit_bit3:
        points[_toggle(file, "cnt_q[3]:0->1", "top.u1")] = 1  # another instance reached it
    return points


def test_waivers_give_raw_and_waived_percentages(tmp_path):
    path = _write(tmp_path, "- {file: rtl/a.v, signal: cnt_q, bits: 2-3, reason: held}\n")
    waivers = coverage.load_waivers(path, tmp_path)
    (f,) = coverage.summarize(_points(tmp_path), tmp_path, waivers)
    # 10 points: cnt_q bits 0-1 both ways (4 hit), bits 2-3 (4, waived), x 0->1 hit, x 1->0 not.
    assert (f.toggles_hit, f.toggles_total, f.toggles_waived) == (5, 10, 4)
    assert f.toggle_pct == pytest.approx(50.0)
    assert f.toggle_pct_waived == pytest.approx(100.0 * 5 / 6)


def test_waiver_wider_than_the_signal_is_stale(tmp_path):
    path = _write(tmp_path, "- {file: rtl/a.v, signal: cnt_q, bits: 2-4, reason: held}\n")
    with pytest.raises(coverage.WaiverError, match=r"stale waiver rtl/a.v cnt_q\[4:2\]: no toggle point for 2"):
        coverage.summarize(_points(tmp_path), tmp_path, coverage.load_waivers(path, tmp_path))


def test_waiver_of_a_hit_point_is_refused(tmp_path):
    path = _write(tmp_path, "- {file: rtl/a.v, signal: cnt_q, bits: 2-3, reason: held}\n")
    with pytest.raises(coverage.WaiverError, match=r"covers points a run hit: cnt_q\[3\]:0->1"):
        coverage.summarize(_points(tmp_path, hit_bit3=True), tmp_path, coverage.load_waivers(path, tmp_path))


def test_one_direction_waiver(tmp_path):
    path = _write(tmp_path, "- {file: rtl/a.v, signal: x, direction: 1->0, reason: held}\n")
    (f,) = coverage.summarize(_points(tmp_path), tmp_path, coverage.load_waivers(path, tmp_path))
    assert (f.toggles_hit, f.toggles_total, f.toggles_waived) == (5, 10, 1)


def test_coverage_merge_needs_coverage(tmp_path):
    res = CliRunner().invoke(main, ["sim", str(tmp_path), "--coverage-merge", str(tmp_path)])
    assert res.exit_code == 2 and "--coverage-merge applies with --coverage" in res.output
    assert "Traceback" not in res.output


@pytest.mark.xdist_group("requant")
def test_sim_coverage_merges_testbench_runs(tmp_path):
    from hwvit import vectors

    vectors.write_set(vectors.random_record("requant", cases=8, seed=2), tmp_path / "sets" / "requant")
    tb = tmp_path / "tb"
    tb.mkdir()
    line = "\x01" + "\x01".join(f"{k}\x02{v}" for k, v in [("f", "/x/extra.v"), ("l", "3"), ("t", "line"), ("o", "b")])
    (tb / "unit.dat").write_text(coverage.dat_text({line: 2}))
    out = tmp_path / "cov"
    args = ["sim", str(tmp_path / "sets"), "--coverage", "--coverage-merge", str(tb), "--coverage-out", str(out)]
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    report = json.loads((out / "report.json").read_text())
    assert report["runs"] == 1 and report["merged_runs"] == 1
    extra = [f for f in report["files"] if f["file"] == "/x/extra.v"]
    assert extra and (extra[0]["lines_hit"], extra[0]["lines_total"]) == (1, 1)
    assert "+ 1 testbench runs merged" in res.output
    empty = tmp_path / "empty"
    empty.mkdir()
    res = CliRunner().invoke(main, [*args[:4], str(empty), *args[5:]])
    assert res.exit_code != 0 and "no .dat files there" in res.output and "Traceback" not in res.output


@pytest.mark.slow  # a coverage build of its own (~20 s cold): make test builds coverage only for requant
@pytest.mark.xdist_group("isqrt")
def test_testbench_runs_keep_coverage_under_env(tmp_path):
    """HWVIT_COVERAGE_DIR makes a pytest testbench's Verilator run a coverage build and keeps its .dat."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "HWVIT_COVERAGE_DIR": str(tmp_path / "dats")}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "sim/test_isqrt.py", "-k", "verilator-8"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    dats = list((tmp_path / "dats").glob("*.dat"))
    assert len(dats) == 1, dats
    files = {f.file: f for f in coverage.summarize(coverage.read_dat(dats[0]), ROOT)}
    assert files["rtl/isqrt.v"].lines_hit > 0 and files["rtl/isqrt.v"].toggles_hit > 0
