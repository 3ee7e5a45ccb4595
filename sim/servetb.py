"""cocotb body shared by the one-request-at-a-time units (rtl/divu.v, rtl/isqrt.v).

Such a unit takes one request (several input signals) on in_valid_i & in_ready_o, works on it
for a fixed number of clocks with in_ready_o low, then holds its result (several output
signals) with out_valid_o high until out_ready_i. ``run_requests`` drives a vector set through
it with random stalls on both sides (HWVIT_STALL) and long holds of every seventh result, and
checks the handshake on every clock:

- while out_valid_o is high, in_ready_o is low (one request at a time);
- a result the sink refused is still there, unchanged, on the next clock (out_valid_o does not
  drop, no output bit moves);
- no output is X/Z while out_valid_o is high, none after reset.

``run_reset_midrequest`` resets the unit in every state of RESET_STATES (idle with a request
offered, a request being worked on, a result waiting), checks after each that it comes back idle
and quiet, then runs the whole set again. Both end
in ``tbutil.finish`` (one check per output tensor), which writes the JSON result.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import cocotb
import numpy as np
from cocotb.simtime import get_sim_time
from cocotb.triggers import ReadOnly, RisingEdge, SimTimeoutError, with_timeout

import tbutil

HOLD_EVERY = 7  # every seventh result waits 20..60 clocks for out_ready_i (stalled runs only)
HOLD_CLOCKS = (20, 60)


@dataclass
class Unit:
    """The handshake and data signals of a request/result unit; ``latency``: clocks per request."""

    dut: Any
    in_data: Sequence[Any]  # input data handles, in the order of each request's values
    out_data: Sequence[Any]  # output data handles (unsigned), in the order of ``out_names``
    out_names: Sequence[str]  # the set's output tensors, one per handle
    latency: int  # clocks a request spends in the unit (Q_BITS, IN_BITS/2)

    @property
    def clk(self):
        return self.dut.clk_i


class Fault(Exception):
    """A handshake rule broken (the message says which)."""


class Sink:
    """Collect results with random ready, long holds, and the handshake rules checked each clock."""

    def __init__(self, unit: Unit, stall: float, rand: random.Random):
        self.unit, self.stall, self.rand = unit, stall, rand
        self.words: list[tuple[int, ...]] = []
        self.fault: str | None = None
        unit.dut.out_ready_i.value = 0

    def _read(self) -> tuple[int, ...]:
        return tuple(tbutil.to_int(h, signed=False) for h in self.unit.out_data)

    def _check(self, valid: bool, held: tuple[int, ...] | None) -> tuple[str | None, tuple[int, ...] | None]:
        """(fault or None, the result on the outputs or None) in this clock's ReadOnly phase."""
        where = f"result {len(self.words)}"
        try:
            data = self._read() if valid else None
        except AssertionError as exc:  # X/Z on a result
            return f"{where}: {exc}", None
        if held is not None and not valid:
            return f"{where}: out_valid_o dropped while out_ready_i was low", None
        if held is not None and data != held:
            return f"{where}: changed from {held} to {data} while out_ready_i was low", None
        if valid and self.unit.dut.in_ready_o.value:
            return f"{where}: in_ready_o high while a result waits", None
        return None, data

    async def collect(self, count: int) -> list[tuple[int, ...]]:
        dut = self.unit.dut
        held: tuple[int, ...] | None = None  # the result refused on the previous clock
        hold, shown = 0, 0  # clocks the current result must wait; clocks it has been shown
        while len(self.words) < count:
            if hold and shown < hold:
                ready = 0
            else:
                ready = 0 if (self.stall and self.rand.random() < self.stall) else 1
            dut.out_ready_i.value = ready
            await ReadOnly()
            valid = bool(dut.out_valid_o.value)
            self.fault, data = self._check(valid, held)
            if self.fault is not None:
                await RisingEdge(self.unit.clk)  # signals are written outside the ReadOnly phase
                break
            if valid:
                shown += 1
                if ready:
                    self.words.append(data)
                    tbutil.OUT_TIMES.append(int(get_sim_time("ns")))
                    held, shown = None, 0
                    hold = self.rand.randint(*HOLD_CLOCKS) if self.stall and len(self.words) % HOLD_EVERY == 0 else 0
                else:
                    tbutil.SEEN["out_stall"] += 1
                    held = data
            await RisingEdge(self.unit.clk)
        dut.out_ready_i.value = 0
        return self.words


