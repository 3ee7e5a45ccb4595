"""hwvit.analysis.sweep and `hwvit sweep`: the one-factor-at-a-time design-space sweep."""

from __future__ import annotations

import csv
import json
from dataclasses import asdict

import pytest
from click.testing import CliRunner

from hwvit import pipeline
from hwvit.analysis.compare import compare
from hwvit.analysis.sweep import COLUMNS, QUICK_AXES, cost, one_factor_grid
from hwvit.cli import main
from hwvit.quant import QuantConfig, quantize_model

IMAGES, CALIB = 24, 48


def _changed(qc: QuantConfig) -> set[str]:
    base = asdict(QuantConfig())
    return {k for k, v in asdict(qc).items() if v != base[k]}


def test_default_grid_is_one_factor_at_a_time():
    grid = one_factor_grid()
    assert grid[0].factor == "baseline" and grid[0].qconfig == QuantConfig()
    assert len(grid) == 11  # baseline + act 6 + softmax 4, 6 + shift + 4 table sizes + 2 percentiles
    allowed = {
        "act_bits": {"act_bits"},
        "softmax_bits": {"softmax_bits"},
        "exp": {"exp"},
        "exp_entries": {"exp_entries"},
        "calibration": {"calibration", "percentile"},
    }
    for p in grid[1:]:
        assert _changed(p.qconfig) and _changed(p.qconfig) <= allowed[p.factor], p
    assert len({tuple(sorted(asdict(p.qconfig).items())) for p in grid}) == len(grid)  # no point twice
    assert len(one_factor_grid(QUICK_AXES)) == 6
    # A value equal to the baseline's is the baseline point, not a second run of it.
    assert len(one_factor_grid({"act_bits": (8, 6), "exp_entries": (256,)})) == 2
    with pytest.raises(ValueError, match="unknown sweep knob"):
        one_factor_grid({"gelu_bits": (6,)})
    with pytest.raises(ValueError):
        one_factor_grid({"act_bits": (9,)})


def test_cost_columns():
    # docs/arithmetic.md: exp table entries are unsigned 24 bit (T[0] = 2^23).
    assert cost(QuantConfig())["table_bits"] == 256 * 24
    assert cost(QuantConfig(exp_entries=32))["table_bits"] == 32 * 24
    shift = cost(QuantConfig(exp="shift"))
    assert shift["exp_entries"] == 0 and shift["table_bits"] == 0
    # One knob per row: the act_bits row keeps the baseline's 256-entry ROM (6-bit scores differ from
    # their row max by at most 63, so entries 64..255 are never read, which the note says).
    act6 = cost(QuantConfig(act_bits=6))
    assert act6["exp_entries"] == 256 and act6["table_bits"] == 256 * 24
    assert "0.75x" in act6["cost_note"] and "only the first 64 are reachable" in act6["cost_note"]
    assert "no hardware cost" in cost(QuantConfig(calibration="percentile"))["cost_note"]


