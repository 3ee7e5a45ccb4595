"""Testbench of rtl/softmax.v: cocotb tests (run inside the simulator) and their pytest drivers.

cocotb side (hwvit.simulate runs it on a vector set named by HWVIT_SET):
- ``run_vectors``: load the set's exp table through the write port, stream its rows through
  in_*/out_* with random stalls on both sides (HWVIT_STALL), compare p and out_last_o bit for bit.
  HWVIT_SOFTMAX_MORE (os.pathsep-separated set directories, same widths, any row length) streams
  further sets after the first in the same simulation: the table is reloaded and row_len_i
  changes between rows, as between layers of a model. HWVIT_SOFTMAX_ROW_LEN drives row_len_i
  with another value than the set's row length (to test the clamping of 0 and of > MAX_N).
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

from hwvit import blocks

TOPLEVEL = "softmax"
SOURCES = list(blocks.get("softmax").rtl)  # the kind's Verilog (hwvit/blocks/softmax.py)
MIN_MAX_N = 256  # row buffer of the built design: one build serves every row length up to 256
MORE_ENV = "HWVIT_SOFTMAX_MORE"
LEN_ENV = "HWVIT_SOFTMAX_ROW_LEN"  # drive row_len_i with this value instead of the set's row length


def hdl_parameters(vset) -> dict:
    """softmax.v parameters for a set. ENTRIES >= 2 (a 1-entry table is padded with T[1] = 0)."""
    p = vset.params
    max_n = max(MIN_MAX_N, 1 << (p["row_len"] - 1).bit_length())
    return {"MAX_N": max_n, "IN_BITS": p["in_bits"], "OUT_BITS": p["out_bits"], "ENTRIES": max(2, p["entries"])}


def cycles_per_row(row_len: int, out_bits: int) -> int:
    """Clocks between the starts of consecutive rows, unstalled, inputs always offered (docs/rtl.md).

    SUM N + 3 (two pipeline stages and the hand-over), DIV 2 + (out_bits + 17) divider steps + 2,
    OUT N + 4 (four pipeline stages and the hand-over); the next row loads behind OUT.
    """
    return 2 * row_len + out_bits + 26


def stream_cycles(rows: int, row_len: int, out_bits: int) -> int:
    """Clocks from offering the first input to taking the last output, unstalled: the first
    row's LOAD (N) and hand-over (1), then one period per row."""
    return row_len + 1 + rows * cycles_per_row(row_len, out_bits)


def unstalled_cycles(vset, params: dict) -> int:
    """Clocks of an unstalled run of the set (hwvit sim --stress checks at most this many)."""
    rows, row_len = vset["x"].shape
    return stream_cycles(rows, row_len, int(vset.params["out_bits"]))


# ---------------------------------------------------------------------------- cocotb side
try:
    import cocotb
    from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, SimTimeoutError, with_timeout
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
            raise ValueError(
                f"{vset.directory}: needs parameters {hdl_parameters(vset)}, the build has {hdl_parameters(first)}"
            )
    return sets


# The states reset_midstream resets in (hwvit.covbins.RESET_STATES), from the engine's phase
# (rtl/row_stream.v: 0 fill, 1 CALC (the division), 2 the sum pass, 3 OUT) and its filling row's count.
RESET_STATES = {
    "load": lambda state, wr_cnt: state == 0 and wr_cnt > 0,  # filling the buffer, nothing processed
    "sum": lambda state, wr_cnt: state == 2,
    "div": lambda state, wr_cnt: state == 1,
    "out": lambda state, wr_cnt: state == 3 and wr_cnt == 0,
    "out_load": lambda state, wr_cnt: state == 3 and wr_cnt > 0,  # next row filling behind OUT
}


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
    values = {
        name: tbutil.to_int(getattr(dut, name), False)
        for name in ("in_ready_o", "out_valid_o", "out_data_o", "out_last_o")
    }
    assert values["out_valid_o"] == 0 and values["in_ready_o"] == 1, f"{when}: not idle: {values}"


