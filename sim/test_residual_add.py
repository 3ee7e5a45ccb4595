"""Testbench of rtl/residual_add.v (twin of hwvit.ops.residual_add): cocotb tests and pytest drivers.

cocotb side (run inside the simulator by hwvit.simulate.run on the set in HWVIT_SET): the set's
mult_a, mult_b and shift go to the configuration ports, then
- ``run_vectors``: stream (a, b) beats with random stalls on both sides (HWVIT_STALL) and check
  every y bit for bit;
- ``reset_midstream``: reset with beats in flight, then stream the whole set again.

pytest side: random sets of 1000 cases for OUT_BITS 8 and 6 on both simulators (the multipliers
and shift are ports, so sets with different ones share a build), the reset test, and a test
that a wrong expected value is reported (the checker can fail).
"""

from __future__ import annotations

import cocotb
import pytest

from hwvit import blocks, ops
from hwvit.blocks.residual_add import ROUNDINGS, ZEROS

import streamtb
import tbutil

unstalled_cycles = streamtb.unstalled_cycles  # the cycle check of hwvit sim --stress
TOPLEVEL = "residual_add"
SOURCES = list(blocks.get("residual_add").rtl)  # the kind's Verilog (hwvit/blocks/residual_add.py)
KIND = "residual_add"


def hdl_parameters(vset) -> dict[str, int]:
    """Toplevel parameters for a set: 8-bit inputs (ACT_BITS) and the output width; an imported
    model's rounding and zero points (none for hwvit's own add: the build of a plain set is unchanged)."""
    p = vset.params
    rounding = p.get("rounding", "half_up")
    extra = {"ROUNDING": ROUNDINGS[rounding]} if rounding != "half_up" else {}
    if any(p.get(key, 0) for key in ZEROS):
        extra["ZERO_POINTS"] = 1
    return {"IN_BITS": 8, "OUT_BITS": int(p["out_bits"]), **extra}


# ---------------------------------------------------------------------------- cocotb side


def _stream(dut, vset) -> streamtb.Stream:
    dut.in_valid_i.value = 0  # defined before the clock starts: Icarus would sample X
    dut.out_ready_i.value = 0
    dut.cfg_mult_a_i.value = int(vset.params["mult_a"])
    dut.cfg_mult_b_i.value = int(vset.params["mult_b"])
    dut.cfg_shift_i.value = int(vset.params["shift"])
    out_mask = (1 << int(vset.params["out_bits"])) - 1
    dut.cfg_zero_a_i.value = int(vset.params.get("zero_a", 0)) & 0xFF  # two's complement
    dut.cfg_zero_b_i.value = int(vset.params.get("zero_b", 0)) & 0xFF
    dut.cfg_zero_out_i.value = int(vset.params.get("zero_out", 0)) & out_mask
    return streamtb.Stream(dut, [dut.in_a_i, dut.in_b_i])


def _words(vset) -> list[tuple[int, int]]:
    return list(zip(vset["a"].reshape(-1).tolist(), vset["b"].reshape(-1).tolist()))


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
    stream = _stream(dut, vset)
    await tbutil.start(dut)
    await streamtb.run_stream(stream, vset, _words(vset), vset["y"].reshape(-1))


@cocotb.test()
async def reset_midstream(dut):
    vset = tbutil.load_set()
    stream = _stream(dut, vset)
    await tbutil.start(dut)
    await streamtb.run_reset_midstream(stream, vset, _words(vset), vset["y"].reshape(-1), RESET_STATES)


# ---------------------------------------------------------------------------- pytest side


def _set(tmp_path, cases: int, seed: int, **params):
    from hwvit import vectors

    record = vectors.random_record(KIND, cases, seed, **params)
    return vectors.write_set(record, tmp_path / f"{KIND}-{seed}")


@pytest.mark.xdist_group(KIND)
@pytest.mark.parametrize("out_bits, seed", [(8, 1), (8, 2), (6, 3)])
def test_random(tmp_path, simulator, out_bits, seed, run_set):
    # Each seed draws its own input scales, so (mult_a, mult_b, shift) differ between sets.
    result = run_set(_set(tmp_path, 1000, seed=seed, out_bits=out_bits), simulator)
    assert result.elements == 1000
    assert result.cycles >= 1000  # one beat per cycle at most


@pytest.mark.xdist_group(KIND)
@pytest.mark.parametrize(
    "mult_a, mult_b, shift",
    [
        ((1 << 31) - 1, 1 << 30, 1),  # shift 1: every sum saturates except those near 0
        ((1 << 31) - 1, (1 << 31) - 1, 62),  # the largest shift: every output rounds to 0
        (0, (1 << 31) - 1, 37),  # a zero multiplier: y depends on b alone
    ],
)
def test_config_extremes(tmp_path, simulator, mult_a, mult_b, shift, run_set):
    set_dir = _set(tmp_path, 200, seed=4, mult_a=mult_a, mult_b=mult_b, shift=shift)
    assert run_set(set_dir, simulator).elements == 200


