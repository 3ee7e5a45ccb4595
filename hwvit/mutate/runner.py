"""Running mutants: each in its own copy of the tree, through the compile check and the block's suite."""

from __future__ import annotations

import concurrent.futures as cf
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hwvit import toolchain
from hwvit.mutate.generate import Mutant, dead_sink, key_of, load_equivalent, mutants
from hwvit.mutate.order import ORDER_ENV
from hwvit.mutate.suites import CORE, first_tests, has_suite, markers_of, own_file, source_of, suite_of
from hwvit.simulate.launch import WALL_LIMIT_ENV

# The tests of a block's suite a mutant run skips: the other simulator's copies and the static
# checks (they read rtl/ but test no behaviour: a width warning is not a wrong block). On Icarus
# also the Verilator-only timing tests.
SUITE_SKIP = "lint or synth"
ICARUS_SKIP = "back_to_back"
# Wall-clock seconds one simulation of a block's suite may take on a mutant (the core's digits image
# excepted: its suite's timeout alone bounds it). A mutant that closes a combinational loop (`en[k]`
# read back into itself) spins Icarus at one simulated instant, where the benches' simulated-time
# limits never fire: the limit fails it in a minute or two instead of at the suite's timeout (4x the
# baseline). It is 4x the unmutated suite's longest test (its build included), at least
# SIM_WALL_MIN; SIM_WALL_LIMIT where no baseline measured it.
SIM_WALL_LIMIT = 300
SIM_WALL_MIN = 60


def sim_wall_limit(longest: float | None) -> int:
    """The wall-clock limit of one simulation, from the unmutated suite's longest test (seconds)."""
    return SIM_WALL_LIMIT if not longest else max(SIM_WALL_MIN, int(4 * longest))


def _longest_test(stdout: str) -> float | None:
    """The longest test's seconds from pytest's ``--durations=1`` section (its first entry)."""
    m = re.search(r"slowest 1 durations =+\n([0-9.]+)s ", stdout)
    return float(m.group(1)) if m else None


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # killed | survived | equivalent | did-not-compile
    detail: str = ""
    seconds: float = 0.0
    longest: float | None = None  # the baseline's longest test, seconds (pytest --durations)


@dataclass
class Report:
    block: str
    simulator: str
    total: int  # mutants generated
    outcomes: list[Outcome] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)

    @property
    def score(self) -> float | None:
        killed, survived = self.count("killed"), self.count("survived")
        return killed / (killed + survived) if killed + survived else None

    def summary(self) -> str:
        score = "n/a" if self.score is None else f"{100 * self.score:.1f}%"
        return (
            f"{self.block}: {len(self.outcomes)} of {self.total} mutants run on {self.simulator}: "
            f"{self.count('killed')} killed, {self.count('survived')} survived, "
            f"{self.count('equivalent')} equivalent, {self.count('did-not-compile')} did not compile; "
            f"score {score}"
        )

    def to_dict(self) -> dict:
        return {
            "block": self.block,
            "simulator": self.simulator,
            "total": self.total,
            "score": self.score,
            "outcomes": [
                {**asdict(o.mutant), "status": o.status, "detail": o.detail, "seconds": round(o.seconds, 1)}
                for o in self.outcomes
            ],
        }


_COPY = ("hwvit", "rtl", "sim", "pyproject.toml")
_COPY_CORE = ("tests",)  # the core's suite lives there


def _tree_copy(root: Path, dest: Path, core: bool = False) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "sim_build", ".pytest_cache")
    for name in _COPY + (_COPY_CORE if core else ()):
        src = root / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)


# Seconds the compile check of one mutant may take: an unmutated block elaborates in about a
# second, but a loaded machine stretches that many times over, so the margin is wide.
COMPILE_TIMEOUT = 120
# Address space the compile check's tools may map: Icarus elaborates the whole core in under 20 MB,
# but an endless generate loop (`gi = gi + 0`) grows its elaborator by about 200 MB a second, to the
# kernel's OOM killer (20 GB on a 24 GB machine, two at a time under -j 2) long before the timeout.
COMPILE_MEMORY = 4 << 30


