"""Testbench of rtl/gemm.v (through sim/tb_gemm.v): cocotb tests and their pytest drivers.

cocotb side (hwvit.simulate runs it on a vector set named by HWVIT_SET):
- ``run_vectors``: link the set's `.hex` files into the run directory, $readmemh them into the
  wrapper's memories, run one job (M x K x N from the set) with no Python in the loop, random
  out_ready stalls from the wrapper's LFSR (HWVIT_STALL), $writememh the results and compare acc
  AND y bit for bit. The JSON result carries cycles, beats and utilization.
- ``reset_midrun``: reset the engine in every state of RESET_STATES (idle with a start offered,
  issuing, issuing while draining, draining, a refused output row, done), check every output is
  defined and idle after each, then rerun the whole job and compare.
- ``back_to_back_jobs``: the job twice, the second started in the cycle the first ends.

pytest side: random sets (hwvit.vectors.random_record, expected values from hwvit.ops) on both
simulators and two array sizes (one with partial edge tiles), the mid-run reset, a no-stall
run checking that tiles issue back to back, a corrupted expected value that must be reported,
lint and synthesis of the RTL.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import numpy as np

from hwvit import blocks

TOPLEVEL = "tb_gemm"
SOURCES = ["sim/tb_gemm.v", *blocks.get("gemm").rtl]  # the wrapper, then the kind's Verilog (hwvit/blocks/gemm.py)
RTL = SOURCES[1:]
# Only the wrapper's ports and the engine outputs it marks public are visible to cocotb; the rest is
# optimized like a plain Verilator model (every signal public: ~5x slower, 0.18 M cycles/s on 8 x 8).
BUILD_ARGS = {"verilator": ["--no-public-flat-rw"]}
DEFAULT_ARRAY = (8, 8)  # ROWS x COLS of `hwvit sim`; tests override it (simulate.run hdl_overrides)
MIN_MAX = 64  # smallest memory dimension: one build serves every set up to 64 x 64 x 64
SENTINEL = -(1 << 31)  # the wrapper's "never written" acc value: no valid acc reaches -2^31
# The $readmemh names tb_gemm.v opens in its working directory, per tensor of the set.
INPUT_FILES = {name: f"gemm_{name}.hex" for name in ("a", "w", "bias", "multiplier", "shift")}


def _bucket(value: int) -> int:
    return max(MIN_MAX, 1 << (int(value) - 1).bit_length())


ZERO_PARAMS = ("zero_a", "zero_w", "zero_out")  # an imported model's zero points (hwvit/blocks/gemm.py)


def hdl_parameters(vset) -> dict:
    """tb_gemm parameters for a set: the default array and power-of-two memory sizes; a requant
    variant's ROUNDING / WRAP (hwvit/blocks/requant.py rtl_rounding; none for half_up);
    ZERO_POINTS = 1 for a set with zero points (none: the build of a plain set is unchanged)."""
    from hwvit.blocks.requant import rtl_rounding

    p = vset.params
    rows, cols = DEFAULT_ARRAY
    zero = {"ZERO_POINTS": 1} if any(k in p for k in ZERO_PARAMS) else {}
    return {
        "ROWS": rows,
        "COLS": cols,
        "OUT_BITS": p["out_bits"],
        "MAX_M": _bucket(p["m"]),
        "MAX_K": _bucket(p["k"]),
        "MAX_N": _bucket(p["n"]),
        **rtl_rounding(p.get("rounding")),
        **zero,
    }


def tiles(m: int, n: int, rows: int, cols: int) -> int:
    return math.ceil(m / rows) * math.ceil(n / cols)


def parse_memh(path: Path, count: int, bits: int) -> np.ndarray:
    """Signed values of a $writememh file (Icarus and Verilator formats); X/Z read as SENTINEL."""
    values = []
    for line in path.read_text().splitlines():
        line = line.split("//", 1)[0]
        for token in line.split():
            if token.startswith("@"):
                continue
            if any(c in "xXzZ" for c in token):
                values.append(SENTINEL)
                continue
            v = int(token, 16) & ((1 << bits) - 1)
            values.append(v - (1 << bits) if v >> (bits - 1) else v)
    if len(values) != count:
        raise AssertionError(f"{path}: {len(values)} values, expected {count}")
    return np.array(values, dtype=np.int64)


# The states reset_midrun resets in (hwvit.covbins.RESET_STATES), from the engine's ports as the
# wrapper sees them: idle with a start_i offered, operands read with no output row offered, reads
# and output rows overlapping (the next tile issues while the last drains), only output rows
# (the last tile draining), an output row refused, the done_o cycle.
RESET_STATES = {
    "idle": lambda dut: not dut.busy_o.value and dut.start_i.value,
    "issue": lambda dut: dut.rd_en.value and not dut.out_valid.value,
    "issue_drain": lambda dut: dut.rd_en.value and dut.out_valid.value,
    "drain": lambda dut: dut.busy_o.value and not dut.rd_en.value and dut.out_valid.value and dut.out_ready.value,
    "drain_stall": lambda dut: dut.out_valid.value and not dut.out_ready.value,
    "done": lambda dut: dut.done_o.value,
}

# ---------------------------------------------------------------------------- cocotb side
try:
    import cocotb
    from cocotb.clock import Clock
    from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge, SimTimeoutError, with_timeout

    import tbutil
except ImportError:  # pragma: no cover - cocotb is a dependency; keep pytest collection clear
    cocotb = None


class _Job:
    """One GEMM of a vector set, as the wrapper runs it."""

    def __init__(self, dut, vset):
        p = vset.params
        self.dut, self.vset = dut, vset
        self.m, self.k, self.n, self.a_signed = p["m"], p["k"], p["n"], bool(p["a_signed"])
        self.out_bits = p["out_bits"]
        self.rows, self.cols = int(dut.rows_o.value), int(dut.cols_o.value)
        self.tiles = tiles(self.m, self.n, self.rows, self.cols)
        self.out_rows = math.ceil(self.n / self.cols) * self.m  # output beats
        self.stall = min(tbutil.stall_probability(), 0.9)

    def timeout_cycles(self) -> int:
        # Per tile: K beats, or the drain of `rows` beats slowed by the stalls; 4x margin.
        per_tile = max(self.k, self.rows / (1 - self.stall)) + self.rows + self.cols + 16
        return int(4 * self.tiles * per_tile) + 1000

    def link_inputs(self) -> None:
        """Symlink the set's hex files to the names tb_gemm.v reads (in the run directory)."""
        for name, fname in INPUT_FILES.items():
            dst = Path.cwd() / fname
            dst.unlink(missing_ok=True)
            dst.symlink_to(self.vset.hex_path(name).resolve())

    async def pulse(self, signal) -> None:
        signal.value = 1
        await RisingEdge(self.dut.clk_i)
        signal.value = 0

    async def load(self) -> None:
        dut = self.dut
        dut.m_i.value, dut.k_i.value, dut.n_i.value = self.m, self.k, self.n
        dut.a_signed_i.value = int(self.a_signed)
        p = self.vset.params
        dut.zero_a_i.value = int(p.get("zero_a", 0)) & 0xFF
        dut.zero_w_i.value = int(p.get("zero_w", 0)) & 0xFF
        dut.zero_out_i.value = int(p.get("zero_out", 0)) & 0xFFFF
        dut.stall_i.value = min(255, int(round(self.stall * 256)))
        dut.seed_i.value = int(os.environ.get("HWVIT_TB_SEED", "1")) & 0xFFFF
        await self.pulse(dut.load_i)

    async def run(self) -> tuple[int, dict]:
        """Start the job and wait for done_o; (busy cycles, timing figures). The zero points change
        once the job has started, and a start_i while it runs must be ignored (rtl/gemm.v samples
        them at the start_i of an idle engine only, as M, K and N)."""
        await self.pulse(self.dut.start_i)
        self.scramble_zeros()
        await RisingEdge(self.dut.clk_i)
        if int(self.dut.busy_o.value):
            await self.pulse(self.dut.start_i)
        return await self.wait_done()

    def scramble_zeros(self) -> None:
        """The zero-point ports to other values: a job must run on those sampled at its start."""
        dut = self.dut
        for port, mask in ((dut.zero_a_i, 0xFF), (dut.zero_w_i, 0xFF), (dut.zero_out_i, 0xFFFF)):
            port.value = (int(port.value) ^ 0x5A) & mask

    async def wait_done(self) -> tuple[int, dict]:
        """Wait for done_o of the job under way; (busy cycles, timing figures).

        cocotb runs inside the simulator process, so process CPU time is the simulator's own
        time: the cycles/s figure that does not depend on the machine's other load.
        """
        dut = self.dut
        t0, c0 = time.perf_counter(), time.process_time()
        done_seen = True
        try:
            await with_timeout(RisingEdge(dut.done_o), self.timeout_cycles() * tbutil.CLK_NS, "ns")
        except SimTimeoutError:
            done_seen = False  # the comparison reports it, and what else is missing
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        await RisingEdge(dut.clk_i)
        cycles = int(dut.cycles_o.value)
        return cycles, {
            "done_seen": done_seen,
            "wall_s": wall,
            "cpu_s": cpu,
            "cycles_per_s": cycles / wall if wall > 0 else None,
            "cycles_per_cpu_s": cycles / cpu if cpu > 0 else None,
        }

    async def results(self) -> tuple[np.ndarray, np.ndarray]:
        await self.pulse(self.dut.dump_i)
        await RisingEdge(self.dut.clk_i)
        shape, count = (self.m, self.n), self.m * self.n
        acc = parse_memh(Path.cwd() / "gemm_acc_out.hex", count, 32).reshape(shape)
        y = parse_memh(Path.cwd() / "gemm_y_out.hex", count, self.out_bits).reshape(shape)
        # the clock of each element's output handshake, for the mismatch line (tbutil.where)
        when = parse_memh(Path.cwd() / "gemm_when_out.hex", count, 40)  # < 2^39 clocks: never negative
        tbutil.OUT_TIMES[:] = [int(c) * tbutil.CLK_NS for c in when]
        return acc, y

    def stream_checks(self, cycles: int, done_seen: bool) -> dict[str, tuple[list[int], list[int]]]:
        """The output stream and status outputs as (expected, got) pairs, checked like tensors:
        every output row exactly once (the count, none past M, none twice, each at a tile's
        column start), lanes past N all 0 (acc and y), one done_o pulse, busy_o high until it, beats_o = tiles * K, and
        cycles_o from the timing model (exact without stalls, a lower bound with them)."""
        dut = self.dut
        checks = {
            "done_o_seen": ([1], [int(done_seen)]),
            "done_pulses": ([1], [int(dut.done_pulses_o.value)]),
            "busy_gaps": ([0], [int(dut.busy_gaps_o.value)]),
            "busy_after_done": ([0], [int(dut.busy_o.value)]),
            "out_beats": ([self.out_rows], [int(dut.out_beats_o.value)]),
            "bad_beats": ([0], [int(dut.bad_beats_o.value)]),
            "dup_beats": ([0], [int(dut.dup_beats_o.value)]),
            "dirty_lanes": ([0], [int(dut.dirty_lanes_o.value)]),
            "beats_o": ([self.tiles * self.k], [int(dut.beats_o.value)]),
        }
        model = no_stall_cycles(self.m, self.k, self.n, self.rows, self.cols)
        if model_is_exact(self.m, self.k, self.rows, self.cols):
            if self.stall == 0:
                checks["cycles_o"] = ([model], [cycles])
            else:
                checks["cycles_o_at_least_model"] = ([1], [int(cycles >= model)])
        elif self.stall == 0:  # a partial tile of rows drains sooner: the model is an upper bound
            checks["cycles_o_at_most_model"] = ([1], [int(cycles <= model)])
        return checks

    async def finish(self, cycles: int, timing: dict, extra: dict, more_checks: dict | None = None) -> None:
        dut, vset = self.dut, self.vset
        acc, y = await self.results()
        beats = int(dut.beats_o.value)
        macs = self.m * self.k * self.n
        extra = {
            "rows": self.rows,
            "cols": self.cols,
            "beats": beats,
            "macs": macs,
            "out_beats": int(dut.out_beats_o.value),
            "expected_out_beats": self.out_rows,
            "outputs": int(acc.size + y.size),
            "utilization": macs / max(1, cycles * self.rows * self.cols),
            **timing,
            **extra,
        }
        checks = {"acc": (vset["acc"], acc), "y": (vset["y"], y)}
        tbutil.SEEN["out_stall"] += int(dut.out_stalls_o.value)  # the out_stall bin: stalls during the drain
        stream = self.stream_checks(cycles, timing["done_seen"])
        stream.update(more_checks or {})
        extra["stream_checks"] = sorted(stream)
        checks.update({name: (np.array(e), np.array(g)) for name, (e, g) in stream.items()})
        tbutil.finish(dut, vset, checks, cycles=cycles, extra=extra)


