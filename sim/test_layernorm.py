"""Testbench of rtl/layernorm.v (twin of hwvit.ops.layernorm); its square root has sim/test_isqrt.py.

cocotb side:
- ``run_vectors``: configure C, eps_int, M, s; load gamma/beta through the write port; stream every
  row of the set with random stalls on both sides; compare every output with the set's ``y``.
- ``reset_midstream``: reset a streaming run in every state (a row filling, each FSM state,
  reading out with and without the next row filling: RESET_STATES), check nothing is X and no
  output is pending after each reset, then stream the whole set and compare; gamma/beta are
  loaded once (they survive reset).

pytest side: random and hand-made sets (constant rows, one-LSB spreads, extreme values) on both
simulators and two parameter sets, reset, row lengths 0 and above MAX_C (clamped), a corrupted
expected output, unstalled throughput.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import cocotb
import numpy as np
import pytest
from cocotb.simtime import get_sim_time
from cocotb.triggers import ReadOnly, RisingEdge, SimTimeoutError, with_timeout

from hwvit import blocks

import tbutil
from layernorm_sets import PARAM_SETS, make_sets

TOPLEVEL = "layernorm"
SOURCES = list(blocks.get("layernorm").rtl)  # the kind's Verilog (hwvit/blocks/layernorm.py)

# Per-row fixed cost of the block, unstalled: MUL1, MUL2, 31 square-root and 44 divider clocks,
# handshakes and the 6-deep output pipeline (docs/rtl.md). Used for time limits and the
# throughput test.
ROW_OVERHEAD = 90
C_ENV = "HWVIT_LN_C"


def max_c_for(c: int) -> int:
    """MAX_C of the build for a set of row length ``c``: the next power of two, at least 16.

    Few distinct builds (each Verilator build costs ~20 s), and the rows are usually shorter than
    the buffer, which exercises the runtime row-length port.
    """
    return max(16, 1 << (c - 1).bit_length())


def unstalled_cycles(vset, params: dict) -> int:
    """Most clocks an unstalled run may take: the first row fills alone (C clocks), each next row
    fills behind the read-out of the one before (C + ROW_OVERHEAD a row). Without the first fill
    the bound held only while 8 clocks of slack a row covered it: 9 rows of C = 4096 took 41548
    clocks, over the old 9 * (C + 90) = 37674."""
    rows, c = vset["x"].shape
    return c + rows * (c + ROW_OVERHEAD)


def hdl_parameters(vset) -> dict:
    return {"MAX_C": max_c_for(int(vset.params["c"])), "OUT_BITS": int(vset.params["out_bits"])}


# ---------------------------------------------------------------------------------------------
# cocotb helpers


def assert_resolvable(*signals) -> None:
    for sig in signals:
        assert sig.value.is_resolvable, f"{sig._name} is {sig.value} (X/Z) after reset"


def check_no_x(dut) -> None:
    """Outputs resolvable after reset, nothing pending, ready to take a row."""
    assert_resolvable(dut.out_valid_o, dut.out_data_o, dut.in_ready_o)
    assert int(dut.out_valid_o.value) == 0, "out_valid_o high right after reset"
    assert int(dut.in_ready_o.value) == 1, "in_ready_o low right after reset"


def configure(dut, vset) -> None:
    p = vset.params
    # HWVIT_LN_C drives cfg_c_i with another value than the set's C (0, above MAX_C: clamping)
    dut.cfg_c_i.value = int(os.environ.get(C_ENV, p["c"]))
    dut.cfg_eps_i.value = int(p["eps_int"])
    dut.cfg_mult_i.value = int(p["multiplier"])
    dut.cfg_shift_i.value = int(p["shift"])
    dut.in_valid_i.value = 0
    dut.in_data_i.value = 0
    dut.out_ready_i.value = 0
    dut.prm_we_i.value = 0
    dut.prm_addr_i.value = 0
    dut.prm_gamma_i.value = 0
    dut.prm_beta_i.value = 0
    dut.prm_alpha_i.value = 0  # PTF = 0: unused


async def load_params(dut, vset) -> None:
    """gamma/beta through the write port, one channel per clock."""
    for i, (g, b) in enumerate(zip(vset["gamma"], vset["beta"])):
        dut.prm_we_i.value = 1
        dut.prm_addr_i.value = i
        dut.prm_gamma_i.value = int(g) & 0x7FFF
        dut.prm_beta_i.value = int(b) & 0x7FFFFFFF
        await RisingEdge(dut.clk_i)
    dut.prm_we_i.value = 0


def input_words(vset) -> list[tuple[int]]:
    return [(int(v) & 0xFF,) for v in vset["x"].reshape(-1)]


def cycle() -> int:
    return int(get_sim_time(unit="ns")) // tbutil.CLK_NS


async def stream(dut, vset, rand_in: random.Random, rand_out: random.Random, stall: float):
    """Send the whole set, collect as many outputs (or fewer on a hang); return (checks, cycles): y,
    and out_last_o (each row's last output flagged, no other) where it is wrong."""
    rows, c = vset["x"].shape
    src = tbutil.Source(dut.clk_i, dut.in_valid_i, dut.in_ready_o, [dut.in_data_i], stall, rand_in)
    sink = tbutil.Sink(
        dut.clk_i, dut.out_valid_o, dut.out_ready_i, [dut.out_data_o, dut.out_last_o], [True, False], stall, rand_out
    )
    limit = rows * (int(2 * c / (1 - min(stall, 0.9))) + 2 * ROW_OVERHEAD) + 200
    t0 = cycle()
    sender = cocotb.start_soon(src.send(input_words(vset)))
    try:
        await with_timeout(sink.collect(rows * c), limit * tbutil.CLK_NS, "ns")
    except SimTimeoutError:
        pass  # fewer words than expected: finish() reports the count
    sender.cancel()
    got = np.array(sink.words, dtype=np.int64).reshape(-1, 2)
    last = np.zeros((rows, c), dtype=np.int64)
    last[:, -1] = 1
    checks = {"y": (vset["y"].reshape(-1), got[:, 0])}
    if got.shape[0] == rows * c:
        checks["y"] = (vset["y"], got[:, 0].reshape(rows, c))
    if not np.array_equal(got[:, 1], last.reshape(-1)[: got.shape[0]]):  # reported only when wrong
        checks["out_last"] = (last.reshape(-1), got[:, 1])
    return checks, cycle() - t0


def rngs() -> tuple[random.Random, random.Random]:
    seed = int(os.environ.get("HWVIT_TB_SEED", "1"))
    return random.Random(seed), random.Random(seed + 7919)


# ---------------------------------------------------------------------------------------------
# cocotb tests


@cocotb.test()
async def run_vectors(dut):
    vset = tbutil.load_set()
    configure(dut, vset)
    await tbutil.start(dut)
    await ReadOnly()
    check_no_x(dut)
    await RisingEdge(dut.clk_i)
    await load_params(dut, vset)
    rand_in, rand_out = rngs()
    checks, cycles = await stream(dut, vset, rand_in, rand_out, tbutil.stall_probability())
    rows = vset["x"].shape[0]
    tbutil.finish(dut, vset, checks, cycles=cycles, extra={"cycles_per_row": cycles / rows})


# The states reset_midstream resets in (hwvit.covbins.RESET_STATES): the engine's phase (rtl/row_stream.v:
# 0 fill, 1 CALC, 3 OUT) with its filling row's count, and within CALC the block's step (1 MUL1, 2 MUL2,
# 3 the root, square root then division): each step, and OUT with and without a row filling behind.
def _phase(dut) -> tuple[int, int, int, bool]:
    eng = dut.u_stream
    dividing = int(dut.u_inv.u_divu.state_q.value) != 0
    return int(eng.state_q.value), int(eng.wr_cnt_q.value), int(dut.step_q.value), dividing


RESET_STATES = {
    "fill": lambda s, wr, step, div: s == 0 and wr > 0,
    "mul1": lambda s, wr, step, div: step == 1,
    "mul2": lambda s, wr, step, div: step == 2,
    "sqrt": lambda s, wr, step, div: step == 3 and not div,
    "div": lambda s, wr, step, div: step == 3 and div,
    "out": lambda s, wr, step, div: s == 3 and wr == 0,
    "out_fill": lambda s, wr, step, div: s == 3 and wr > 0,
}


@cocotb.test()
async def reset_midstream(dut):
    """Reset in every state of RESET_STATES while the set streams (the depth-th clock in it, 1-7),
    check no output is X and the block idles, then stream the whole set and compare."""
    vset = tbutil.load_set()
    rows, c = vset["x"].shape
    configure(dut, vset)
    await tbutil.start(dut)
    await load_params(dut, vset)
    rand_in, rand_out = rngs()
    stall = tbutil.stall_probability()
    resets = []
    for k, state in enumerate(RESET_STATES):
        src = tbutil.Source(dut.clk_i, dut.in_valid_i, dut.in_ready_o, [dut.in_data_i], stall, rand_in)
        sink = tbutil.Sink(dut.clk_i, dut.out_valid_o, dut.out_ready_i, [dut.out_data_o], [True], stall, rand_out)
        sender = cocotb.start_soon(src.send(input_words(vset)))
        receiver = cocotb.start_soon(sink.collect(rows * c))
        seen, depth = [0], 1 + (k * 3) % 7

        def in_state(state=state, seen=seen, depth=depth) -> bool:
            seen[0] += RESET_STATES[state](*_phase(dut))
            return seen[0] >= depth

        limit = 4 * rows * (int(c / (1 - min(stall, 0.9))) + ROW_OVERHEAD)
        waited = await tbutil.reset_when(dut, state, in_state, limit)
        await RisingEdge(dut.clk_i)  # the reset is taken here, in `state` (unless not reached)
        sender.cancel()
        receiver.cancel()
        resets.append({"state": state, "reached": waited is not None})
        dut.in_valid_i.value = 0
        dut.out_ready_i.value = 0
        await RisingEdge(dut.clk_i)
        dut.rst_ni.value = 1
        await RisingEdge(dut.clk_i)
        await ReadOnly()
        check_no_x(dut)
        await RisingEdge(dut.clk_i)
    checks, cycles = await stream(dut, vset, rand_in, rand_out, stall)
    tbutil.finish(dut, vset, checks, cycles=cycles, extra={"resets": resets})


# ---------------------------------------------------------------------------------------------
# pytest side

pytestmark = pytest.mark.xdist_group("layernorm")


@pytest.fixture(scope="module")
def ln_sets(tmp_path_factory) -> dict[str, list[Path]]:
    """Every parameter set's vector sets, written once for both simulators."""
    return make_sets(tmp_path_factory.mktemp("layernorm"))


@pytest.mark.parametrize("pset", sorted(PARAM_SETS))
def test_vectors(simulator, ln_sets, pset, run_set):
    for set_dir in ln_sets[pset]:
        run_set(set_dir, simulator)


def test_reset_midstream(simulator, ln_sets, sim_run):
    set_dir = ln_sets["out6_c16"][0]
    result = sim_run(set_dir, simulator, testcase="reset_midstream")
    assert result.passed, result.message
    assert result.elements > 0
    assert [r["state"] for r in result.extra["resets"] if r["reached"]] == list(RESET_STATES)
    assert all(result.extra["bins"][f"reset_{state}"] == 1 for state in RESET_STATES), result.extra["bins"]


def test_mismatch_reported(ln_sets, tmp_path, sim_run):
    """A set whose expected y is off by one LSB in one element fails, naming that element."""
    from hwvit import vectors
    from hwvit.record import BlockRecord, Tensor

    good = vectors.read(ln_sets["out6_c16"][0])
    y = good["y"].copy()
    rows, c = y.shape
    r, i = rows // 2, c - 3
    y[r, i] = y[r, i] - 1 if y[r, i] > -(1 << (good.tensors["y"].bits - 1)) else y[r, i] + 1
    tensors = {name: Tensor(t.data, t.bits, t.signed, t.role, t.scale) for name, t in good.tensors.items()}
    tensors["y"] = Tensor(y, good.tensors["y"].bits, True, "output")
    params = {k: v for k, v in good.params.items()}
    bad_dir = vectors.write_set(BlockRecord("layernorm", "corrupted", params, tensors), tmp_path / "bad")
    result = sim_run(bad_dir, "icarus")
    assert not result.passed
    assert result.mismatches == 1
    assert result.first["index"] == r * c + i
    assert result.first["expected"] == int(y[r, i]) and result.first["got"] == int(good["y"][r, i])
    for text in (
        "layernorm",
        "corrupted",
        str(bad_dir),
        f"[{r}, {i}]",
        f"expected {y[r, i]}",
        f"got {good['y'][r, i]}",
    ):
        assert text in result.message, f"{text!r} missing from: {result.message}"


@pytest.mark.parametrize("c, drive", [(1, 0), (16, 17), (16, 31)], ids=["0->1", "17->16", "31->16"])
def test_row_len_clamped(simulator, c, drive, tmp_path, sim_run):
    """rtl/layernorm.v documents cfg_c_i = 0 as C = 1 and cfg_c_i > MAX_C as MAX_C.

    Both sets build with MAX_C = 16 (max_c_for), whose 5-bit cfg_c_i reaches 31: rows of the
    clamped length, driven with the out-of-range value, must come out as ops.layernorm's rows of
    that length (a C = 1 row normalizes to beta alone, V = 0).
    """
    from hwvit import vectors

    assert max_c_for(c) == 16 and drive < 32
    set_dir = vectors.write_set(vectors.random_record("layernorm", cases=6, seed=9, c=c), tmp_path / "set")
    result = sim_run(set_dir, simulator, extra_env={C_ENV: str(drive)})
    assert result.passed, result.message
    assert result.elements == 6 * c


def test_max_c_not_a_power_of_two(simulator, tmp_path, sim_run):
    """MAX_C = 40: the row counters get as many bits as the buffer address (clog2(41) = clog2(40)),
    unlike every power-of-two build; full rows of 40 and rows of 33 stay exact. The special rows at
    C = 40 (all -128, one outlier) fill the top bits that a power-of-two MAX_C never reaches:
    |Sx| = 5120 > 2^(SX_W-2) = 4096 and |d| = 255 * 39 > 2^(D_W-2) = 8192, so a sign extension
    taken from the bit below the sign shows."""
    from hwvit import vectors

    from layernorm_sets import special_record

    records = [vectors.random_record("layernorm", cases=6, seed=c, c=c) for c in (40, 33)]
    records.append(special_record(40, 8, 0, seed=40))
    for i, record in enumerate(records):
        set_dir = vectors.write_set(record, tmp_path / f"s{i}")
        result = sim_run(set_dir, simulator, hdl_overrides={"MAX_C": 40})
        assert result.passed, result.message
        assert result.elements == record.tensors["x"].data.size


def test_throughput_unstalled(ln_sets, sim_run):
    """Without stalls the next row fills behind the read-out: one row per C + ROW_OVERHEAD clocks."""
    from hwvit import vectors

    set_dir = ln_sets["out8_c64"][0]
    vset = vectors.read(set_dir)
    rows, c = vset["x"].shape
    result = sim_run(set_dir, "icarus", extra_env={"HWVIT_STALL": "0"})
    assert result.passed, result.message
    assert result.cycles <= unstalled_cycles(vset, {}), f"{result.cycles} cycles for {rows} rows of {c}"


def _with_rows(base, x: np.ndarray):
    """``base`` (a layernorm record) with its rows replaced by ``x`` and y recomputed by ops.layernorm."""
    import dataclasses

    from hwvit import ops

    t, prm = base.tensors, base.params
    y = ops.layernorm(
        x, t["gamma"].data, t["beta"].data, prm["eps_int"], prm["multiplier"], prm["shift"], prm["out_bits"]
    )
    tensors = {**t, "x": dataclasses.replace(t["x"], data=x), "y": dataclasses.replace(t["y"], data=y)}
    return dataclasses.replace(base, params={**prm, "rows": int(x.shape[0])}, tensors=tensors)


def test_row_period_unstalled(tmp_path, sim_run):
    """docs/rtl.md: unstalled rows of C elements (V > 0) follow each other every C + 82 clocks.

    The same rows with two more: the run takes exactly 2 * (C + 82) clocks longer. The bound of
    test_throughput_unstalled (C + 90) would not see a row one clock slower.
    """
    from hwvit import vectors

    c = 16
    base = vectors.random_record("layernorm", cases=6, seed=31, c=c)
    x = np.random.default_rng(31).integers(-128, 127, (6, c), endpoint=True)
    x[:, 0], x[:, 1] = -100, 100  # V > 0 in every row: each takes the square root and divider
    cycles = []
    for rows in (4, 6):
        record = _with_rows(base, x[:rows])
        result = sim_run(vectors.write_set(record, tmp_path / f"r{rows}"), "icarus", extra_env={"HWVIT_STALL": "0"})
        assert result.passed, result.message
        cycles.append(result.cycles)
    assert cycles[1] - cycles[0] == 2 * (c + 82), cycles


def test_constant_row_skips_root_and_division(tmp_path, sim_run):
    """rtl/layernorm.v: a row's first output comes 88 clocks after its last input, 11 for a constant
    row (V = 0 skips the square root and the division). One unstalled row of each, otherwise the
    same: the constant row's run is exactly 77 clocks shorter, and both are exact."""
    from hwvit import vectors

    c = 16
    base = vectors.random_record("layernorm", cases=1, seed=32, c=c)
    x = np.random.default_rng(32).integers(-128, 127, (1, c), endpoint=True)
    x[0, 0], x[0, 1] = -100, 100  # V > 0
    cycles = {}
    for name, rows in (("varied", x), ("constant", np.full((1, c), -37))):
        result = sim_run(
            vectors.write_set(_with_rows(base, rows), tmp_path / name), "icarus", extra_env={"HWVIT_STALL": "0"}
        )
        assert result.passed, result.message
        cycles[name] = result.cycles
    assert cycles["varied"] - cycles["constant"] == 88 - 11, cycles


def test_variance_at_2_to_the_37(tmp_path, run_set):
    """Rows of 4096 whose V = C * Sxx - Sx^2 is 2^37 - 8192, 2^37 and 2^37 + 8192 (sum 0, sums of
    squares 2^25 - 2, 2^25, 2^25 + 2): V's top bit alone set, which the zero-variance test must
    read (a test on 37 of its 38 bits takes V = 2^37 for a constant row); exact. Icarus (the
    arithmetic is the simulators' alike; rows of 4096 cost 8 s there)."""
    from hwvit import vectors

    from layernorm_sets import variance_row

    rng = np.random.default_rng(37)
    x = np.stack([variance_row(4096, (1 << 25) + d, rng) for d in (-2, 0, 2)])
    v = 4096 * (x * x).sum(axis=1) - x.sum(axis=1) ** 2
    assert v.tolist() == [(1 << 37) - 8192, 1 << 37, (1 << 37) + 8192]
    record = _with_rows(vectors.random_record("layernorm", cases=3, seed=37, c=4096), x)
    assert run_set(vectors.write_set(record, tmp_path / "set"), "icarus").elements == 3 * 4096


def test_requant_at_the_largest_product(tmp_path, run_set):
    """The requant stage at the contract's corner (M = 2^31 - 1, s = 62, hwvit.formats): channels with
    B = +-(2^30 - 1) make |acc| > 2^30 and |acc M| > 2^61, the output +-1, where rounding in fewer than
    64 bits or a sign copied from bit 61 of acc M shows (drawn sets keep |acc M| near 2^60)."""
    import dataclasses

    from hwvit import vectors

    from layernorm_sets import special_record

    base = special_record(16, 6, 0, seed=62)
    base = dataclasses.replace(base, params={**base.params, "multiplier": (1 << 31) - 1, "shift": 62})
    record = _with_rows(base, base.tensors["x"].data)
    y = record.tensors["y"].data
    assert (y == 1).sum() >= 8 and (y == -1).sum() >= 8, np.unique(y, return_counts=True)
    assert run_set(vectors.write_set(record, tmp_path / "set"), "icarus").elements == y.size


# Static checks share no build with the simulations: their own group, so xdist may run them
# on the other worker.
static_group = pytest.mark.xdist_group("layernorm_static")

LINT_PARAMS = [
    {},
    {"MAX_C": 16, "OUT_BITS": 6},
    {"MAX_C": 1000, "OUT_BITS": 16},
    {"MAX_C": 4096, "OUT_BITS": 2},
    {"MAX_C": 2},
    {"EPS": 0, "MAX_C": 40},  # layernorm_no_eps
    {"PTF": 1, "MAX_C": 4096, "OUT_BITS": 16},  # layernorm_ptf
]


@static_group
@pytest.mark.parametrize("params", LINT_PARAMS, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()) or "default")
def test_lint(params):
    """verilator --lint-only -Wall (nothing switched off) and iverilog -g2005 -Wall accept every size."""
    from hwvit import synth

    assert synth.lint(SOURCES, params) == []
    assert synth.iverilog(SOURCES, TOPLEVEL, params) == []


