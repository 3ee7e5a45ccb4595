"""Testbench of rtl/divu.v, the restoring divider of softmax and layernorm (twin of hwvit.ops.divu).

cocotb side (run inside the simulator by hwvit.simulate.run on the set in HWVIT_SET):
- ``run_vectors``: every (dividend, divisor) request of the set through the request/result
  handshakes with random stalls on both sides (HWVIT_STALL) and every seventh result held 20-60
  clocks; quotient and remainder checked bit for bit, the handshake rules on every clock
  (sim/servetb.py);
- ``reset_midstream``: reset in every state (servetb.RESET_STATES: idle, run, done), then the
  whole set again.

pytest side: the default set and softmax's and layernorm's divider widths (sets of
hwvit.vectors.random_record("divu"): the precondition's edges, quotients 0 and 2^Q_BITS - 1,
divisors 1 and all ones, exact divisions) on both simulators, the reset test, the unstalled
timing model, and a wrong expected value reported.
"""

from __future__ import annotations

import cocotb
import numpy as np
import pytest

from hwvit import blocks

import servetb
import tbutil

TOPLEVEL = "divu"
SOURCES = list(blocks.get("divu").rtl)  # the kind's Verilog (hwvit/blocks/divu.py)
KIND = "divu"


def hdl_parameters(vset) -> dict[str, int]:
    """Toplevel parameters for a set: its widths."""
    p = vset.params
    return {"N_BITS": int(p["n_bits"]), "D_BITS": int(p["d_bits"]), "Q_BITS": int(p["q_bits"])}


def unstalled_cycles(vset, params: dict) -> int:
    """Most clocks an unstalled run may take: Q_BITS + 2 per division (accept, Q_BITS steps, the
    result taken; servetb.unstalled_cycles, measured exact)."""
    return servetb.unstalled_cycles(int(vset["quotient"].size), int(params["Q_BITS"]))


# ---------------------------------------------------------------------------- cocotb side


def _unit(dut, vset) -> servetb.Unit:
    dut.in_valid_i.value = 0  # defined before the clock starts: Icarus would sample X
    dut.in_dividend_i.value = 0
    dut.in_divisor_i.value = 0
    dut.out_ready_i.value = 0
    return servetb.Unit(
        dut,
        [dut.in_dividend_i, dut.in_divisor_i],
        [dut.out_quotient_o, dut.out_remainder_o],
        ["quotient", "remainder"],
        latency=int(vset.params["q_bits"]),
    )


def _words(vset) -> list[tuple[int, int]]:
    return list(zip(vset["dividend"].reshape(-1).tolist(), vset["divisor"].reshape(-1).tolist()))


RESET_STATES = servetb.RESET_STATES  # hwvit.covbins.RESET_STATES checks it


@cocotb.test()
async def run_vectors(dut):
    vset = tbutil.load_set()
    unit = _unit(dut, vset)
    await tbutil.start(dut)
    await servetb.run_requests(unit, vset, _words(vset))


@cocotb.test()
async def reset_midstream(dut):
    vset = tbutil.load_set()
    unit = _unit(dut, vset)
    await tbutil.start(dut)
    await servetb.run_reset_midrequest(unit, vset, _words(vset))


# ---------------------------------------------------------------------------- pytest side

pytestmark = pytest.mark.xdist_group("softmax")

# The RTL's defaults (the default set), softmax's divider (8-bit outputs: 48-bit dividend, 32-bit
# S, 25-bit R) and a full-width one like layernorm's (44-bit dividend, 31-bit divisor, quotient
# as wide as the dividend).
WIDTHS = [
    pytest.param({}, id="default"),
    pytest.param({"n_bits": 48, "d_bits": 32, "q_bits": 25}, id="n48d32q25"),
    pytest.param({"n_bits": 44, "d_bits": 31, "q_bits": 44}, id="n44d31q44"),
]


def _set(tmp_path, cases: int, seed: int, **params):
    from hwvit import vectors

    record = vectors.random_record(KIND, cases, seed, **params)
    return vectors.write_set(record, tmp_path / f"{KIND}-{seed}")


@pytest.mark.parametrize("params", WIDTHS)
def test_divide(tmp_path, simulator, params, run_set):
    from hwvit import covbins
    from hwvit.vectors.random_sets import default_cases

    cases = default_cases(KIND)
    result = run_set(_set(tmp_path, cases, seed=1, **params), simulator)
    assert result.elements == 2 * cases and result.mismatches == 0
    bins = result.extra["bins"]
    assert list(bins) == list(covbins.names(KIND)), bins
    assert min(bins[name] for name in covbins.NAMES[KIND]) > 0, bins  # every bin but the reset states hit


def test_unstalled_timing_model_is_exact(tmp_path, simulator, run_set):
    """No stalls: exactly Q_BITS + 2 clocks a division, neither more nor fewer."""
    from hwvit import vectors

    set_dir = _set(tmp_path, 30, seed=2, n_bits=48, d_bits=32, q_bits=25)
    result = run_set(set_dir, simulator, extra_env={"HWVIT_STALL": "0"})
    vset = vectors.read(set_dir)
    assert result.cycles == unstalled_cycles(vset, hdl_parameters(vset)) == 30 * 27
    assert result.extra["bins"]["out_stall"] == 0


def test_reset_midstream(tmp_path, simulator, run_set):
    servetb.check_reset_midstream(run_set, _set(tmp_path, 60, seed=11), simulator, 60, 2)


def test_mismatch_is_reported(tmp_path, simulator, mismatch_reported):
    mismatch_reported(KIND, tmp_path, simulator, "remainder", index=17, cases=40)


def test_default_set_meets_the_precondition_and_reaches_the_edges():
    """The default set's cases are legal (divisor >= 1, quotient fits) and hold the edges."""
    from hwvit import vectors
    from hwvit.vectors.random_sets import default_cases, divu_edges

    rec = vectors.random_record(KIND, default_cases(KIND), 1, n_bits=48, d_bits=32, q_bits=25)
    a, b = rec.tensors["dividend"].data, rec.tensors["divisor"].data
    q, r = rec.tensors["quotient"].data, rec.tensors["remainder"].data
    assert np.all((b >= 1) & (b < 1 << 32) & (a >= 0) & (a < 1 << 48) & (q < 1 << 25))
    assert np.array_equal(q * b + r, a) and np.all(r < b)
    assert {0, 1, (1 << 25) - 1} <= set(q.tolist())
    assert {1, (1 << 32) - 1} <= set(b.tolist())
    assert set(divu_edges(48, 32, 25)) <= set(zip(a.tolist(), b.tolist()))
    exact = (r == 0) & (a > b)  # exact divisions beyond a = b: a step's remainder equals the divisor
    assert exact.sum() >= len(a) // 10


RTL_PARAMS = [{"N_BITS": 40, "D_BITS": 24}, {"N_BITS": 48, "D_BITS": 32, "Q_BITS": 25}, {"N_BITS": 2, "D_BITS": 1}]


@pytest.mark.parametrize("params", RTL_PARAMS, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_lint(params):
    from hwvit import synth

    assert synth.lint(SOURCES, params) == []
    assert synth.iverilog(SOURCES, TOPLEVEL, params) == []
