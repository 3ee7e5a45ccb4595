"""Directed test of rtl/gemm.v: one simulation, back-to-back jobs of different shapes, no reset between.

Every other GEMM run is one job, or one shape repeated: m_i, k_i, n_i and the registers that hold
them never change inside a simulation. Here each job is a vector set with its own M, K, N and
a signedness; tb_gemm reloads its memories (load_i) and starts the next job right after the
previous one's done_o. Every job is checked as sim/test_gemm.py checks one: acc and y bit for
bit, every output beat once, done_o/busy_o/beats_o/cycles_o (test_gemm._Job.stream_checks).

The shapes flip every bit of the 7-bit m_i/k_i/n_i ports of a MAX = 64 build both ways
(63 -> 64 -> 1 -> 63 and 64 -> 63 -> 1 -> 64; a pytest test checks the sequence).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

JOBS_ENV = "HWVIT_GEMM_JOBS"  # os.pathsep-separated set directories run after HWVIT_SET
ARRAY = (4, 4)
MAX = 64
# (m, k, n, a_signed) per job.
JOBS = [(63, 64, 63, True), (64, 63, 64, False), (1, 1, 1, True), (63, 64, 63, False)]

try:
    import cocotb
    from test_gemm import _idle_inputs, _Job, _start

    import tbutil
except ImportError:  # pragma: no cover - cocotb is a dependency; keep pytest collection clear
    cocotb = None

if cocotb is not None:

    @cocotb.test()
    async def reshape_jobs(dut):
        from hwvit import vectors

        first = tbutil.load_set()
        more = [vectors.read(Path(d)) for d in os.environ.get(JOBS_ENV, "").split(os.pathsep) if d]
        _idle_inputs(dut)
        await _start(dut)
        checks, total = {}, 0
        for i, vset in enumerate([first, *more]):
            job = _Job(dut, vset)
            job.link_inputs()
            await job.load()
            cycles, timing = await job.run()
            acc, y = await job.results()
            checks[f"acc{i}"], checks[f"y{i}"] = (vset["acc"], acc), (vset["y"], y)
            for name, (e, g) in job.stream_checks(cycles, timing["done_seen"]).items():
                checks[f"{name}{i}"] = (np.array(e), np.array(g))
            total += cycles
        tbutil.finish(dut, first, checks, cycles=total, extra={"jobs": 1 + len(more)})


# ---------------------------------------------------------------------------- pytest side

pytestmark = pytest.mark.xdist_group("gemm")


def test_shapes_flip_every_port_bit():
    for field in range(3):
        seq = [job[field] for job in JOBS]
        rises = falls = 0
        for a, b in zip(seq, seq[1:]):
            rises |= ~a & b
            falls |= a & ~b
        assert rises & 0x7F == 0x7F and falls & 0x7F == 0x7F, ("mkn"[field], hex(rises), hex(falls))
        assert max(seq) <= MAX


def test_reshape_between_jobs(simulator, tmp_path, coverage_on, keep_coverage):
    from hwvit import simulate, vectors

    dirs = []
    for i, (m, k, n, signed) in enumerate(JOBS):
        rec = vectors.random_record("gemm", cases=m, seed=400 + i, k=k, n=n, a_signed=signed)
        dirs.append(Path(vectors.write_set(rec, tmp_path / f"job{i}")).resolve())
    params = {"ROWS": ARRAY[0], "COLS": ARRAY[1], "OUT_BITS": 8, "MAX_M": MAX, "MAX_K": MAX, "MAX_N": MAX}
    covered = coverage_on and simulator == "verilator"
    build_dir = simulate.build("gemm", simulator, params, coverage=covered)
    result = simulate.run_test(
        build_dir,
        simulator,
        dirs[0],
        "gemm",
        "tb_gemm",
        "test_gemm_reshape",
        params,
        testcase="reshape_jobs",
        extra_env={JOBS_ENV: os.pathsep.join(str(d) for d in dirs[1:])},
    )
    assert result.passed, result.message
    assert result.extra["jobs"] == len(JOBS)
    assert result.elements >= 2 * sum(m * n for m, _, n, _ in JOBS)  # acc and y of every job
    if covered:
        keep_coverage(Path(result.extra["coverage_dat"]), "gemm-reshape")
