"""Every mutant of every block, resumable: ``campaign`` runs what the journal lacks and counts the rest."""

from __future__ import annotations

import concurrent.futures as cf
import threading
from collections.abc import Callable

from hwvit import toolchain
from hwvit.mutate.generate import EQUIVALENT_FILE, Mutant, dead_sink, key_of, load_equivalent, mutants
from hwvit.mutate.journal import Journal, Row, fingerprint, suite_fingerprint
from hwvit.mutate.runner import Outcome, killer, run_one, sim_wall_limit
from hwvit.mutate.suites import suite_of

KILLERS_FIRST = 2  # a campaign runs the tests that killed a file's last mutants first, this many


def campaign(
    chosen: list[tuple[str, str]],
    journal: Journal,
    *,
    simulator: str = "verilator",
    jobs: int = 1,
    timeout: int | None = None,
    on_outcome: Callable[[str, Outcome], None] | None = None,
    run: bool = True,
    lines: set[int] | None = None,
) -> list[Row]:
    """Every mutant of each (block, file) of ``chosen``: those in the journal with the current
    fingerprint are not run again; the rest run ``jobs`` at a time across all blocks, each outcome
    journaled as it finishes. ``run=False``: only the table of what the journal holds. ``lines``:
    run only the mutants of those source lines (two campaigns on one journal's copy share a long
    file); the table still counts every mutant."""
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
            if current(block, fp, mu) is not None or (lines and mu.line not in lines):
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
                journal.record_baseline(key[0], key[1], outcome.seconds, suites[key[0]], outcome.longest)
        sim_limits: dict[tuple[str, str], int] = {}
        for key in keys:
            limits[key] = timeout or max(120, int(4 * journal.baselines[(*key, suites[key[0]])]))
            sim_limits[key] = sim_wall_limit(journal.longest.get((*key, suites[key[0]])))

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
            first = recent.get((block, fp), [])
            outcome = run_one(mu, block, simulator, root, limits[(block, fp)], first, sim_limits[(block, fp)])
            name = killer(outcome)
            if name is not None:
                recent[(block, fp)] = list(dict.fromkeys([name, *recent.get((block, fp), [])]))[:KILLERS_FIRST]
            return block, fp, outcome

        with cf.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for fut in cf.as_completed([pool.submit(one, item) for item in work]):
                block, fp, outcome = fut.result()
                if outcome is None:  # reviewed as equivalent since the campaign started
                    continue
                journal.record(block, fp, outcome, suites[block], simulator)
                if on_outcome:
                    on_outcome(block, outcome)
    equivalent = load_equivalent(root) if run and work else equivalent  # as reviewed by now
    rows = []
    texts = {file: (root / file).read_text() for _, file, _, _ in plan}
    for block, file, fp, every in plan:
        counts: dict[str, int] = {}
        seconds = 0.0
        where: set[str] = set()
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
                if row.get("machine"):  # journals of older hwvit name no machine
                    where.add(f"{row['machine']}; {row.get('simulator') or 'simulator not recorded'}")
        rows.append(Row(block, file, len(every), counts, seconds, tuple(sorted(where))))
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