async def _start(dut) -> None:
    """tbutil.start with the clock toggled by the simulator interface (impl="gpi"), not by a
    Python task: cocotb's default Python clock costs ~0.5 ms per cycle, which would make the
    engine's speed invisible. Reset is held for 3 cycles."""
    Clock(dut.clk_i, tbutil.CLK_NS, unit="ns", impl="gpi").start()
    dut.rst_ni.value = 0
    await ClockCycles(dut.clk_i, 3)
    dut.rst_ni.value = 1
    await RisingEdge(dut.clk_i)


def _idle_inputs(dut) -> None:
    for name in ("m_i", "k_i", "n_i", "a_signed_i", "zero_a_i", "zero_w_i", "zero_out_i", "load_i", "start_i",
                 "dump_i", "stall_i", "seed_i"):  # fmt: skip
        getattr(dut, name).value = 0


async def _check_reset_state(dut, when: str) -> None:
    """After reset: every engine output defined (no X/Z), idle, nothing valid, the counters 0."""
    await ReadOnly()
    # The engine's outputs, as the wrapper's public wires (tb_gemm.v) and ports.
    values = {
        name: tbutil.to_int(getattr(dut, name), False)
        for name in (
            "busy_o",
            "done_o",
            "cycles_o",
            "beats_o",
            "rd_en",
            "out_valid",
            "out_m",
            "out_n",
            "out_acc",
            "out_data",
            "prm_n",
        )
    }
    assert values["busy_o"] == 0 and values["done_o"] == 0 and values["out_valid"] == 0 and values["rd_en"] == 0, (
        f"{when}: engine not idle: {values}"
    )
    # rtl/gemm.v's header: the counters read 0 after reset, until a job starts
    assert values["cycles_o"] == 0 and values["beats_o"] == 0, f"{when}: counters not cleared: {values}"
    await RisingEdge(dut.clk_i)