def _timeout_ns(unit: Unit, requests: int) -> int:
    # A request needs its latency plus ~1/(1-p) clocks for each handshake with stall probability
    # p, and every seventh result up to 60 clocks more; allow 8x the handshakes, 2x the holds.
    p = min(tbutil.stall_probability(), 0.95)
    per = unit.latency + 8 / (1 - p) + (2 * HOLD_CLOCKS[1] / HOLD_EVERY if p else 0)
    return int((requests * per + 200) * tbutil.CLK_NS)


async def transfer(unit: Unit, words: Sequence[Sequence[int]], stall: float, seeds: tuple[int, int] = (0, 1)):
    """Send ``words``, collect as many results; (results, clocks, fault or None). Stops at a timeout."""
    dut = unit.dut
    src = tbutil.Source(unit.clk, dut.in_valid_i, dut.in_ready_o, unit.in_data, stall, tbutil.stream_rng(seeds[0]))
    snk = Sink(unit, stall, tbutil.stream_rng(seeds[1]))
    t0 = get_sim_time("ns")
    send = cocotb.start_soon(src.send(words))
    recv = cocotb.start_soon(snk.collect(len(words)))
    fault = None
    try:
        await with_timeout(recv, _timeout_ns(unit, len(words)), "ns")
    except SimTimeoutError:
        recv.cancel()  # report what arrived: the checker names the missing elements
        dut.out_ready_i.value = 0
        fault = f"{len(snk.words)} of {len(words)} results within the time limit"
    send.cancel()
    dut.in_valid_i.value = 0
    cycles = int(round((get_sim_time("ns") - t0) / tbutil.CLK_NS))
    return snk.words, cycles, snk.fault or fault


def _columns(unit: Unit, results: list[tuple[int, ...]]) -> dict[str, np.ndarray]:
    cols = list(zip(*results)) if results else [()] * len(unit.out_names)
    return {name: np.array(col, dtype=np.int64) for name, col in zip(unit.out_names, cols)}


async def check_idle(unit: Unit, vset, when: str) -> None:
    """In this clock's ReadOnly phase: no output is X/Z and out_valid_o is low; then the next edge."""
    dut = unit.dut
    await ReadOnly()
    try:
        for handle in (dut.out_valid_o, dut.in_ready_o, *unit.out_data):
            tbutil.to_int(handle, signed=False)
    except AssertionError as exc:
        tbutil.fail(vset, f"{when}: {exc}")
    if dut.out_valid_o.value:
        tbutil.fail(vset, f"out_valid_o high {when}")
    await RisingEdge(unit.clk)


async def run_requests(unit: Unit, vset, words: Sequence[Sequence[int]]) -> None:
    """Every request of the set once, every result checked (the ``run_vectors`` body)."""
    await check_idle(unit, vset, "after reset")
    got, cycles, fault = await transfer(unit, words, tbutil.stall_probability())
    if fault is not None:
        tbutil.fail(vset, fault)
    cols = _columns(unit, got)
    checks = {name: (vset[name].reshape(-1), cols[name]) for name in unit.out_names}
    tbutil.finish(unit.dut, vset, checks, cycles=cycles)


# The states run_reset_midrequest resets in (hwvit.covbins.RESET_STATES of divu and isqrt), from
# the ports: idle with a request offered (the reset must drop it), a request worked on (the
# FSM's RUN) with the next offered, a result held for a sink that refuses it (DONE).
RESET_STATES = {
    "idle": lambda dut: bool(dut.in_ready_o.value) and bool(dut.in_valid_i.value),
    "run": lambda dut: not dut.in_ready_o.value and not dut.out_valid_o.value and bool(dut.in_valid_i.value),
    "done": lambda dut: bool(dut.out_valid_o.value) and not dut.out_ready_i.value,
}


