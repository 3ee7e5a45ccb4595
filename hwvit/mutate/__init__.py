"""Mutation testing of the RTL: would the testbenches notice a wrong block?

``mutants(text, file)`` (``generate``) makes single-point source mutants of one Verilog file.
``run(block, ...)`` (``runner``) applies each (a sample of them) to a copy of the tree in a
temporary directory, rejects those the simulator cannot compile, runs the block's pytest suite
(``suites.suite_of``, cheap tests first through the ``order`` plugin, stopping at the first
failure) and sorts the mutant into killed (a test failed or timed out), survived, equivalent
(listed with a reason in ``sim/mutants_equivalent.yaml``, or a dead sink) or did-not-compile. The
score is killed / (killed + survived). ``campaign`` (``campaigns``) runs every mutant of every
block, each outcome kept in a ``Journal`` (``journal``) that a rerun resumes from and ``table``
prints.
"""

from __future__ import annotations

from hwvit.mutate.campaigns import KILLERS_FIRST, campaign, killed_yet_equivalent, survivors
from hwvit.mutate.generate import (
    EQUIVALENT_FILE,
    Mutant,
    code_of,
    dead_sink,
    key_of,
    load_equivalent,
    mutants,
    stale_equivalent,
)
from hwvit.mutate.journal import JOURNAL, Journal, Row, fingerprint, suite_fingerprint, table
from hwvit.mutate.order import ORDER_ENV
from hwvit.mutate.runner import (
    COMPILE_MEMORY,
    COMPILE_TIMEOUT,
    ICARUS_SKIP,
    SUITE_SKIP,
    Outcome,
    Report,
    killer,
    run,
    run_one,
)
from hwvit.mutate.suites import (
    CORE,
    CORE_FIRST,
    CORE_PARTS,
    CORE_SUITE,
    first_tests,
    has_suite,
    markers_of,
    own_file,
    parts,
    parts_of,
    shared,
    source_of,
    suite_of,
    targets,
)

__all__ = [
    "COMPILE_MEMORY",
    "COMPILE_TIMEOUT",
    "CORE",
    "CORE_FIRST",
    "CORE_PARTS",
    "CORE_SUITE",
    "EQUIVALENT_FILE",
    "ICARUS_SKIP",
    "JOURNAL",
    "KILLERS_FIRST",
    "ORDER_ENV",
    "SUITE_SKIP",
    "Journal",
    "Mutant",
    "Outcome",
    "Report",
    "Row",
    "campaign",
    "code_of",
    "dead_sink",
    "first_tests",
    "fingerprint",
    "has_suite",
    "key_of",
    "killed_yet_equivalent",
    "killer",
    "load_equivalent",
    "markers_of",
    "mutants",
    "own_file",
    "parts",
    "parts_of",
    "run",
    "run_one",
    "shared",
    "source_of",
    "stale_equivalent",
    "suite_fingerprint",
    "suite_of",
    "survivors",
    "table",
    "targets",
]


def __getattr__(name: str):
    """``FIRST`` (kind -> the tests a mutant runs first: ``suites.first_tests``) and ``PARTS`` (kind ->
    the other files ``--source`` may mutate: ``suites.parts``), read from the block registry when asked."""
    if name == "FIRST":
        return first_tests()
    if name == "PARTS":
        return parts()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
