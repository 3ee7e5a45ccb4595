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
import threading
import time
from collections.abc import Callable, Sequence
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
# every test.
ORDER_ENV = "HWVIT_MUTATE_FIRST"
KILLERS_FIRST = 2  # a campaign runs the tests that killed a file's last mutants first, this many


def __getattr__(name: str):
    """``FIRST`` (kind -> the tests a mutant runs first, by name prefix: pytest -x stops at the first
    failure, so a killed mutant costs one cheap test that pushes real data through the block instead
    of the whole suite; survivors still run every test) and ``PARTS`` (kind -> other source files it
    instantiates, which `--source` may mutate instead of rtl/<block>.v): each kind's module
    declares them (``mutate_first``, ``mutate_parts``). A shared module (``shared()``) runs its
    users' first tests and, when a variant kind uses it, that kind's random sets."""
    from hwvit import blocks

    if name == "FIRST":
        first = {k: list(v.mutate_first) for k, v in blocks.kinds().items() if v.mutate_first}
        for module, users in shared().items():
            names = [t for u in users for t in blocks.get(u).mutate_first]
            if any(blocks.get(u).variant for u in users):
                names.append("test_variant_random_sets_bit_exact")
            first[module] = list(dict.fromkeys(names))
        return {**first, CORE: list(CORE_FIRST)}
    if name == "PARTS":
        return {k: v.mutate_parts for k, v in blocks.kinds().items() if v.mutate_parts}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The accelerator core is no block kind: its suite is the digits model compiled and run on it.
CORE = "vit_core"
CORE_PARTS = ("vit_core_agu.v", "vit_core_gemm.v", "vit_core_ram.v", "vit_core_stream.v")
CORE_SUITE = "tests/test_core_digits.py"
# a one-layer random model on Icarus, ~5 s; the digits image after it takes 35-55 s
CORE_FIRST = (
    "test_tiny_model_with_attention_wider_than_dim_icarus_bit_exact",
    "test_tiny_model_loaded_through_the_host_port_icarus_bit_exact",
    "test_stream_over_four_loop_levels_icarus",
)


def shared() -> dict[str, list[str]]:
    """The Verilog modules several blocks are built on that no kind owns (the row engine
    rtl/row_stream.v and the statistics of the softmax and LayerNorm blocks): module -> the kinds
    whose ``rtl`` lists it. Each is a target of its own, judged by all those kinds' suites, since a
    feature one arithmetic alone uses (ITA's segments) is seen only by that arithmetic's tests.
    Files a kind names as its parts (round_sat.v) stay under that kind's suite."""
    from hwvit import blocks

    specs = blocks.kinds()
    owned = {spec.top for spec in specs.values()} | {Path(p).stem for s in specs.values() for p in s.mutate_parts}
    out: dict[str, list[str]] = {}
    for name, spec in specs.items():
        for path in spec.rtl:
            stem = Path(path).stem
            if Path(path).parent.name == "rtl" and stem not in owned:
                out.setdefault(stem, []).append(name)
    return out


def _users(block: str) -> list[str]:
    """The kinds whose tests judge the mutants of rtl/<block>.v: a shared module's users; a kind and
    every variant kind that is a parameter of its block (layernorm_ptf: rtl/layernorm.v, PTF = 1)."""
    from hwvit import blocks

    if block in shared():
        return shared()[block]
    specs = blocks.kinds()
    return [block, *(k for k, s in specs.items() if s.top == block and k != block and s.variant and s.rtl)]


