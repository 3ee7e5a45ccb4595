"""The journal of a campaign: one JSON line per outcome, keyed by the mutated file's code and the
suite's text, and the table it makes."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hwvit.mutate.generate import code_of
from hwvit.mutate.runner import Outcome
from hwvit.mutate.suites import suite_of

JOURNAL = "build/mutate/journal.jsonl"


@functools.cache
def machine() -> str:
    """This machine in one cell, as the journal records it beside each outcome: the CPU's model,
    family and model number, cores and int8 flags (``hwvit.ops.cpu``)."""
    from hwvit.ops import cpu

    return cpu.features().describe()


def _digest(root: Path, rels: Sequence[str], read: Callable[[Path], bytes] = Path.read_bytes) -> str:
    import hashlib

    h = hashlib.sha256()
    for rel in rels:
        h.update(rel.encode() + b"\0" + read(root / rel) + b"\0")
    return h.hexdigest()[:16]


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
        self.longest: dict[tuple[str, str, str], float] = {}  # ... and its longest test (older journals: none)
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    row = json.loads(line)
                except ValueError:  # a line cut short by an interrupt
                    continue
                if row.get("baseline"):
                    key = (row["block"], row["fp"], row.get("suite", ""))
                    self.baselines[key] = float(row["seconds"])
                    if row.get("longest"):
                        self.longest[key] = float(row["longest"])
                else:
                    self.done[(row["block"], row["fp"], row["key"])] = row

    def _append(self, row: dict) -> None:
        import json

        with self._lock, self.path.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def record(self, block: str, fp: str, outcome: Outcome, suite: str = "", simulator: str = "") -> None:
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
            "machine": machine(),
            "simulator": simulator,
        }
        self.done[(block, fp, m.key)] = row
        self._append(row)

    def record_baseline(
        self, block: str, fp: str, seconds: float, suite: str = "", longest: float | None = None
    ) -> None:
        self.baselines[(block, fp, suite)] = seconds
        row = {"baseline": True, "block": block, "fp": fp, "suite": suite, "seconds": round(seconds, 1)}
        if longest:
            self.longest[(block, fp, suite)] = longest
            row["longest"] = round(longest, 2)
        self._append(row)


@dataclass
class Row:
    """One line of the table: a block's mutants of one file."""

    block: str
    file: str
    total: int
    counts: dict[str, int]
    seconds: float
    where: tuple[str, ...] = ()  # the machines and simulators its journaled outcomes ran on

    @property
    def pending(self) -> int:
        return self.total - sum(self.counts.values())

    @property
    def score(self) -> float | None:
        k, s = self.counts.get("killed", 0), self.counts.get("survived", 0)
        return k / (k + s) if k + s else None


def table(rows: list[Row]) -> str:
    """The campaign table (markdown): per block and file, then per block over all its files."""
    head = (
        "| block | file | mutants | killed | equivalent | survived | did not compile | pending | score | time "
        "| measured on |"
    )
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]

    def fmt(block, file, total, c: dict[str, int], pending, score, seconds: float, where) -> str:
        sc = "n/a" if score is None else f"{100 * score:.1f}%"
        return (
            f"| {block} | {file} | {total} | {c.get('killed', 0)} | {c.get('equivalent', 0)} | "
            f"{c.get('survived', 0)} | {c.get('did-not-compile', 0)} | {pending} | {sc} | {seconds / 60:.1f} min | "
            f"{' / '.join(sorted(set(where)))} |"
        )

    by_block: dict[str, list[Row]] = {}
    for r in rows:
        by_block.setdefault(r.block, []).append(r)
        lines.append(fmt(r.block, r.file, r.total, r.counts, r.pending, r.score, r.seconds, r.where))
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
                    [w for r in rs for w in r.where],
                )
            )
    return "\n".join(lines)
