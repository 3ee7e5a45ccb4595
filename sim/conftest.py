"""pytest side of the testbenches: simulators as a parameter, fixtures that run a testbench.

- ``run_set``: one vector set through its block's testbench (hwvit.simulate), bit-exact;
- ``run_unit``: a cocotb test of a block without vector sets (divu, isqrt), built and run with
  the same runner options; both return a ``SimResult`` read from the result the test wrote
  with ``tbutil.write_result``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from pathlib import Path

import pytest

from hwvit import simulate, toolchain

SIMULATORS = list(toolchain.SIMULATORS)


@pytest.fixture(params=SIMULATORS)
def simulator(request) -> str:
    """Each simulator in turn; a missing one fails the test with its install command."""
    toolchain.require(request.param)  # raises ToolMissing("... install it with: ...")
    return request.param


def _run_set(set_dir: Path, simulator: str, **kwargs) -> simulate.SimResult:
    result = simulate.run(set_dir, simulator, **kwargs)
    assert result.passed, result.message
    assert result.elements > 0, f"{set_dir}: testbench compared nothing"
    return result


@pytest.fixture
def run_set():
    """``run_set(set_dir, simulator, **simulate.run options)``: run, assert bit-exact, return the result."""
    return _run_set


def _run_unit(
    module: str,
    toplevel: str,
    sources: list[str],
    simulator: str,
    params: dict[str, int],
    testcase: str,
    extra_env: dict[str, str] | None = None,
) -> simulate.SimResult:
    from cocotb_tools.runner import get_runner

    toolchain.apply_sim_env()
    repo = toolchain.repo()
    tag = hashlib.sha1(json.dumps(params, sort_keys=True).encode()).hexdigest()[:10]
    build_dir = repo.root / "sim_build" / f"{toplevel}-{simulator}-{tag}"
    build_dir.mkdir(parents=True, exist_ok=True)
    # Same build as hwvit.simulate: X bugs become visible on Verilator too; warnings are the lint
    # tests' job (a width warning must not fail a simulation, e.g. of a mutant in hwvit mutate).
    build_args = ["-Wno-fatal", "--x-assign", "unique", "--x-initial", "unique"] if simulator == "verilator" else []
    runner = get_runner(simulator)
    with open(build_dir.parent / f".{toplevel}-{simulator}-{tag}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        runner.build(
            sources=[repo.root / s for s in sources],
            includes=[repo.rtl],
            hdl_toplevel=toplevel,
            parameters=params,
            build_args=build_args,
            build_dir=build_dir,
            timescale=("1ns", "1ps"),
            log_file=build_dir / "build.log",
        )
        result_file = build_dir / f"{testcase}.json"
        result_file.unlink(missing_ok=True)
        try:
            runner.test(
                test_module=module,
                hdl_toplevel=toplevel,
                hdl_toplevel_lang="verilog",
                testcase=testcase,
                build_dir=build_dir,
                test_dir=build_dir,
                parameters=params,
                extra_env={
                    "HWVIT_RESULT": str(result_file),
                    "HWVIT_SIMULATOR": simulator,
                    "PYTHONPATH": os.pathsep.join([str(repo.sim), str(repo.root)]),
                    **(extra_env or {}),
                },
                log_file=build_dir / "sim.log",
            )
        except SystemExit:  # the runner exits on a failed test under pytest: the result says why
            pass
    name = f"{toplevel} {params}"
    if not result_file.exists():
        return simulate.SimResult(
            toplevel, name, simulator, False, message=f"{testcase} wrote no result; see {build_dir / 'sim.log'}"
        )
    return simulate.SimResult(kind=toplevel, set_dir=name, simulator=simulator, **json.loads(result_file.read_text()))


@pytest.fixture
def run_unit():
    """``run_unit(module, toplevel, sources, simulator, params, testcase)``: build, run, return the result."""
    return _run_unit
