"""Lines that keep the history of the work instead of describing what is: what git log is for.

Two kinds, each found by regular expressions (no list of exceptions):

- ``stage``: a line that numbers or dates a stage of the work: "session 24", "sessions 19 and 20",
  "stage 3 of the work", "stop 51", or a calendar date such as 2026-11-23. A pipeline stage of a
  block ("stage 2 of an OUT pass") is not one.
- ``timing``: a line of code (anything but Markdown) that records a timing or a machine as a log:
  a machine named by its core count ("on the 2-core EPYC"), a load average ("at load 6"), a time
  that something took or ran ("took 5.4 s"), a time beside a CPU or GPU model ("~1.6 s ... on the
  EPYC", "Measured on one H100: 652 images/s"), or a bare list of times ("# 1.7, 3, 3 s"). A
  present-tense cost kept as the reason for a choice ("the question takes two locks: 40 us") and a
  fact about a CPU kind ("torch._int_mm on a Zen 4 is wrong for stride-0 operands") are not.
  Markdown pages are exempt: a page's figures name their machine, in one table a command makes.

``python tests/history_lines.py DIR_OR_FILE...`` prints every such line as ``path:line: kind: text``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

STAGE = re.compile(
    r"\bsessions? \d+[a-z]?\b"  # session 24, sessions 24b-26
    r"|\bstage \d+ of (?:the|this) (?:work|project)\b"
    r"|\bstop \d+\b"
    r"|\b20\d\d-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])\b",  # a calendar date
    re.IGNORECASE,
)
_TIME = r"\d+(?:\.\d+)?(?:\s*-\s*\d+(?:\.\d+)?)?\s*(?:ns|us|µs|ms|s|min|minutes?|seconds?|hours?|images/s|GMAC/s)\b"
TIMING = re.compile(
    r"\b\d+-core\b"  # a particular machine, by its cores
    r"|\bat load (?:average )?\d"
    rf"|\b(?:took|ran)\b[^.;]*?{_TIME}"  # a time a run took
    rf"|{_TIME}.*\b(?:EPYC|Xeon|Zen ?\d|H100|H200)\b|\b(?:EPYC|Xeon|Zen ?\d|H100|H200)\b.*{_TIME}"
    r"|\b\d+(?:\.\d+)?(?:, \d+(?:\.\d+)?)+ (?:s|ms)\b",  # a list of times: 1.7, 3, 3 s
)
SOURCES = ("docs", "hwvit", "sim", "rtl")  # what the issue holds to it
SUFFIXES = (".md", ".py", ".v", ".vh", ".c", ".h", ".yaml", ".tmpl", ".sv", ".json", ".txt")


def history_lines(text: str, markdown: bool = False) -> list[tuple[int, str, str]]:
    """(line number, kind, line) of each line of ``text`` that keeps history; ``markdown``: a page,
    checked for stages only."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if STAGE.search(line):
            found.append((number, "stage", line))
        elif not markdown and TIMING.search(line):
            found.append((number, "timing", line))
    return found


def files(paths: list[Path]) -> list[Path]:
    """The text files under ``paths`` (files or directories) with a suffix of SUFFIXES."""
    out = []
    for path in paths:
        out += sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return [p for p in out if p.suffix in SUFFIXES and "__pycache__" not in p.parts]


def scan(paths: list[Path]) -> list[tuple[Path, int, str, str]]:
    """(file, line number, kind, line) of every history line under ``paths``."""
    return [
        (path, number, kind, line)
        for path in files(paths)
        for number, kind, line in history_lines(path.read_text(errors="replace"), path.suffix == ".md")
    ]


if __name__ == "__main__":
    for path, number, kind, line in scan([Path(p) for p in sys.argv[1:] or SOURCES]):
        print(f"{path}:{number}: {kind}: {line.strip()}")
