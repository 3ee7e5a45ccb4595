"""Testbench of rtl/isqrt.v, the bit-serial integer square root LayerNorm uses (sigma from Ve).

cocotb side: ``root_cases`` sends radicands one at a time with random idle cycles and, every
seventh result, holds out_ready_i low for 20-60 cycles (backpressure: the result must stay on
out_data_o with out_valid_o high, and no new operand may be taken). Each root is compared with
``math.isqrt``. Radicands: m^2 - 1, m^2, m^2 + 1 and m^2 + 2m (the largest remainder a root m
leaves, which needs ROOT_BITS + 1 remainder bits) for edge and random m, and the largest
radicands of the width (2^IN_BITS - 1; LayerNorm's Ve reaches 2^62 - 1 with C = 4096).
"""

from __future__ import annotations

import math
import random

TOPLEVEL = "isqrt"
SOURCES = ["rtl/isqrt.v"]


def isqrt_cases(width: int, seed: int = 5) -> list[int]:
    """Radicands around squares (see the module docstring), clipped to [0, 2^width)."""
    half = width // 2
    ms = {0, 1, 2, 3, 4, 5, 15, 16, 255, 256, 4095, 4096, 65535, 65536, (1 << half) - 1, (1 << half) - 2}
    ms |= {(1 << k) + d for k in range(17, half) for d in (-1, 0, 1)}
    rand = random.Random(seed)
    ms |= {rand.randrange(1 << half) for _ in range(24)}
    ms |= {rand.randrange(1 << (half - 1), 1 << half) for _ in range(16)}
    values = {(1 << width) - 1, (1 << width) - 2, 1 << (width - 1), (1 << (width - 1)) - 1}
    for m in ms:
        values |= {v for v in (m * m - 1, m * m, m * m + 1, m * m + 2 * m) if 0 <= v < 1 << width}
    return sorted(values, key=lambda v: rand.random())  # shuffled: no state carries a trend


try:
    import cocotb
    from cocotb.triggers import ReadOnly, RisingEdge

    import tbutil
except ImportError:  # pragma: no cover - cocotb is a dependency
    cocotb = None

if cocotb is not None:

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
        cases = isqrt_cases(width)
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
import pytest  # noqa: E402

pytestmark = pytest.mark.xdist_group("layernorm")


@pytest.mark.parametrize("width", [62, 64, 8])
def test_isqrt(simulator, width, run_unit):
    """LayerNorm's width (62), the largest (64) and a small one where every corner is near."""
    result = run_unit("test_isqrt", TOPLEVEL, SOURCES, simulator, {"IN_BITS": width}, "root_cases")
    assert result.passed, result.message
    assert result.elements == len(isqrt_cases(width)) > 20


def test_cases_reach_the_largest_remainder():
    """m^2 + 2m for the largest root of the width: remainder 2m needs ROOT_BITS + 1 bits."""
    m = (1 << 31) - 1
    cases = isqrt_cases(62)
    assert m * m + 2 * m in cases and (1 << 62) - 1 in cases


@pytest.mark.parametrize("width", [4, 62, 64])
def test_lint(width):
    from hwvit import synth

    assert synth.lint(SOURCES, {"IN_BITS": width}) == []
    assert synth.iverilog(SOURCES, TOPLEVEL, {"IN_BITS": width}) == []