async def _reset_in(unit: Unit, vset, words, state: str, seeds: tuple[int, int]) -> tuple[list, bool]:
    """Run the set with stalls, past a quarter of it, until the unit is in ``state``; reset it
    there for 2 clocks (tbutil.reset_when), check it comes back idle; return the results received
    before the reset and whether the state was reached."""
    dut, stall = unit.dut, max(tbutil.stall_probability(), 0.3)  # stalls make results wait
    src = tbutil.Source(unit.clk, dut.in_valid_i, dut.in_ready_o, unit.in_data, stall, tbutil.stream_rng(seeds[0]))
    snk = Sink(unit, stall, tbutil.stream_rng(seeds[1]))
    send = cocotb.start_soon(src.send(words))
    recv = cocotb.start_soon(snk.collect(len(words)))
    for _ in range(len(words) // 4 * (unit.latency + 2)):
        await RisingEdge(unit.clk)
    held = RESET_STATES[state]
    waited = await tbutil.reset_when(
        dut, state, lambda: bool(snk.fault) or held(dut), 10 * len(words) * (unit.latency + 2)
    )
    await RisingEdge(unit.clk)  # the reset is taken here, in `state` (unless not reached)
    send.cancel()
    recv.cancel()
    if snk.fault:
        tbutil.fail(vset, f"before the reset in state {state}: {snk.fault}")
    dut.out_ready_i.value = 0  # a waiting result stays unread through the reset
    await RisingEdge(unit.clk)
    await check_idle(unit, vset, f"after 2 reset clocks in state {state} (a result survived the reset)")
    dut.rst_ni.value = 1
    dut.in_valid_i.value = 0
    dut.out_ready_i.value = 1
    for clock in range(unit.latency + 4):  # nothing may come out of an emptied unit
        await check_idle(unit, vset, f"{clock + 1} clocks after a reset in state {state}, with no request")
    return snk.words, waited is not None


async def run_reset_midrequest(unit: Unit, vset, words: Sequence[Sequence[int]]) -> None:
    """Reset in every state of RESET_STATES while the set runs; then the whole set, checked."""
    assert len(words) >= 8, "reset_midstream needs at least 8 requests"
    await check_idle(unit, vset, "after reset")
    checks, resets = {}, []
    for k, state in enumerate(RESET_STATES):
        results, reached = await _reset_in(unit, vset, words, state, (2 + 2 * k, 3 + 2 * k))
        resets.append({"state": state, "reached": reached, "results_before": len(results)})
        cols = _columns(unit, results)
        for name in unit.out_names:
            checks[f"{name}_before_reset_{state}"] = (vset[name].reshape(-1)[: len(results)], cols[name])
    got, cycles, fault = await transfer(unit, words, tbutil.stall_probability())
    if fault is not None:
        tbutil.fail(vset, f"after the resets: {fault}")
    cols = _columns(unit, got)
    checks.update({name: (vset[name].reshape(-1), cols[name]) for name in unit.out_names})
    before = sum(r["results_before"] for r in resets)
    tbutil.finish(unit.dut, vset, checks, cycles=cycles, extra={"resets": resets, "before_reset": before})


def check_reset_midstream(run_set, set_dir, simulator: str, requests: int, outputs: int) -> None:
    """A reset in every state, each counted in its bin; the results before each reset right."""
    result = run_set(set_dir, simulator, testcase="reset_midstream")
    assert [r["state"] for r in result.extra["resets"] if r["reached"]] == list(RESET_STATES)
    assert all(result.extra["bins"][f"reset_{state}"] == 1 for state in RESET_STATES), result.extra["bins"]
    assert 0 < result.extra["before_reset"] < len(RESET_STATES) * requests
    assert result.elements == outputs * (requests + result.extra["before_reset"])


# ---------------------------------------------------------------------------- pytest side


def unstalled_cycles(requests: int, latency: int) -> int:
    """Clocks of an unstalled run of ``requests`` (the timing model; docs/verification.md), from
    the first request offered to the last result taken: each request takes one clock to be
    accepted, ``latency`` clocks of work and one clock for its result to be taken (the next is
    accepted on the clock after): latency + 2 each, measured exactly so on Icarus and Verilator."""
    return requests * (latency + 2)
