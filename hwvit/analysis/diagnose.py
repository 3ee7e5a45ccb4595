"""Where the integer model loses accuracy: the points that add the most error, the stage each
point belongs to, and one suggested change per point (hwvit.report.write words them)."""

from __future__ import annotations

import math
import re

from hwvit.analysis.compare import CompareResult


def suggestion(r: dict) -> str:
    """One suggested change for a point, from its clip rate, range use and isolated error."""
    iso = r.get("isolated_sqnr_db", math.inf)
    if r.get("clip_rate", 0.0) > 1e-3:
        return "clips more than 0.1% of its elements: widen its range (mse calibration, or a higher percentile)"
    if iso - r["sqnr_db"] < 3.0:
        return (
            "its own error dominates (isolated within 3 dB of accumulated): give it more bits "
            "(its weights or the activation width)"
        )
    if r.get("range_used", 1.0) < 0.5:
        return "uses less than half its integer range: tighten its scale (percentile or mse calibration)"
    return "most of its error comes from earlier points: fix those first (lower isolated SQNR upstream)"


def worst_points(result: CompareResult, n: int = 3) -> list[dict]:
    """The ``n`` points that add the most error by themselves (lowest isolated SQNR; accumulated without it)."""
    pts = [r for r in result.layers if r["path"] != "input"]
    return sorted(pts, key=lambda r: r.get("isolated_sqnr_db", r["sqnr_db"]))[:n]


def stage_of(path: str) -> str:
    """The stage a traced point belongs to: ``embed``, ``layers.<i>`` or ``head``."""
    m = re.match(r"layers\.(\d+)\.", path)
    if m:
        return f"layers.{m.group(1)}"
    if path in ("input", "tokens") or path.startswith("embed"):
        return "embed"
    return "head"


def by_stage(layers: list[dict]) -> dict[str, list[dict]]:
    """The traced points (compare's layer rows) grouped by stage, in forward order."""
    stages: dict[str, list[dict]] = {}
    for row in layers:
        stages.setdefault(stage_of(row["path"]), []).append(row)
    return stages