if cocotb is not None:

    @cocotb.test()
    async def run_vectors(dut):
        """Load the set into memories, run the whole GEMM, compare acc and y bit for bit."""
        vset = tbutil.load_set()
        _idle_inputs(dut)
        await _start(dut)
        await _check_reset_state(dut, "after reset")
        job = _Job(dut, vset)
        job.link_inputs()
        await job.load()
        cycles, timing = await job.run()
        await job.finish(cycles, timing, {})

    @cocotb.test()
    async def reset_midrun(dut):
        """Reset the engine in every state of RESET_STATES (a job started afresh for each; idle:
        a start_i the reset must drop), check its outputs after each, rerun the job, compare."""
        vset = tbutil.load_set()
        _idle_inputs(dut)
        await _start(dut)
        await _check_reset_state(dut, "after reset")
        job = _Job(dut, vset)
        job.link_inputs()
        resets = []
        for state, in_state in RESET_STATES.items():
            await job.load()
            dut.start_i.value = 1
            if state != "idle":
                await RisingEdge(dut.clk_i)  # start_i taken
                dut.start_i.value = 0
            waited = await tbutil.reset_when(dut, state, lambda s=in_state: s(dut), job.timeout_cycles())
            await RisingEdge(dut.clk_i)  # the reset is taken here, in `state` (unless not reached)
            dut.start_i.value = 0
            resets.append({"state": state, "reached": waited is not None, "out_rows": int(dut.out_beats_o.value)})
            await _check_reset_state(dut, f"in reset (taken in state {state})")  # then the second reset edge
            dut.rst_ni.value = 1
            await RisingEdge(dut.clk_i)
            await _check_reset_state(dut, f"after a reset in state {state}")
        await job.load()  # clears the result memory: the rerun must produce every element
        cycles, timing = await job.run()
        await job.finish(cycles, timing, {"resets": resets})

    @cocotb.test()
    async def back_to_back_jobs(dut):
        """The set's job twice, the second started in the cycle the first ends (done_o high) and
        its operands reloaded (results cleared) the cycle after: the first job's output stream
        is checked by its counts, the second completely."""
        vset = tbutil.load_set()
        _idle_inputs(dut)
        await _start(dut)
        job = _Job(dut, vset)
        job.link_inputs()
        await job.load()
        await job.pulse(dut.start_i)
        for _ in range(job.timeout_cycles()):
            await ReadOnly()
            if int(dut.done_o.value):
                break
            await RisingEdge(dut.clk_i)
        first = {
            "first_done_o_seen": ([1], [int(dut.done_o.value)]),
            "first_out_beats": ([job.out_rows], [int(dut.out_beats_o.value)]),
            "first_bad_beats": ([0], [int(dut.bad_beats_o.value)]),
            "first_dup_beats": ([0], [int(dut.dup_beats_o.value)]),
            "first_dirty_lanes": ([0], [int(dut.dirty_lanes_o.value)]),
        }
        await FallingEdge(dut.clk_i)
        dut.start_i.value = 1  # sampled with done_o high: the next job begins at once
        await RisingEdge(dut.clk_i)
        dut.start_i.value = 0
        await job.pulse(dut.load_i)  # operands again, results cleared: before the first output beat
        await ReadOnly()
        started = int(dut.busy_o.value)
        first["second_started_back_to_back"] = ([1], [started])
        tbutil.SEEN["back_to_back"] = tbutil.SEEN.get("back_to_back", 0) + started
        await RisingEdge(dut.clk_i)
        cycles, timing = await job.wait_done()
        await job.finish(cycles, timing, {"jobs": 2}, first)

    @cocotb.test()
    async def zero_dim_jobs(dut):
        """Jobs with M, K or N = 0 have no tiles: done_o one cycle after start, nothing read,
        nothing out, beats_o = 0, cycles_o = 1. Then the set's job runs and is compared."""
        vset = tbutil.load_set()
        _idle_inputs(dut)
        await _start(dut)
        job = _Job(dut, vset)
        for shape in ZERO_DIM_SHAPES:
            dut.m_i.value, dut.k_i.value, dut.n_i.value = shape
            dut.a_signed_i.value = 1
            await job.pulse(dut.start_i)  # start_i sampled at this edge: busy_o from now on
            reads = outs = 0
            done_at = None
            for cycle in range(1, 9):
                await ReadOnly()
                reads += int(dut.rd_en.value)
                outs += int(dut.out_valid.value)
                if done_at is None and int(dut.done_o.value):
                    done_at = cycle
                await RisingEdge(dut.clk_i)
            got = (done_at, reads, outs, int(dut.beats_o.value), int(dut.cycles_o.value), int(dut.busy_o.value))
            assert got == (2, 0, 0, 0, 1, 0), (
                f"zero-dimension job (M, K, N) = {shape}: (done_o at cycle, reads, output beats, "
                f"beats_o, cycles_o, busy_o) = {got}, expected (2, 0, 0, 0, 1, 0)"
            )
        job.link_inputs()
        await job.load()
        cycles, timing = await job.run()
        await job.finish(cycles, timing, {"zero_dim_jobs": len(ZERO_DIM_SHAPES)})


