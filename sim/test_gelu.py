"""Testbench of rtl/gelu.v (twin of hwvit.ops.gelu): cocotb tests and their pytest drivers.

cocotb side (run inside the simulator by hwvit.simulate.run on the set in HWVIT_SET): the set's
table is written through the tbl_* port (one entry per cycle), then
- ``run_vectors``: stream x with random stalls on both sides (HWVIT_STALL) and check every y;
- ``reset_midstream``: reset with beats in flight (the table survives a reset: it is a RAM),
  then stream the whole set again.

pytest side: random sets of 1000 cases for (IN_BITS, OUT_BITS) = (8, 8) and (6, 12) on both
simulators, a random (non-monotone) table that catches address and data bit errors the GELU
curve hides, the reset test, and a test that a wrong expected value is reported.
"""

from __future__ import annotations

import cocotb
import numpy as np
import pytest
from cocotb.triggers import RisingEdge

from hwvit import blocks

import streamtb
import tbutil

unstalled_cycles = streamtb.unstalled_cycles  # the cycle check of hwvit sim --stress
TOPLEVEL = "gelu"
SOURCES = list(blocks.get("gelu").rtl)  # the kind's Verilog (hwvit/blocks/gelu.py)
KIND = "gelu"


def hdl_parameters(vset) -> dict[str, int]:
    """Toplevel parameters for a set: input width (table depth 2^IN_BITS) and output width."""
    return {"IN_BITS": int(vset.params["in_bits"]), "OUT_BITS": int(vset.params["out_bits"])}


# ---------------------------------------------------------------------------- cocotb side


def _stream(dut) -> streamtb.Stream:
    dut.in_valid_i.value = 0  # defined before the clock starts: Icarus would sample X
    dut.out_ready_i.value = 0
    dut.tbl_we_i.value = 0
    return streamtb.Stream(dut, [dut.in_data_i])


async def _load_table(dut, table: np.ndarray) -> None:
    """Write every entry through the table port, index i at address i."""
    for addr, value in enumerate(table.reshape(-1).tolist()):
        dut.tbl_we_i.value = 1
        dut.tbl_addr_i.value = addr
        dut.tbl_data_i.value = value
        await RisingEdge(dut.clk_i)
    dut.tbl_we_i.value = 0
    await RisingEdge(dut.clk_i)


def _words(vset) -> list[tuple[int]]:
    return [(x,) for x in vset["x"].reshape(-1).tolist()]


# The states reset_midstream resets in (hwvit.covbins.RESET_STATES): the output register empty
# with a beat offered, holding a beat that leaves, holding a refused beat with the next offered.
RESET_STATES = {
    "empty": lambda dut: not dut.out_valid_q.value and dut.in_valid_i.value,
    "output": lambda dut: dut.out_valid_q.value and dut.out_ready_i.value,
    "stalled": lambda dut: dut.out_valid_q.value and not dut.out_ready_i.value and dut.in_valid_i.value,
}


@cocotb.test()
async def run_vectors(dut):
    vset = tbutil.load_set()
    stream = _stream(dut)
    await tbutil.start(dut)
    await _load_table(dut, vset["table"])
    await streamtb.run_stream(stream, vset, _words(vset), vset["y"].reshape(-1))


@cocotb.test()
async def reset_midstream(dut):
    vset = tbutil.load_set()
    stream = _stream(dut)
    await tbutil.start(dut)
    await _load_table(dut, vset["table"])
    await streamtb.run_reset_midstream(stream, vset, _words(vset), vset["y"].reshape(-1), RESET_STATES)


# ---------------------------------------------------------------------------- pytest side


def _set(tmp_path, cases: int, seed: int, **params):
    from hwvit import vectors

    record = vectors.random_record(KIND, cases, seed, **params)
    return vectors.write_set(record, tmp_path / f"{KIND}-{seed}")


@pytest.mark.xdist_group(KIND)
@pytest.mark.parametrize("in_bits, out_bits", [(8, 8), (6, 12)])
def test_random(tmp_path, simulator, in_bits, out_bits, run_set):
    result = run_set(_set(tmp_path, 1000, seed=in_bits, in_bits=in_bits, out_bits=out_bits), simulator)
    assert result.elements == 1000
    assert result.cycles >= 1000  # one beat per cycle at most


@pytest.mark.xdist_group(KIND)
def test_random_table(tmp_path, simulator, run_set):
    # Every entry random over the full 8-bit range: a wrong address or data bit changes y.
    table = np.random.default_rng(7).integers(-128, 127, 256, endpoint=True)
    result = run_set(_set(tmp_path, 1000, seed=7, table=table), simulator)
    assert result.elements == 1000


@pytest.mark.xdist_group(KIND)
def test_full_throughput(tmp_path, simulator, run_set):
    streamtb.check_full_throughput(run_set, _set(tmp_path, 500, seed=5), simulator, 500)


@pytest.mark.xdist_group(KIND)
def test_reset_midstream(tmp_path, simulator, run_set):
    streamtb.check_reset_midstream(run_set, _set(tmp_path, 300, seed=11), simulator, 300, RESET_STATES)


@pytest.mark.xdist_group(KIND)
def test_mismatch_is_reported(tmp_path, simulator, mismatch_reported):
    mismatch_reported(KIND, tmp_path, simulator)


RTL_PARAMS = [
    {"IN_BITS": 8, "OUT_BITS": 8},
    {"IN_BITS": 6, "OUT_BITS": 12},
    {"IN_BITS": 2, "OUT_BITS": 2},
    {"IN_BITS": 10, "OUT_BITS": 16},
]


@pytest.mark.parametrize("params", RTL_PARAMS, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_lint(params):
    from hwvit import synth

    assert synth.lint(SOURCES, params) == []
    assert synth.iverilog(SOURCES, TOPLEVEL, params) == []
