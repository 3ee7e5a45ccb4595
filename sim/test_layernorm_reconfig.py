"""Directed test of rtl/layernorm.v: one simulation, several jobs, the configuration changed between them.

Every other LayerNorm run holds cfg_c_i, cfg_eps_i, cfg_mult_i and cfg_shift_i for a whole
simulation, as a model layer does; between layers a core changes them with the block idle and
no reset. This test does that: each job is a vector set with its own C, eps_int, multiplier and
shift; the block is reconfigured and gamma/beta reloaded between jobs, then every job's outputs
are compared bit for bit with its set's ``y`` (from hwvit.ops).

The values are chosen so that every configuration bit changes both ways over the sequence
(alternating-bit patterns A -> B -> A, within the contract: eps_int <= 2^61, multiplier 0 or in
[2^30, 2^31 - 1], shift <= 62) and C runs over 63 -> 64 -> 1 -> 42 -> 21 (every bit of the 7-bit
C port of a MAX_C = 64 build both ways): the coverage of the configuration path that one-layer
runs cannot give (docs/verification.md, Coverage).
"""

from __future__ import annotations

import os
from pathlib import Path

import cocotb
import numpy as np
import pytest
from cocotb.triggers import RisingEdge
from test_layernorm import configure, load_params, rngs, stream

import tbutil

JOBS_ENV = "HWVIT_LN_JOBS"  # os.pathsep-separated set directories streamed after HWVIT_SET
MAX_C = 64
E_EVEN = sum(1 << b for b in range(0, 61, 2))  # eps bits 0, 2, ..., 60
E_ODD = sum(1 << b for b in range(1, 60, 2))  # eps bits 1, 3, ..., 59
M_A = (1 << 30) | sum(1 << b for b in range(1, 30, 2))  # 0x6AAAAAAA: bit 30 and the odd bits
M_B = (1 << 30) | sum(1 << b for b in range(0, 30, 2))  # 0x55555555: bit 30 and the even bits
# (c, eps_int, multiplier, shift): consecutive jobs flip every bit of each field one way or back.
JOBS = [
    (63, E_EVEN, M_A, 42),
    (64, E_ODD, M_B, 21),
    (1, 1 << 61, 0, 42),
    (42, E_EVEN, M_B, 21),
    (21, 0, M_A, 42),
]


@cocotb.test()
async def reconfig_jobs(dut):
    from hwvit import vectors

    first = tbutil.load_set()
    sets = [first] + [vectors.read(Path(d)) for d in os.environ.get(JOBS_ENV, "").split(os.pathsep) if d]
    configure(dut, first)
    await tbutil.start(dut)
    rand_in, rand_out = rngs()
    checks, cycles = {}, 0
    for i, vset in enumerate(sets):
        # stream() returns once every output of the previous job is out: the block is idle here.
        configure(dut, vset)
        await RisingEdge(dut.clk_i)
        await load_params(dut, vset)
        got, n = await stream(dut, vset, rand_in, rand_out, tbutil.stall_probability())
        checks.update({f"{name}{i}": pair for name, pair in got.items()})
        cycles += n
    tbutil.finish(dut, first, checks, cycles=cycles, extra={"jobs": len(sets)})


# ---------------------------------------------------------------------------------------------
# pytest side

pytestmark = pytest.mark.xdist_group("layernorm")


def test_jobs_flip_every_configuration_bit():
    """The sequence above really changes every bit both ways (what the test is for)."""
    widths = {"c": 7, "eps": 62, "mult": 31, "shift": 6}
    for field, width in enumerate(widths.values()):
        seq = [job[field] for job in JOBS]
        rises = falls = 0
        for a, b in zip(seq, seq[1:]):
            rises |= ~a & b
            falls |= a & ~b
        full = (1 << width) - 1
        assert rises & full == full and falls & full == full, (list(widths)[field], hex(rises), hex(falls))
    assert max(job[0] for job in JOBS) == MAX_C and all(0 <= job[1] <= 1 << 61 for job in JOBS)


def test_reconfig_between_jobs(simulator, tmp_path, coverage_on, keep_coverage):
    from hwvit import simulate, vectors

    dirs = []
    for i, (c, eps, mult, shift) in enumerate(JOBS):
        rec = vectors.random_record(
            "layernorm", cases=6, seed=300 + i, c=c, out_bits=8, eps_int=eps, multiplier=mult, shift=shift
        )
        dirs.append(vectors.write_set(rec, tmp_path / f"job{i}"))
    params = {"MAX_C": MAX_C, "OUT_BITS": 8}
    covered = coverage_on and simulator == "verilator"
    build_dir = simulate.build("layernorm", simulator, params, coverage=covered)
    result = simulate.run_test(
        build_dir,
        simulator,
        Path(dirs[0]).resolve(),
        "layernorm",
        "layernorm",
        "test_layernorm_reconfig",
        params,
        testcase="reconfig_jobs",
        extra_env={JOBS_ENV: os.pathsep.join(str(Path(d).resolve()) for d in dirs[1:])},
    )
    assert result.passed, result.message
    assert result.extra["jobs"] == len(JOBS)
    assert result.elements == 6 * sum(job[0] for job in JOBS)
    if covered:
        keep_coverage(Path(result.extra["coverage_dat"]), "layernorm-reconfig")
    outputs = [np.asarray(vectors.read(Path(d))["y"]) for d in dirs]
    assert len({o.tobytes() for o in outputs}) == len(JOBS)  # the jobs' outputs differ: a real check
