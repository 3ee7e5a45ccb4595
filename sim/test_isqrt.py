"""Testbench of rtl/isqrt.v, the bit-serial integer square root LayerNorm uses (sigma from Ve).

cocotb side:
- ``run_vectors`` (hwvit.simulate.run, the set in HWVIT_SET): every radicand of the set through
  the request/result handshakes with random stalls on both sides (HWVIT_STALL) and every seventh
  result held 20-60 clocks; each root checked bit for bit, the handshake rules on every clock
  (sim/servetb.py: a refused result stays unchanged with out_valid_o high, no operand is taken
  while a result waits);
- ``reset_midstream``: reset in every state (servetb.RESET_STATES: idle, run, done), then the whole
  set again;
- ``root_cases`` (IN_BITS = 64, wider than a vector set holds): the radicands of
  ``hwvit.vectors.random_sets.isqrt_edges(64)`` and random ones around squares, one at a time,
  every seventh result held 20-60 cycles, each root compared with ``math.isqrt``.

Radicands (``random_record("isqrt")``): 0, 2^IN_BITS - 1, m^2 - 1, m^2, m^2 + 1 and m^2 + 2m (the
largest remainder a root m leaves, which needs ROOT_BITS + 1 remainder bits) for edge and
random m; LayerNorm's Ve reaches 2^62 - 1 with C = 4096.
"""

from __future__ import annotations

import math
import random

import cocotb
import numpy as np
import pytest
from cocotb.triggers import ReadOnly, RisingEdge

from hwvit import blocks

import servetb
import tbutil

TOPLEVEL = "isqrt"
SOURCES = list(blocks.get("isqrt").rtl)  # the kind's Verilog (hwvit/blocks/isqrt.py)
KIND = "isqrt"


def hdl_parameters(vset) -> dict[str, int]:
    """Toplevel parameters for a set: its radicand width."""
    return {"IN_BITS": int(vset.params["in_bits"])}