def suite_of(block: str) -> tuple[tuple[str, ...], str | None]:
    """The pytest files that judge ``block``'s mutants and a ``-k`` filter within them: the kind's
    testbench ``sim/test_<block>.py``; for a variant kind with Verilog and no such file, its tests in
    every ``sim/test_variants*.py``; for a block several kinds use (``_users``), all of theirs; for the
    core, ``tests/test_core_digits.py``."""
    if block == CORE:
        return (CORE_SUITE,), None
    from hwvit import blocks

    root = toolchain.repo().root
    variant_files = tuple(f"sim/{p.name}" for p in sorted((root / "sim").glob("test_variants*.py")))
    files: list[str] = []
    terms: list[str] = []
    for user in _users(block):
        spec = blocks.get(user) if user in blocks.kinds() else None
        if spec is not None and spec.variant and spec.rtl and not (root / "sim" / f"test_{user}.py").exists():
            files += variant_files
            terms.append(user)
        else:
            files.append(f"sim/test_{user}.py")
            terms.append(f"test_{user}.py")
    if len(terms) == 1:
        return tuple(files), None if files[0] == f"sim/test_{block}.py" else terms[0]
    return tuple(dict.fromkeys(files)), " or ".join(terms)


def own_file(block: str) -> tuple[str, str]:
    """(file name in rtl/, module) of ``block``'s own Verilog: rtl/<block>.v with module <block>, or
    the file and toplevel a kind declares (``softmax_shiftmax_exact``: rtl/softmax_shiftmax.v)."""
    from hwvit import blocks

    spec = blocks.get(block) if block in blocks.kinds() else None
    if spec is not None and spec.rtl:
        return Path(spec.rtl[0]).name, spec.top
    return f"{block}.v", block


def has_suite(block: str) -> bool:
    """The block's own file and every file of its suite exist."""
    root = toolchain.repo().root
    files, _ = suite_of(block)
    return (root / "rtl" / own_file(block)[0]).exists() and bool(files) and all((root / f).exists() for f in files)


def parts_of(block: str) -> tuple[str, ...]:
    """The other Verilog files of ``block`` that `--source` may mutate under its suite."""
    if block == CORE:
        return CORE_PARTS
    from hwvit import blocks

    return tuple(blocks.get(block).mutate_parts) if block in blocks.kinds() else ()


def source_of(block: str, source: str | None) -> str:
    """The file a run mutates, as ``rtl/<name>``: rtl/<block>.v, or ``source`` if it is one of the
    block's PARTS (ValueError otherwise, naming the choices)."""
    own = own_file(block)[0]
    if source is None or source in (own, f"rtl/{own}"):
        return f"rtl/{own}"
    name = source.removeprefix("rtl/")
    parts = parts_of(block)
    if name not in parts:
        choices = ", ".join((own, *parts))
        raise ValueError(f"--source {source}: block {block} is built from {choices}")
    return f"rtl/{name}"


def pytest_collection_modifyitems(config, items):  # pytest hook: `pytest -p hwvit.mutate`
    """Run the tests named in $HWVIT_MUTATE_FIRST first, in that order: a name with its parameters
    (``test_x[icarus-8]``) picks that one test, a bare prefix every test whose function it begins."""
    first = [p for p in os.environ.get(ORDER_ENV, "").split(",") if p]

    def rank(item) -> int:
        name = item.name.split("[")[0]
        return next(
            (i for i, p in enumerate(first) if (item.name == p if "[" in p else name.startswith(p))), len(first)
        )

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
        """Unique among a file's mutants: a constant's +1 and -1 share line, column and operator."""
        return f"{self.file}:{self.line}:{self.col}:{self.operator}:{self.new}"


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


# The row engine's parameters that only its checks read (rtl/row_stream.v's initial block): the
# bounds a block hands it are part of the parameter checks, blanked with them.
_ENGINE = re.compile(r"\brow_stream\s*#\(.*?\)\s*\w+\s*\(", re.S)
_CHECK_BOUND = re.compile(r"\.(?:NAME|LEN_NAME|LIMIT|OUT_MIN|[AB]_(?:NAME|VAL|MIN|MAX))\s*\((?:[^()]|\([^()]*\))*\)")


def _spaces(m: re.Match) -> str:
    return re.sub(r"[^\n]", " ", m.group(0))


