"""`hwvit sim --coverage`: functional bins on hand-made rows, the coverage.dat reader, and one
Verilator run end to end. Expected counts and percentages are worked out by hand here."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from click.testing import CliRunner

from hwvit import blocks, covbins, coverage, vectors
from hwvit.cli import main

# ---------------------------------------------------------------------------- functional bins


def test_softmax_bins_count_one_hot_and_all_equal_rows():
    x = np.array(
        [
            [-128, -128, 127, -128],  # one hot: a single max over equal values
            [5, 5, 5, 5],  # all equal (not one hot: no single max)
            [3, 3, 2, 1],  # neither: two at the max
            [9, 0, 1, 0],  # neither: the rest is not flat
        ]
    )
    p = np.array([[0, 0, 255, 0], [64, 64, 64, 64], [100, 100, 40, 15], [255, 0, 0, 0]])
    bins = covbins.count("softmax", {"out_bits": 8}, {"x": x}, {"p": p}, {"MAX_N": 256}, {"out_stall": 3})
    data = {name: bins[name] for name in covbins.NAMES["softmax"]}
    assert data == {"all_equal": 1, "one_hot": 1, "p_full": 2, "row_len_1": 0, "row_len_max": 0, "out_stall": 3}
    assert all(bins[f"reset_{state}"] == 0 for state in covbins.RESET_STATES["softmax"])  # no reset test ran


def test_softmax_bins_row_lengths():
    one = covbins.count("softmax", {"out_bits": 8}, {"x": np.zeros((3, 1), int)}, {"p": None}, {"MAX_N": 256})
    assert one["row_len_1"] == 3 and one["all_equal"] == 3 and one["one_hot"] == 0
    full = covbins.count("softmax", {"out_bits": 8}, {"x": np.zeros((2, 256), int)}, {"p": None}, {"MAX_N": 256})
    assert full["row_len_max"] == 2 and full["p_full"] == 0  # no output received: no output bin


def test_layernorm_bins_variance_zero_and_largest():
    # C = 2: V = 2 * (x0^2 + x1^2) - (x0 + x1)^2 = (x0 - x1)^2, largest at (127, -128): 255^2.
    assert covbins.largest_variance(2) == 255**2
    x = np.array([[7, 7], [127, -128], [-128, 127], [1, 0]])
    y = np.array([[0, 0], [127, -128], [-128, 127], [5, -5]])
    bins = covbins.count("layernorm", {"out_bits": 8}, {"x": x}, {"y": y}, {"MAX_C": 16})
    assert bins["var_zero"] == 1 and bins["var_max"] == 2
    assert bins["sat_high"] == 2 and bins["sat_low"] == 2
    assert bins["row_len_1"] == 0 and bins["row_len_max"] == 0


def test_requant_bins_ties_shifts_and_rails():
    # 1 * 2^30 >> 31 drops exactly 2^30 = half of 2^31: a tie; 2 * 2^30 >> 31 drops nothing.
    acc = np.array([1, 2, -3, 100, 7])
    mult = np.array([1 << 30, 1 << 30, 1 << 30, 5, 1])
    shift = np.array([31, 31, 31, 0, 62])
    y = np.array([1, 1, -1, 127, 0])
    inputs = {"acc": acc, "multiplier": mult, "shift": shift}
    bins = covbins.count("requant", {"out_bits": 8}, inputs, {"y": y})
    # -3 * 2^30 = -3221225472: its low 31 bits are 2^30 (two's complement), a tie too.
    data = {name: bins[name] for name in covbins.NAMES["requant"]}
    assert data == {"sat_high": 1, "sat_low": 0, "round_tie": 2, "shift_0": 1, "shift_62": 1, "out_stall": 0}


def test_reset_and_back_to_back_bins_come_from_the_testbench():
    """reset_<state> and back_to_back count only what the testbench did (seen), never the data."""
    inputs = {"acc": np.array([1]), "multiplier": np.array([1]), "shift": np.array([0])}
    bins = covbins.count("requant", {"out_bits": 8}, inputs, {"y": np.array([1])}, None, {"reset_full": 2})
    assert list(bins) == list(covbins.names("requant"))
    assert bins["reset_full"] == 2 and bins["reset_empty"] == bins["reset_stage1"] == 0
    params = {"m": 4, "k": 3, "n": 4, "out_bits": 8}
    gemm = covbins.count("gemm", params, {"shift": np.array([1])}, {"y": None}, {"ROWS": 4, "COLS": 4}, {})
    assert gemm["back_to_back"] == 0
    gemm = covbins.count("gemm", params, {"shift": np.array([1])}, {"y": None}, {}, {"back_to_back": 1})
    assert gemm["back_to_back"] == 1


@pytest.mark.parametrize("kind", sorted(k for k, spec in blocks.kinds().items() if spec.testbench))
def test_reset_bins_match_the_testbench_states(kind):
    """The states a block's reset test resets in are its bins, in order (one list, two places)."""
    from hwvit import simulate

    assert tuple(simulate.tb_module(kind).RESET_STATES) == covbins.RESET_STATES[kind]


