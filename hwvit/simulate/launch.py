"""Run a block's cocotb testbench on a vector set (the second job of hwvit.simulate).

``run`` builds the set's design (hwvit.simulate.build), runs the test with the set's directory in
``HWVIT_SET`` and reads back the JSON result the test writes to ``HWVIT_RESULT``
(hwvit.simulate.results). ``run_stress`` runs a set under every stress variant of its testbench.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hwvit import toolchain
from hwvit.simresult import SimResult
from hwvit.simulate.build import SIM_FLAGS, build, refuse_outside_domain, tb_module
from hwvit.simulate.results import no_simulator, read_result


def sim_pythonpath() -> str:
    """PYTHONPATH of a simulation: the testbenches, the hwvit package, then the caller's path."""
    parts = [str(toolchain.repo().sim), str(toolchain.package_root()), os.environ.get("PYTHONPATH", "")]
    return os.pathsep.join(p for p in parts if p)


# Seconds of wall time one simulation may run, where this variable is set (hwvit mutate sets it): a
# mutant that closes a combinational loop spins Icarus at one simulated instant, where no testbench's
# simulated-time limit (with_timeout) can fire.
WALL_LIMIT_ENV = "HWVIT_SIM_WALL_S"


def _descendants(pid: int) -> list[int]:
    """The processes below ``pid``, from /proc (empty where there is none)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # the process ended while we read
            continue
        fields = text.rsplit(")", 1)[-1].split()
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


@contextlib.contextmanager
def wall_limit(seconds: float) -> Iterator[threading.Event]:
    """Kill every process this one started (the simulator) once ``seconds`` of wall time have passed
    inside the block; the event says whether it fired. ``seconds`` <= 0: no limit."""
    fired = threading.Event()

    def kill() -> None:
        fired.set()
        for pid in _descendants(os.getpid()):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    timer = threading.Timer(seconds, kill) if seconds > 0 else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        yield fired
    finally:
        if timer is not None:
            timer.cancel()


def assertion_rewriting_env() -> dict[str, str]:
    """What the simulator's Python is told about pytest's assertion rewriting, which cocotb installs
    before it imports a testbench: only the testbenches' own modules are rewritten (cocotb's default
    pattern, ``*.py``, rewrites every module imported after it, numpy and hwvit included: an AST parse
    and compile of each on every run where bytecode is not written, PYTHONDONTWRITEBYTECODE, 1.2 of a
    small set's 2.9 s), and pytest's plugins are not loaded into the simulator (anyio, xdist: nothing
    a testbench uses). A value the caller's environment sets is kept."""
    wanted = {  # pytest splits the pattern list as shell words: a path with a space stays one
        "COCOTB_REWRITE_ASSERTION_FILES": shlex.quote(str(toolchain.repo().sim / "*.py")),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    return {name: value for name, value in wanted.items() if name not in os.environ}


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
    refuse_outside_domain(kind, vset)
    if getattr(tb, "GENERIC", False):  # a streaming kind without a testbench module: the stream bench
        return _run_generic(
            tb, kind, vset, set_dir, simulator, build_root, waves, seed, testcase, extra_env, test_dir, hdl_overrides
        )
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


def _run_generic(
    tb, kind, vset, set_dir, simulator, build_root, waves, seed, testcase, extra_env, test_dir, hdl_overrides=None
):
    """A set through the generic stream bench (sim/byotb.py) bound to the kind's reference ports."""
    from hwvit.blocks import get

    sources = get(kind).rtl_paths(toolchain.repo().root)
    return run_bind(
        sources,
        tb.TOPLEVEL,
        tb.BIND,
        set_dir,
        simulator,
        name=f"{kind}-stream",
        build_root=build_root,
        waves=waves,
        seed=seed,
        testcase=testcase,
        extra_env=extra_env,
        test_dir=test_dir,
        hdl_overrides=hdl_overrides,
    )


def run_bind(
    sources,
    top: str,
    bind,
    set_dir: Path,
    simulator: str,
    *,
    name: str,
    build_root: Path | None = None,
    waves: bool = False,
    seed: int = 1,
    testcase: str = "run_vectors",
    extra_env: dict[str, str] | None = None,
    test_dir: Path | None = None,
    hdl_overrides: dict[str, Any] | None = None,
) -> SimResult:
    """A set through the stream bench (sim/byotb.py) driving ``top`` through ``bind`` (hwvit.byo.bind):
    a team's block (hwvit.byo.run), or a kind's reference block with no testbench of its own.
    ``hdl_overrides`` replace parameters the bind file chose (e.g. a smaller MAX_C)."""
    import json

    from hwvit import vectors
    from hwvit.simulate.build import build_design

    set_dir = Path(set_dir).resolve()
    params = {**bind.hdl_parameters(vectors.read(set_dir).params), **(hdl_overrides or {})}
    build_dir = build_design(name, simulator, list(sources), top, params, build_root, waves)
    env = {"HWVIT_BIND": json.dumps(bind.plan(top)), **(extra_env or {})}
    return run_test(
        build_dir,
        simulator,
        set_dir,
        bind.kind,
        top,
        "byotb",
        params,
        testcase=testcase,
        seed=seed,
        waves=waves,
        extra_env=env,
        test_dir=test_dir,
    )


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
        **assertion_rewriting_env(),
    }
    env.update(extra_env or {})
    # The runner hands the simulator this process's sys.path as PYTHONPATH (it overrides ours).
    for path in reversed(sim_pythonpath().split(os.pathsep)[:2]):
        if path not in sys.path:
            sys.path.insert(0, path)
    flags = SIM_FLAGS[simulator]  # what hwvit adds to the runner's command lines (hwvit.simulate.build)
    runner = get_runner(simulator)
    # A runner that did not build has no source lists; Xcelium's test step reads them (for VHDL).
    for attr in ("_sources", "_vhdl_sources", "_verilog_sources"):
        if not hasattr(runner, attr):
            setattr(runner, attr, [])
    limit = float(os.environ.get(WALL_LIMIT_ENV) or 0)
    try:
        with wall_limit(limit) as fired:
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
                parameters=params if flags.parameters_at_test else None,
                log_file=run_dir / "sim.log",
                plusargs=[flags.wave_plusarg.format(run_dir=run_dir, toplevel=toplevel)]
                if waves and flags.wave_plusarg
                else [],
            )
    except (SystemExit, RuntimeError) as exc:
        if fired.is_set():
            raise RuntimeError(f"{simulator} killed after {limit:g} s of wall time (${WALL_LIMIT_ENV})") from exc
        if isinstance(exc, RuntimeError):
            raise
        # The runner exits when the simulator fails to start; under pytest also when the cocotb
        # test failed (a mismatch): the testbench's result file then says what failed.
        if not result_file.exists():
            return no_simulator(kind, set_dir, simulator, exc)
    return read_result(run_dir, kind, set_dir, simulator)


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