def _blank(text: str) -> str:
    """``text`` with comments, strings, initial blocks (parameter checks) and the check bounds of a
    row_stream instance replaced by spaces."""
    out = re.sub(r"//[^\n]*|/\*.*?\*/|\"[^\"\n]*\"", _spaces, text, flags=re.S)
    out = re.sub(r"\binitial\s+begin.*?\n  end\n", _spaces, out, flags=re.S)
    return _ENGINE.sub(lambda m: _CHECK_BOUND.sub(_spaces, m.group(0)), out)


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


def load_equivalent(root: Path) -> dict[tuple[str, str, str, int], str]:
    """The reviewed list: (file, before, after, line) -> reason. The line is part of the key: one
    text can stand at two lines (a reset branch and a start branch assigning the same zeros) where
    only one of its mutants is equivalent. A line that moved is named by ``stale_equivalent``."""
    path = root / EQUIVALENT_FILE
    if not path.exists():
        return {}
    entries = read_yaml(path) or []
    out = {}
    for entry in entries:
        if not isinstance(entry, dict) or not {"file", "line", "before", "after", "reason"} <= entry.keys():
            raise ValueError(f"{path}: each entry needs file, line, before, after and reason: {entry!r}")
        out[(entry["file"], entry["before"].strip(), entry["after"].strip(), entry["line"])] = entry["reason"]
    return out


def key_of(mu: Mutant) -> tuple[str, str, str, int]:
    """``mu``'s key in the reviewed list (load_equivalent)."""
    return mu.file, mu.before, mu.after, mu.line


_WIRE_DECL = re.compile(r"\bwire\b[^;=]*?\b([A-Za-z_]\w*)\s*=")


def dead_sink(text: str, mutant: Mutant) -> str | None:
    """The name of the wire whose declaration's expression ``mutant`` changes, when nothing else in
    the file reads that wire (a sink such as ``unused_bits`` that only tells the linter some bits are
    dropped on purpose): such a mutant cannot change any output. None otherwise."""
    code = _blank(text)
    begin = code.rfind(";", 0, mutant.start) + 1
    end = code.find(";", mutant.start)
    # The statement runs from the last ';' (after any `end`s of blocks before it) to the next.
    m = _WIRE_DECL.search(code, begin, end) if end >= 0 else None
    if m is None or m.end() > mutant.start:  # a wire declaration, the change in its expression
        return None
    name = m.group(1)
    uses = len(re.findall(rf"\b{re.escape(name)}\b", code))
    return name if uses == 1 else None


def stale_equivalent(root: Path) -> list[str]:
    """The reviewed entries that no longer hold, one line each: the mutant is no longer made, or it
    is made at another line than the entry names (the code around it changed: review it again)."""
    made: dict[tuple[str, str, str], set[int]] = {}
    for path in sorted((root / "rtl").glob("*.v")):
        for m in mutants(path.read_text(), f"rtl/{path.name}"):
            made.setdefault((m.file, m.before, m.after), set()).add(m.line)
    out, seen = [], set()
    for e in read_yaml(root / EQUIVALENT_FILE) or []:
        key = (e["file"], str(e["before"]).strip(), str(e["after"]).strip())
        where = f"{e['file']}:{e['line']}"
        if (*key, e["line"]) in seen:
            out.append(f"{where}: listed twice: {key[2]}")
        seen.add((*key, e["line"]))
        if key not in made:
            out.append(f"{where}: no such mutant any more: {key[2]}")
        elif e["line"] not in made[key]:
            out.append(f"{where}: the mutant is now at line {min(made[key])}, review it again: {key[2]}")
    return out


# ---------------------------------------------------------------------------- running them

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