# (M, K, N) with a zero: each alone, and K = 0 with M and N at the wrapper's memory sizes.
ZERO_DIM_SHAPES = [(0, 5, 6), (7, 0, 6), (7, 5, 0), (0, 0, 0), (40, 0, 32)]

# ---------------------------------------------------------------------------- pytest side

import pytest  # noqa: E402  (the cocotb side above must import without pytest)

pytestmark = pytest.mark.xdist_group("gemm")

# Two array sizes: 4 x 4 tiles 40 x 32 exactly; 3 x 5 leaves partial tiles on both edges.
ARRAYS = [(4, 4), (3, 5)]
# (k, a_signed): both signednesses; with 30% output stalls K = 24 is drain-bound on 4 x 4
# (back to back needs K >= 2*ROWS + COLS without stalls, more with them), K = 64 is not.
SETS = [(24, True), (64, False)]
M, N = 40, 32  # 1280 output elements per set


def _ids(arr: tuple[int, int]) -> str:
    return f"{arr[0]}x{arr[1]}"


def _overrides(arr: tuple[int, int]) -> dict:
    return {"ROWS": arr[0], "COLS": arr[1]}


@pytest.fixture(scope="module")
def gemm_sets(tmp_path_factory) -> dict:
    from hwvit import vectors

    root = tmp_path_factory.mktemp("gemm_sets")
    out = {}
    for i, (k, signed) in enumerate(SETS):
        record = vectors.random_record("gemm", cases=M, seed=100 + i, k=k, n=N, a_signed=signed)
        out[(k, signed)] = vectors.write_set(record, root / f"k{k}_{'s' if signed else 'u'}")
    return out


