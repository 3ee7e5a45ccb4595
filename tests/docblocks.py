"""The command blocks of the docs, read and run as a reader would (docs/setup.md, "Commands in these
docs"): README.md, docs/**/*.md and examples/**/README.md.

A fenced block whose info string starts with ``sh`` holds commands; one that starts with
``console`` is a session, ``$ `` before each command and what it prints after it. A second word
``slow`` marks a block that takes minutes. Every other block (untagged, ``text``, ``yaml``, ...) is
shown, not run.

``run_page`` runs a page's blocks in order from the root of a fresh clone (tests/freshclone.py),
each block in a new bash with ``.venv`` activated and nothing else of the caller's on PATH, so the
simulators must be reachable the way the docs say. A command fails the page when it exits non-zero
(a doc that shows a failing command writes ``cmd || echo "exit status $?"``), and a session's
output lines must appear, in order, in what its command printed (stdout and stderr together;
``...`` stands for any text in a line, a line of only ``...`` for any lines).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN_TAGS = ("sh", "console")
# The suite this test belongs to: checked by `make -n` (the target exists and its rules hold), not run.
DRY_RUN = ("make test", "make test-docs")
# Commands a page may start with that a reader types at a shell: an untagged block holding one is a
# command block someone forgot to mark, so it would drift untested.
COMMAND_WORDS = ("hwvit ", "make ", "source ", "cd ", "iverilog ", "verilator ", "vvp ")
MARKER = "@@hwvit-docs-command"


@dataclass
class Command:
    text: str  # one logical line (continuation lines joined), comments kept
    line: int  # where it starts in the page
    expected: list[str] = field(default_factory=list)  # a session's output lines


@dataclass
class Block:
    page: str  # path relative to the repository root
    line: int  # the opening fence
    lang: str  # sh | console
    slow: bool
    commands: list[Command]

    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages(root: Path = ROOT) -> list[str]:
    """The pages whose command blocks run: README.md, docs/**/*.md, examples/**/README.md."""
    found = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    found += sorted((root / "examples").rglob("README.md"))
    return [p.relative_to(root).as_posix() for p in found if p.is_file()]


def fences(text: str) -> list[tuple[int, str, list[str]]]:
    """(line of the opening fence, info string, body lines) of every fenced block."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = re.match(r"^ {0,3}(`{3,}|~{3,})(.*)$", lines[i])
        if not m:
            i += 1
            continue
        fence, info, start = m.group(1), m.group(2).strip(), i
        body, i = [], i + 1
        while i < len(lines) and not re.match(rf"^ {{0,3}}{fence[0]}{{{len(fence)},}}\s*$", lines[i]):
            body.append(lines[i])
            i += 1
        out.append((start + 1, info, body))
        i += 1
    return out


def _logical(body: list[str], first: int) -> list[tuple[int, str]]:
    """(line, text) of each logical line: a trailing backslash joins the next one."""
    out, pending, start = [], "", 0
    for n, raw in enumerate(body):
        if not pending:
            start = first + n
        text = raw.rstrip()
        if text.endswith("\\"):
            pending += text[:-1].rstrip() + " "
            continue
        out.append((start, pending + text.strip() if pending else text))
        pending = ""
    if pending:
        out.append((start, pending.strip()))
    return out


def parse_block(page: str, line: int, info: str, body: list[str]) -> Block:
    words = info.split()
    lang, slow = words[0], "slow" in words[1:]
    commands: list[Command] = []
    if lang == "sh":
        for n, text in _logical(body, line + 1):
            if text.strip() and not text.strip().startswith("#"):
                commands.append(Command(text.strip(), n))
    else:  # console: "$ " lines are commands, the lines until the next one its output
        for n, text in _logical(body, line + 1):
            if text.startswith("$ "):
                commands.append(Command(text[2:].strip(), n))
            elif commands:
                commands[-1].expected.append(text.rstrip())
            elif text.strip():
                raise ValueError(f"{page}:{n}: a console block starts with a `$ ` command line")
        for c in commands:
            while c.expected and not c.expected[-1].strip():
                c.expected.pop()
    return Block(page, line, lang, slow, commands)


def blocks(page: str, root: Path = ROOT) -> list[Block]:
    """The runnable blocks of a page, in order."""
    text = (root / page).read_text(encoding="utf-8")
    return [parse_block(page, n, info, body) for n, info, body in fences(text) if _runs(info)]


def _runs(info: str) -> bool:
    return bool(info.split()) and info.split()[0] in RUN_TAGS


def untagged_commands(page: str, root: Path = ROOT) -> list[str]:
    """``page:line: text`` of each line that looks typed at a shell in a block not marked sh/console."""
    text = (root / page).read_text(encoding="utf-8")
    out = []
    for n, info, body in fences(text):
        if _runs(info):
            continue
        for k, raw in enumerate(body):
            if raw.startswith(COMMAND_WORDS):
                out.append(f"{page}:{n + 1 + k}: {raw.strip()}")
    return out


# --- what a command names ---------------------------------------------------------------------
_OPERATORS = {"&&", "||", ";", "|", "&"}
# a redirection and its target: 2>&1, &> f, > f, >> f, < f (the docs quote no > or <)
_REDIRECT = re.compile(r"(?<!\S)(\d*>&\d+|&>>?\s*\S+|\d*>>?\s*\S+|<\s*\S+)")


def segments(text: str) -> list[list[str]]:
    """The simple commands of a shell line: words, split at && || ; | &, redirections dropped."""
    lex = shlex.shlex(_REDIRECT.sub(" ", text), posix=True, punctuation_chars=";&|")
    lex.whitespace_split = True
    lex.commenters = "#"
    out, words = [], []
    for tok in lex:
        if tok in _OPERATORS:
            out.append(words)
            words = []
        else:
            words.append(tok)
    out.append(words)
    return [w for w in out if w]


def option_errors(words: list[str]) -> list[str]:
    """What is wrong with an `hwvit ...` command's words by the command line's own definition: an
    unknown command, or an option the command does not have (its values are not checked here)."""
    import click

    from hwvit.cli import main

    assert words[0] == "hwvit", words
    cmd: click.Command = main
    ctx = click.Context(main, info_name="hwvit")
    rest = words[1:]
    while isinstance(cmd, click.Group) and rest and not rest[0].startswith("-"):
        sub = cmd.get_command(ctx, rest[0])
        if sub is None:
            return [f"no command `{' '.join(words[: len(words) - len(rest) + 1])}`"]
        ctx = click.Context(sub, parent=ctx, info_name=rest[0])
        cmd, rest = sub, rest[1:]
    names = {o for p in cmd.get_params(ctx) for o in (*p.opts, *p.secondary_opts)}
    bad = []
    for word in rest:
        if word.startswith("-") and not re.match(r"^-\d", word) and word != "-":
            name = word.split("=", 1)[0]
            if name not in names:
                bad.append(f"`{ctx.command_path}` has no option {name}")
    return bad


# --- running ----------------------------------------------------------------------------------
def clean_env(home: Path | None = None) -> dict[str, str]:
    """The environment of a new login shell: the caller's, without its virtual environment, the
    Verilator of `make`'s environment and anything else of the venv on PATH."""
    venv = Path(sys.prefix).resolve()
    drop = ("VIRTUAL_ENV", "VERILATOR_ROOT", "PYTHONPATH", "PYTHONHOME")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    keep = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and not Path(p).resolve().is_relative_to(venv)]
    env["PATH"] = os.pathsep.join(keep)
    env.pop("COLUMNS", None)
    env["TERM"] = "dumb"
    return env


def script(commands: list[Command]) -> str:
    """One bash script for a block: the venv activated, then each command with its exit status
    checked (a failing one ends the block), a marker line before each command's output."""
    lines = ["exec 2>&1", "set -o pipefail", "source .venv/bin/activate || exit 97"]
    for i, c in enumerate(commands):
        lines += [
            f"printf '\\n{MARKER} {i}\\n'",
            c.text,
            "rc=$?",
            f'if [ "$rc" -ne 0 ]; then printf \'\\n{MARKER} failed %d\\n\' "$rc"; exit "$rc"; fi',
        ]
    return "\n".join(lines) + "\n"


@dataclass
class Ran:
    command: Command
    output: str
    status: int | None  # None: not reached (an earlier command failed)


def run_commands(commands: list[Command], cwd: Path, env: dict[str, str], timeout: float) -> list[Ran]:
    bash = shutil.which("bash")
    assert bash, "bash is not installed"
    try:
        res = subprocess.run(
            [bash, "--noprofile", "--norc", "-c", script(commands)],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout,
        )
        text, code = res.stdout.decode(errors="replace"), res.returncode
    except subprocess.TimeoutExpired as exc:
        text = (exc.stdout or b"").decode(errors="replace") + f"\n{MARKER} failed timeout after {timeout:.0f} s\n"
        code = -1
    if code == 97 and MARKER not in text:
        raise AssertionError(f"cannot activate .venv in {cwd}: {text.strip()}")
    parts = re.split(rf"\n?{MARKER} (\d+)\n", text)
    outputs = {int(parts[k]): parts[k + 1] for k in range(1, len(parts) - 1, 2)}
    ran = []
    for i, c in enumerate(commands):
        out = outputs.get(i)
        if out is None:
            ran.append(Ran(c, "", None))
            continue
        failed = re.search(rf"\n?{MARKER} failed (\S+)\n?$", out)
        status = 0
        if failed:
            out = out[: failed.start()]
            status = int(failed.group(1)) if failed.group(1).isdigit() else -1
        ran.append(Ran(c, out, status))
    return ran


def _line_re(expected: str) -> re.Pattern:
    return re.compile("^" + ".*".join(re.escape(p) for p in expected.rstrip().split("...")) + "$")


def missing_line(expected: list[str], output: str) -> str | None:
    """The first expected line that does not appear, in order, in ``output``; None if all do."""
    actual = [ln.rstrip() for ln in output.splitlines()]
    at = 0
    for want in expected:
        if want.strip() == "...":
            continue
        pattern = _line_re(want)
        while at < len(actual) and not pattern.match(actual[at]):
            at += 1
        if at == len(actual):
            return want
        at += 1
    return None


def failures(ran: list[Ran], block: Block) -> list[str]:
    out = []
    for r in ran:
        where = f"{block.page}:{r.command.line}: `{r.command.text}`"
        if r.status is None:
            continue
        if r.status != 0:
            tail = "\n".join(r.output.strip().splitlines()[-15:])
            out.append(f"{where} exited {r.status}:\n{tail}")
            break
        if r.command.expected:
            gone = missing_line(r.command.expected, r.output)
            if gone is not None:
                out.append(f"{where} did not print {gone!r}; it printed:\n{r.output.strip()[-3000:]}")
    return out


Once = Callable[[Command, Path], "Ran | None"]


def _special(c: Command) -> bool:
    return c.text.split("#", 1)[0].strip() in (*DRY_RUN, "make demo")


def _groups(commands: list[Command]) -> list[list[Command]]:
    """The commands in runs: each dry-run or once-answered command alone, the others together."""
    out: list[list[Command]] = []
    for c in commands:
        if _special(c) or not out or _special(out[-1][0]):
            out.append([c])
        else:
            out[-1].append(c)
    return out


def run_page(
    page: str, clone: Path, *, slow: bool, timeout: float, once: Once | None = None, setup=None
) -> tuple[list[str], list[Block]]:
    """Run the page's blocks (with ``slow``: all; else those not marked slow) in order in ``clone``;
    (failures, blocks run). ``once(command, clone)`` may answer a command instead of running it
    (the test's one `make demo` per session); ``setup(clone, blocks)`` makes what the docs call
    the user's own files. A failing block ends the page: later blocks build on it."""
    env = clean_env()
    todo = [b for b in blocks(page) if slow or not b.slow]
    if setup is not None:
        setup(clone, todo)
    problems: list[str] = []
    for block in todo:
        ran: list[Ran] = []
        for group in _groups(block.commands):  # a run of plain commands shares one shell
            text = group[0].text.split("#", 1)[0].strip()
            if text in DRY_RUN:
                dry = Command(f"make -n {text.split()[1]} >/dev/null", group[0].line)
                ran += [Ran(group[0], r.output, r.status) for r in run_commands([dry], clone, env, 120)]
                continue
            answered = once(group[0], clone) if once is not None else None
            if answered is not None:
                ran.append(answered)
                continue
            ran += run_commands(group, clone, env, timeout)
        found = failures(ran, block)
        if found:
            problems += found
            break
    return problems, todo