@pytest.mark.xdist_group(KIND)
@pytest.mark.parametrize(
    "rounding, zeros",
    [
        ("half_even", (-128, 127, -128)),  # zero points at both rails: every difference and the output's reach
        pytest.param("half_even", (5, -3, 0), marks=pytest.mark.variants),
        pytest.param("half_up", (0, 0, 127), marks=pytest.mark.variants),
        pytest.param("floor", (-1, 0, 3), marks=pytest.mark.variants),
        ("onnxruntime_u8", (-128, 127, -100)),  # onnxruntime's QLinearAdd, a uint8 file's codes
        ("onnxruntime_u8", (0, -40, 90)),
        ("onnxruntime", (5, -3, 0)),
        ("onnxruntime", (-50, 20, 7)),
    ],
)
def test_zero_points(tmp_path, variant_simulator, rounding, zeros, run_set):
    _zero_points(tmp_path, variant_simulator, rounding, zeros, run_set, {})


@pytest.mark.xdist_group(KIND)
@pytest.mark.parametrize(
    "rounding, mults, zeros",
    [
        ("onnxruntime_u8", (7, (3 << 24) | 5, 6), (-7, -20, 0)),  # ratios 7/64 and 40/64: ties of both signs
        ("onnxruntime", (3, (1 << 24) | 1, 3), (-3, -90, -5)),  # 3/8 and 2/8, a negative zero point of a
        # r_a = 1 + 2^-23, r_b = 1/2, Z_b = 1: u = A + A 2^-23 + (B - 1)/2 lies just past a half for
        # every even B; binary32 keeps 15 or 16 bits below the point, so it drops A 2^-23 below
        # A = 64 or 128 (the half, then even), holds a tie at them and rounds up past them
        ("onnxruntime", (2**23 + 1, 2**22, 23), (0, 1, 0)),
        ("onnxruntime_u8", (2**23 + 1, 2**22, 23), (-128, -127, -128)),
        # r_a = 1 - 3 2^-23: binary32 ties whose kept significand ends in 01 or 10 (searched for)
        ("onnxruntime", (2**23 - 3, 2**22, 23), (2, 4, -4)),
    ],
)
def test_qlinear_add_small_shifts(tmp_path, variant_simulator, rounding, mults, zeros, run_set):
    """onnxruntime's QLinearAdd at ratios of a few bits (multiplier = k 2^24 + m: m moved up k bits):
    binary32 holds every value exactly, so its adds round only at the output, on exact halves of both
    signs; bit-exact on the ROUNDING 5 / 6 build."""
    opts = dict(zip(("mult_a", "mult_b", "shift"), mults))
    _zero_points(tmp_path, variant_simulator, rounding, zeros, run_set, opts, cases=3000)


def _zero_points(tmp_path, variant_simulator, rounding, zeros, run_set, opts, cases=300):
    """An imported model's add: zero points subtracted from a and b, the output's added after the
    rounding (half to even for ONNX), bit-exact (the sets' edge rows put sums on every tie); Icarus
    and the widest case in make test, the rest and Verilator in make test-variants (and every set of
    the imported models on both in make test-onnx)."""
    from hwvit import vectors

    record = vectors.random_record(
        KIND, cases, 9, rounding=rounding, **dict(zip(("zero_a", "zero_b", "zero_out"), zeros)), **opts
    )
    set_dir = vectors.write_set(record, tmp_path / "zp")
    assert blocks.get(KIND).verify(vectors.read(set_dir)) is None
    if rounding.startswith("onnxruntime") and not opts:  # its first rows: where binary32 gives another integer
        vset = vectors.read(set_dir)
        p = vset.params
        exact = ops.residual_add_zp(vset["a"], vset["b"], p["mult_a"], p["mult_b"], p["shift"], 8, "half_even", *zeros)
        assert (exact != vset["y"]).any()
    assert run_set(set_dir, variant_simulator).elements == cases


@pytest.mark.xdist_group(KIND)
def test_full_throughput(tmp_path, simulator, run_set):
    streamtb.check_full_throughput(run_set, _set(tmp_path, 500, seed=5), simulator, 500)


@pytest.mark.xdist_group(KIND)
def test_reset_midstream(tmp_path, simulator, run_set):
    streamtb.check_reset_midstream(run_set, _set(tmp_path, 200, seed=11), simulator, 200, RESET_STATES)


@pytest.mark.xdist_group(KIND)
def test_mismatch_is_reported(tmp_path, simulator, mismatch_reported):
    mismatch_reported(KIND, tmp_path, simulator)


RTL_PARAMS = [
    {"OUT_BITS": 8},
    {"OUT_BITS": 6},
    {"OUT_BITS": 16},
    {"OUT_BITS": 2},
    {"IN_BITS": 16, "OUT_BITS": 16},
    {"OUT_BITS": 8, "ROUNDING": 2, "ZERO_POINTS": 1},
    {"OUT_BITS": 16, "ZERO_POINTS": 1},
    {"OUT_BITS": 8, "ROUNDING": 5},
    {"OUT_BITS": 8, "ROUNDING": 6, "ZERO_POINTS": 1},
]


@pytest.mark.parametrize("params", RTL_PARAMS, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_lint(params):
    from hwvit import synth

    assert synth.lint(SOURCES, params) == []
    assert synth.iverilog(SOURCES, TOPLEVEL, params) == []