@pytest.mark.parametrize("arr", ARRAYS, ids=_ids)
def test_gemm_random_sets(gemm_sets, simulator, arr, run_set):
    """Both sets, random out_ready stalls (30%), acc and y bit-exact."""
    for (k, _signed), set_dir in gemm_sets.items():
        result = run_set(set_dir, simulator, hdl_overrides=_overrides(arr), seed=7 + k)
        assert result.extra["outputs"] == 2 * M * N
        assert {"done_pulses", "out_beats", "bad_beats", "dup_beats", "beats_o"} <= set(result.extra["stream_checks"])
        assert result.extra["beats"] == tiles(M, N, *arr) * k
        assert result.extra["out_beats"] == result.extra["expected_out_beats"], result.extra


def test_gemm_reset_midrun(gemm_sets, simulator, run_set):
    """A reset in every state of RESET_STATES (each counted in its bin), then the job bit-exact."""
    result = run_set(gemm_sets[SETS[1]], simulator, hdl_overrides=_overrides(ARRAYS[1]), testcase="reset_midrun")
    assert [r["state"] for r in result.extra["resets"] if r["reached"]] == list(RESET_STATES)
    assert all(result.extra["bins"][f"reset_{state}"] == 1 for state in RESET_STATES), result.extra["bins"]
    assert max(r["out_rows"] for r in result.extra["resets"]) > 0  # resets with output rows already out