async def _load_table(dut, vset) -> None:
    """Write T[0..ENTRIES-1] through the write port, one entry per clock (zero-padded), entry 0 as
    0: the block hard-wires T[0] = 2^F, a write there has no effect (rtl/softmax.v header)."""
    entries = hdl_parameters(vset)["ENTRIES"]
    table = [0] + [int(v) for v in vset["exp_table"][1:]] + [0] * (entries - vset.params["entries"])
    dut.tbl_we_i.value = 1
    for addr, value in enumerate(table):
        dut.tbl_addr_i.value = addr
        dut.tbl_data_i.value = value
        await RisingEdge(dut.clk_i)
    dut.tbl_we_i.value = 0


async def _stream(dut, vset, stall: float, rand: random.Random) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """Send every row of the set, collect as many outputs: (p, last flags, clocks, complete).

    A watchdog (4x the unstalled time) stops a hung block: the outputs collected so far come
    back flat and the comparison reports the missing elements instead of the run hanging.
    """
    x = vset["x"]
    rows, n = x.shape
    words = [(int(v), int(os.environ.get(LEN_ENV, n))) for v in x.reshape(-1)]
    src = tbutil.Source(
        dut.clk_i,
        dut.in_valid_i,
        dut.in_ready_o,
        [dut.in_data_i, dut.row_len_i],
        stall,
        random.Random(rand.getrandbits(32)),
    )
    sink = tbutil.Sink(
        dut.clk_i,
        dut.out_valid_o,
        dut.out_ready_i,
        [dut.out_data_o, dut.out_last_o],
        [False, False],
        stall,
        random.Random(rand.getrandbits(32)),
    )
    start = get_sim_time("ns")
    sender = cocotb.start_soon(src.send(words))
    budget = int(4 * stream_cycles(rows, n, 16) / max(0.05, 1.0 - stall)) + 1000
    try:
        await with_timeout(sink.collect(x.size), budget * tbutil.CLK_NS, "ns")
        await sender
        complete = True
    except SimTimeoutError:
        sender.cancel()
        complete = False
    cycles = int(round((get_sim_time("ns") - start) / tbutil.CLK_NS))
    got = np.array(sink.words, dtype=np.int64).reshape(-1, 2)
    if not complete:
        return got[:, 0], got[:, 1], cycles, False
    return got[:, 0].reshape(rows, n), got[:, 1].reshape(rows, n), cycles, True


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
        p, last, n_cycles, complete = await _stream(dut, vset, stall, rand)
        tag = "" if k == 0 else f"@{vset.directory.name}"
        expected_last = _expected_last(vset["p"].shape)
        checks["p" + tag] = (vset["p"], p) if complete else (vset["p"].reshape(-1), p)
        if not complete or not np.array_equal(last, expected_last):  # reported only when wrong
            checks["out_last" + tag] = (expected_last, last) if complete else (expected_last.reshape(-1), last)
        cycles += n_cycles
        if not complete:
            break  # the block hangs: nothing more to learn
    rows = sum(int(v["x"].shape[0]) for v in sets)
    if len(sets) > 1:  # the handshake log spans every set: a mismatch line says "not timed" rather than guess
        tbutil.OUT_TIMES.clear()
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
        """Reset inside every phase of a row (twice each, at random depths), then run the whole set."""
        vset = _sets()[0]
        rand = tbutil.rng()
        stall = tbutil.stall_probability()
        _idle(dut)
        await tbutil.start(dut)
        _check_idle_outputs(dut, "after reset")
        await _load_table(dut, vset)
        x = vset["x"]
        rows, n = x.shape
        words = [(int(v), n) for v in x.reshape(-1)]
        resets = []
        for phase in list(RESET_STATES) * 2:
            src = tbutil.Source(
                dut.clk_i,
                dut.in_valid_i,
                dut.in_ready_o,
                [dut.in_data_i, dut.row_len_i],
                stall,
                random.Random(rand.getrandbits(32)),
            )
            sink = tbutil.Sink(
                dut.clk_i,
                dut.out_valid_o,
                dut.out_ready_i,
                [dut.out_data_o, dut.out_last_o],
                [False, False],
                stall,
                random.Random(rand.getrandbits(32)),
            )
            sender = cocotb.start_soon(src.send(words))
            receiver = cocotb.start_soon(sink.collect(x.size))
            seen, depth = [0], rand.randrange(1, 8)

            def in_phase(phase=phase, seen=seen, depth=depth) -> bool:  # its depth-th clock in the phase
                seen[0] += RESET_STATES[phase](int(dut.u_stream.state_q.value), int(dut.u_stream.wr_cnt_q.value))
                return seen[0] >= depth

            waited = await tbutil.reset_when(dut, phase, in_phase, 50 * cycles_per_row(n, 16))
            await RisingEdge(dut.clk_i)  # the reset is taken here, in the phase (unless not reached)
            sender.cancel()
            receiver.cancel()
            resets.append({"state": phase, "reached": waited is not None})
            dut.in_valid_i.value = 0
            dut.out_ready_i.value = rand.getrandbits(1)  # ready must not matter during reset
            await ClockCycles(dut.clk_i, rand.randrange(0, 3))
            dut.rst_ni.value = 1
            dut.out_ready_i.value = 0
            await RisingEdge(dut.clk_i)
            _check_idle_outputs(dut, f"after a reset in phase {phase}")
        await _run_and_check(dut, [vset], rand, {"resets": resets})

    async def _handshakes(dut, log: dict, count: int) -> None:
        """Clock index of every input and output handshake, until ``count`` outputs."""
        cycle = 0
        while len(log["out"]) < count:
            await ReadOnly()
            if dut.in_valid_i.value and dut.in_ready_o.value:
                log["in"].append(cycle)
            if dut.out_valid_o.value and dut.out_ready_i.value:
                log["out"].append(cycle)
            await RisingEdge(dut.clk_i)
            cycle += 1

    async def _unstalled(dut, words: list, rows: int, longest: int) -> tuple:
        """Send (x, row length) words with no stalls on either side, inputs always offered, and
        collect as many outputs: (sink, the handshake clocks of _handshakes)."""
        log: dict = {"in": [], "out": []}
        src = tbutil.Source(
            dut.clk_i, dut.in_valid_i, dut.in_ready_o, [dut.in_data_i, dut.row_len_i], 0.0, random.Random(0)
        )
        sink = tbutil.Sink(
            dut.clk_i,
            dut.out_valid_o,
            dut.out_ready_i,
            [dut.out_data_o, dut.out_last_o],
            [False, False],
            0.0,
            random.Random(1),
        )
        cocotb.start_soon(src.send(words))
        monitor = cocotb.start_soon(_handshakes(dut, log, len(words)))
        await with_timeout(sink.collect(len(words)), 50 * rows * cycles_per_row(longest, 16) * tbutil.CLK_NS, "ns")
        await monitor
        return sink, log

    @cocotb.test()
    async def row_timing(dut):
        """Unstalled rows, inputs always offered: handshake clocks give the row period (first
        input to first input of the next row) and an idle block's latency (last input of the
        first row to its first output); the outputs are checked as in run_vectors."""
        vset = _sets()[0]
        _idle(dut)
        await tbutil.start(dut)
        await _load_table(dut, vset)
        x = vset["x"]
        rows, n = x.shape
        sink, log = await _unstalled(dut, [(int(v), n) for v in x.reshape(-1)], rows, n)
        starts = log["in"][::n]
        # The first row loads into an idle block; from the second on, each row loads behind the
        # previous row's OUT pass: the steady period is between the starts of rows 2, 3, ...
        periods = sorted({b - a for a, b in zip(starts[1:], starts[2:])})
        got = np.array(sink.words, dtype=np.int64)[:, 0].reshape(rows, n)
        extra = {
            "periods": periods,
            "latency": log["out"][0] - log["in"][n - 1],
            "spread": log["out"][n - 1] - log["out"][0],
        }
        tbutil.finish(dut, vset, {"p": (vset["p"], got)}, cycles=log["out"][-1] - log["in"][0], extra=extra)

    @cocotb.test()
    async def interleaved_rows(dut):
        """Row r of each set in turn in one unstalled stream, inputs always offered (the sets share
        the exp table and differ in row length, so a longer row loads behind a shorter row's OUT
        pass): every row checked bit for bit; the handshake clocks of each row's last input and
        last output go to the result for the pytest side's timing checks."""
        sets = _sets()
        tables = {tuple(int(v) for v in vset["exp_table"]) for vset in sets}
        assert len(tables) == 1, "the interleaved sets need one exp table"
        _idle(dut)
        await tbutil.start(dut)
        await _load_table(dut, sets[0])
        order = [(k, r) for r in range(min(int(v["x"].shape[0]) for v in sets)) for k in range(len(sets))]
        rows = [sets[k]["x"][r] for k, r in order]
        words = [(int(v), len(row)) for row in rows for v in row]
        sink, log = await _unstalled(dut, words, len(rows), max(len(row) for row in rows))
        ends = np.cumsum([len(row) for row in rows]) - 1
        got = np.array(sink.words, dtype=np.int64)
        expected = np.concatenate([sets[k]["p"][r] for k, r in order])
        last = np.zeros(len(words), dtype=np.int64)
        last[ends] = 1
        extra = {
            "row_lens": [len(row) for row in rows],
            "last_in": [log["in"][e] for e in ends],
            "last_out": [log["out"][e] for e in ends],
        }
        checks = {"p": (expected, got[:, 0]), "out_last": (last, got[:, 1])}
        tbutil.finish(dut, sets[0], checks, cycles=log["out"][-1] - log["in"][0], extra=extra)