def unstalled_cycles(vset, params: dict) -> int:
    """Most clocks an unstalled run may take: IN_BITS/2 + 2 per root (accept, IN_BITS/2 steps,
    the result taken; servetb.unstalled_cycles, measured exact)."""
    return servetb.unstalled_cycles(int(vset["root"].size), int(params["IN_BITS"]) // 2)


def wide_cases(width: int, seed: int = 5) -> list[int]:
    """Radicands of a width no set holds (64): the edges and random m around squares, shuffled."""
    from hwvit.vectors.random_sets import isqrt_edges

    rand = random.Random(seed)
    half = width // 2
    ms = [rand.randrange(1 << half) for _ in range(24)] + [
        rand.randrange(1 << (half - 1), 1 << half) for _ in range(16)
    ]
    values = set(isqrt_edges(width))
    values |= {v for m in ms for v in (m * m - 1, m * m, m * m + 1, m * m + 2 * m) if 0 <= v < 1 << width}
    return sorted(values, key=lambda v: rand.random())  # shuffled: no state carries a trend


def _unit(dut, vset) -> servetb.Unit:
    dut.in_valid_i.value = 0  # defined before the clock starts: Icarus would sample X
    dut.in_data_i.value = 0
    dut.out_ready_i.value = 0
    return servetb.Unit(dut, [dut.in_data_i], [dut.out_data_o], ["root"], latency=int(vset.params["in_bits"]) // 2)


def _words(vset) -> list[tuple[int]]:
    return [(v,) for v in vset["radicand"].reshape(-1).tolist()]


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


# ---------------------------------------------------------------------------- root_cases: 64 bits, no set


async def _hold(dut, cycles: int, value: int) -> str | None:
    """Keep out_ready_i low for ``cycles``: the result must stay put and no operand be taken."""
    dut.out_ready_i.value = 0
    for _ in range(cycles):
        await RisingEdge(dut.clk_i)
        await ReadOnly()
        if not dut.out_valid_o.value or dut.out_data_o.value.to_unsigned() != value:
            return "result dropped or changed while out_ready_i was low"
        if dut.in_ready_o.value:
            return "in_ready_o high while a result waits"
    await RisingEdge(dut.clk_i)
    return None


@cocotb.test()
async def root_cases(dut):
    width = len(dut.in_data_i)
    dut.in_valid_i.value = 0
    dut.in_data_i.value = 0
    dut.out_ready_i.value = 0
    await tbutil.start(dut)
    await ReadOnly()
    for sig in (dut.out_valid_o, dut.out_data_o, dut.in_ready_o):
        tbutil.to_int(sig, signed=False)  # defined after reset
    await RisingEdge(dut.clk_i)
    rand = random.Random(3)
    cases = wide_cases(width)
    checked, mismatches, first, fault = 0, 0, None, None
    # A root takes IN_BITS/2 steps plus the handshakes; a block that takes no operand or gives
    # no result within twice that (or holds a result past 200 ready draws) fails here, not in
    # a hang.
    limit = width + 16
    for index, n in enumerate(cases):
        while rand.random() < 0.3:
            await RisingEdge(dut.clk_i)
        dut.in_valid_i.value = 1
        dut.in_data_i.value = n
        await RisingEdge(dut.clk_i)
        waited = 0
        while not dut.in_ready_o.value and waited < limit:
            await RisingEdge(dut.clk_i)
            waited += 1
        dut.in_valid_i.value = 0
        while waited < 2 * limit:  # wait for the result with out_ready_i low
            await ReadOnly()
            if dut.out_valid_o.value:
                break
            await RisingEdge(dut.clk_i)
            waited += 1
        else:
            fault = f"no result for isqrt({n}) within {2 * limit} cycles"
            break
        got = dut.out_data_o.value.to_unsigned()
        await RisingEdge(dut.clk_i)
        if index % 7 == 0 and fault is None:
            fault = await _hold(dut, rand.randint(20, 60), got)
        for _ in range(200):  # then random ready until the result is taken
            dut.out_ready_i.value = int(rand.random() >= 0.3)
            await ReadOnly()
            if dut.out_valid_o.value and dut.out_ready_i.value:
                got = dut.out_data_o.value.to_unsigned()
                await RisingEdge(dut.clk_i)
                break
            await RisingEdge(dut.clk_i)
        else:
            fault = f"the result of isqrt({n}) was never taken (out_valid_o dropped)"
            break
        dut.out_ready_i.value = 0
        checked += 1
        if got != math.isqrt(n):
            mismatches += 1
            first = first or {"tensor": "root", "index": index, "expected": math.isqrt(n), "got": got}
    message = ""
    if first is not None:
        message = (
            f"isqrt IN_BITS={width}: {mismatches} wrong; first isqrt({cases[first['index']]}) "
            f"expected {first['expected']} got {first['got']}"
        )
    if fault is not None:
        message = f"isqrt IN_BITS={width}: {fault}; {message}"
    passed = first is None and fault is None
    tbutil.write_result(passed, elements=checked, mismatches=mismatches, first=first, message=message)
    assert passed, message


# ---------------------------------------------------------------------------- pytest side

pytestmark = pytest.mark.xdist_group("layernorm")


def _set(tmp_path, cases: int, seed: int, **params):
    from hwvit import vectors

    record = vectors.random_record(KIND, cases, seed, **params)
    return vectors.write_set(record, tmp_path / f"{KIND}-{seed}")


@pytest.mark.parametrize("width", [62, 8])
def test_isqrt(tmp_path, simulator, width, run_set):
    """LayerNorm's width (62, the default set) and a small one where every corner is near."""
    from hwvit import covbins
    from hwvit.vectors.random_sets import default_cases

    cases = default_cases(KIND)
    result = run_set(_set(tmp_path, cases, seed=1, in_bits=width), simulator)
    assert result.elements == cases and result.mismatches == 0
    bins = result.extra["bins"]
    assert list(bins) == list(covbins.names(KIND)), bins
    assert min(bins[name] for name in covbins.NAMES[KIND]) > 0, bins  # every bin but the reset states hit


def test_isqrt_64_bits(simulator, run_unit):
    """The largest width (64), beyond what a set holds: root_cases against math.isqrt."""
    result = run_unit("test_isqrt", TOPLEVEL, SOURCES, simulator, {"IN_BITS": 64}, "root_cases")
    assert result.passed, result.message
    assert result.elements == len(wide_cases(64)) > 200


def test_unstalled_timing_model_is_exact(tmp_path, simulator, run_set):
    """No stalls: exactly IN_BITS/2 + 2 clocks a root, neither more nor fewer."""
    from hwvit import vectors

    set_dir = _set(tmp_path, 30, seed=2, in_bits=16)
    result = run_set(set_dir, simulator, extra_env={"HWVIT_STALL": "0"})
    vset = vectors.read(set_dir)
    assert result.cycles == unstalled_cycles(vset, hdl_parameters(vset)) == 30 * 10
    assert result.extra["bins"]["out_stall"] == 0


def test_reset_midstream(tmp_path, simulator, run_set):
    servetb.check_reset_midstream(run_set, _set(tmp_path, 60, seed=11), simulator, 60, 1)


def test_mismatch_is_reported(tmp_path, simulator, mismatch_reported):
    mismatch_reported(KIND, tmp_path, simulator, "root", index=17, cases=40)


def test_cases_reach_the_largest_remainder():
    """m^2 + 2m for the largest root of the width (remainder 2m needs ROOT_BITS + 1 bits), in the
    default set and in the 64-bit cases; squares and their neighbours around every edge m."""
    from hwvit import vectors
    from hwvit.vectors.random_sets import default_cases, isqrt_edges

    x = vectors.random_record(KIND, default_cases(KIND), 1).tensors["radicand"].data.tolist()
    m = (1 << 31) - 1
    assert {0, m * m + 2 * m, (1 << 62) - 1, m * m, m * m - 1} <= set(x)
    assert set(isqrt_edges(62)) <= set(x)
    assert ((1 << 32) - 1) ** 2 + 2 * ((1 << 32) - 1) in wide_cases(64)
    roots = np.array([math.isqrt(v) for v in x], dtype=object)
    assert sum(v == r * r and r >= 1 for v, r in zip(x, roots)) >= 40


@pytest.mark.parametrize("width", [4, 62, 64])
def test_lint(width):
    from hwvit import synth

    assert synth.lint(SOURCES, {"IN_BITS": width}) == []
    assert synth.iverilog(SOURCES, TOPLEVEL, {"IN_BITS": width}) == []