def _compiles(tree: Path, block: str, simulator: str) -> str | None:
    """None if Icarus (and Verilator, warnings aside, when it runs the suite) compiles the mutated
    block at its default parameters, else the first error: a build failure is no kill."""
    from hwvit import synth

    name, top = own_file(block)
    try:
        lines = synth.iverilog([tree / "rtl" / name], top, rtl=tree / "rtl", timeout=COMPILE_TIMEOUT)
        errors = [ln for ln in lines if "error" in ln.lower() or "ERROR" in ln]
        if not errors and simulator == toolchain.Simulator.VERILATOR:
            cmd = [toolchain.require("verilator"), "--lint-only", "-Wno-fatal", "-Wno-lint", "-Wno-style"]
            cmd += [f"-I{tree / 'rtl'}", "--top-module", top, str(tree / "rtl" / name)]
            out = toolchain.run_tool(cmd, env=toolchain.sim_env(), timeout=COMPILE_TIMEOUT)
            errors = [ln for ln in out.stderr.splitlines() if ln.startswith("%Error")]
    except subprocess.TimeoutExpired as exc:
        # An endless generate loop (`gi = gi - 1`) hangs elaboration instead of failing it.
        tool = Path(str(exc.cmd[0])).name
        return f"{tool} did not finish elaborating in {COMPILE_TIMEOUT} s (an endless generate loop?)"
    return errors[0] if errors else None


def markers_of(block: str) -> str:
    """The pytest marker expression a mutant's suite runs under: the variants' Verilator runs, opt-in
    in make test, are in (their marker is not excluded); slow tests are out, except the core's (its
    digits image on Icarus, kept out of make test's budget, is the core's strongest Icarus test)."""
    return "not gpu and not slurm" + ("" if block == CORE else " and not slow")


def killer(outcome: Outcome) -> str | None:
    """The test that killed a mutant (``test_x[icarus-8]``), from its outcome's FAILED line."""
    m = re.match(r"FAILED \S+?::(\S+)", outcome.detail) if outcome.status == "killed" else None
    return m.group(1) if m and "," not in m.group(1) else None


def run_one(
    mutant: Mutant | None, block: str, simulator: str, root: Path, timeout: int, first: Sequence[str] = ()
) -> Outcome:
    """One mutant through the compile check and the suite (``None``: the unmutated baseline);
    ``first``: tests to run before the block's own first tests (names as ``killer`` gives them)."""
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
        cmd += ["-m", markers_of(block)]
        suite, within = suite_of(block)
        select = f"not ({skip})" if within is None else f"({within}) and not ({skip})"
        cmd += ["-p", "hwvit.mutate", "-k", select, *suite]
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
        order = list(dict.fromkeys([*first, *__getattr__("FIRST").get(block, [])]))
        env = toolchain.sim_env({**env, ORDER_ENV: ",".join(order)})
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
    with cf.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(run_one, mu, block, simulator, root, timeout) for mu in todo]
        for fut in cf.as_completed(futures):
            outcome = fut.result()
            report.outcomes.append(outcome)
            if on_outcome:
                on_outcome(outcome)
    report.outcomes.sort(key=lambda o: (o.mutant.line, o.mutant.col, o.mutant.operator))
    return report


# ---------------------------------------------------------------------------- every mutant, resumable

JOURNAL = "build/mutate/journal.jsonl"


def targets(include_core: bool = True) -> list[tuple[str, str]]:
    """Every (block, file) of a full run: each block's own file and its parts, each file once, under
    the suite of the first block that names it (round_sat.v under requant's), then each shared
    module under its users' suites (``shared``), then the core's files."""
    from hwvit import blocks

    root = toolchain.repo().root
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    names = [k for k, spec in blocks.kinds().items() if spec.rtl and not spec.source.startswith(str(root / "examples"))]
    names += sorted(shared())
    if include_core:
        names.append(CORE)
    for block in names:
        if not has_suite(block):
            continue
        for name in (own_file(block)[0], *parts_of(block)):
            if name not in seen:
                seen.add(name)
                out.append((block, f"rtl/{name}"))
    return out


def _digest(root: Path, rels: Sequence[str], read: Callable[[Path], bytes] = Path.read_bytes) -> str:
    import hashlib

    h = hashlib.sha256()
    for rel in rels:
        h.update(rel.encode() + b"\0" + read(root / rel) + b"\0")
    return h.hexdigest()[:16]


