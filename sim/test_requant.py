"""Testbench of rtl/requant.v (twin of hwvit.ops.requant): cocotb tests and their pytest drivers.

cocotb side (run inside the simulator by hwvit.simulate.run on the set in HWVIT_SET):
- ``run_vectors``: stream (acc, multiplier, shift) beats with random stalls on both sides
  (HWVIT_STALL) and check every y bit for bit;
- ``reset_midstream``: reset with beats in flight, then stream the whole set again.

pytest side: random sets of 1000 cases for OUT_BITS 8 and 6 on both simulators, the reset test,
a test that a wrong expected value is reported (the checker can fail), and a random set of every
requant variant (``rounding``: ties at every shift, both rails, int32 extremes) on its ROUNDING /
WRAP build.
"""

from __future__ import annotations

import cocotb
import pytest

from hwvit import blocks

import streamtb
import tbutil

unstalled_cycles = streamtb.unstalled_cycles  # the cycle check of hwvit sim --stress
TOPLEVEL = "requant"
SOURCES = list(blocks.get("requant").rtl)  # the kind's Verilog (hwvit/blocks/requant.py)
KIND = "requant"


def hdl_parameters(vset) -> dict[str, int]:
    """Toplevel parameters for a set: the output width (the accumulator is always 32 bits) and the
    rounding's ROUNDING / WRAP (hwvit/blocks/requant.py; none for hwvit's half_up)."""
    return blocks.get(KIND).parameters_for(vset)


# ---------------------------------------------------------------------------- cocotb side


def _stream(dut) -> streamtb.Stream:
    dut.in_valid_i.value = 0  # defined before the clock starts: Icarus would sample X
    dut.out_ready_i.value = 0
    return streamtb.Stream(dut, [dut.in_acc_i, dut.in_mult_i, dut.in_shift_i])


def _words(vset) -> list[tuple[int, int, int]]:
    return list(
        zip(
            vset["acc"].reshape(-1).tolist(),
            vset["multiplier"].reshape(-1).tolist(),
            vset["shift"].reshape(-1).tolist(),
        )
    )


# The states reset_midstream resets in (hwvit.covbins.RESET_STATES): which of the two pipeline
# stages hold a beat, with a beat offered at the input (the reset must drop it too); "full" with
# the output refused, so both beats are stuck in the block.
RESET_STATES = {
    "empty": lambda dut: not dut.s1_valid_q.value and not dut.out_valid_q.value and dut.in_valid_i.value,
    "stage1": lambda dut: dut.s1_valid_q.value and not dut.out_valid_q.value,
    "output": lambda dut: not dut.s1_valid_q.value and dut.out_valid_q.value,
    "full": lambda dut: dut.s1_valid_q.value and dut.out_valid_q.value and not dut.out_ready_i.value,
}


@cocotb.test()
async def run_vectors(dut):
    vset = tbutil.load_set()
    stream = _stream(dut)
    await tbutil.start(dut)
    await streamtb.run_stream(stream, vset, _words(vset), vset["y"].reshape(-1))


@cocotb.test()
async def reset_midstream(dut):
    vset = tbutil.load_set()
    stream = _stream(dut)
    await tbutil.start(dut)
    await streamtb.run_reset_midstream(stream, vset, _words(vset), vset["y"].reshape(-1), RESET_STATES)


# ---------------------------------------------------------------------------- pytest side


def _set(tmp_path, cases: int, seed: int, **params):
    from hwvit import vectors

    record = vectors.random_record(KIND, cases, seed, **params)
    return vectors.write_set(record, tmp_path / f"{KIND}-{seed}")


@pytest.mark.xdist_group(KIND)
@pytest.mark.parametrize("out_bits", [8, 6])
def test_random(tmp_path, simulator, out_bits, run_set):
    result = run_set(_set(tmp_path, 1000, seed=out_bits, out_bits=out_bits), simulator)
    assert result.elements == 1000
    assert result.cycles >= 1000  # one beat per cycle at most


@pytest.mark.xdist_group(KIND)
def test_full_throughput(tmp_path, simulator, run_set):
    streamtb.check_full_throughput(run_set, _set(tmp_path, 500, seed=5), simulator, 500)


@pytest.mark.xdist_group(KIND)
def test_reset_midstream(tmp_path, simulator, run_set):
    streamtb.check_reset_midstream(run_set, _set(tmp_path, 200, seed=11), simulator, 200, RESET_STATES)


@pytest.mark.xdist_group(KIND)
def test_mismatch_is_reported(tmp_path, simulator, mismatch_reported):
    mismatch_reported(KIND, tmp_path, simulator)


# Every requant variant with a Verilog twin (hwvit/blocks/requant.py RTL_ROUNDING, RTL_ALIAS).
ROUNDINGS = [
    *(f"{name}{wrap}" for name in ("half_up", "half_away", "half_even", "floor", "gemmlowp") for wrap in ("", "_wrap")),
    "ibert",
    "onnxruntime",
]


@pytest.mark.xdist_group(KIND)
@pytest.mark.parametrize("rounding", ROUNDINGS)
def test_rounding_variant(tmp_path, variant_simulator, rounding, run_set):
    """The variant's random set (its edges first: ties at every shift, both rails, int32 extremes)
    at OUT_BITS 6, bit-exact on its ROUNDING / WRAP build."""
    from hwvit import variants, vectors

    set_dir = _set(tmp_path, 600, seed=21, out_bits=6, rounding=rounding)
    vset = vectors.read(set_dir)
    assert vset.params["rounding"] == rounding
    assert blocks.get(KIND).verify(vset) is None
    y = vset["y"].reshape(-1)
    if rounding.endswith("_wrap"):  # the wrap shows: the saturating twin differs somewhere
        p = {"multiplier": vset["multiplier"], "shift": vset["shift"], "out_bits": 6}
        assert (variants.get("requant", rounding[: -len("_wrap")]).kernel(vset["acc"], p) != y).any()
    else:
        assert (y == 31).any() and (y == -32).any()  # both rails
    result = run_set(set_dir, variant_simulator)
    assert result.elements == 600


RTL_PARAMS = [
    {"OUT_BITS": 8},
    {"OUT_BITS": 6},
    {"OUT_BITS": 16},
    {"OUT_BITS": 2},
    {"ACC_BITS": 48, "OUT_BITS": 16},
    *({"ROUNDING": r, "WRAP": w} for r in range(5) for w in (0, 1)),
    {"ACC_BITS": 48, "OUT_BITS": 16, "ROUNDING": 2, "WRAP": 1},
    {"OUT_BITS": 2, "ROUNDING": 4},
]


@pytest.mark.parametrize("params", RTL_PARAMS, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_lint(params):
    from hwvit import synth

    assert synth.lint(SOURCES, params) == []
    assert synth.iverilog(SOURCES, TOPLEVEL, params) == []
