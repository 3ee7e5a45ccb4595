"""Mutation testing of the RTL: would the testbenches notice a wrong block?

``mutants(text)`` makes single-point source mutants of one Verilog file: operators swapped,
comparisons flipped, constants moved by one, conditions inverted, ready/valid stuck.
``run(block, ...)`` applies each (a sample of them) to a copy of the tree in a temporary
directory, rejects those Icarus (or Verilator) cannot compile, runs the block's pytest suite
(``sim/test_<block>.py`` on one simulator, cheap tests first, stopping at the first failure) and
sorts the mutant into killed (a test failed or timed out), survived, equivalent (listed with a
reason in ``sim/mutants_equivalent.yaml``) or did-not-compile. The score is killed / (killed +
survived).
"""

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
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hwvit import toolchain
from hwvit.textfiles import read_yaml

EQUIVALENT_FILE = "sim/mutants_equivalent.yaml"

# The tests of a block's suite a mutant run skips: the other simulator's copies and the static
# checks (they read rtl/ but test no behaviour: a width warning is not a wrong block). On Icarus
# also the Verilator-only timing tests.
SUITE_SKIP = "lint or synth"
ICARUS_SKIP = "back_to_back"

# Tests a mutant runs first, by name prefix (the rest follow in file order): pytest -x stops at
# the first failure, so a killed mutant costs one cheap test that pushes real data through the
# block (a mid-stream reset runs the set twice) instead of the whole suite. Survivors still run
# every test. Seconds are Verilator's on the 2-core EPYC, build included.
ORDER_ENV = "HWVIT_MUTATE_FIRST"


def __getattr__(name: str):
    """``FIRST`` (kind -> the tests a mutant runs first, by name prefix: pytest -x stops at the first
    failure, so a killed mutant costs one cheap test that pushes real data through the block instead
    of the whole suite; survivors still run every test) and ``PARTS`` (kind -> other source files it
    instantiates, which `--source` may mutate instead of rtl/<block>.v): each kind's module
    declares them (``mutate_first``, ``mutate_parts``)."""
    from hwvit import blocks

    if name == "FIRST":
        return {k: list(v.mutate_first) for k, v in blocks.kinds().items() if v.mutate_first}
    if name == "PARTS":
        return {k: v.mutate_parts for k, v in blocks.kinds().items() if v.mutate_parts}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def source_of(block: str, source: str | None) -> str:
    """The file a run mutates, as ``rtl/<name>``: rtl/<block>.v, or ``source`` if it is one of the
    block's PARTS (ValueError otherwise, naming the choices)."""
    if source is None or source in (f"{block}.v", f"rtl/{block}.v"):
        return f"rtl/{block}.v"
    name = source.removeprefix("rtl/")
    from hwvit import blocks

    parts = blocks.get(block).mutate_parts if block in blocks.kinds() else ()
    if name not in parts:
        choices = ", ".join((f"{block}.v", *parts))
        raise ValueError(f"--source {source}: block {block} is built from {choices}")
    return f"rtl/{name}"


def pytest_collection_modifyitems(config, items):  # pytest hook: `pytest -p hwvit.mutate`
    """Run the tests named (by prefix) in $HWVIT_MUTATE_FIRST first, in that order."""
    first = [p for p in os.environ.get(ORDER_ENV, "").split(",") if p]

    def rank(item) -> int:
        name = item.name.split("[")[0]
        return next((i for i, p in enumerate(first) if name.startswith(p)), len(first))

    items.sort(key=rank)  # stable: file order within a rank


@dataclass(frozen=True)
class Mutant:
    file: str  # relative to the repository root
    line: int  # 1-based
    col: int  # 0-based offset of the change in the line
    operator: str  # what kind of change
    before: str  # the source line, stripped
    after: str  # the mutated line, stripped
    start: int  # character offset of the change in the file
    old: str  # replaced text
    new: str  # replacement

    def apply(self, text: str) -> str:
        assert text[self.start : self.start + len(self.old)] == self.old
        return text[: self.start] + self.new + text[self.start + len(self.old) :]

    @property
    def key(self) -> str:
        return f"{self.file}:{self.line}:{self.col}:{self.operator}"


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # killed | survived | equivalent | did-not-compile
    detail: str = ""
    seconds: float = 0.0


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


