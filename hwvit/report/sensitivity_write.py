"""Write a sensitivity analysis: sensitivity.md (sorted table), sensitivity.png (bars), sensitivity.json,
and recipe.yaml when a mixed-precision recipe was proposed. Atomic (hwvit.report.publish)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from hwvit import __version__
from hwvit.quant.recipe import dump
from hwvit.report.publish import json_safe, staged_dir

KIND = "sensitivity"
FILES = ("sensitivity.md", "sensitivity.png", "sensitivity.json", "recipe.yaml")


def table(rows: list[dict], metric: str) -> tuple[list[str], list[list[str]]]:
    head = [
        "group",
        "layers",
        "bits",
        metric,
        f"change in {metric} (points)",
        "logits SQNR (dB)",
        "change in logits SQNR (dB)",
    ]
    body = [
        [
            r["group"],
            str(len(r["layers"])),
            str(r["bits"]),
            f"{100 * (r['top1'] if r['top1'] is not None else r['agreement']):.2f}%",
            f"{100 * r['d_acc']:+.2f}",
            f"{r['logits_sqnr_db']:.2f}",
            f"{r['d_sqnr_db']:+.2f}",
        ]
        for r in rows
    ]
    return head, body


def bars(rows: list[dict], path: Path, title: str) -> None:
    """Change in logits SQNR per group (sorted as the table), top-1 change written beside each bar."""
    fig = Figure(figsize=(8.0, 1.6 + 0.28 * len(rows)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    y = np.arange(len(rows))
    d = [r["d_sqnr_db"] for r in rows]
    ax.barh(y, d, color=["#C44E52" if v < 0 else "#55A868" for v in d], height=0.7)
    span = max([abs(v) for v in d] + [0.1])
    for yi, r in zip(y, rows):
        ax.text(
            r["d_sqnr_db"] + (0.02 if r["d_sqnr_db"] >= 0 else -0.02) * span,
            yi,
            f"{100 * r['d_acc']:+.1f} pt",
            va="center",
            ha="left" if r["d_sqnr_db"] >= 0 else "right",
            fontsize=7,
        )
    ax.set_yticks(y, [r["group"] for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(-1.25 * span, 1.25 * span)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xlabel("change in logits SQNR against the baseline (dB); label: change in top-1 (points)")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.savefig(path, dpi=110)


def write(out_dir: str | Path, meta: dict, rows: list[dict], proposal: dict | None, recipe=None) -> Path:
    """The directory atomically; returns its path."""
    metric = meta["metric"]
    head, body = table(rows, metric)
    calib = f"calibrated on {meta['calib_images']}" if meta["calib_images"] is not None else "the file's scales"
    md = [
        f"# hwvit sensitivity: {meta['model']}",
        "",
        f"{meta['description']} Evaluated on {meta['images']} images, {calib} "
        f"(hwvit {__version__}). Baseline: {metric} {100 * meta['baseline_acc']:.2f}%, logits SQNR "
        f"{meta['baseline_sqnr_db']:.2f} dB. Sorted most sensitive first.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" for _ in head) + "|",
    ]
    md += ["| " + " | ".join(r) + " |" for r in body]
    if proposal is not None:
        md += [
            "",
            "## Proposed mixed-precision recipe",
            "",
            proposal["text"],
            "",
            "```yaml",
            dump(recipe).rstrip(),
            "```",
        ]
    md += ["", "![change in logits SQNR per group](sensitivity.png)", ""]
    with staged_dir(out_dir, KIND, FILES) as (tmp, final):
        bars(rows, tmp / "sensitivity.png", f"{meta['model']}: {meta['description']}")
        (tmp / "sensitivity.md").write_text("\n".join(md), encoding="utf-8")
        if recipe is not None:
            (tmp / "recipe.yaml").write_text(dump(recipe), encoding="utf-8")
        doc = {"kind": KIND, "hwvit": __version__, "meta": meta, "rows": rows, "proposal": proposal}
        (tmp / "sensitivity.json").write_text(json.dumps(json_safe(doc), indent=2), encoding="utf-8")
    return final
