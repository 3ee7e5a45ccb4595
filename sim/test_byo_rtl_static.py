"""The example blocks of examples/byo meet the project's Verilog rules: verilator --lint-only -Wall
with nothing switched off, iverilog -g2005 -Wall silent, yosys synth without warnings. (The
deliberate-bug copy is only simulated.)"""

from __future__ import annotations

import shutil

import pytest

from hwvit import blocks, synth, toolchain

EXAMPLES = {
    "team_gelu": ["examples/byo/gelu/team_gelu.v"],
    "team_softmax": ["examples/byo/softmax/team_softmax.v", *blocks.get("softmax").rtl],
    "team_requant": ["examples/byo/requant/team_requant.v", "rtl/requant.v", "rtl/round_sat.v"],
}
PARAMS = {
    "team_gelu": [{}, {"XW": 6, "YW": 12}],
    "team_softmax": [{}, {"XW": 6, "PW": 10, "LUT_N": 40}],
    "team_requant": [{}, {"OUT_W": 16}],
}


@pytest.mark.parametrize(
    "top, params",
    [(t, p) for t, ps in PARAMS.items() for p in ps],
    ids=lambda v: v if isinstance(v, str) else "-".join(f"{k}{x}" for k, x in v.items()) or "default",
)
def test_lint(top, params):
    assert synth.lint(EXAMPLES[top], params) == []
    assert synth.iverilog(EXAMPLES[top], top, params) == []


@pytest.mark.parametrize("top", list(EXAMPLES))
def test_synth(top, tmp_path):
    for src in EXAMPLES[top]:  # yosys reads every .v of one folder: the example's own sources only
        shutil.copy(toolchain.repo().root / src, tmp_path)
    res = synth.synth_block(top, params={}, rtl=tmp_path)
    assert res.ok, res.message
    assert res.warnings == [] and res.latches == 0
    assert res.cells > 100, res.cells  # a real datapath, not an optimized-away shell