def _compiles(tree: Path, block: str, simulator: str) -> str | None:
    """None if Icarus (and Verilator, warnings aside, when it runs the suite) compiles the mutated
    block at its default parameters, else the first error: a build failure is no kill."""
    from hwvit import synth

    name, top = own_file(block)
    try:
        lines = synth.iverilog(
            [tree / "rtl" / name], top, rtl=tree / "rtl", timeout=COMPILE_TIMEOUT, memory=COMPILE_MEMORY
        )
        if any("bad_alloc" in ln for ln in lines):
            return f"iverilog ran out of {COMPILE_MEMORY >> 20} MiB elaborating (an endless generate loop?)"
        errors = [ln for ln in lines if "error" in ln.lower() or "ERROR" in ln]
        if not errors and simulator == toolchain.Simulator.VERILATOR:
            cmd = [toolchain.require("verilator"), "--lint-only", "-Wno-fatal", "-Wno-lint", "-Wno-style"]
            cmd += [f"-I{tree / 'rtl'}", "--top-module", top, str(tree / "rtl" / name)]
            out = toolchain.run_tool(cmd, env=toolchain.sim_env(), timeout=COMPILE_TIMEOUT, memory=COMPILE_MEMORY)
            errors = [ln for ln in out.stderr.splitlines() if ln.startswith("%Error")]
    except subprocess.TimeoutExpired as exc:
        # An endless generate loop (`gi = gi - 1`) hangs elaboration instead of failing it.
        tool = Path(str(exc.cmd[0])).name
        return f"{tool} did not finish elaborating in {COMPILE_TIMEOUT} s (an endless generate loop?)"
    return errors[0] if errors else None


def killer(outcome: Outcome) -> str | None:
    """The test that killed a mutant (``test_x[icarus-8]``), from its outcome's FAILED line."""
    m = re.match(r"FAILED \S+?::(\S+)", outcome.detail) if outcome.status == "killed" else None
    return m.group(1) if m and "," not in m.group(1) else None


