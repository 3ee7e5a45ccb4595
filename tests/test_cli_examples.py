"""Every `Example:` line of every command's help runs as written and exits 0; the README's
command-line table quotes only such lines, so its commands run as written too.

The examples are run through click's CliRunner from the root of a fresh clone of the repository
per command (tests/freshclone.py), where a user runs them: an example that writes over a file the
repository commits (vectors/README.md) fails here as it would there. They are chosen small so that
this stays cheap (the digits model, random sets of few cases, one or two blocks); nothing is
substituted. Two kinds of setup, both stated here:
- an example may read what another command's examples write (`hwvit check vectors/` reads the
  sets of `hwvit vectors`): NEEDS lists those commands, whose examples run first;
- files the examples name as the user's own (`vit.safetensors`, `vit.yaml`, `vit/`, `photos/`)
  are made by tests/userfiles.py.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from hwvit.cli import main

from freshclone import fresh_clone
from userfiles import USER_FILES, user_files

ROOT = Path(__file__).resolve().parents[1]
# command -> commands whose examples write what its examples read
NEEDS = {"check": ("vectors", "vectors-random"), "sim": ("vectors", "vectors-random"), "core": ("compile",)}


def example_lines(help_text: str) -> list[str]:
    """The command lines of the `Example:` blocks of a help text: indented lines starting with
    `hwvit `, a trailing backslash joining the next line, a `#` starting a comment."""
    lines, block, pending = [], False, ""
    for raw in help_text.splitlines():
        text = raw.strip()
        if text in ("Example:", "Examples:"):
            block = True
            continue
        if not block:
            continue
        if not text and not pending:
            block = False
            continue
        text = f"{pending} {text}".strip() if pending else text
        if text.endswith("\\"):
            pending = text[:-1].strip()
            continue
        pending = ""
        if text.startswith("hwvit "):
            lines.append(text)
    return lines


def readme_lines() -> list[str]:
    """The command lines of the README's fenced code blocks that start with `hwvit ` (its runnable
    examples, one part per reader)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M)
    return [line.strip() for block in blocks for line in block.splitlines() if line.startswith("hwvit ")]


def cli_table_lines() -> list[str]:
    """The `hwvit ...` commands in backticks in the first column of docs/cli.md's command table."""
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    return re.findall(r"^\| `(hwvit [^`]+)` \|", text, flags=re.M)


def _commands() -> dict[str, click.Command]:
    ctx = click.Context(main)
    return {name: main.get_command(ctx, name) for name in main.list_commands(ctx)}


def _run(line: str) -> None:
    args = shlex.split(line, comments=True)
    assert args[0] == "hwvit", line
    res = CliRunner().invoke(main, args[1:])
    assert res.exception is None or isinstance(res.exception, SystemExit), (line, res.output)
    assert res.exit_code == 0, f"{line}\n{res.output}"
    assert "Traceback" not in res.output and res.output.strip(), line


def test_example_parser():
    text = (
        "Does things.\n\n\b\nExample:\n  hwvit a --x 1\n  hwvit b --y 'p q' \\\n    --z 2\n"
        "  hwvit c  # a comment\n\nMore text naming hwvit d.\n"
    )
    assert example_lines(text) == ["hwvit a --x 1", "hwvit b --y 'p q' --z 2", "hwvit c  # a comment"]
    assert shlex.split(example_lines(text)[2], comments=True) == ["hwvit", "c"]


def test_every_command_has_examples():
    missing = [name for name, cmd in _commands().items() if not example_lines(cmd.help or "")]
    assert missing == []


def test_readme_quotes_help_examples_of_every_command():
    """Each `hwvit ...` line of the README's examples and of docs/cli.md's table is verbatim an
    example run by test_help_examples_run; the table names every command, each reader's part of
    the README has examples."""
    examples = {line for cmd in _commands().values() for line in example_lines(cmd.help or "")}
    readme, table = readme_lines(), cli_table_lines()
    assert len(readme) >= 6 and len(table) >= len(_commands())
    assert [line for line in readme + table if line not in examples] == []
    assert set(_commands()) <= {shlex.split(line)[1] for line in table}
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for reader in ("RTL engineer", "Architect", "ML engineer"):
        part = text.split(f"\n## {reader}", 1)[1].split("\n## ", 1)[0]
        assert re.search(r"```[^\n]*\nhwvit ", part), f"README: the {reader} part has no example"


# `hwvit demo` is `make demo` itself (~5 min: every traced set on Verilator, which
# sim/test_traced.py already runs, plus the RTL core): opt-in with -m slow to keep make test short.
# So are `sim`'s and `sweep`'s examples (54 and 27 s on 2 cores: both simulators, a Dask cluster,
# coverage; sim/test_sim_cli.py, tests/test_cluster.py and the sweep tests run each of those paths),
# and `bench`'s (15-17 s: ViT-B/16 and the peer; tests/test_cli.py's four bench tests run its options).
SLOW_EXAMPLES = {"bench", "demo", "sim", "sweep"}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_EXAMPLES else n for n in sorted(_commands())]
)
def test_help_examples_run(name, tmp_path, monkeypatch):
    root = fresh_clone(tmp_path / "clone")
    monkeypatch.chdir(root)
    commands = _commands()
    lines = example_lines(commands[name].help or "")
    needed = [line for cmd in NEEDS.get(name, ()) for line in example_lines(commands[cmd].help or "")]
    if any(f in line for line in lines + needed for f in USER_FILES):
        user_files(root)
    for line in needed:
        _run(line)
    for line in lines:
        _run(line)


# Modules a command's --help must not import: each costs 0.3-1 s (torch alone ~0.9 s here), and
# help is what a newcomer runs first. A command imports them when it runs.
HEAVY = ("torch", "numba", "matplotlib", "sklearn", "scipy", "transformers", "dask", "distributed", "PIL", "cocotb")


def test_help_imports_nothing_heavy():
    """`hwvit CMD --help` of every command and subcommand, in one fresh Python: none of HEAVY is
    imported (a choice list read for the help, `--family`'s, imported torch: 2.5 s for `hwvit
    compare --help`)."""
    import json
    import subprocess
    import sys

    code = (
        "import sys, json, click\n"
        "from hwvit.cli import main\n"
        "ctx = click.Context(main)\n"
        "for name in main.list_commands(ctx):\n"
        "    cmd = main.get_command(ctx, name)\n"
        "    subs = cmd.list_commands(ctx) if isinstance(cmd, click.Group) else []\n"
        "    for args in [[name], *([name, s] for s in subs)]:\n"
        "        try:\n"
        "            main([*args, '--help'], standalone_mode=False)\n"
        "        except SystemExit:\n"
        "            pass\n"
        f"print(json.dumps(sorted(m for m in {list(HEAVY)!r} if m in sys.modules)))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "Usage: -c compare" in res.stdout and "Usage: -c tb export" in res.stdout
    assert json.loads(res.stdout.strip().splitlines()[-1]) == []