# ---------------------------------------------------------------------------- generating mutants

# (operator name, pattern, replacement function). Patterns run over code with comments,
# strings and declarations blanked out, so offsets stay those of the original text.
_SWAPS = {
    "+": "-",
    "-": "+",
    "&&": "||",
    "||": "&&",
    "&": "|",
    "|": "&",
    "==": "!=",
    "!=": "==",
    ">=": ">",
    ">": ">=",
    "<": "<=",
}
_RULES: list[tuple[str, re.Pattern, Callable[[re.Match], str]]] = [
    ("arith", re.compile(r"(?<=[\w)\]} ])\s*([+-])(?![+:=-])\s*(?=[\w({$'])"), lambda m: _SWAPS[m.group(1)]),
    ("logic", re.compile(r"(&&|\|\|)"), lambda m: _SWAPS[m.group(1)]),
    (
        "bitwise",
        re.compile(r"(?<=[\w)\]} ])\s*(?<![&|~^])([&|])(?![&|=])\s*(?=[\w(~{!'])"),
        lambda m: _SWAPS[m.group(1)],
    ),
    ("compare", re.compile(r"(==|!=|>=|(?<![>=-])>(?![>=])|(?<![<])<(?![<=]))"), lambda m: _SWAPS[m.group(1)]),
    ("const", re.compile(r"\b(\d+)'([bdh])([0-9a-fA-F_]+)\b"), None),
    ("const", re.compile(r"(?<![\w'.$])(\d+)(?![\w'.])"), None),
]
_SKIP_LINE = re.compile(r"^\s*(parameter|localparam|input|output|module|`|\$display|\$finish)")
_IF = re.compile(r"\bif\s*\(")
_STUCK = re.compile(r"^\s*(assign\s+)?(\w*(?:valid|ready)\w*)\s*(=|<=)\s*([^;]+);", re.M)