def code_of(text: str) -> str:
    """Verilog ``text`` without its comments (a block comment's line breaks kept) and with trailing
    blanks cut: what a mutant's behaviour and its key (line, column) depend on."""

    def drop(m: re.Match) -> str:
        return m.group(0) if m.group(0).startswith('"') else "\n" * m.group(0).count("\n")

    code = re.sub(r"\"[^\"\n]*\"|//[^\n]*|/\*.*?\*/", drop, text, flags=re.S)
    return "\n".join(line.rstrip() for line in code.split("\n"))


def fingerprint(root: Path, block: str, file: str) -> str:
    """What a killed (or did-not-compile) outcome depends on: the mutated file's code. A test added
    to the suite cannot revive a killed mutant, so those outcomes survive suite edits; an edit of
    the file's code makes its outcomes stale (they run again), an edit of a comment that moves no
    line does not."""
    return _digest(root, [file], lambda path: code_of(path.read_text()).encode())


def suite_fingerprint(root: Path, block: str) -> str:
    """The suite's text, with the block's Verilog test wrapper (sim/tb_<block>.v) where it has one: a
    survivor recorded under another suite runs again (a new test or wrapper check may kill it)."""
    wrapper = [f"sim/tb_{block}.v"] if (root / "sim" / f"tb_{block}.v").exists() else []
    return _digest(root, [*suite_of(block)[0], *wrapper])


class Journal:
    """Outcomes appended one JSON line each as they finish (an interrupt loses only the mutants in
    flight); ``done`` maps (block, fingerprint, mutant key) to the last outcome recorded."""

    def __init__(self, path: Path):
        import json
        import threading

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.done: dict[tuple[str, str, str], dict] = {}
        # (block, file fingerprint, suite fingerprint) -> seconds of the unmutated suite: a suite
        # edited since (a new test) is checked on the unmutated RTL again, and sets the time limit
        self.baselines: dict[tuple[str, str, str], float] = {}
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    row = json.loads(line)
                except ValueError:  # a line cut short by an interrupt
                    continue
                if row.get("baseline"):
                    self.baselines[(row["block"], row["fp"], row.get("suite", ""))] = float(row["seconds"])
                else:
                    self.done[(row["block"], row["fp"], row["key"])] = row

    def _append(self, row: dict) -> None:
        import json

        with self._lock, self.path.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def record(self, block: str, fp: str, outcome: Outcome, suite: str = "") -> None:
        m = outcome.mutant
        row = {
            "block": block,
            "fp": fp,
            "suite": suite,
            "key": m.key,
            "file": m.file,
            "line": m.line,
            "operator": m.operator,
            "before": m.before,
            "after": m.after,
            "status": outcome.status,
            "detail": outcome.detail[:300],
            "seconds": round(outcome.seconds, 1),
        }
        self.done[(block, fp, m.key)] = row
        self._append(row)

    def record_baseline(self, block: str, fp: str, seconds: float, suite: str = "") -> None:
        self.baselines[(block, fp, suite)] = seconds
        self._append({"baseline": True, "block": block, "fp": fp, "suite": suite, "seconds": round(seconds, 1)})


@dataclass
class Row:
    """One line of the table: a block's mutants of one file."""

    block: str
    file: str
    total: int
    counts: dict[str, int]
    seconds: float

    @property
    def pending(self) -> int:
        return self.total - sum(self.counts.values())

    @property
    def score(self) -> float | None:
        k, s = self.counts.get("killed", 0), self.counts.get("survived", 0)
        return k / (k + s) if k + s else None


