"""pytest side of the testbenches: simulators as a parameter, fixtures that run a testbench.

- ``run_set``: one vector set through its block's testbench (hwvit.simulate), bit-exact;
- ``run_unit``: a cocotb test of a block without vector sets (isqrt at 64 bits), built and run with
  the same runner options; both return a ``SimResult`` read from the result the test wrote
  with ``tbutil.write_result``.

Coverage of the testbenches (``make coverage``): when ``HWVIT_COVERAGE_DIR`` names a directory,
every Verilator run of these testbenches is a coverage build (``--coverage-line
--coverage-toggle``; its own build directory and cache key, so plain builds are untouched) and
each run's ``coverage.dat`` is copied there under a unique name, for ``hwvit sim --coverage
--coverage-merge DIR`` to merge with the vector sets' runs. Unset (``make test``), nothing changes.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as tests/conftest.py says, before any import loads OpenMP

import fcntl
import hashlib
import json
import shutil
import uuid
from pathlib import Path

import pytest

from hwvit import coverage, simulate, toolchain
from hwvit.atomic import atomic_file
from hwvit.simulate import launch

SIMULATORS = list(toolchain.SIMULATORS)
COVERAGE_ENV = "HWVIT_COVERAGE_DIR"


def coverage_dir() -> Path | None:
    """The directory named by HWVIT_COVERAGE_DIR (created), or None when coverage is off."""
    name = os.environ.get(COVERAGE_ENV)
    if not name:
        return None
    path = Path(name).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def keep_coverage(dat: Path, label: str) -> None:
    """Copy one run's coverage.dat into the coverage directory (unique name: runs never overwrite)."""
    dest = coverage_dir()
    if dest is None or not dat.exists():  # a run that died early writes none; its test says why
        return
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in label)[:60]
    with atomic_file(dest / f"{safe}-{uuid.uuid4().hex[:12]}.dat") as tmp:
        shutil.copyfile(dat, tmp)


def _coverage_run(original):
    """simulate.run under HWVIT_COVERAGE_DIR: Verilator runs are coverage builds, their .dat kept."""

    def run(set_dir, simulator, **kwargs):
        # A caller that asks for coverage itself (hwvit sim --coverage) keeps its own report.
        if simulator != "verilator" or kwargs.get("coverage"):
            return original(set_dir, simulator, **kwargs)
        result = original(set_dir, simulator, **{**kwargs, "coverage": True})
        if "coverage_dat" in result.extra:
            keep_coverage(Path(result.extra["coverage_dat"]), f"{result.kind}-{kwargs.get('testcase', 'run')}")
        return result

    return run


def pytest_configure(config) -> None:
    # The testbench modules call simulate.run (directly or through run_set): wrapping it here
    # covers every one of them, including the reset and stall tests, without touching them.
    if coverage_dir() is not None:
        # both names: hwvit.simulate's (the fixtures) and launch's own (run_stress, batch runs)
        launch.run = simulate.run = _coverage_run(launch.run)


@pytest.fixture(params=SIMULATORS)
def simulator(request) -> str:
    """Each simulator in turn; a missing one fails the test with its install command."""
    toolchain.require(request.param)  # raises ToolMissing("... install it with: ...")
    return request.param


@pytest.fixture(params=["icarus", pytest.param("verilator", marks=pytest.mark.variants)])
def variant_simulator(request) -> str:
    """The arithmetic variants' matrix: Icarus in make test, Verilator too in make test-variants
    (marker ``variants``: a Verilator build per variant costs minutes make test has not got)."""
    toolchain.require(request.param)
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


# The testbench modules (sim/test_<kind>.py) reach hwvit.simulate only through these fixtures:
# hwvit.simulate loads them, so their importing it would close an import circle
# (tests/test_import_graph.py).
@pytest.fixture
def sim_run():
    """``hwvit.simulate.run`` as is: the result, pass or fail (a test that expects a failure)."""
    return lambda *args, **kwargs: simulate.run(*args, **kwargs)  # looked up per call: coverage wraps it


def _mismatch_reported(kind: str, tmp_path, simulator: str, name: str = "y", index: int = 41, cases: int = 64) -> None:
    """A corrupted expected ``name[index]`` of a random set fails with block, set, index,
    expected and got."""
    from hwvit import vectors

    from streamtb import corrupt

    record = vectors.random_record(kind, cases, seed=3)
    bad = corrupt(record, name, index)
    set_dir = vectors.write_set(bad, tmp_path / "corrupt")
    result = simulate.run(set_dir, simulator)
    want, got = int(bad.tensors[name].data[index]), int(record.tensors[name].data[index])
    assert not result.passed
    assert result.mismatches == 1
    first = {k: result.first[k] for k in ("tensor", "index", "expected", "got", "vector")}
    assert first == {"tensor": name, "index": index, "expected": want, "got": got, "vector": index}
    rerun = f"hwvit sim {set_dir} --simulator {simulator} --vector {index}"
    assert result.first["rerun"] == rerun and result.first["time_ns"] > 0
    for text in (kind, "random", str(set_dir), f"{name}[{index}]", f"expected {want}", f"got {got}", rerun):
        assert text in result.message, (text, result.message)


@pytest.fixture
def mismatch_reported():
    """``mismatch_reported(kind, tmp_path, simulator, name="y", index=41, cases=64)``."""
    return _mismatch_reported


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
    # Same build as hwvit.simulate: X bugs become visible on Verilator too; warnings are the lint
    # tests' job (a width warning must not fail a simulation, e.g. of a mutant in hwvit mutate).
    build_args = ["-Wno-fatal", "--x-assign", "unique", "--x-initial", "unique"] if simulator == "verilator" else []
    covered = simulator == "verilator" and coverage_dir() is not None
    if covered:
        build_args += coverage.build_args(simulator)
    key = {"p": params, "a": build_args} if covered else params  # plain builds keep their key
    tag = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]
    build_dir = repo.root / "sim_build" / f"{toplevel}-{simulator}-{tag}"
    build_dir.mkdir(parents=True, exist_ok=True)
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
        (build_dir / "coverage.dat").unlink(missing_ok=True)  # a coverage build writes it at the end
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
                    **launch.assertion_rewriting_env(),
                    **(extra_env or {}),
                },
                log_file=build_dir / "sim.log",
            )
        except SystemExit:  # the runner exits on a failed test under pytest: the result says why
            pass
        if covered:
            keep_coverage(build_dir / "coverage.dat", f"{toplevel}-{testcase}")
    name = f"{toplevel} {params}"
    if not result_file.exists():
        return simulate.SimResult(
            toplevel, name, simulator, False, message=f"{testcase} wrote no result; see {build_dir / 'sim.log'}"
        )
    return simulate.SimResult(kind=toplevel, set_dir=name, simulator=simulator, **json.loads(result_file.read_text()))


@pytest.fixture
def coverage_on() -> bool:
    """True under HWVIT_COVERAGE_DIR: a test that builds by itself makes a coverage build."""
    return coverage_dir() is not None


@pytest.fixture(name="keep_coverage")
def keep_coverage_fixture():
    """``keep_coverage(dat, label)``: keep a run's coverage.dat in HWVIT_COVERAGE_DIR."""
    return keep_coverage


@pytest.fixture
def run_unit():
    """``run_unit(module, toplevel, sources, simulator, params, testcase)``: build, run, return the result."""
    return _run_unit
