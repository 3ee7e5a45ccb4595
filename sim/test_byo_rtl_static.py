"""The example blocks of examples/byo meet the project's Verilog rules: verilator --lint-only -Wall
with nothing switched off, iverilog -g2005 -Wall silent, yosys synth without warnings. (The
deliberate-bug copy is only simulated.)"""

from __future__ import annotations

import pytest

import streamtb

EXAMPLES = {
    "team_gelu": ["examples/byo/gelu/team_gelu.v"],
    "team_softmax": ["examples/byo/softmax/team_softmax.v", "rtl/softmax.v", "rtl/divu.v"],
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
    streamtb.lint(EXAMPLES[top], params)
    streamtb.iverilog_2005(EXAMPLES[top], top, params)


@pytest.mark.parametrize("top", list(EXAMPLES))
def test_synth(top):
    assert streamtb.synth(EXAMPLES[top], top, {}) > 0