def run_one(
    mutant: Mutant | None,
    block: str,
    simulator: str,
    root: Path,
    timeout: int,
    first: Sequence[str] = (),
    sim_limit: int = SIM_WALL_LIMIT,
) -> Outcome:
    """One mutant through the compile check and the suite (``None``: the unmutated baseline, which
    also measures its longest test); ``first``: tests to run before the block's own first tests
    (names as ``killer`` gives them); ``sim_limit``: wall-clock seconds one simulation may take."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"hwvit-mutant-{block}-") as tmp:
        tree = Path(tmp)
        _tree_copy(root, tree, core=block == CORE)
        if mutant is not None:
            target = tree / mutant.file
            target.write_text(mutant.apply(target.read_text()))
        error = _compiles(tree, block, simulator)
        if error is not None:
            return Outcome(mutant, "did-not-compile", error, time.monotonic() - t0)
        sink = dead_sink((root / mutant.file).read_text(), mutant) if mutant is not None else None
        if sink is not None:  # no suite can see it: equivalent by construction, no run needed
            return Outcome(mutant, "equivalent", f"dead code: wire {sink} is read nowhere", time.monotonic() - t0)
        skip = " or ".join([SUITE_SKIP, *(s for s in toolchain.SIMULATORS if s != simulator)])
        if simulator == toolchain.Simulator.ICARUS:
            skip += f" or {ICARUS_SKIP}"
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]  # no -n: one process
        if mutant is None:
            cmd += ["--durations=1", "--durations-min=0"]
        cmd += ["-m", markers_of(block)]
        suite, within = suite_of(block)
        select = f"not ({skip})" if within is None else f"({within}) and not ({skip})"
        cmd += ["-p", "hwvit.mutate.order", "-k", select, *suite]
        # Builds go to the copy's own cache (hwvit keys them by source path, so a mutant's builds
        # are never reused and would pile up in ~/.cache): nothing mutable is shared between
        # mutants but ccache, whose entries are keyed by content.
        ccache = os.environ.get("CCACHE_DIR") or str(
            Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ccache"
        )
        env = {**os.environ, "PYTHONPATH": str(tree), "XDG_CACHE_HOME": str(tree / ".cache"), "CCACHE_DIR": ccache}
        # The sets a suite makes take their GEMMs on the int64 reference: with the copy's empty cache
        # the backend probe would run in every mutant, and its cache key imports torch (a quarter
        # of a gemm mutant's time). Exact either way; the sets are small.
        env["HWVIT_GEMM"] = "int64"
        if block != CORE and mutant is not None:
            env[WALL_LIMIT_ENV] = str(sim_limit)
        order = list(dict.fromkeys([*first, *first_tests().get(block, [])]))
        env = toolchain.sim_env({**env, ORDER_ENV: ",".join(order)})
        # Own session: on a timeout the whole group goes, the simulator pytest started included
        # (killing pytest alone left a hung simulator running on the shared cores).
        try:
            out = toolchain.run_tool(cmd, timeout=timeout, cwd=tree, env=env)
        except subprocess.TimeoutExpired:
            return Outcome(mutant, "killed", f"suite timed out after {timeout} s", time.monotonic() - t0)
        tail = (out.stdout.strip().splitlines() or [""])[-1]
        if out.returncode == 0:
            return Outcome(mutant, "survived", tail, time.monotonic() - t0, _longest_test(out.stdout))
        if out.returncode == 5:  # no tests collected: the suite itself is wrong, not the mutant
            raise RuntimeError(f"{' '.join(suite)}: no tests selected for {block}")
        failed = [ln for ln in out.stdout.splitlines() if ln.startswith("FAILED")]
        return Outcome(mutant, "killed", (failed[0] if failed else tail)[:300], time.monotonic() - t0)


def run(
    block: str,
    *,
    simulator: str = "verilator",
    jobs: int = 1,
    sample: int | None = None,
    seed: int = 1,
    timeout: int | None = None,
    on_outcome: Callable[[Outcome], None] | None = None,
    lines: set[int] | None = None,
    source: str | None = None,
) -> Report:
    """Generate the mutants of rtl/<block>.v (or of ``source``, one of the block's PARTS), run a
    sample of them (of those on ``lines``) through the block's suite, and report."""
    root = toolchain.repo().root
    if not has_suite(block):
        raise ValueError(f"no rtl/{own_file(block)[0]} with its suite {' '.join(suite_of(block)[0])}")
    rel = source_of(block, source)
    toolchain.require(simulator)
    toolchain.require("icarus")  # the compile check
    every = mutants((root / rel).read_text(), rel)
    if lines:  # re-running the mutants of a few lines, e.g. after a test was added to kill them
        every = [mu for mu in every if mu.line in lines]
    chosen = every if sample is None or sample >= len(every) else random.Random(seed).sample(every, sample)
    chosen = sorted(chosen, key=lambda mu: (mu.line, mu.col))
    equivalent = load_equivalent(root)
    report = Report(block, simulator, len(every))
    base = run_one(None, block, simulator, root, timeout or 1800)  # a failing suite would "kill" every mutant
    if base.status != "survived":
        raise RuntimeError(f"{' '.join(suite_of(block)[0])} fails on the unmutated RTL: {base.detail}")
    # A mutant that hangs a testbench without a time limit of its own would cost the suite's
    # whole timeout: by default 4x the unmutated suite's time (a loaded machine slows both alike).
    timeout = timeout or max(120, int(4 * base.seconds))
    todo = []
    for mutant in chosen:
        reason = equivalent.get(key_of(mutant))
        if reason is not None:
            outcome = Outcome(mutant, "equivalent", reason)
            report.outcomes.append(outcome)
            if on_outcome:
                on_outcome(outcome)
        else:
            todo.append(mutant)
    limit = sim_wall_limit(base.longest)
    with cf.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(run_one, mu, block, simulator, root, timeout, (), limit) for mu in todo]
        for fut in cf.as_completed(futures):
            outcome = fut.result()
            report.outcomes.append(outcome)
            if on_outcome:
                on_outcome(outcome)
    report.outcomes.sort(key=lambda o: (o.mutant.line, o.mutant.col, o.mutant.operator))
    return report