def test_gemm_back_to_back_jobs(gemm_sets, simulator, run_set):
    """A second job started in the done_o cycle of the first: both streams right, the second bit-exact."""
    result = run_set(gemm_sets[SETS[0]], simulator, hdl_overrides=_overrides(ARRAYS[1]), testcase="back_to_back_jobs")
    assert result.extra["jobs"] == 2 and result.extra["bins"]["back_to_back"] == 1
    assert {"first_out_beats", "second_started_back_to_back", "busy_gaps"} <= set(result.extra["stream_checks"])


def test_gemm_small_shapes(tmp_path, simulator, run_set):
    """Shapes smaller than the array and K = 1 (every beat is a tile's last): one row, one
    column, one element, N < COLS, M < ROWS; unsigned and signed a."""
    from hwvit import vectors

    shapes = [(1, 1, 1, True), (1, 7, 9, False), (6, 1, 2, True), (2, 3, 5, False), (5, 2, 1, True)]
    for i, (m, k, n, signed) in enumerate(shapes):
        record = vectors.random_record("gemm", cases=m, seed=40 + i, k=k, n=n, a_signed=signed)
        set_dir = vectors.write_set(record, tmp_path / f"s{i}")
        result = run_set(set_dir, simulator, hdl_overrides=_overrides(ARRAYS[0]), seed=i)
        assert result.extra["outputs"] == 2 * m * n and result.extra["beats"] == tiles(m, n, *ARRAYS[0]) * k


# Every requant variant with a Verilog twin (sim/test_requant.py ROUNDINGS): ROUNDING / WRAP builds.
ROUNDINGS = [
    *(f"{name}{wrap}" for name in ("half_up", "half_away", "half_even", "floor", "gemmlowp") for wrap in ("", "_wrap")),
    "ibert",
    "onnxruntime",
]


@pytest.mark.parametrize("rounding", ROUNDINGS)
def test_gemm_rounding_variant(tmp_path, variant_simulator, rounding, run_set):
    """A small set of each requant variant (channel 3: shift 0, every output on a rail or wrapped;
    channel 4: the largest shift; channel 5: acc / 2, a tie for every odd acc), acc and y bit-exact
    on the variant's build."""
    from hwvit import vectors

    record = vectors.random_record("gemm", cases=6, seed=70, k=8, n=10, out_bits=16, rounding=rounding)
    set_dir = vectors.write_set(record, tmp_path / "s")
    assert vectors.read(set_dir).params["rounding"] == rounding
    assert blocks.get("gemm").verify(vectors.read(set_dir)) is None
    result = run_set(set_dir, variant_simulator, hdl_overrides=_overrides(ARRAYS[0]), seed=2)
    assert result.extra["outputs"] == 2 * 6 * 10