def test_gemm_bins_shapes_and_partial_tiles():
    params = {"m": 13, "k": 1, "n": 11, "out_bits": 8}
    inputs = {"shift": np.array([0] * 10 + [62])}
    bins = covbins.count("gemm", params, inputs, {"y": np.full((13, 11), -128)}, {"ROWS": 4, "COLS": 4})
    assert bins["k_1"] == 1 and bins["k_max"] == 0
    assert bins["partial_tile_rows"] == 1 and bins["partial_tile_cols"] == 1  # 13 % 4 and 11 % 4
    assert bins["sat_low"] == 143 and bins["shift_0"] == 10 and bins["shift_62"] == 1
    assert bins["out_stall"] == 0  # only what the testbench saw counts (seen)
    y = {"y": np.full((13, 11), -128)}
    seen = covbins.count("gemm", params, inputs, y, {"ROWS": 4, "COLS": 4}, {"out_stall": 7})
    assert seen["out_stall"] == 7


def test_divu_bins_exact_divisions_and_extremes():
    params = {"n_bits": 8, "d_bits": 4, "q_bits": 8}
    dividend = np.array([0, 255, 45, 44, 15, 30, 7])
    divisor = np.array([3, 1, 15, 15, 15, 1, 7])
    quotient, remainder = np.divmod(dividend, divisor)  # as the block returned them
    inputs = {"dividend": dividend, "divisor": divisor}
    bins = covbins.count("divu", params, inputs, {"quotient": quotient, "remainder": remainder}, {}, {"out_stall": 2})
    bins = {name: bins[name] for name in covbins.NAMES["divu"]}  # the data bins and out_stall
    # exact: 255/1, 45/15, 15/15, 30/1, 7/7 (0/3 leaves remainder 0 too, but with quotient 0)
    assert bins == {
        "exact_division": 5,
        "quotient_0": 1,
        "quotient_max": 1,
        "divisor_1": 2,
        "divisor_max": 3,
        "out_stall": 2,
    }
    wrong = covbins.count("divu", params, inputs, {"quotient": quotient + 1, "remainder": remainder + 1})
    assert wrong["exact_division"] == 0 and wrong["quotient_0"] == 0  # outputs are what came back
    cut = covbins.count("divu", params, inputs, {"quotient": None, "remainder": None})
    assert cut["exact_division"] == cut["quotient_max"] == 0 and cut["divisor_1"] == 2


def test_isqrt_bins_squares_and_largest_remainders():
    x = np.array([0, 255, 1, 3, 16, 24, 15, 17, 224])
    root = np.array([0, 15, 1, 1, 4, 4, 3, 4, 14])
    bins = covbins.count("isqrt", {"in_bits": 8}, {"radicand": x}, {"root": root}, {}, {"out_stall": 1})
    bins = {name: bins[name] for name in covbins.NAMES["isqrt"]}  # the data bins and out_stall
    # squares 1, 16 (0 has root 0: not counted); r^2 + 2r: 255 = 15^2 + 30, 3, 24, 15, 224 = 14^2 + 28
    assert bins == {"radicand_0": 1, "radicand_max": 1, "perfect_square": 2, "max_remainder": 5, "out_stall": 1}
    none = covbins.count("isqrt", {"in_bits": 8}, {"radicand": x}, {"root": None})
    assert none["perfect_square"] == none["max_remainder"] == 0 and none["radicand_max"] == 1