# ---------------------------------------------------------------------------- pytest side
import pytest  # noqa: E402  (the cocotb side above must import without pytest)

pytestmark = pytest.mark.xdist_group("softmax")

# Two builds: the contract's 8/8 with a full table, and 6-bit inputs, 10-bit outputs with a
# 40-entry table (inputs whose d >= 40 get E = 0; a table length that is not a power of two).
WIDTHS = [
    pytest.param({"in_bits": 8, "out_bits": 8, "entries": 256}, id="i8o8L256"),
    pytest.param({"in_bits": 6, "out_bits": 10, "entries": 40}, id="i6o10L40"),
]
# (row_len, rows) of the random sets streamed in one simulation: 450 random rows + 60 hard rows
# per parameter set, 1020 in all; ~60k clocks per simulation with 30% stalls on both sides.
ROW_MIX = [(1, 60), (2, 60), (3, 50), (5, 60), (9, 60), (16, 60), (33, 50), (64, 50)]
HARD_LENS = (64, 7)


def softmax_record(
    x: np.ndarray, table: np.ndarray, in_bits: int, out_bits: int, path: str = "random", p: np.ndarray | None = None
):
    """A softmax BlockRecord whose expected output is hwvit.ops.softmax (or ``p`` if given)."""
    from hwvit import ops, vectors
    from hwvit.record import BlockRecord, Tensor

    table_bits = vectors.CONTRACT["softmax"]["exp_table"][2]
    x = np.asarray(x, dtype=np.int64)
    table = np.asarray(table, dtype=np.int64)
    if p is None:
        p = ops.softmax(x, table, out_bits=out_bits, in_bits=in_bits)
    params = {
        "in_bits": in_bits,
        "out_bits": out_bits,
        "entries": int(table.size),
        "rows": int(x.shape[0]),
        "row_len": int(x.shape[1]),
    }
    return BlockRecord(
        "softmax",
        path,
        params,
        {
            "x": Tensor(x, in_bits, True, "input"),
            "exp_table": Tensor(table, table_bits, False, "parameter"),
            "p": Tensor(np.asarray(p, dtype=np.int64), out_bits, False, "output"),
        },
    )