def test_inv_rounding_rows_flip():
    """hwvit.ops agrees with the plain-integer formula on the directed rows, and each row's
    outputs change with inv one lower (sig/2 dropped) or one higher."""
    import reciprocal_rows as rr

    from layernorm_sets import inv_rounding_record

    record = inv_rounding_record(64, 8, 8, seed=7)
    t, p = record.tensors, record.params
    args = (t["gamma"].data, t["beta"].data, p["eps_int"], p["multiplier"], p["shift"], 8)
    base = rr.layernorm_out(t["x"].data, *args)
    assert np.array_equal(base, t["y"].data)
    assert (base != rr.layernorm_out(t["x"].data, *args, drop_half=True)).any(axis=-1)[:4].all()
    assert (base != rr.layernorm_out(t["x"].data, *args, inv_delta=1)).any(axis=-1)[4:].all()
    # The largest eps_int: sig >= 2^30 (the top bit of the 31-bit root is used) and the rows still
    # flip with sig/2 dropped or inv one higher.
    record = inv_rounding_record(4096, 8, 8, seed=7, eps_int=EPS_TOP)
    t, p = record.tensors, record.params
    args = (t["gamma"].data, t["beta"].data, p["eps_int"], p["multiplier"], p["shift"], 8)
    assert np.array_equal(rr.layernorm_out(t["x"].data, *args), t["y"].data)
    assert rr._isqrt(np.array([EPS_TOP])).item() >= 1 << 30
    assert (t["y"].data != rr.layernorm_out(t["x"].data, *args, drop_half=True)).any(axis=-1)[:4].all()


# eps_int at its largest (ops.layernorm's EPS_MAX): sig >= 2^30.5, so the square root's top bit
# reaches inv's dividend 2^43 + sig/2 (with eps_int = 0 and V < 2^38, sig < 2^30 always).
EPS_TOP = (1 << 61) - 1


@pytest.mark.parametrize("c, eps_int", [(64, 0), (4096, 0), (4096, EPS_TOP)], ids=["64", "4096", "4096-eps"])
def test_inv_rounding_rows(simulator, tmp_path, c, eps_int, run_set):
    """Directed rows near inv's rounding boundaries, at C = 64 and at the block's maximum 4096
    with the largest variance (half the rows all -128/127), and with the largest eps_int."""
    from hwvit import vectors

    from layernorm_sets import inv_rounding_record

    record = inv_rounding_record(c, 8, 8, seed=7, eps_int=eps_int)
    set_dir = vectors.write_set(record, tmp_path / "set")
    assert run_set(set_dir, simulator).elements == 8 * c