@pytest.mark.parametrize(
    "a_signed, zeros",
    [
        (True, (-128, 127, -128)),  # the widest differences (255, -255) and the lowest output zero point
        (False, (-128, -7, 127)),  # uint8 a minus -128: 383, the 10-bit operand's top; zy at its top
        # an imported linear layer: the input's zero point folded into the bias
        pytest.param(True, (0, 0, 5), marks=pytest.mark.variants),
    ],
)
def test_gemm_zero_points(tmp_path, variant_simulator, a_signed, zeros, run_set):
    """An imported model's GEMM (ZERO_POINTS = 1): zero points subtracted from a and w at the
    array's edge, the output's added after the half-to-even requant; a 3 x 5 array, so partial tiles
    check that lanes past N stay 0; acc and y bit-exact (Icarus in make test, Verilator too in make
    test-variants and on every set of the imported models in make test-onnx)."""
    from hwvit import vectors

    za, zw, zy = zeros
    record = vectors.random_record(
        "gemm",
        cases=11,
        seed=80,
        k=19,
        n=13,
        a_signed=a_signed,
        rounding="half_even",
        zero_a=za,
        zero_w=zw,
        zero_out=zy,
    )
    set_dir = vectors.write_set(record, tmp_path / "zp")
    vset = vectors.read(set_dir)
    assert blocks.get("gemm").verify(vset) is None and hdl_parameters(vset)["ZERO_POINTS"] == 1
    result = run_set(set_dir, variant_simulator, hdl_overrides=_overrides(ARRAYS[1]), seed=4)
    assert result.extra["outputs"] == 2 * 11 * 13 and "dirty_lanes" in result.extra["stream_checks"]


@pytest.fixture(scope="module")
def digits():
    from hwvit import pipeline

    source = pipeline.load_source("digits")
    calib = pipeline.calibration_inputs(source, 32)
    x_test, _ = pipeline.eval_inputs(source, 1)
    return source, calib, x_test.numpy()


@pytest.mark.parametrize("rounding", ["floor", "half_away_wrap", "gemmlowp", "ibert"])
def test_gemm_traced_rounding(digits, tmp_path, rounding, run_set):
    """GEMM passes of the digits model's first encoder layer quantized with QuantConfig(requant=
    rounding): q k^T and a v of head 0 and the projection, bit-exact on Icarus."""
    from hwvit import vectors
    from hwvit.intvit import trace_model
    from hwvit.quant import QuantConfig, quantize_model

    source, calib, x = digits
    model = quantize_model(source.model, calib, QuantConfig(requant=rounding))
    _, records, _ = trace_model(model, x)
    paths = ("layers.0.attn.h0.qk", "layers.0.attn.h0.av", "layers.0.attn.proj")
    mine = [r for r in records if r.kind == "gemm" and r.path in paths]
    assert len(mine) == len(paths) and all(r.params["rounding"] == rounding for r in mine)
    vectors.write_sets(mine, tmp_path, seed=0)
    for set_dir in vectors.find_sets(tmp_path):
        result = run_set(set_dir, "icarus")
        assert result.extra["outputs"] == 2 * vectors.read(set_dir)["y"].size, result.line()


def test_gemm_zero_dim_jobs(gemm_sets, simulator, run_set):
    """Jobs with a zero dimension end at once without reading or writing; the engine then runs a
    normal job bit-exact (a partial-tile array: lanes past N checked)."""
    result = run_set(gemm_sets[SETS[0]], simulator, hdl_overrides=_overrides(ARRAYS[1]), testcase="zero_dim_jobs")
    assert result.extra["zero_dim_jobs"] == len(ZERO_DIM_SHAPES)
    assert "dirty_lanes" in result.extra["stream_checks"]


def test_gemm_top_index_bits(tmp_path, simulator, run_set):
    """Memory sizes that are not powers of two (MAX_M = MAX_N = 40: 6-bit m and n) with M = N = 40:
    output rows 32..39 and column tiles 32 and 36 set the top bit of out_m_o and out_n_o, which
    power-of-two sizes never do (the largest index is then below half the range)."""
    from hwvit import vectors

    record = vectors.random_record("gemm", cases=40, seed=61, k=9, n=40, a_signed=True)
    set_dir = vectors.write_set(record, tmp_path / "s")
    overrides = {**_overrides(ARRAYS[0]), "MAX_M": 40, "MAX_N": 40}
    result = run_set(set_dir, simulator, hdl_overrides=overrides, seed=3)
    assert result.extra["outputs"] == 2 * 40 * 40
    assert result.extra["out_beats"] == result.extra["expected_out_beats"] == 40 * 10


def no_stall_cycles(m: int, k: int, n: int, rows: int, cols: int) -> int:
    """Busy cycles of a job without output stalls (the timing model of docs/rtl.md).

    A tile's results are read out 2*ROWS + COLS cycles after its last beat issued, so tiles run
    back to back when K >= 2*ROWS + COLS; after the last beat: read 1, skew ROWS + COLS - 2,
    completion 1, one drain cycle per valid row of the last tile, requant 2, done 1.
    """
    period = max(k, 2 * rows + cols) if m >= rows else k  # partial tile rows: assumed K-bound
    last_rows = m - (math.ceil(m / rows) - 1) * rows
    return (tiles(m, n, rows, cols) - 1) * period + k + rows + cols + 4 + last_rows