def table(rows: list[Row]) -> str:
    """The campaign table (markdown): per block and file, then per block over all its files."""
    head = "| block | file | mutants | killed | equivalent | survived | did not compile | pending | score | time |"
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def fmt(block: str, file: str, total: int, c: dict[str, int], pending: int, score, seconds: float) -> str:
        sc = "n/a" if score is None else f"{100 * score:.1f}%"
        return (
            f"| {block} | {file} | {total} | {c.get('killed', 0)} | {c.get('equivalent', 0)} | "
            f"{c.get('survived', 0)} | {c.get('did-not-compile', 0)} | {pending} | {sc} | {seconds / 60:.1f} min |"
        )

    by_block: dict[str, list[Row]] = {}
    for r in rows:
        by_block.setdefault(r.block, []).append(r)
        lines.append(fmt(r.block, r.file, r.total, r.counts, r.pending, r.score, r.seconds))
    for block, rs in by_block.items():
        if len(rs) > 1:
            c: dict[str, int] = {}
            for r in rs:
                for k, v in r.counts.items():
                    c[k] = c.get(k, 0) + v
            k_, s_ = c.get("killed", 0), c.get("survived", 0)
            lines.append(
                fmt(
                    f"**{block}**",
                    "all",
                    sum(r.total for r in rs),
                    c,
                    sum(r.pending for r in rs),
                    k_ / (k_ + s_) if k_ + s_ else None,
                    sum(r.seconds for r in rs),
                )
            )
    return "\n".join(lines)


def campaign(
    chosen: list[tuple[str, str]],
    journal: Journal,
    *,
    simulator: str = "verilator",
    jobs: int = 1,
    timeout: int | None = None,
    on_outcome: Callable[[str, Outcome], None] | None = None,
    run: bool = True,
) -> list[Row]:
    """Every mutant of each (block, file) of ``chosen``: those in the journal with the current
    fingerprint are not run again; the rest run ``jobs`` at a time across all blocks, each outcome
    journaled as it finishes. ``run=False``: only the table of what the journal holds."""
    root = toolchain.repo().root
    equivalent = load_equivalent(root)
    plan: list[tuple[str, str, str, list[Mutant]]] = []
    for block, file in chosen:
        fp = fingerprint(root, block, file)
        plan.append((block, file, fp, mutants((root / file).read_text(), file)))
    work: list[tuple[str, str, Mutant]] = []
    suites = {block: suite_fingerprint(root, block) for block, _ in chosen}

    def current(block: str, fp: str, mu: Mutant) -> dict | None:
        """The journaled outcome still valid: a survivor only under today's suite."""
        row = journal.done.get((block, fp, mu.key))
        if row is None or (row["status"] == "survived" and row.get("suite") != suites[block]):
            return None
        return row

    for block, _file, fp, every in plan:
        for mu in every:
            if current(block, fp, mu) is not None:
                continue
            if key_of(mu) not in equivalent:  # a reviewed equivalent never runs
                work.append((block, fp, mu))
    if run and work:
        toolchain.require(simulator)
        toolchain.require("icarus")
        limits: dict[tuple[str, str], int] = {}
        keys = list(dict.fromkeys((b, f) for b, f, _ in work))
        missing = [key for key in keys if journal.baselines.get((*key, suites[key[0]])) is None]

        def baseline(key: tuple[str, str]) -> tuple[tuple[str, str], Outcome]:
            return key, run_one(None, key[0], simulator, root, timeout or 3600)

        # The unmutated suites run side by side, on the same -j workers as the mutants.
        with cf.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for key, outcome in pool.map(baseline, missing):
                if outcome.status != "survived":
                    suite = " ".join(suite_of(key[0])[0])
                    raise RuntimeError(f"{suite} fails for {key[0]} on the unmutated RTL: {outcome.detail}")
                journal.record_baseline(key[0], key[1], outcome.seconds, suites[key[0]])
        for key in keys:
            limits[key] = timeout or max(120, int(4 * journal.baselines[(*key, suites[key[0]])]))

        # The tests that killed the file's latest mutants run first: mutants come in line order, and
        # neighbours tend to die by the same test (requant's rounding datapath by its gemmlowp test,
        # 14th of 16 in file order: 24-28 s a mutant with the fixed order, 4.4 s first).
        recent: dict[tuple[str, str], list[str]] = {}
        # A mutant reviewed as equivalent while the campaign runs (hours) is not run when its turn
        # comes: the list is read again whenever its file changes.
        eq_file = root / EQUIVALENT_FILE
        seen = {"stamp": eq_file.stat().st_mtime_ns if eq_file.exists() else 0, "eq": equivalent}
        seen_lock = threading.Lock()

        def reviewed(mu: Mutant) -> bool:
            with seen_lock:
                stamp = eq_file.stat().st_mtime_ns if eq_file.exists() else 0
                if stamp != seen["stamp"]:
                    try:
                        seen["eq"] = load_equivalent(root)
                    except ValueError:  # caught mid-edit: keep the last good list
                        pass
                    seen["stamp"] = stamp
                return key_of(mu) in seen["eq"]

        def one(item: tuple[str, str, Mutant]) -> tuple[str, str, Outcome | None]:
            block, fp, mu = item
            if reviewed(mu):
                return block, fp, None
            outcome = run_one(mu, block, simulator, root, limits[(block, fp)], recent.get((block, fp), []))
            name = killer(outcome)
            if name is not None:
                recent[(block, fp)] = list(dict.fromkeys([name, *recent.get((block, fp), [])]))[:KILLERS_FIRST]
            return block, fp, outcome

        with cf.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for fut in cf.as_completed([pool.submit(one, item) for item in work]):
                block, fp, outcome = fut.result()
                if outcome is None:  # reviewed as equivalent since the campaign started
                    continue
                journal.record(block, fp, outcome, suites[block])
                if on_outcome:
                    on_outcome(block, outcome)
    equivalent = load_equivalent(root) if run and work else equivalent  # as reviewed by now
    rows = []
    texts = {file: (root / file).read_text() for _, file, _, _ in plan}
    for block, file, fp, every in plan:
        counts: dict[str, int] = {}
        seconds = 0.0
        for mu in every:
            row = current(block, fp, mu)
            if key_of(mu) in equivalent:
                counts["equivalent"] = counts.get("equivalent", 0) + 1
            elif row is not None:
                status = row["status"]
                if status == "survived" and dead_sink(texts[file], mu) is not None:
                    status = "equivalent"  # journaled before run_one knew dead sinks
                counts[status] = counts.get(status, 0) + 1
                seconds += float(row["seconds"])
        rows.append(Row(block, file, len(every), counts, seconds))
    return rows


