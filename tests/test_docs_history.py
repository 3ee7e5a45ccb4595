"""No line of docs/, hwvit/, sim/ or rtl/ keeps the history of the work (tests/history_lines.py says
what that is; `python tests/history_lines.py` lists such lines)."""

from __future__ import annotations

from pathlib import Path

import pytest

from history_lines import SOURCES, history_lines, scan

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "line, kind",
    [
        ("## The 2-core Zen 3, session 27 (2026-11-28): the targets", "stage"),
        ("(docs/performance.md, sessions 19 and 20).", "stage"),
        ("the changes of sessions 24b-26", "stage"),
        ("what stage 3 of the work left", "stage"),
        ("against 13:38 in session 26 and 803 s for stop 51's landing CI", "stage"),
        ("Found by the reset-value run of 2026-11-23", "stage"),
        ("# batch 8 took 316-448 ms per image with the defaults", "timing"),
        ("# Measured side by side on a 2-core AMD EPYC (docs/performance.md): the forward", "timing"),
        ('mutate_first=("a", "b", "c"),  # 1.7, 3, 3 s', "timing"),
        ("# check took over 60 s on the 2-core machine at load 6", "timing"),
        ("# CPU against ~1.6 s for a block's own model on the EPYC", "timing"),
        ("# Measured on one H100, ViT-B/16 batch 64: 652 images/s against 355 eager", "timing"),
        ("# make test's GEMM tests beside it ran 200-270 s", "timing"),
    ],
)
def test_the_check_finds_history(line, kind):
    assert [k for _, k, _ in history_lines(line)] == [kind]


@pytest.mark.parametrize(
    "line",
    [
        "Reset value of a data register: read only by stage 2 of an OUT pass, and every",
        '# _int_mm on a Zen 4 is wrong for stride-0 operands (docs/arithmetic.md, "Operand layouts").',
        "numba.get_num_threads takes two locks: 40 us a call in the forward",
        "cycles/s measured on the whole-core test (43 s of hardware at 100 MHz, the reason for the 40-bit width)",
        "help from 0.2 s to 1-2.5 s. --help shows ``metavar``",
        "with ort.InferenceSession(path) as session: 2 outputs",
        'version = "2026.8"',
    ],
)
def test_the_check_passes_what_is_not_history(line):
    assert history_lines(line) == []


def test_a_page_may_name_the_machine_of_its_figures():
    """Markdown is checked for stages only: a table row names the machine it was measured on."""
    row = "| Xeon (family 6 model 167), 2 cores, avx2; load 1.0 | 2.13.0+cpu | vit-b16 | 1 | 150.2 ms |"
    assert history_lines(row, markdown=True) == [] and history_lines(row) != []


def test_no_file_keeps_history():
    found = list(scan([ROOT / source for source in SOURCES]))
    assert not found, "\n".join(f"{p.relative_to(ROOT)}:{n}: {k}: {line.strip()}" for p, n, k, line in found)


@pytest.mark.parametrize("page", ["docs/performance.md", "docs/verification.md", "docs/mutation.md"])
def test_the_reference_pages_stay_references(page):
    """Each under 300 lines: one current table, not a log of every measurement."""
    assert len((ROOT / page).read_text().splitlines()) < 300
