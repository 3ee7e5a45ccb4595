"""Shared cocotb-side helpers for hwvit testbenches (imported by sim/test_<kind>.py).

- ``load_set()``: the vector set named by HWVIT_SET, read and validated by hwvit.vectors.read;
- ``start(dut)``: clock on ``clk_i`` and a synchronous active-low reset on ``rst_ni``;
- ``Source`` / ``Sink``: valid/ready drivers with random stalls;
- ``finish(...)``: compare outputs, write the JSON result for hwvit.simulate, fail with
  block, set, first mismatching index, expected, got and waveform path.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

CLK_NS = 10

# What the drivers saw of the handshakes in this simulation (one cocotb test per run), for the
# functional coverage bins: cycles in which the block offered an output word the sink refused
# (out_stall), resets sampled while the block was in state S (reset_S, counted by reset_when),
# jobs started in the cycle the previous one ended (back_to_back).
SEEN: dict[str, int] = {"out_stall": 0}
# Simulation time (ns) of every output handshake the sinks took, in order: a mismatch line gives
# the one of its element (the last len(output) of them: a reset test's final pass).
OUT_TIMES: list[int] = []


def load_set():
    from hwvit import vectors

    return vectors.read(Path(os.environ["HWVIT_SET"]))


def stall_probability() -> float:
    """Probability that a source withholds valid / a sink withholds ready in a cycle."""
    return float(os.environ.get("HWVIT_STALL", "0.3"))


def rng() -> random.Random:
    return random.Random(int(os.environ.get("HWVIT_TB_SEED", "1")))


def stream_rng(stream_id: int) -> random.Random:
    """The stalls of one driver (source, sink) of a run: each its own stream, since one seed
    shared by a source and its sink would correlate their stalls."""
    return random.Random(int(os.environ.get("HWVIT_TB_SEED", "1")) * 2 + stream_id)


async def start(dut, cycles: int = 3) -> None:
    """Start the clock and hold reset (rst_ni low) for ``cycles`` rising edges."""
    # impl="gpi": the clock toggles in the simulator, not in a Python coroutine (~0.5 ms per cycle saved)
    Clock(dut.clk_i, CLK_NS, unit="ns", impl="gpi").start()
    dut.rst_ni.value = 0
    for _ in range(cycles):
        await RisingEdge(dut.clk_i)
    dut.rst_ni.value = 1
    await RisingEdge(dut.clk_i)


async def reset_when(dut, state: str, in_state: Callable[[], bool], limit: int) -> int | None:
    """Drive rst_ni low so that the next rising edge samples the reset while ``in_state()`` holds.

    Checks ``in_state()`` once per clock in the ReadOnly phase (the registers as they are until
    the next edge); when it holds, rst_ni goes low at the falling edge, so the synchronous reset
    is taken at the following rising edge, in that state, and ``SEEN["reset_<state>"]`` counts
    it. Returns the clocks waited, or None when the state did not come within ``limit`` clocks
    (a set whose traffic never gets there, e.g. a one-tile GEMM has no tile issuing while another
    drains): rst_ni goes low all the same, so the caller's sequence is unchanged, but nothing is
    counted and the bin stays 0. Directed tests assert the bins. The caller holds reset as long
    as it likes and raises rst_ni again.
    """
    for waited in range(limit):
        await ReadOnly()
        if in_state():
            await FallingEdge(dut.clk_i)
            dut.rst_ni.value = 0
            SEEN[f"reset_{state}"] = SEEN.get(f"reset_{state}", 0) + 1
            return waited
        await RisingEdge(dut.clk_i)
    await FallingEdge(dut.clk_i)
    dut.rst_ni.value = 0
    return None


def to_int(handle, signed: bool) -> int:
    """Value of a signal as a Python int; raises if it holds X or Z."""
    value = handle.value
    if not value.is_resolvable:
        raise AssertionError(f"{handle._name} is {value} (X/Z) after reset")
    if not hasattr(value, "to_unsigned"):  # a 1-bit signal reads as a Logic, not a LogicArray
        return int(value)
    return value.to_signed() if signed else value.to_unsigned()


class Source:
    """Drive words on (valid, data...) and wait for ready, with random idle cycles."""

    def __init__(self, clk, valid, ready, data: Sequence, stall: float, rand: random.Random):
        self.clk, self.valid, self.ready, self.data = clk, valid, ready, data
        self.stall, self.rand = stall, rand
        self.valid.value = 0

    async def send(self, words: Sequence[Sequence[int]], eager: bool = False) -> None:
        """``eager``: the first word is offered at once (in the clock the call starts in), stalls
        after it."""
        for i, word in enumerate(words):
            while self.stall and not (eager and i == 0) and self.rand.random() < self.stall:
                self.valid.value = 0
                await RisingEdge(self.clk)
            self.valid.value = 1
            for sig, val in zip(self.data, word):
                sig.value = int(val)
            await RisingEdge(self.clk)
            while not self.ready.value:
                await RisingEdge(self.clk)
        self.valid.value = 0


class Sink:
    """Collect words from (valid, data...) while toggling ready at random; ``hold`` = (words, clocks):
    ready held low for ``clocks`` clocks once, after ``words`` words are taken (a consumer busy for
    longer than random stalls ever are)."""

    def __init__(
        self,
        clk,
        valid,
        ready,
        data: Sequence,
        signed: Sequence[bool],
        stall: float,
        rand: random.Random,
        hold: tuple[int, int] | None = None,
    ):
        self.clk, self.valid, self.ready, self.data, self.signed = clk, valid, ready, data, signed
        self.stall, self.rand, self.hold = stall, rand, hold
        self.words: list[tuple[int, ...]] = []
        self.ready.value = 0

    async def collect(self, count: int) -> list[tuple[int, ...]]:
        while len(self.words) < count:
            if self.hold is not None and len(self.words) == self.hold[0]:
                self.ready.value = 0
                for _ in range(self.hold[1]):
                    await RisingEdge(self.clk)
                self.hold = None
            self.ready.value = 0 if (self.stall and self.rand.random() < self.stall) else 1
            await ReadOnly()
            if self.valid.value and not self.ready.value:
                SEEN["out_stall"] += 1
            if self.ready.value and self.valid.value:
                self.words.append(tuple(to_int(s, g) for s, g in zip(self.data, self.signed)))
                OUT_TIMES.append(int(get_sim_time("ns")))
            await RisingEdge(self.clk)
        self.ready.value = 0
        return self.words


def first_mismatch(expected: np.ndarray, got: np.ndarray) -> tuple[int, dict[str, Any] | None]:
    """Number of mismatching elements and the first one (flat index and N-d index)."""
    expected = np.asarray(expected, dtype=np.int64).reshape(-1)
    got = np.asarray(got, dtype=np.int64).reshape(-1)
    if expected.shape != got.shape:
        return max(len(expected), len(got)), {
            "index": min(len(expected), len(got)),
            "expected": f"{len(expected)} elements",
            "got": f"{len(got)} elements",
        }
    bad = np.flatnonzero(expected != got)
    if bad.size == 0:
        return 0, None
    i = int(bad[0])
    return int(bad.size), {"index": i, "expected": int(expected[i]), "got": int(got[i])}


def write_result(passed: bool, **fields: Any) -> None:
    """Write the JSON result hwvit.simulate reads: the fields of ``SimResult`` (the one writer).

    ``fields`` are SimResult's (elements, mismatches, first, waveform, cycles, message, extra);
    building a SimResult checks their names, and the run's kind, set and simulator are left to
    the harness.
    """
    import dataclasses

    from hwvit.simresult import SimResult

    result = dataclasses.asdict(SimResult(kind="", set_dir="", simulator="", passed=passed, **fields))
    for harness_field in ("kind", "set_dir", "simulator"):
        del result[harness_field]
    out = os.environ.get("HWVIT_RESULT")
    if out:
        Path(out).write_text(json.dumps(result))


def fail(vset, message: str) -> None:
    """Write a failed result for a fault found outside the comparison (a handshake rule, a hang),
    naming the set, then raise."""
    message = f"{vset.kind} {vset.path} ({vset.directory}): {message}"
    write_result(False, message=message)
    raise AssertionError(message)


def finish(
    dut,
    vset,
    checks: dict[str, tuple[np.ndarray, np.ndarray]],
    cycles: int | None = None,
    extra: dict[str, Any] | None = None,
) -> None:
    """Compare each named output (expected, got), write the result, assert bit-exactness."""
    elements, mismatches, first = 0, 0, None
    for name, (expected, got) in checks.items():
        exp = np.asarray(expected)
        n, f = first_mismatch(exp, got)
        elements += int(exp.size)
        mismatches += n
        if f is not None and first is None:
            if exp.ndim > 1 and isinstance(f["index"], int) and f["index"] < exp.size:
                f["nd_index"] = [int(v) for v in np.unravel_index(f["index"], exp.shape)]
            first = {"tensor": name, **f}
    waves = os.environ.get("HWVIT_WAVES") == "1"
    sim = os.environ.get("HWVIT_SIMULATOR", "?")
    waveform = None
    if waves:
        waveform = str(Path.cwd() / ("dump.vcd" if sim == "verilator" else f"{dut._name}.fst"))
    message = ""
    if first is not None:
        first.update(where(vset, first, np.asarray(checks[first["tensor"]][0]).size, sim))
        message = mismatch_line(vset.kind, vset, mismatches, first, waveform)
    extra = dict(extra or {})
    try:
        extra["bins"] = coverage_bins(vset, checks, extra)
    except Exception as exc:  # noqa: BLE001 - a bin bug must not hide the comparison's verdict
        extra["bins_error"] = f"{exc.__class__.__name__}: {exc}"
    write_result(
        first is None,
        elements=elements,
        mismatches=mismatches,
        first=first,
        waveform=waveform,
        cycles=cycles,
        message=message,
        extra=extra,
    )
    assert first is None, message


def mismatch_line(block: str, vset, mismatches: int, first: dict[str, Any], waveform: str | None) -> str:
    """The line a failed run reports, for hwvit's blocks and a team's (``block``: the kind, or
    ``top (kind)``): the set, the count, the first mismatching element with expected and got, and
    where ``where`` found them its vector, operands, output handshake and rerun command."""
    from hwvit.textfiles import count

    index = ", ".join(map(str, first.get("nd_index", [first["index"]])))
    message = (
        f"{block} {vset.path} ({vset.directory}): {count(mismatches, 'mismatch')}; first "
        f"{first['tensor']}[{index}] expected {first['expected']} got {first['got']}; "
    )
    if "vector" in first:
        return message + (
            f"vector {first['vector']}: {first['operands']}; output handshake at {first['handshake']}; "
            f"waveform: {waveform or 'rerun with --waves'}; rerun this vector: {first['rerun']}"
        )
    return message + f"waveform: {waveform or 'rerun with --waves'}"


def where(vset, first: dict[str, Any], size: int, simulator: str, options: str = "") -> dict[str, Any]:
    """What reproduces the first mismatch (hwvit.vectors.pick): its vector, the operands that made
    the element, the simulation time and cycle of its output handshake (OUT_TIMES: the sinks log
    every handshake; the GEMM wrapper keeps the clock of each element's) and the command that
    reruns that vector (``options``: what else `hwvit sim` needs for it, a team's --rtl and --bind)."""
    from hwvit.vectors import pick

    nd = first.get("nd_index", [first["index"]])
    if first["tensor"] not in vset.tensors or not isinstance(first["expected"], int):
        return {}  # a status check (GEMM's beat counts...) or an output cut short: no element to explain
    vector = pick.vector_of(vset.kind, nd)
    out: dict[str, Any] = {"vector": vector}
    try:
        out["operands"] = pick.operands(vset.kind, vset.params, {n: t.data for n, t in vset.tensors.items()}, nd)
    except (KeyError, IndexError) as exc:  # a set of another shape: say so, keep the verdict
        out["operands"] = f"operands unknown ({exc.__class__.__name__}: {exc})"
    t_ns = OUT_TIMES[len(OUT_TIMES) - size + first["index"]] if len(OUT_TIMES) >= size else None
    if t_ns:
        out["time_ns"], out["cycle"] = t_ns, t_ns // CLK_NS
        out["handshake"] = f"{t_ns} ns (cycle {t_ns // CLK_NS})"
    elif t_ns == 0:  # the GEMM wrapper's clock of an element no handshake wrote
        out["handshake"] = "none (no output handshake wrote it)"
    else:
        out["handshake"] = "not timed by this testbench"
    extra = f" {options}" if options else ""
    out["rerun"] = f"hwvit sim {vset.directory}{extra} --simulator {simulator} --vector {vector}"
    return out


def coverage_bins(vset, checks: dict[str, tuple[np.ndarray, np.ndarray]], extra: dict[str, Any]) -> dict[str, int]:
    """The run's functional coverage bins (hwvit.covbins) from the set's inputs, the outputs the
    block returned (an output cut short counts as absent) and the handshakes the drivers saw."""
    import sys

    from hwvit import covbins

    if vset.kind not in covbins.NAMES:
        return {}
    inputs = {name: t.data for name, t in vset.tensors.items() if t.role != "output"}
    outputs = {}
    for name, (expected, got) in checks.items():
        got = np.asarray(got)
        outputs[name] = got if got.shape == np.asarray(expected).shape else None
    tb = sys.modules.get(f"test_{vset.kind}")  # the cocotb test module: its build's parameters
    limits = dict(tb.hdl_parameters(vset)) if tb is not None and hasattr(tb, "hdl_parameters") else {}
    limits.update({k.upper(): int(extra[k]) for k in ("rows", "cols") if vset.kind == "gemm" and k in extra})
    return covbins.count(vset.kind, dict(vset.params), inputs, outputs, limits, SEEN)


Predicate = Callable[[], bool]
