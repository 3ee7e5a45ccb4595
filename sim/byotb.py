"""cocotb testbench of a team's own block, driven through its bind file (hwvit.byo).

hwvit.byo.run builds the team's RTL and runs one of the tests below with the set's directory in
HWVIT_SET, the checked bind (names, offsets, reset polarity) as JSON in HWVIT_BIND and the options
that name the team's block to `hwvit sim` (--rtl, --top, --bind) in HWVIT_BYO_OPTIONS, for the
mismatch line's rerun command:
- ``run_vectors``: configuration ports set, the table written one entry per clock, then every
  input beat streamed with random stalls on both sides (HWVIT_STALL); every output is compared,
  and where the output has a row end (tlast / last) its position too; HWVIT_SINK_HOLD (JSON
  [words, clocks], valid_ready blocks) holds the output's ready low that long once, after that many
  outputs;
- ``reconfig_jobs``: the sets of HWVIT_SET then HWVIT_BYO_JOBS in one simulation, no reset between
  them: once a set's last output is out, the configuration ports and the table take the next set's
  values and it streams, every set compared (an accelerator changes a block's constants between
  layers);
- ``reset_midstream``: reset while beats are in flight, check no output is X and nothing comes out
  afterwards; reset again and stream the whole set from the first clock after that reset (valid_ready
  blocks), checking everything.
valid_ready blocks go through tbutil.Source/Sink (the reference testbenches' drivers); AXI4-Stream
blocks through cocotbext-axi's AxiStreamSource/AxiStreamSink with random pause generators.
The block's latency is its own: the test follows the handshake and stops only at a generous timeout.
A mismatch is reported in the words of the reference benches (tbutil.mismatch_line): the element,
its vector and operands, the clock of its output handshake and a command rerunning that vector.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import ReadOnly, RisingEdge, SimTimeoutError, with_timeout

from hwvit.byo import kinds

import tbutil

JOBS_ENV = "HWVIT_BYO_JOBS"  # os.pathsep-separated set directories reconfig_jobs streams after HWVIT_SET


class Fault(AssertionError):
    """A protocol fault (X output, output after reset, hang) rather than a wrong value."""


def _mask(value: int, bits: int) -> int:
    return int(value) & ((1 << bits) - 1)


def _signed(value: int, bits: int, signed: bool) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if signed and value >> (bits - 1) else value


def _pauses(rand: random.Random, p: float):
    """Pause generator for cocotbext-axi: True (stall) with probability p, once per clock."""
    while True:
        yield p > 0 and rand.random() < p


class Bench:
    def __init__(self, dut):
        self.dut = dut
        self.plan: dict[str, Any] = json.loads(os.environ["HWVIT_BIND"])
        self.spec = kinds.KINDS[self.plan["kind"]]
        self.use(tbutil.load_set())
        self.sig = lambda name: getattr(dut, name)
        self.clk = self.sig(self.plan["clock"])
        self.rst = self.sig(self.plan["reset"])
        self.active = 1 if self.plan["reset_active_high"] else 0
        self.out_name, self.out_field = self.spec.output
        self.out_bits = self.out_field.bits(self.params)
        seed = int(os.environ.get("HWVIT_TB_SEED", "1"))
        self.rands = [random.Random(seed * 4 + i) for i in range(4)]
        self.axis = self.plan["style"] == "axis"
        hold = json.loads(os.environ.get("HWVIT_SINK_HOLD") or "null")
        self.hold = None if hold is None else (int(hold[0]), int(hold[1]))
        if self.hold is not None and self.axis:
            raise ValueError("HWVIT_SINK_HOLD: valid_ready blocks only")

    def use(self, vset) -> None:
        """Stream ``vset`` (the set of HWVIT_SET, then each of reconfig_jobs'): its parameters, input
        words, outputs and row ends."""
        self.vset, self.params = vset, vset.params
        self.words = kinds.input_words(self.spec, vset)
        self.expected = kinds.expected(self.spec, vset)
        self.ends = kinds.row_ends(self.spec, vset)

    # ------------------------------------------------------------------ setup
    def idle_inputs(self) -> None:
        """Every input defined before the clock starts (Icarus would sample X)."""
        for port, value in self.plan["tie"].items():
            self.sig(port).value = value
        p = self.plan
        if self.axis:
            self.sig(p["input"]["tvalid"]).value = 0
            self.sig(p["output"]["tready"]).value = 0
        else:
            self.sig(p["input"]["valid"]).value = 0
            self.sig(p["output"]["ready"]).value = 0
        # HWVIT_BYO_DRIVE (JSON {logical config name: value}): drive a configuration port with another
        # value than the set's, e.g. a row length of 0 or above the build's maximum (clamping tests)
        drive = json.loads(os.environ.get("HWVIT_BYO_DRIVE") or "{}")
        for logical, port in p["ports"].items():
            cfg = self.spec.config.get(logical)
            self.sig(port).value = int(drive[logical]) if logical in drive else cfg.value(self.params) if cfg else 0

    async def start(self) -> None:
        self.idle_inputs()
        Clock(self.clk, tbutil.CLK_NS, unit="ns", impl="gpi").start()
        await self.reset(3)
        if self.axis:  # tbutil.Sink logs the valid_ready handshakes; cocotbext-axi's sink does not
            cocotb.start_soon(self.log_output_handshakes())
        await self.load_table()

    async def log_output_handshakes(self) -> None:
        """The simulation time of every output beat taken (tvalid and tready high in a clock), into
        tbutil.OUT_TIMES, sampled as tbutil.Sink samples its own."""
        valid, ready = self.sig(self.plan["output"]["tvalid"]), self.sig(self.plan["output"]["tready"])
        while True:
            await ReadOnly()
            if valid.value.is_resolvable and ready.value.is_resolvable and int(valid.value) and int(ready.value):
                tbutil.OUT_TIMES.append(int(get_sim_time("ns")))
            await RisingEdge(self.clk)

    async def reset(self, cycles: int) -> None:
        self.rst.value = self.active
        for _ in range(cycles):
            await RisingEdge(self.clk)
        self.rst.value = 1 - self.active
        await RisingEdge(self.clk)

    async def load_table(self) -> None:
        ports = self.plan["ports"]
        if not self.spec.table or "tbl_we" not in ports:
            return
        data = [self.sig(ports[name]) for name in self.spec.table.data]
        bits = [f.bits(self.params) for f in self.spec.table.data.values()]
        we, addr = self.sig(ports["tbl_we"]), self.sig(ports["tbl_addr"])
        for i, entry in enumerate(kinds.table_entries(self.spec, self.vset)):
            we.value, addr.value = 1, i
            for handle, value, b in zip(data, entry, bits):
                handle.value = _mask(value, b)
            await RisingEdge(self.clk)
        we.value = 0
        await RisingEdge(self.clk)

    # ------------------------------------------------------------------ streaming
    def timeout_ns(self, beats: int) -> int:
        # ~1/(1-p) cycles a beat with stall probability p on both sides; 8x that, plus a generous
        # per-row allowance (the block's latency is unknown: a row of N may need a few N clocks).
        p = min(tbutil.stall_probability(), 0.95)
        rows = max(1, len(self.ends))
        row_len = max(1, self.expected.size // rows)
        held = self.hold[1] if self.hold else 0
        work = self.spec.row_work(self.params) if self.spec.row_work else 0  # e.g. layernorm_ptf's float program
        return int((beats * 8 / (1 - p) + rows * (4 * row_len + 400 + work) + 1000 + held) * tbutil.CLK_NS)

    async def transfer(self, stall: float, stop_after: int | None = None, eager: bool = False):
        """Stream every beat; return (values, last flags or None, cycles). ``stop_after``: return
        (without finishing) once that many outputs arrived, the stream still running. ``eager``
        (valid_ready blocks): the first beat is offered in the clock the call starts in."""
        t0 = get_sim_time("ns")
        if self.axis:
            values, lasts, tasks = await self._axis(stall, stop_after)
        else:
            values, lasts, tasks = await self._valid_ready(stall, stop_after, eager)
        return values, lasts, int(round((get_sim_time("ns") - t0) / tbutil.CLK_NS)), tasks

    async def _valid_ready(self, stall: float, stop_after: int | None, eager: bool = False):
        p = self.plan
        inp, out = p["input"], p["output"]
        fields = [self.sig(inp["fields"][name]) for name in self.spec.inputs]
        src = tbutil.Source(self.clk, self.sig(inp["valid"]), self.sig(inp["ready"]), fields, stall, self.rands[0])
        data = [self.sig(out["fields"][self.out_name])]
        signed = [self.out_field.signed]
        if "last" in out:
            data.append(self.sig(out["last"]))
            signed.append(False)
        snk = tbutil.Sink(
            self.clk, self.sig(out["valid"]), self.sig(out["ready"]), data, signed, stall, self.rands[1], self.hold
        )
        send = cocotb.start_soon(src.send(self.words, eager))
        want = len(self.words) if stop_after is None else stop_after
        recv = cocotb.start_soon(snk.collect(want))
        try:
            await with_timeout(recv, self.timeout_ns(len(self.words)), "ns")
        except SimTimeoutError:
            recv.cancel()
        if stop_after is None:
            send.cancel()
            self.sig(inp["valid"]).value = 0
            self.sig(out["ready"]).value = 0
        words = list(snk.words)
        lasts = [w[1] for w in words] if "last" in out else None
        return [w[0] for w in words], lasts, (send, recv)

    async def _axis(self, stall: float, stop_after: int | None):
        from cocotbext.axi import AxiStreamFrame

        p = self.plan
        inp, out = p["input"], p["output"]
        src, snk = self.axis_ends()
        src.set_pause_generator(_pauses(self.rands[0], stall))
        snk.set_pause_generator(_pauses(self.rands[1], stall))
        # One frame per row (tlast on its last beat); the whole set is one row for element-wise kinds.
        starts = [0] + [e + 1 for e in self.ends[:-1]]
        for a, b in zip(starts, self.ends):
            tdata, tuser = [], []
            for word in self.words[a : b + 1]:
                d, u = 0, 0
                for (name, f), value in zip(self.spec.inputs.items(), word):
                    place = inp["fields"][name]
                    v = _mask(value, f.bits(self.params)) << place["offset"]
                    if place["signal"] == "tdata":
                        d |= v
                    else:
                        u |= v
                tdata.append(d)
                tuser.append(u)
            src.send_nowait(AxiStreamFrame(tdata, tuser=tuser if "tuser" in inp else None))
        want = len(self.words) if stop_after is None else stop_after
        place = out["fields"][self.out_name]
        values: list[int] = []
        lasts: list[int] | None = [] if "tlast" in out else None

        async def collect():
            while len(values) < want:
                frame = await snk.recv(compact=False)
                source = frame.tdata if place["signal"] == "tdata" else frame.tuser
                values.extend(_signed(int(w) >> place["offset"], self.out_bits, self.out_field.signed) for w in source)
                if lasts is not None:
                    lasts.extend([0] * (len(source) - 1) + [1])

        recv = cocotb.start_soon(collect())
        try:
            await with_timeout(recv, self.timeout_ns(len(self.words)), "ns")
        except SimTimeoutError:
            recv.cancel()
        if stop_after is None:
            src.clear()
            src.clear_pause_generator()
            snk.clear_pause_generator()
        return values, lasts, (recv, src, snk)

    def axis_ends(self):
        """The AxiStreamSource on the input and AxiStreamSink on the output, made once: each watches
        the reset (it idles while reset is active and restarts after), so a second pair would fight
        the first over tvalid/tready."""
        from cocotbext.axi import AxiStreamSink, AxiStreamSource

        if not hasattr(self, "_axis_pair"):
            level = bool(self.active)
            # byte_lanes=1: one tdata word per beat, whatever its width (no byte lanes, no tkeep).
            self._axis_pair = (
                AxiStreamSource(_bus(self.dut, self.plan["input"]), self.clk, self.rst, level, byte_lanes=1),
                AxiStreamSink(_bus(self.dut, self.plan["output"]), self.clk, self.rst, level, byte_lanes=1),
            )
        return self._axis_pair

    # ------------------------------------------------------------------ checks
    def out_handles(self) -> list:
        p = self.plan
        if self.axis:
            names = [p["output"]["tvalid"], p["output"]["tdata"], p["input"]["tready"]]
        else:
            names = [p["output"]["valid"], p["output"]["fields"][self.out_name], p["input"]["ready"]]
        return [self.sig(n) for n in names]

    async def check_idle(self, when: str) -> None:
        """In this cycle's ReadOnly phase: no output is X and the output valid is low."""
        await ReadOnly()
        for handle in self.out_handles():
            if not handle.value.is_resolvable:
                raise Fault(f"{when}: {handle._name} is {handle.value} (X/Z)")
        if int(self.out_handles()[0].value):
            raise Fault(f"{when}: output valid is high")
        await RisingEdge(self.clk)

    def finish(self, checks: dict[str, tuple[np.ndarray, np.ndarray]], cycles: int | None, extra=None) -> None:
        """Compare (expected, got) per name; write the JSON result hwvit.simulate reads; assert."""
        elements, mismatches, first = 0, 0, None
        for name, (exp, got) in checks.items():
            n, f = tbutil.first_mismatch(exp, got)
            if not name.endswith("last"):  # row-end flags are compared but not counted as elements
                elements += int(np.asarray(exp).size)
            mismatches += n
            if f is not None and first is None:
                first = {"tensor": name, **f}
        message = ""
        if first is not None:
            shape = self.vset[self.out_field.tensor].shape
            index = first["index"]
            if first["tensor"] == self.out_name and isinstance(index, int) and index < self.expected.size:
                first["nd_index"] = [int(i) for i in np.unravel_index(index, shape)]
                # the element's vector, operands, handshake and rerun, as for hwvit's own blocks
                found = tbutil.where(
                    self.vset,
                    {**first, "tensor": self.out_field.tensor},
                    self.expected.size,
                    os.environ.get("HWVIT_SIMULATOR", "?"),
                    os.environ.get("HWVIT_BYO_OPTIONS", ""),
                )
                first.update(found)
            waves = _waveform(self.dut)
            block = f"{self.plan['top']} ({self.spec.name})"
            waves = None if waves.startswith("rerun") else waves
            message = tbutil.mismatch_line(block, self.vset, mismatches, first, waves)
        _write(first is None, elements, mismatches, first, cycles, message, extra or {})
        assert first is None, message

    def fail(self, text: str) -> None:
        message = f"{self.plan['top']} ({self.spec.name}) {self.vset.path} ({self.vset.directory}): {text}"
        _write(False, 0, 0, None, None, message, {})
        raise AssertionError(message)

    def output_checks(self, values, lasts, prefix: str = "") -> dict[str, tuple[np.ndarray, np.ndarray]]:
        n = len(values) if prefix else self.expected.size
        checks = {f"{prefix}{self.out_name}": (self.expected[:n], np.array(values, dtype=np.int64))}
        if lasts is not None:
            want = np.zeros(self.expected.size, dtype=np.int64)
            want[self.ends] = 1
            checks[f"{prefix}last"] = (want[:n] if prefix else want, np.array(lasts, dtype=np.int64))
        return checks


def _bus(dut, stream: dict[str, Any]):
    """An AxiStreamBus over the bind's port names (cocotb_bus takes a name mapping)."""
    from cocotbext.axi import AxiStreamBus

    names = {k: stream[k] for k in ("tdata", "tvalid", "tready", "tlast", "tuser") if k in stream}
    bus = type(
        "BoundAxiStreamBus", (AxiStreamBus,), {"_signals": {"tdata": names.pop("tdata")}, "_optional_signals": names}
    )
    return bus(dut)


def _waveform(dut) -> str:
    if os.environ.get("HWVIT_WAVES") != "1":
        return "rerun with --waves"
    sim = os.environ.get("HWVIT_SIMULATOR", "?")
    return str(Path.cwd() / ("dump.vcd" if sim == "verilator" else f"{dut._name}.fst"))


def _write(passed, elements, mismatches, first, cycles, message, extra) -> None:
    out = os.environ.get("HWVIT_RESULT")
    if out:
        Path(out).write_text(
            json.dumps(
                {
                    "passed": passed,
                    "elements": elements,
                    "mismatches": mismatches,
                    "first": first,
                    "waveform": None,
                    "cycles": cycles,
                    "message": message,
                    "extra": extra,
                }
            )
        )


@cocotb.test()
async def run_vectors(dut):
    tb = Bench(dut)
    await tb.start()
    try:
        await tb.check_idle("after reset")
        values, lasts, cycles, _ = await tb.transfer(tbutil.stall_probability())
    except AssertionError as exc:  # Fault, or an X on an output beat
        tb.fail(str(exc))
    # under a hold, the clock of every output handshake: what the block does around the hold
    extra = {"out_cycles": [t // tbutil.CLK_NS for t in tbutil.OUT_TIMES]} if tb.hold else None
    tb.finish(tb.output_checks(values, lasts), cycles, extra)


@cocotb.test()
async def reconfig_jobs(dut):
    """HWVIT_SET, then each set of HWVIT_BYO_JOBS (sets of one build), with no reset between: after
    a set's last output the block is idle, its configuration ports and table take the next set's
    values, and that set streams with random stalls. Every output of every set is compared. A block
    that uses a constant sampled before its row's first input (a division started while idle) gets
    the previous set's value."""
    from hwvit import vectors

    tb = Bench(dut)
    await tb.start()
    more = [vectors.read(Path(d)) for d in os.environ.get(JOBS_ENV, "").split(os.pathsep) if d]
    checks: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    cycles = 0
    for i, vset in enumerate([tb.vset, *more]):
        try:
            if i:
                tb.use(vset)
                tb.idle_inputs()  # the next set's configuration, valid low
                await tb.load_table()
            values, lasts, n, _ = await tb.transfer(tbutil.stall_probability())
        except AssertionError as exc:  # Fault, or an X on an output beat
            tb.fail(str(exc))
        if len(values) != tb.expected.size:
            tb.fail(f"gave {len(values)} outputs of {tb.expected.size}")
        job = tb.output_checks(values, lasts, prefix=f"job{i}_")
        cycles += n
        if any(tbutil.first_mismatch(exp, got)[0] for exp, got in job.values()):
            tb.finish(job, cycles, extra={"jobs": i + 1})  # fails, its mismatch line naming this set
        checks.update(job)
    tb.finish(checks, cycles, extra={"jobs": 1 + len(more)})


@cocotb.test()
async def reset_midstream(dut):
    """Reset with beats in flight (a quarter of the outputs taken), then, after a second reset, the
    whole set again from the first clock out of it."""
    tb = Bench(dut)
    stall = max(tbutil.stall_probability(), 0.3)
    await tb.start()
    try:
        await tb.check_idle("after reset")
        before, lasts_before, _, tasks = await tb.transfer(stall, stop_after=max(1, len(tb.words) // 4))
        if len(before) >= len(tb.words):
            tb.fail("the stream ended before the reset")
        tb.rst.value = tb.active  # the stream is still running: reset wins over beats in flight
        for _ in range(2):
            await RisingEdge(tb.clk)
        await tb.check_idle("in reset, 2 cycles after it was asserted")
        for task in tasks:  # stop the old drivers (cocotbext-axi ones also stopped at the reset)
            if hasattr(task, "cancel"):
                task.cancel()
            else:
                task.clear()
                task.clear_pause_generator()
        tb.idle_inputs()
        tb.rst.value = 1 - tb.active
        for cycle in range(4):  # nothing may come out of an emptied pipeline
            await tb.check_idle(f"{cycle + 1} cycles after reset with no input")
        # A second reset, nothing in flight, and the set offered in the first clock after it: a
        # pipeline register whose reset value leaks into a row taken that early shows (the
        # campaign found softmax_log2's read-stage valid reset to 1 alive: its phantom E entered
        # the sum of a one-element row taken in that clock).
        tb.rst.value = tb.active
        for _ in range(2):
            await RisingEdge(tb.clk)
        tb.rst.value = 1 - tb.active
        await tb.load_table()  # tables may or may not survive a reset: write them again
        values, lasts, cycles, _ = await tb.transfer(stall, eager=True)
    except AssertionError as exc:
        tb.fail(str(exc))
    checks = {**tb.output_checks(before, lasts_before, prefix="before_reset_"), **tb.output_checks(values, lasts)}
    tb.finish(checks, cycles, extra={"before_reset": len(before)})