@pytest.mark.parametrize("kind", ["divu", "isqrt"])
def test_default_sets_hit_every_bin(kind):
    """`hwvit vectors-random divu` / `isqrt` at their defaults: every bin but out_stall (a stall the
    testbench makes; sim/test_divu.py and sim/test_isqrt.py check it on the same sets) is hit by
    the set's own inputs and outputs."""
    from hwvit.vectors.random_sets import default_cases

    rec = vectors.random_record(kind, default_cases(kind), 0)
    inputs = {n: t.data for n, t in rec.tensors.items() if t.role != "output"}
    outputs = {n: t.data for n, t in rec.tensors.items() if t.role == "output"}
    bins = covbins.count(kind, rec.params, inputs, outputs)
    assert list(bins) == list(covbins.names(kind))
    testbench_only = ["out_stall"] + [f"reset_{state}" for state in covbins.RESET_STATES[kind]]
    assert [name for name, n in bins.items() if n == 0] == testbench_only, bins


# ---------------------------------------------------------------------------- coverage.dat


def _point(file: str, kind: str, line: int, point: str, hier: str, span: str = "") -> str:
    fields = [("f", file), ("l", str(line)), ("t", kind), ("page", f"v_{kind}/m"), ("o", point)]
    if span:
        fields.append(("S", span))
    fields.append(("h", hier))
    return "\x01" + "\x01".join(f"{k}\x02{v}" for k, v in fields)


def test_dat_merge_and_percentages(tmp_path):
    a = {
        _point("/r/a.v", "line", 10, "block", "top", "10-12"): 4,  # lines 10, 11, 12 run
        _point("/r/a.v", "branch", 20, "if", "top", "20-21"): 0,  # lines 20, 21 never
        _point("/r/a.v", "branch", 20, "else", "top"): 3,
        _point("/r/a.v", "toggle", 5, "x:0->1", "top"): 1,
        _point("/r/a.v", "toggle", 5, "x:1->0", "top"): 0,
    }
    b = {
        _point("/r/a.v", "branch", 20, "if", "top.u1"): 0,  # another instance: per module, summed
        _point("/r/a.v", "toggle", 5, "x:1->0", "top.u1"): 2,  # hit in the other instance
        _point("/r/b.v", "line", 3, "block", "top.u2"): 0,
    }
    for name, points in (("a.dat", a), ("b.dat", b)):
        (tmp_path / name).write_text(coverage.dat_text(points))
    merged = coverage.merge([tmp_path / "a.dat", tmp_path / "b.dat"])
    assert len(merged) == 8 and sum(merged.values()) == 10
    files = {f.file: f for f in coverage.summarize(merged)}
    # a.v: lines 10-12 covered, 20 and 21 not (the if point names them with count 0): 3 of 5.
    assert (files["/r/a.v"].lines_hit, files["/r/a.v"].lines_total) == (3, 5)
    assert files["/r/a.v"].line_pct == pytest.approx(60.0)
    assert (files["/r/a.v"].toggles_hit, files["/r/a.v"].toggles_total) == (2, 2)
    assert (files["/r/b.v"].lines_hit, files["/r/b.v"].lines_total) == (0, 1)
    assert files["/r/b.v"].toggle_pct is None


# ---------------------------------------------------------------------------- the CLI


def test_coverage_refused_on_icarus(tmp_path):
    res = CliRunner().invoke(main, ["sim", str(tmp_path), "--coverage", "--simulator", "icarus"])
    assert res.exit_code == 2
    assert "--coverage needs --simulator verilator" in res.output
    assert "Traceback" not in res.output


@pytest.mark.xdist_group("requant")
def test_sim_coverage_writes_report(tmp_path):
    vectors.write_set(vectors.random_record("requant", cases=64, seed=1), tmp_path / "sets" / "requant")
    out = tmp_path / "cov"
    res = CliRunner().invoke(
        main, ["sim", str(tmp_path / "sets"), "--coverage", "--coverage-out", str(out)], catch_exceptions=False
    )
    assert res.exit_code == 0, res.output
    report = json.loads((out / "report.json").read_text())
    assert (out / "merged.dat").read_text().startswith("# SystemC::Coverage-3")
    assert (out / "annotated" / "rtl" / "requant.v").exists() and (out / "untoggled.txt").exists()
    pattern = re.compile(r"^(\S+\.v) +line +([\d.]+)%.*toggle +([\d.]+)%", re.M)
    printed = {m[1]: (float(m[2]), float(m[3])) for m in pattern.finditer(res.output)}
    assert {"rtl/requant.v", "rtl/round_sat.v"} <= set(printed), res.output
    for line_pct, toggle_pct in printed.values():
        assert 0 < line_pct <= 100 and 0 < toggle_pct <= 100
    assert set(report["bins"]["requant"]) == set(covbins.names("requant"))
    assert "bins requant:" in res.output and "shift_62=" in res.output