def _blank(text: str) -> str:
    """``text`` with comments, strings and initial blocks (parameter checks) replaced by spaces."""
    out = re.sub(r"//[^\n]*|/\*.*?\*/|\"[^\"\n]*\"", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    return re.sub(r"\binitial\s+begin.*?\n  end\n", lambda m: re.sub(r"[^\n]", " ", m.group(0)), out, flags=re.S)


def _const_change(m: re.Match, delta: int) -> str | None:
    if m.re.groups == 3:  # sized literal: value +- 1 within its width (1'b0 <-> 1'b1)
        width, base, digits = int(m.group(1)), m.group(2), m.group(3).replace("_", "")
        value = int(digits, {"b": 2, "d": 10, "h": 16}[base]) + delta
        if not 0 <= value < 1 << width:
            return None
        body = {"b": format(value, "b"), "d": str(value), "h": format(value, "x")}[base]
        return f"{width}'{base}{body}"
    value = int(m.group(1)) + delta
    return str(value) if value >= 0 else None


def mutants(text: str, file: str) -> list[Mutant]:
    """Every single-point mutant of one Verilog source."""
    code = _blank(text)
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
    lines = text.split("\n")
    out: list[Mutant] = []

    def add(operator: str, start: int, old: str, new: str) -> None:
        line = max(i for i, s in enumerate(starts) if s <= start)
        col = start - starts[line]
        before = lines[line]
        after = before[:col] + new + before[col + len(old) :]
        if "\n" not in old and before != after:
            out.append(Mutant(file, line + 1, col, operator, before.strip(), after.strip(), start, old, new))

    for index, (line_text, base) in enumerate(zip(code.split("\n"), starts)):
        if _SKIP_LINE.match(lines[index]) or not line_text.strip():
            continue
        # Declarations without an expression have nothing to mutate but widths.
        if re.match(r"^\s*(reg|wire|integer)\b", line_text) and "=" not in line_text:
            continue
        scan = line_text
        if re.match(r"^\s*(reg|wire)\b", scan):  # only the expression after '=' of a wire declaration
            cut = scan.index("=") + 1
            scan = " " * cut + scan[cut:]
        for operator, pattern, repl in _RULES:
            for m in pattern.finditer(scan):
                grp = 1 if m.re.groups else 0
                if operator == "const":
                    if (
                        "[" in scan[: m.start()]
                        and "]" in scan[m.end() :]
                        and scan.rfind("[", 0, m.start()) > scan.rfind("]", 0, m.start())
                    ):
                        op_name = "bit-select"  # an index or part-select bound moved
                    else:
                        op_name = "const"
                    for delta in (1, -1):
                        new = _const_change(m, delta)
                        if new is not None:
                            add(op_name, base + m.start(), m.group(0), new)
                    continue
                if operator == "compare" and m.group(1) == "<" and scan[m.end(1) : m.end(1) + 1] == "=":
                    continue
                add(operator, base + m.start(grp), m.group(grp), repl(m))
        for m in _IF.finditer(scan):  # condition inverted: if (c) -> if (!(c))
            depth, j = 1, m.end()
            while j < len(scan) and depth:
                depth += {"(": 1, ")": -1}.get(scan[j], 0)
                j += 1
            if depth == 0:
                cond = lines[index][m.end() : j - 1]
                add("if-inverted", base + m.end(), cond, f"!({cond})")
    for m in _STUCK.finditer(code):  # ready/valid stuck at 0 and at 1
        expr_start = m.start(4)
        expr = text[expr_start : m.end(4)]
        for stuck in ("1'b1", "1'b0"):
            if expr.strip() != stuck and "\n" not in expr:
                add(f"stuck-{stuck[-1]}", expr_start, expr, stuck)
    unique = {(mu.start, mu.old, mu.new): mu for mu in out}
    return sorted(unique.values(), key=lambda mu: (mu.line, mu.col, mu.operator, mu.new))


# ---------------------------------------------------------------------------- equivalent mutants


def load_equivalent(root: Path) -> dict[tuple[str, str, str], str]:
    """The reviewed list: (file, before, after) -> reason. Matching on text survives line moves."""
    path = root / EQUIVALENT_FILE
    if not path.exists():
        return {}
    entries = read_yaml(path) or []
    out = {}
    for entry in entries:
        if not isinstance(entry, dict) or not {"file", "before", "after", "reason"} <= entry.keys():
            raise ValueError(f"{path}: each entry needs file, before, after and reason: {entry!r}")
        out[(entry["file"], entry["before"].strip(), entry["after"].strip())] = entry["reason"]
    return out


# ---------------------------------------------------------------------------- running them

_COPY = ("hwvit", "rtl", "sim", "pyproject.toml")


def _tree_copy(root: Path, dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "sim_build", ".pytest_cache")
    for name in _COPY:
        src = root / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)


# Seconds the compile check of one mutant may take: an unmutated block elaborates in ~1 s (one
# check took over 60 s on the 2-core machine at load 6, so the margin is wide).
COMPILE_TIMEOUT = 120


def _compiles(tree: Path, block: str, simulator: str) -> str | None:
    """None if Icarus (and Verilator, warnings aside, when it runs the suite) compiles the mutated
    block at its default parameters, else the first error: a build failure is no kill."""
    from hwvit import synth

    try:
        lines = synth.iverilog([tree / "rtl" / f"{block}.v"], block, rtl=tree / "rtl", timeout=COMPILE_TIMEOUT)
        errors = [ln for ln in lines if "error" in ln.lower() or "ERROR" in ln]
        if not errors and simulator == toolchain.Simulator.VERILATOR:
            cmd = [toolchain.require("verilator"), "--lint-only", "-Wno-fatal", "-Wno-lint", "-Wno-style"]
            cmd += [f"-I{tree / 'rtl'}", "--top-module", block, str(tree / "rtl" / f"{block}.v")]
            out = toolchain.run_tool(cmd, env=toolchain.sim_env(), timeout=COMPILE_TIMEOUT)
            errors = [ln for ln in out.stderr.splitlines() if ln.startswith("%Error")]
    except subprocess.TimeoutExpired as exc:
        # An endless generate loop (`gi = gi - 1`) hangs elaboration instead of failing it.
        tool = Path(str(exc.cmd[0])).name
        return f"{tool} did not finish elaborating in {COMPILE_TIMEOUT} s (an endless generate loop?)"
    return errors[0] if errors else None