def hard_rows(row_len: int, in_bits: int, rng: np.random.Generator) -> np.ndarray:
    """Rows at the edges: all minimum (-128 for 8 bits), all equal, one huge, ties, full ramps."""
    lo, hi = -(1 << (in_bits - 1)), (1 << (in_bits - 1)) - 1
    n = row_len
    rows = [np.full(n, lo), np.full(n, hi), np.full(n, 0), np.full(n, lo + 1)]
    for pos in (0, n - 1, n // 2):  # one huge among minima: d = 2^in_bits - 1 for the rest
        r = np.full(n, lo)
        r[pos] = hi
        rows.append(r)
    r = rng.integers(lo, 0, n, endpoint=True)  # one huge over a random rest
    r[rng.integers(n)] = hi
    rows.append(r)
    rows.append(np.where(np.arange(n) % 2 == 0, hi, lo))  # ties at the max, alternating
    rows.append(np.clip(hi - np.arange(n) * max(1, (hi - lo) // max(1, n - 1)), lo, hi))  # ramp
    rows.append(np.clip(lo + np.arange(n), lo, hi))  # max at the end
    rows.append(np.full(n, hi - 1))
    while len(rows) < 30:
        rows.append(rng.integers(lo, hi, n, endpoint=True))
    return np.stack(rows)


def write_sets(root: Path, widths: dict, seed: int) -> list[Path]:
    """Random sets (hwvit.vectors.random_record) of every ROW_MIX length, then the hard sets."""
    from hwvit import vectors
    from hwvit.quant import exp_table

    dirs = []
    for k, (row_len, rows) in enumerate(ROW_MIX):
        record = vectors.random_record("softmax", cases=rows, seed=seed + k, row_len=row_len, **widths)
        dirs.append(vectors.write_set(record, root / f"n{row_len}"))
    rng = np.random.default_rng(seed)
    table = exp_table(16.0 / (1 << widths["in_bits"]), widths["entries"])
    for row_len in HARD_LENS:
        x = hard_rows(row_len, widths["in_bits"], rng)
        record = softmax_record(x, table, widths["in_bits"], widths["out_bits"], path="hard")
        dirs.append(vectors.write_set(record, root / f"hard{row_len}"))
    return dirs


def run_sets(run, dirs: list[Path], simulator: str, **kwargs):
    """``run`` (the sim_run fixture) on the first set, the others named in MORE_ENV."""
    env = {MORE_ENV: os.pathsep.join(str(d) for d in dirs[1:]), **kwargs.pop("extra_env", {})}
    return run(dirs[0], simulator, extra_env=env, **kwargs)


@pytest.mark.parametrize("widths", WIDTHS)
def test_vectors(simulator, widths, tmp_path, sim_run):
    """1020 rows of 1..64 elements (random and hard) through one simulation, bit-exact."""
    dirs = write_sets(tmp_path, widths, seed=7)
    result = run_sets(sim_run, dirs, simulator)
    assert result.passed, result.message
    total = sum(rows * n for n, rows in ROW_MIX) + sum(30 * n for n in HARD_LENS)
    assert result.elements == total, f"compared {result.elements} of {total} probabilities"
    assert result.extra["rows"] == sum(rows for _, rows in ROW_MIX) + 30 * len(HARD_LENS)


def test_reset_midstream(simulator, tmp_path, sim_run):
    """Resets in every phase of a row leave the outputs defined and idle; the next run is exact."""
    from hwvit import vectors

    record = vectors.random_record("softmax", cases=24, seed=3, row_len=16)
    set_dir = vectors.write_set(record, tmp_path / "set")
    result = sim_run(set_dir, simulator, testcase="reset_midstream")
    assert result.passed, result.message
    assert result.elements == 24 * 16
    assert [r["state"] for r in result.extra["resets"] if r["reached"]] == list(RESET_STATES) * 2
    assert all(result.extra["bins"][f"reset_{phase}"] == 2 for phase in RESET_STATES), result.extra["bins"]


@pytest.mark.parametrize("row_len, drive", [(1, 0), (MIN_MAX_N, 2 * MIN_MAX_N - 1)], ids=["0->1", "511->256"])
def test_row_len_clamped(simulator, row_len, drive, tmp_path, sim_run):
    """row_len_i = 0 counts as 1 and row_len_i > MAX_N as MAX_N (the build has MAX_N = 256)."""
    from hwvit import vectors

    record = vectors.random_record("softmax", cases=3, seed=9, row_len=row_len)
    set_dir = vectors.write_set(record, tmp_path / "set")
    result = sim_run(set_dir, simulator, extra_env={LEN_ENV: str(drive)})
    assert result.passed, result.message
    assert result.elements == 3 * row_len


def test_cycles_per_row(tmp_path, sim_run):
    """Without stalls a stream of rows takes N + 1 + R * (2N + OUT_BITS + 26) clocks (docs/rtl.md)."""
    from hwvit import vectors

    rows, n = 10, 20
    record = vectors.random_record("softmax", cases=rows, seed=5, row_len=n)
    set_dir = vectors.write_set(record, tmp_path / "set")
    result = sim_run(set_dir, "icarus", extra_env={"HWVIT_STALL": "0"})
    assert result.passed, result.message
    assert result.cycles == stream_cycles(rows, n, 8), result.cycles


@pytest.mark.parametrize(("n", "out_bits"), [(7, 8), (20, 6), (33, 16)])
def test_row_period_and_latency(tmp_path, n, out_bits, simulator, sim_run):
    """Measured from handshake clocks: a row every 2N + OUT_BITS + 26 clocks once rows load behind
    the previous row's OUT pass; on an idle block the first probability N + OUT_BITS + 28 clocks
    after the row's last input and the last one N - 1 clocks after the first (docs/rtl.md)."""
    from hwvit import vectors

    record = vectors.random_record("softmax", cases=5, seed=n, row_len=n, out_bits=out_bits)
    set_dir = vectors.write_set(record, tmp_path / "set")
    result = sim_run(set_dir, simulator, testcase="row_timing", extra_env={"HWVIT_STALL": "0"})
    assert result.passed, result.message
    assert result.extra["periods"] == [cycles_per_row(n, out_bits)]
    assert result.extra["latency"] == n + out_bits + 28
    assert result.extra["spread"] == n - 1


def test_longer_row_loads_behind_out(tmp_path, sim_run):
    """Rows of 7 and 8 elements alternate, unstalled: the 8th slot of the longer row is one the
    7-element row in OUT never reads, so it is free at once (docs/rtl.md: a slot is written once
    OUT has read it, or when OUT does not read it at all). Each 8-element row therefore takes its
    last input before the row ahead of it in OUT gives its last probability; the outputs are exact.
    Icarus, as test_cycles_per_row (the clocks are the RTL's, the same on both simulators)."""
    from hwvit import vectors

    dirs = []
    for n in (7, 8):
        record = vectors.random_record("softmax", cases=4, seed=40 + n, row_len=n)
        dirs.append(vectors.write_set(record, tmp_path / f"n{n}"))
    result = run_sets(sim_run, dirs, "icarus", testcase="interleaved_rows", extra_env={"HWVIT_STALL": "0"})
    assert result.passed, result.message
    assert result.elements == 2 * 4 * 15
    lens, last_in, last_out = (result.extra[k] for k in ("row_lens", "last_in", "last_out"))
    assert lens == [7, 8] * 4
    for i in range(1, len(lens)):
        if lens[i] > lens[i - 1]:
            assert last_in[i] < last_out[i - 1], (i, last_in, last_out)


def test_mismatch_reported(simulator, tmp_path, sim_run):
    """A corrupted expected value fails the run, naming block, set, index, expected and got."""
    from hwvit import ops, vectors
    from hwvit.quant import exp_table

    rng = np.random.default_rng(11)
    x = rng.integers(-128, 127, (6, 9), endpoint=True)
    table = exp_table(0.0625, 256)
    p = ops.softmax(x, table, out_bits=8, in_bits=8)
    bad = p.copy()
    bad[4, 2] = (bad[4, 2] + 1) % 256
    set_dir = vectors.write_set(softmax_record(x, table, 8, 8, path="layers.2.softmax", p=bad), tmp_path / "corrupt")
    result = sim_run(set_dir, simulator)
    assert not result.passed
    assert result.mismatches == 1
    first = {k: result.first[k] for k in ("tensor", "index", "nd_index", "expected", "got", "vector")}
    assert first == {
        "tensor": "p",
        "index": 4 * 9 + 2,
        "nd_index": [4, 2],
        "expected": int(bad[4, 2]),
        "got": int(p[4, 2]),
        "vector": 4,  # the row
    }
    assert result.first["operands"].startswith(f"softmax row 4 x [{int(x[4, 0])}, ")
    assert result.first["time_ns"] > 0 and "--vector 4" in result.first["rerun"]
    for text in (
        "softmax",
        "layers.2.softmax",
        str(set_dir),
        "p[4, 2]",
        f"expected {int(bad[4, 2])}",
        f"got {int(p[4, 2])}",
    ):
        assert text in result.message, f"{text!r} missing from: {result.message}"


LINT_PARAMS = [
    {},
    {"IN_BITS": 6, "OUT_BITS": 10, "ENTRIES": 40},
    {"MAX_N": 100, "ENTRIES": 100},
    {"MAX_N": 4096, "OUT_BITS": 16, "IN_BITS": 16, "ENTRIES": 1024},
    {"MAX_N": 2, "IN_BITS": 2, "OUT_BITS": 1, "ENTRIES": 2},
]


@pytest.mark.parametrize("params", LINT_PARAMS, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()) or "default")
def test_lint(params):
    """verilator --lint-only -Wall (nothing switched off) and iverilog -g2005 -Wall accept every size."""
    from hwvit import synth

    assert synth.lint(SOURCES, params) == []
    assert synth.iverilog(SOURCES, TOPLEVEL, params) == []


def test_reciprocal_rows_flip():
    """The directed rows do what they are for: hwvit.ops agrees with the plain-integer formula,
    and every row's probabilities change with R one lower (S/2 dropped) or one higher."""
    import reciprocal_rows as rr

    from hwvit import ops
    from hwvit.quant import exp_table

    table = exp_table(16.0 / 256, 256)
    x = rr.softmax_flip_rows(table, 8, 64, 16, seed=3)
    base = rr.softmax_p(x, table, 8)
    assert np.array_equal(base, ops.softmax(x, table, out_bits=8, in_bits=8))
    lower = (base != rr.softmax_p(x, table, 8, drop_half=True)).any(axis=-1)
    higher = (base != rr.softmax_p(x, table, 8, r_delta=1)).any(axis=-1)
    assert lower[:8].all() and higher[8:].all()


def test_reciprocal_rounding_rows(simulator, tmp_path, run_set):
    """16 rows of 64 near rounding boundaries of R: the RTL's R must be exactly round(Q 2^40 / S)."""
    import reciprocal_rows as rr

    from hwvit import vectors
    from hwvit.quant import exp_table

    table = exp_table(16.0 / 256, 256)
    x = rr.softmax_flip_rows(table, 8, 64, 16, seed=3)
    set_dir = vectors.write_set(softmax_record(x, table, 8, 8, path="reciprocal_rounding"), tmp_path / "set")
    assert run_set(set_dir, simulator).elements == x.size