def model_is_exact(m: int, k: int, rows: int, cols: int) -> bool:
    """no_stall_cycles is exact when every tile has ROWS rows (M a multiple of ROWS) or tiles are
    K-bound (K >= 2*ROWS + COLS: the drain never holds the next tile's last beat). Otherwise a
    partial tile of rows drains in fewer cycles than the model's period and the model is an
    upper bound only: a traced attention GEMM (M = K = 17, N = 16 on 8 x 8) takes 151 cycles
    against the model's 158, and with stalls can end below it."""
    return m % rows == 0 or k >= 2 * rows + cols


def unstalled_cycles(vset, params: dict) -> int:
    """The timing model for a set on the built array (hwvit sim --stress checks at most this many)."""
    p = vset.params
    return no_stall_cycles(int(p["m"]), int(p["k"]), int(p["n"]), int(params["ROWS"]), int(params["COLS"]))


@pytest.mark.parametrize("k", [11, 12, 64])
def test_gemm_back_to_back(gemm_sets, tmp_path, k, run_set):
    """No stalls: cycles follow the timing model exactly (no_stall_cycles).

    On 4 x 4, K = 12 = 2*4 + 4 is the shortest K that keeps the array busy every cycle; at
    K = 11 each tile waits one cycle for the previous tile's drain.
    """
    from hwvit import vectors

    arr = ARRAYS[0]
    if k == 64:
        set_dir = gemm_sets[SETS[1]]
    else:
        set_dir = vectors.write_set(vectors.random_record("gemm", cases=M, seed=k, k=k, n=N), tmp_path / "s")
    result = run_set(set_dir, "verilator", hdl_overrides=_overrides(arr), extra_env={"HWVIT_STALL": "0"})
    assert result.extra["beats"] == tiles(M, N, *arr) * k
    assert result.cycles == no_stall_cycles(M, k, N, *arr), (result.cycles, no_stall_cycles(M, k, N, *arr))


def test_gemm_reports_mismatch(tmp_path, simulator, sim_run):
    """A corrupted expected y must fail with block, set, index, expected, got and waveform."""
    from hwvit import vectors
    from hwvit.record import Tensor

    record = vectors.random_record("gemm", cases=8, seed=5, k=16, n=8)
    y = record.tensors["y"]
    data = y.data.copy()
    data[3, 5] = data[3, 5] + 1 if data[3, 5] < y.fmt.hi else data[3, 5] - 1
    record.tensors["y"] = Tensor(data, y.bits, y.signed, y.role, y.scale, y.layout)
    set_dir = vectors.write_set(record, tmp_path / "bad")
    result = sim_run(set_dir, simulator, hdl_overrides=_overrides(ARRAYS[0]))
    assert not result.passed
    assert result.mismatches == 1, result.message
    assert result.first["tensor"] == "y" and result.first["nd_index"] == [3, 5]
    assert result.first["expected"] == int(data[3, 5]) and result.first["got"] == int(y.data[3, 5])
    for text in ("gemm", str(set_dir), "y[3, 5]", "waveform"):
        assert text in result.message, result.message


LINT_PARAMS = [
    {},
    {"ROWS": 3, "COLS": 5},
    {"ROWS": 1, "COLS": 1, "MAX_M": 1, "MAX_N": 1},
    {"ROWS": 16, "COLS": 2, "OUT_BITS": 16, "MAX_K": 65535},
    {"ROWS": 2, "COLS": 3, "ROUNDING": 4, "WRAP": 1},
    {"ROWS": 2, "COLS": 3, "ROUNDING": 2},
    {"ROWS": 2, "COLS": 3, "ROUNDING": 2, "ZERO_POINTS": 1},
    {"ROWS": 1, "COLS": 1, "MAX_M": 1, "MAX_N": 1, "OUT_BITS": 15, "ZERO_POINTS": 1},
]


@pytest.mark.parametrize("params", LINT_PARAMS, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()) or "default")
def test_gemm_lint(params):
    """verilator --lint-only -Wall, nothing switched off, for several parameter sets."""
    from hwvit import synth

    assert synth.lint(RTL, params) == []
    assert synth.iverilog(RTL, "gemm", params) == []