def run_one(mutant: Mutant | None, block: str, simulator: str, root: Path, timeout: int) -> Outcome:
    """One mutant through the compile check and the suite (``None``: the unmutated baseline)."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"hwvit-mutant-{block}-") as tmp:
        tree = Path(tmp)
        _tree_copy(root, tree)
        if mutant is not None:
            target = tree / mutant.file
            target.write_text(mutant.apply(target.read_text()))
        error = _compiles(tree, block, simulator)
        if error is not None:
            return Outcome(mutant, "did-not-compile", error, time.monotonic() - t0)
        skip = " or ".join([SUITE_SKIP, *(s for s in toolchain.SIMULATORS if s != simulator)])
        if simulator == toolchain.Simulator.ICARUS:
            skip += f" or {ICARUS_SKIP}"
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]  # no -n: one process
        cmd += ["-p", "hwvit.mutate", "-k", f"not ({skip})", f"sim/test_{block}.py"]
        # Builds go to the copy's own cache (hwvit keys them by source path, so a mutant's builds
        # are never reused and would pile up in ~/.cache): nothing mutable is shared between
        # mutants but ccache, whose entries are keyed by content.
        ccache = os.environ.get("CCACHE_DIR") or str(
            Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ccache"
        )
        env = {**os.environ, "PYTHONPATH": str(tree), "XDG_CACHE_HOME": str(tree / ".cache"), "CCACHE_DIR": ccache}
        env = toolchain.sim_env({**env, ORDER_ENV: ",".join(__getattr__("FIRST").get(block, []))})
        # Own session: on a timeout the whole group goes, the simulator pytest started included
        # (killing pytest alone left a hung simulator running on the shared cores).
        try:
            out = toolchain.run_tool(cmd, timeout=timeout, cwd=tree, env=env)
        except subprocess.TimeoutExpired:
            return Outcome(mutant, "killed", f"suite timed out after {timeout} s", time.monotonic() - t0)
        tail = (out.stdout.strip().splitlines() or [""])[-1]
        if out.returncode == 0:
            return Outcome(mutant, "survived", tail, time.monotonic() - t0)
        if out.returncode == 5:  # no tests collected: the suite itself is wrong, not the mutant
            raise RuntimeError(f"sim/test_{block}.py: no tests selected")
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
    if not (root / "rtl" / f"{block}.v").exists() or not (root / "sim" / f"test_{block}.py").exists():
        raise ValueError(f"no rtl/{block}.v with a sim/test_{block}.py")
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
        raise RuntimeError(f"sim/test_{block}.py fails on the unmutated RTL: {base.detail}")
    # A mutant that hangs a testbench without a time limit of its own would cost the suite's
    # whole timeout: by default 4x the unmutated suite's time (a loaded machine slows both alike).
    timeout = timeout or max(120, int(4 * base.seconds))
    todo = []
    for mutant in chosen:
        reason = equivalent.get((mutant.file, mutant.before, mutant.after))
        if reason is not None:
            outcome = Outcome(mutant, "equivalent", reason)
            report.outcomes.append(outcome)
            if on_outcome:
                on_outcome(outcome)
        else:
            todo.append(mutant)
    with cf.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(run_one, mu, block, simulator, root, timeout) for mu in todo]
        for fut in cf.as_completed(futures):
            outcome = fut.result()
            report.outcomes.append(outcome)
            if on_outcome:
                on_outcome(outcome)
    report.outcomes.sort(key=lambda o: (o.mutant.line, o.mutant.col, o.mutant.operator))
    return report