@pytest.fixture(scope="session")  # session: kept when xdist runs other modules between its tests
def quick_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sw") / "sweep"
    res = CliRunner().invoke(
        main,
        [
            "sweep",
            "--model",
            "digits",
            "--quick",
            "--limit",
            str(IMAGES),
            "--calib-images",
            str(CALIB),
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    return out, res.output


def _csv_rows(out) -> list[dict]:
    with open(out / "sweep.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def test_files_and_rows(quick_sweep):
    out, output = quick_sweep
    assert sorted(p.name for p in out.iterdir()) == ["pareto.png", "sweep.csv", "sweep.json", "sweep.md", "sweep.png"]
    assert (out / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    grid = one_factor_grid(QUICK_AXES)
    rows = _csv_rows(out)
    assert list(rows[0]) == list(COLUMNS)
    assert [(r["factor"], r["label"]) for r in rows] == [(p.factor, p.label) for p in grid]  # one row per point
    for r, p in zip(rows, grid):
        assert int(r["act_bits"]) == p.qconfig.act_bits and int(r["softmax_bits"]) == p.qconfig.softmax_bits
        assert r["exp"] == p.qconfig.exp and r["calibration"] == p.qconfig.calibration
        assert int(r["table_bits"]) == 24 * int(r["exp_entries"])
        assert int(r["images"]) == IMAGES
    md = (out / "sweep.md").read_text()
    table = [line for line in md.splitlines() if line.startswith("| ") and not line.startswith("| factor")]
    assert len(table) == len(grid)
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["kind"] == "sweep" and len(doc["rows"]) == len(grid)
    for r, j in zip(rows, doc["rows"]):
        assert abs(float(r["logits_sqnr_db"]) - j["logits_sqnr_db"]) <= 1e-6
    # Pareto front of cost_bits against top-1 and logits SQNR (the default --front both): a row is on
    # it iff no row is no costlier, no less accurate and no lower in SQNR, and strictly better in one
    # of them (recomputed here from the CSV).
    for r in rows:
        c, a, q = int(r["cost_bits"]), float(r["top1_int"]), float(r["logits_sqnr_db"])
        dominated = any(
            (int(o["cost_bits"]) <= c and float(o["top1_int"]) >= a and float(o["logits_sqnr_db"]) >= q)
            and (int(o["cost_bits"]) < c or float(o["top1_int"]) > a or float(o["logits_sqnr_db"]) > q)
            for o in rows
        )
        assert (r["pareto"] == "True") == (not dominated), r
    assert doc["front"] == "both"
    assert any(r["pareto"] == "True" for r in rows) and "Pareto front" in md
    last = output.strip().splitlines()[-1]
    assert last.startswith(f"digits: {len(grid)} configurations on {IMAGES} images") and str(out) in last


def test_rows_equal_independent_compare(quick_sweep):
    """The baseline and the 6-bit rows are what compare() gives for those QuantConfigs on the same inputs."""
    out, _ = quick_sweep
    rows = {r["label"]: r for r in _csv_rows(out)}
    source = pipeline.load_source("digits")
    calib = pipeline.calibration_inputs(source, CALIB)
    inputs, labels = pipeline.eval_inputs(source, IMAGES)
    for label, qc in (("int8 baseline", QuantConfig()), ("6 bit", QuantConfig(act_bits=6))):
        res = compare(source.model, quantize_model(source.model, calib, qc), inputs, labels)
        row = rows[label]
        assert abs(float(row["top1_int"]) - res.top1_int) <= 1e-6
        assert abs(float(row["agreement"]) - res.agreement) <= 1e-6
        assert abs(float(row["logits_sqnr_db"]) - res.logits_sqnr_db) <= 1e-5


def test_wider_probabilities_are_closer(quick_sweep):
    """8-bit probabilities (step 1/255) are nearer the float softmax than 4-bit ones (step 1/15): the
    rounding noise alone differs by 20 log10(255/15) = 24.6 dB, on identical layer-0 scores."""
    rows = {r["label"]: r for r in _csv_rows(quick_sweep[0])}
    assert float(rows["int8 baseline"]["probs_sqnr_db"]) > float(rows["4 bit"]["probs_sqnr_db"]) + 6.0


def test_cli_refuses_foreign_out_dir_before_work(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("keep")
    res = CliRunner().invoke(main, ["sweep", "--model", "digits", "--quick", "--out", str(out)])
    assert res.exit_code == 1 and "Error:" in res.output and "Traceback" not in res.output
    assert "[1/" not in res.output  # refused before the first point ran
    assert (out / "thesis.tex").read_text() == "keep"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--act-bits", "6,x"], "comma-separated"),
        (["--softmax-bits", "12"], "outside"),
        (["--percentiles", "20"], "outside"),
    ],
)
def test_cli_bad_lists(tmp_path, args, message):
    res = CliRunner().invoke(main, ["sweep", "--model", "digits", "--out", str(tmp_path / "o"), *args])
    assert res.exit_code == 2 and message in res.output and "Traceback" not in res.output
