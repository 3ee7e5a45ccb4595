"""Testbench of rtl/softmax.v: cocotb tests (run inside the simulator) and their pytest drivers.

cocotb side (hwvit.simulate runs it on a vector set named by HWVIT_SET):
- ``run_vectors``: load the set's exp table through the write port, stream its rows through
  in_*/out_* with random stalls on both sides (HWVIT_STALL), compare p and out_last_o bit for bit.
  HWVIT_SOFTMAX_MORE (os.pathsep-separated set directories, same widths, any row length) streams
  further sets after the first in the same simulation: the table is reloaded and row_len_i
  changes between rows, as between layers of a model.
- ``reset_midstream``: reset the block at random points of a stream (any phase: load, sum,
  divide, output), check the outputs are defined and idle after each reset, then stream the
  whole set and compare. The table RAM has no reset, so it is loaded only once.

pytest side: random and hand-made hard sets (compared with hwvit.ops.softmax, the specification),
on both simulators and two parameter sets, plus the reset test, a cycle-count test and a test
that a corrupted expected value is reported.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np

TOPLEVEL = "softmax"
SOURCES = ["rtl/softmax.v", "rtl/divu.v"]
MIN_MAX_N = 256  # row buffer of the built design: one build serves every row length up to 256
MORE_ENV = "HWVIT_SOFTMAX_MORE"


def hdl_parameters(vset) -> dict:
    """softmax.v parameters for a set. ENTRIES >= 2 (a 1-entry table is padded with T[1] = 0)."""
    p = vset.params
    max_n = max(MIN_MAX_N, 1 << (p["row_len"] - 1).bit_length())
    return {"MAX_N": max_n, "IN_BITS": p["in_bits"], "OUT_BITS": p["out_bits"],
            "ENTRIES": max(2, p["entries"])}


def cycles_per_row(row_len: int, out_bits: int) -> int:
    """Clocks between the first inputs of consecutive rows without stalls (see docs/rtl.md).

    LOAD N, SUM N + 3 (two pipeline stages and the hand-over), DIV 2 + (out_bits + 17) divider
    steps + 1, OUT N + 4 (four pipeline stages and the hand-over).
    """
    return 3 * row_len + out_bits + 17 + 9


# ---------------------------------------------------------------------------- cocotb side
try:
    import cocotb
    from cocotb.triggers import ClockCycles, RisingEdge
    from cocotb.utils import get_sim_time

    import tbutil
except ImportError:  # pragma: no cover - cocotb is a dependency; keep pytest collection clear
    cocotb = None


def _sets() -> list:
    """The set named by HWVIT_SET, then those in HWVIT_SOFTMAX_MORE (all with the same build)."""
    from hwvit import vectors

    first = tbutil.load_set()
    more = [d for d in os.environ.get(MORE_ENV, "").split(os.pathsep) if d]
    sets = [first] + [vectors.read(Path(d)) for d in more]
    for vset in sets[1:]:
        if vset.kind != "softmax" or hdl_parameters(vset) != hdl_parameters(first):
            raise ValueError(f"{vset.directory}: needs parameters {hdl_parameters(vset)}, "
                             f"the build has {hdl_parameters(first)}")
    return sets


def _idle(dut) -> None:
    dut.tbl_we_i.value = 0
    dut.tbl_addr_i.value = 0
    dut.tbl_data_i.value = 0
    dut.row_len_i.value = 1
    dut.in_valid_i.value = 0
    dut.in_data_i.value = 0
    dut.out_ready_i.value = 0


def _check_idle_outputs(dut, when: str) -> None:
    """Every output defined (no X/Z), nothing valid, ready for a row."""
    values = {name: tbutil.to_int(getattr(dut, name), False)
              for name in ("in_ready_o", "out_valid_o", "out_data_o", "out_last_o")}
    assert values["out_valid_o"] == 0 and values["in_ready_o"] == 1, f"{when}: not idle: {values}"


async def _load_table(dut, vset) -> None:
    """Write T[0..ENTRIES-1] through the write port, one entry per clock (zero-padded)."""
    entries = hdl_parameters(vset)["ENTRIES"]
    table = [int(v) for v in vset["exp_table"]] + [0] * (entries - vset.params["entries"])
    dut.tbl_we_i.value = 1
    for addr, value in enumerate(table):
        dut.tbl_addr_i.value = addr
        dut.tbl_data_i.value = value
        await RisingEdge(dut.clk_i)
    dut.tbl_we_i.value = 0


async def _stream(dut, vset, stall: float, rand: random.Random) -> tuple[np.ndarray, np.ndarray, int]:
    """Send every row of the set, collect as many outputs: (p, last flags, clocks taken)."""
    x = vset["x"]
    rows, n = x.shape
    words = [(int(v), n) for v in x.reshape(-1)]
    src = tbutil.Source(dut.clk_i, dut.in_valid_i, dut.in_ready_o, [dut.in_data_i, dut.row_len_i],
                        stall, random.Random(rand.getrandbits(32)))
    sink = tbutil.Sink(dut.clk_i, dut.out_valid_o, dut.out_ready_i, [dut.out_data_o, dut.out_last_o],
                       [False, False], stall, random.Random(rand.getrandbits(32)))
    start = get_sim_time("ns")
    sender = cocotb.start_soon(src.send(words))
    got = np.array(await sink.collect(x.size), dtype=np.int64).reshape(rows, n, 2)
    await sender
    cycles = int(round((get_sim_time("ns") - start) / tbutil.CLK_NS))
    return got[..., 0], got[..., 1], cycles


def _expected_last(shape: tuple[int, int]) -> np.ndarray:
    last = np.zeros(shape, dtype=np.int64)
    last[:, -1] = 1
    return last


async def _run_and_check(dut, sets: list, rand: random.Random, extra: dict) -> None:
    stall = tbutil.stall_probability()
    checks: dict = {}
    cycles = 0
    for k, vset in enumerate(sets):
        await _load_table(dut, vset)
        p, last, n_cycles = await _stream(dut, vset, stall, rand)
        tag = "" if k == 0 else f"@{vset.directory.name}"
        checks["p" + tag] = (vset["p"], p)
        if not np.array_equal(last, _expected_last(last.shape)):  # reported only when wrong
            checks["out_last" + tag] = (_expected_last(last.shape), last)
        cycles += n_cycles
    rows = sum(int(v["x"].shape[0]) for v in sets)
    tbutil.finish(dut, sets[0], checks, cycles=cycles, extra={"rows": rows, "sets": len(sets), **extra})


if cocotb is not None:

    @cocotb.test()
    async def run_vectors(dut):
        """Load the table, stream every row with random stalls, compare bit for bit."""
        sets = _sets()
        _idle(dut)
        await tbutil.start(dut)
        _check_idle_outputs(dut, "after reset")
        await _run_and_check(dut, sets, tbutil.rng(), {})

    @cocotb.test()
    async def reset_midstream(dut):
        """Reset at random points of a stream (any phase), then run the whole set."""
        vset = _sets()[0]
        rand = tbutil.rng()
        stall = tbutil.stall_probability()
        _idle(dut)
        await tbutil.start(dut)
        _check_idle_outputs(dut, "after reset")
        await _load_table(dut, vset)
        rows, n = vset["x"].shape
        span = min(rows, 4) * cycles_per_row(n, vset.params["out_bits"]) * 2
        resets = []
        for _ in range(6):
            x = vset["x"]
            words = [(int(v), n) for v in x.reshape(-1)]
            src = tbutil.Source(dut.clk_i, dut.in_valid_i, dut.in_ready_o, [dut.in_data_i, dut.row_len_i],
                                stall, random.Random(rand.getrandbits(32)))
            sink = tbutil.Sink(dut.clk_i, dut.out_valid_o, dut.out_ready_i, [dut.out_data_o, dut.out_last_o],
                               [False, False], stall, random.Random(rand.getrandbits(32)))
            sender = cocotb.start_soon(src.send(words))
            receiver = cocotb.start_soon(sink.collect(x.size))
            wait = rand.randrange(1, span)
            await ClockCycles(dut.clk_i, wait)
            sender.cancel()
            receiver.cancel()
            resets.append(wait)
            dut.in_valid_i.value = 0
            dut.out_ready_i.value = rand.getrandbits(1)  # ready must not matter during reset
            dut.rst_ni.value = 0
            await ClockCycles(dut.clk_i, rand.randrange(1, 4))
            dut.rst_ni.value = 1
            dut.out_ready_i.value = 0
            await RisingEdge(dut.clk_i)
            _check_idle_outputs(dut, f"after a reset {wait} clocks into a stream")
        await _run_and_check(dut, [vset], rand, {"resets_after": resets})