def _journaled(chosen: list[tuple[str, str]], journal: Journal):
    """(mutant, its file's text, its journaled row under today's fingerprint, whether that row is
    under today's suite, whether the mutant is listed equivalent) for every journaled mutant."""
    root = toolchain.repo().root
    equivalent = load_equivalent(root)
    for block, file in chosen:
        fp, suite = fingerprint(root, block, file), suite_fingerprint(root, block)
        text = (root / file).read_text()
        for mu in mutants(text, file):
            row = journal.done.get((block, fp, mu.key))
            if row is not None:
                yield mu, text, row, row.get("suite") == suite, key_of(mu) in equivalent


def survivors(chosen: list[tuple[str, str]], journal: Journal) -> list[dict]:
    """The journal's survivors among the current mutants of ``chosen``."""
    return [
        row
        for mu, text, row, same_suite, listed in _journaled(chosen, journal)
        if row["status"] == "survived" and same_suite and not listed and dead_sink(text, mu) is None
    ]


def killed_yet_equivalent(chosen: list[tuple[str, str]], journal: Journal) -> list[dict]:
    """Journaled kills of mutants that sim/mutants_equivalent.yaml calls equivalent: a reviewing
    error (an equivalent mutant cannot fail a test), or a flaky test. The table would count such a
    mutant as equivalent, so the campaign names each one."""
    return [row for _, _, row, _, listed in _journaled(chosen, journal) if row["status"] == "killed" and listed]
