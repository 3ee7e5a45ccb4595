"""The sweep's price of each arithmetic in logic (hwvit.analysis.variant_cost, `hwvit sweep --synth`)."""

from __future__ import annotations

from types import SimpleNamespace

from hwvit.analysis import variant_cost
from hwvit.report import sweep_write


def test_block_of_names_the_block_that_computes_each_variant():
    assert variant_cost.block_of("gelu", "shiftgelu_exact") == variant_cost.block_of("gelu", "lut")  # one table block
    assert variant_cost.block_of("gelu", "shiftgelu") == ("gelu_shiftgelu", {"MAX_N": 64})  # on rows: its own block
    assert variant_cost.block_of("softmax", "shiftmax")[0] == "softmax_shiftmax"  # I-ViT's released form
    assert variant_cost.block_of("softmax", "log2")[0] == "softmax_log2"  # FQ-ViT's released form
    assert variant_cost.block_of("layernorm", "ptf")[0] == "layernorm_ptf"  # FQ-ViT's released PTF LayerNorm
    assert variant_cost.block_of("softmax", "shiftmax_exact")[0] == "softmax_shiftmax_exact"
    assert variant_cost.block_of("softmax", "hwvit")[0] == "softmax"
    assert variant_cost.block_of("layernorm", "hwvit")[0] == "layernorm"
    assert variant_cost.block_of("softmax", "pkg.mod:fn") is None  # a team's function: its block is theirs


def _row(factor, label, sqnr):
    return {"factor": factor, "label": label, "logits_sqnr_db": sqnr}


def test_costs_synthesize_each_block_once_and_fill_the_rows():
    calls = []

    def fake(block, params):
        calls.append(block)
        return SimpleNamespace(ok=True, cells=100, flip_flops=10, longest_path=7, memory_bits=2048)

    rows = [_row("baseline", "int8", 30.0), _row("gelu", "shiftgelu_exact", 29.0), _row("gelu", "tanh_lut", 31.0)]
    got = variant_cost.costs(rows, ("gelu",), synth_block=fake)
    assert calls == ["gelu"]  # the three GELU arithmetics are one table block
    assert set(got) == {("gelu", "shiftgelu_exact"), ("gelu", "tanh_lut"), ("gelu", "lut")}
    assert rows[1]["cells"] == 100 and rows[2]["memory_bits"] == 2048


def test_front_keeps_what_nothing_beats():
    pts = [(100, 30.0), (80, 29.0), (120, 29.5), (80, 29.0), (200, 31.0)]
    # (120, 29.5) is beaten by (100, 30.0); equal points do not beat each other
    assert sweep_write._front(pts) == [True, True, False, True, True]


def test_synth_variants_prints_a_row_per_variant(tmp_path, monkeypatch):
    """`hwvit synth --variants`: every variant of every family gets the cost of its block, and each
    distinct (block, parameters) is synthesized once (yosys replaced by a stand-in here: the real
    runs are tests/test_rtl_static.py's)."""
    from click.testing import CliRunner

    from hwvit import synth, variants
    from hwvit.cli import main

    seen = []

    def fake(block, params=None, **_):
        seen.append((block, tuple(sorted((params or {}).items()))))
        return synth.SynthResult(block, True, cells=10 * len(seen))

    monkeypatch.setattr(synth, "synth_block", fake)
    out = tmp_path / "v.md"
    res = CliRunner().invoke(main, ["synth", "--variants", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert len(seen) == len(set(seen))
    text = out.read_text()
    for family, name in variants.every():
        assert f"| {family} | {name} |" in text
    assert "requant (ROUNDING=3, WRAP=1)" in text  # floor_wrap
    assert sum(1 for b, _ in seen if b == "gelu") == 1  # every GELU arithmetic is the one table block
