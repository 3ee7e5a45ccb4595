"""Single-point mutants of one Verilog file, and the reviewed list of equivalent ones.

``mutants(text, file)``: operators swapped, comparisons flipped, constants and select bounds moved
by one, conditions inverted, ready/valid stuck. ``load_equivalent``: sim/mutants_equivalent.yaml,
each entry keyed by file, line and the line before and after; ``dead_sink``: a mutant no output
can see."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hwvit.textfiles import read_yaml

EQUIVALENT_FILE = "sim/mutants_equivalent.yaml"


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


def code_of(text: str) -> str:
    """Verilog ``text`` without its comments (a block comment's line breaks kept) and with trailing
    blanks cut: what a mutant's behaviour and its key (line, column) depend on."""

    def drop(m: re.Match) -> str:
        return m.group(0) if m.group(0).startswith('"') else "\n" * m.group(0).count("\n")

    code = re.sub(r"\"[^\"\n]*\"|//[^\n]*|/\*.*?\*/", drop, text, flags=re.S)
    return "\n".join(line.rstrip() for line in code.split("\n"))
