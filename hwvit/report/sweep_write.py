"""Write a sweep to disk: sweep.csv, sweep.md, sweep.png and sweep.json, atomically (hwvit.report.publish)."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

from hwvit import __version__
from hwvit.analysis.sweep import COLUMNS, EXP_ENTRY_BITS, FRONTS, VARIANT_FAMILIES, baseline_row
from hwvit.report.plots import sweep_plot
from hwvit.report.publish import json_safe, staged_dir
from hwvit.textfiles import count

KIND = "sweep"
FILES = ("sweep.csv", "sweep.md", "sweep.png", "pareto.png", "sweep.json", "variants_pareto.png")


# Plot columns (hwvit.report.plots.sweep_plot): title, factors, x label, cost key, tick label,
# drawn apart (not on the same cost axis as the others).
PLOT_COLUMNS = [
    (
        "activation bits",
        ("act_bits",),
        "activation bits (GEMM a x 8 multipliers)",
        "act_bits",
        lambda r: f"{r['act_bits']}",
        None,
    ),
    (
        "softmax output bits",
        ("softmax_bits",),
        "probability bits",
        "softmax_bits",
        lambda r: f"{r['softmax_bits']}",
        None,
    ),
    (
        "exp approximation",
        ("exp", "exp_entries"),
        f"exp ROM entries (x{EXP_ENTRY_BITS} bit; shift: no ROM)",
        "table_bits",
        lambda r: "shift" if r["exp"] == "shift" else f"{r['exp_entries']}",
        lambda r: r["exp"] == "shift",
    ),
    (
        "calibration",
        ("calibration",),
        "activation range (offline, no hardware cost)",
        "calibration_rank",
        lambda r: "min/max" if r["calibration"] == "minmax" else f"p{r['percentile']:g}",
        None,
    ),
    (
        "block arithmetic",
        VARIANT_FAMILIES,
        "each block's own arithmetic\n(its cells: hwvit synth --variants)",
        "variant_rank",
        lambda r: "hwvit" if r["factor"] == "baseline" else f"{r['factor']}=\n{r['label']}",
        None,
    ),
]


def plot_rows(rows: list[dict]) -> list[dict]:
    """Rows with the ordering keys of the calibration column (min/max first, then higher percentiles
    first) and of the block-arithmetic column (hwvit's first, then the variants in grid order)."""
    out = []
    for i, r in enumerate(rows):
        rank = 0.0 if r["calibration"] == "minmax" else 1.0 + (100.0 - float(r["percentile"]))
        out.append({**r, "calibration_rank": rank, "variant_rank": i if r["factor"] in VARIANT_FAMILIES else -1})
    return out


def _num(v, digits: int) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return f"{v:.{digits}f}"
    return str(v)


def render_csv(rows: list[dict]) -> str:
    """One row per grid point, columns COLUMNS; floats with 6 decimals, missing values empty."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow([_num(r[c], 6) if c != "percentile" else _num(r[c], 4) for c in COLUMNS])
    return buf.getvalue()


def _pct(v) -> str:
    return "n/a" if v is None else f"{100.0 * v:.2f}%"


def _delta_pts(v, b) -> str:
    if v is None or b is None:
        return "n/a"
    return f"{100.0 * (v - b):+.2f}"


def _delta_db(v: float, b: float) -> str:
    if not (math.isfinite(v) and math.isfinite(b)):
        return "n/a"
    return f"{v - b:+.2f}"


def table(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    """The markdown table: one row per grid point, with deltas to the baseline."""
    base = baseline_row(rows) or rows[0]
    labelled = base["top1_int"] is not None
    acc_key = "top1_int" if labelled else "agreement"
    head = [
        "factor",
        "setting",
        "act bits",
        "softmax bits",
        "exp",
        "table entries",
        "table bits",
        "calibration",
        "top-1 int" if labelled else "agreement",
        "change (points)",
        "logits SQNR (dB)",
        "change (dB)",
        "worst point (SQNR dB)",
        "cost vs int8 baseline",
    ]
    if labelled:
        head.insert(10, "agreement")
    out = []
    for r in rows:
        calib = "min/max" if r["calibration"] == "minmax" else f"percentile {r['percentile']:g}"
        line = [
            r["factor"],
            r["label"],
            str(r["act_bits"]),
            str(r["softmax_bits"]),
            r["exp"],
            str(r["exp_entries"]),
            str(r["table_bits"]),
            calib,
            _pct(r[acc_key]),
            _delta_pts(r[acc_key], base[acc_key]),
            _num(r["logits_sqnr_db"], 2),
            _delta_db(r["logits_sqnr_db"], base["logits_sqnr_db"]),
            f"{r['worst_point']} ({_num(r['worst_sqnr_db'], 1)})",
            r["cost_note"],
        ]
        if labelled:
            line.insert(10, _pct(r["agreement"]))
        out.append(line)
    return head, out


def _name(r: dict) -> str:
    return "int8 baseline" if r["factor"] == "baseline" else f"{r['factor']}: {r['label']}"


def pareto_plot(rows: list[dict], path: Path, front: str = "both") -> None:
    """pareto.png: ``pareto_figure``."""
    pareto_figure(rows, front).savefig(path, dpi=110)


def pareto_figure(rows: list[dict], front: str = "both"):
    """Accuracy and logits SQNR, each against storage cost (bits x elements per input + exp ROM
    bits), side by side: the rows on the Pareto front of ``front`` (hwvit.analysis.sweep.pareto)
    red (and, where the front weighs that panel's measure alone, joined as a step), the baseline a
    large star drawn last, every point named once (the names of points at one place in one label)
    where no other label or marker is, and the legend below the panels."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    from hwvit.report.plots import freeze_layout, place_labels

    labelled = rows[0]["top1_int"] is not None
    key = "top1_int" if labelled else "agreement"
    base = baseline_row(rows) or rows[0]
    measures = (
        (key, 100.0, f"{'top-1' if labelled else 'agreement with float'} (%)", "top1"),
        ("logits_sqnr_db", 1.0, "logits SQNR against float (dB)", "sqnr"),
    )
    fig = Figure(figsize=(11.0, 5.2), layout="constrained")
    axes = fig.subplots(1, 2)
    panels = []
    for ax, (field, scale, ylabel, alone) in zip(axes, measures):
        pts = [
            (r["cost_bits"] / base["cost_bits"], scale * r[field], r)
            for r in rows
            if r[field] is not None and math.isfinite(r[field])
        ]
        for x, y, r in pts:
            if r is not base:
                on = bool(r["pareto"])
                ax.scatter([x], [y], s=55 if on else 35, color=RED if on else BLUE, zorder=3)
        bx, by = base["cost_bits"] / base["cost_bits"], scale * base[field]
        ax.scatter([bx], [by], s=260, marker="*", color=GOLD, edgecolors="black", linewidths=0.8, zorder=5)
        line = sorted((x, y) for x, y, r in pts if r["pareto"])
        if front == alone and len(line) > 1:  # a front of this measure alone: its staircase
            ax.step([p[0] for p in line], [p[1] for p in line], where="post", color=RED, lw=1, zorder=2)
        ax.set_xlabel(
            "cost relative to the int8 baseline\n(activation bits x elements per input + exp ROM bits)", fontsize=9
        )
        ax.set_ylabel(ylabel, fontsize=9)
        ax.grid(alpha=0.3)
        ax.margins(x=0.45, y=0.25)  # room for the labels inside the panel
        panels.append((ax, pts))
    fig.suptitle(
        f"Accuracy and logits SQNR against cost; red: Pareto front of cost against {FRONTS[front]}",
        fontsize=10,
    )
    fig.legend(
        handles=[
            Line2D([], [], marker="*", ls="", ms=13, color=GOLD, markeredgecolor="black", label="int8 baseline"),
            Line2D([], [], marker="o", ls="", color=RED, label="on the front: no point costs less and does better"),
            Line2D([], [], marker="o", ls="", color=BLUE, label="off the front"),
        ],
        loc="outside lower center",
        ncols=3,
        fontsize=8,
        frameon=False,
    )
    renderer = freeze_layout(fig)
    for ax, pts in panels:
        groups: dict[tuple[float, float], list[dict]] = {}
        for x, y, r in pts:
            groups.setdefault((round(x, 9), round(y, 9)), []).append(r)
        items = []
        for (x, y), members in sorted(groups.items(), key=lambda g: (base not in g[1], g[0])):
            members.sort(key=lambda r: r is not base)
            size = {"marker_pt": 19} if base in members else {}  # the star's own size
            items.append((x, y, "\n".join(_name(r) for r in members), {"fontsize": 7, **size}))
        place_labels(ax, renderer, items)
    return fig


RED, BLUE, GOLD = "#C44E52", "#4C72B0", "#F2C14E"


def render_md(rows: list[dict], model: str, front: str = "both") -> str:
    base = baseline_row(rows) or rows[0]
    labelled = base["top1_int"] is not None
    head, body = table(rows)
    lines = [
        f"# hwvit sweep: {model}",
        "",
        f"{count(len(rows), 'configuration')}, each calibrated and evaluated on the same "
        f"{count(base['images'], 'image')} "
        f"(hwvit {__version__}). One knob changes per row; the difference to the int8 baseline is that "
        f"knob's price. Baseline: {base['act_bits']}-bit activations, {base['softmax_bits']}-bit "
        f"probabilities, exp {base['exp']} with {base['exp_entries']} entries, {base['calibration']} "
        "calibration. A narrower activation leaves the exp ROM as it is (entries beyond 2^bits are "
        "just never read).",
        "",
    ]
    if labelled:
        lines += [
            f"Float model top-1: {_pct(base['top1_float'])}. Baseline integer top-1: {_pct(base['top1_int'])}, "
            f"agreement with float {_pct(base['agreement'])}, logits SQNR {_num(base['logits_sqnr_db'], 2)} dB.",
            "",
        ]
    else:
        lines += [
            f"No labels: accuracy is top-1 agreement with the float model. Baseline agreement "
            f"{_pct(base['agreement'])}, logits SQNR {_num(base['logits_sqnr_db'], 2)} dB.",
            "",
        ]
    lines += ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    lines += ["", "## What each choice costs", ""]
    acc_key = "top1_int" if labelled else "agreement"
    what = "top-1" if labelled else "agreement"
    for r in rows:
        if r is base:
            continue
        lines.append(
            f"- {r['factor']} = {r['label']}: {what} {_delta_pts(r[acc_key], base[acc_key])} points, "
            f"logits SQNR {_delta_db(r['logits_sqnr_db'], base['logits_sqnr_db'])} dB; {r['cost_note']}."
        )
    lines += variants_section(rows, base, acc_key, what)
    on_front = [f"{r['factor']} {r['label']}" for r in rows if r.get("pareto")]
    lines += [
        "",
        "Accuracy and logits SQNR against cost, one panel per knob:",
        "",
        "![sweep](sweep.png)",
        "",
        f"Pareto front of cost (activation bits x elements per input + exp ROM bits) against {FRONTS[front]}: "
        f"{', '.join(on_front) or 'none'}.",
        "",
        "![pareto](pareto.png)",
        "",
    ]
    return "\n".join(lines)


def variants_section(rows: list[dict], base: dict, acc_key: str, what: str) -> list[str]:
    """Arithmetic variants side by side: end to end, then the SQNR of every traced point (dB), one
    column per variant (the baseline first); empty when the sweep varied no block's arithmetic."""
    from hwvit.analysis.sweep import VARIANT_FAMILIES

    chosen = [r for r in rows if r["factor"] in VARIANT_FAMILIES]
    if not chosen:
        return []
    cols = [base, *chosen]
    names = ["hwvit (baseline)", *(f"{r['factor']}={r['label']}" for r in chosen)]
    out = ["", "## Block arithmetic, side by side", ""]
    out += ["| | " + " | ".join(names) + " |", "|---|" + "|".join("---" for _ in cols) + "|"]
    out.append(f"| {what} | " + " | ".join(_pct(r[acc_key]) for r in cols) + " |")
    if acc_key == "top1_int":
        out.append("| agreement with float | " + " | ".join(_pct(r["agreement"]) for r in cols) + " |")
    out.append("| logits SQNR (dB) | " + " | ".join(_num(r["logits_sqnr_db"], 2) for r in cols) + " |")
    paths = list(base.get("layers") or {})
    for p in paths:
        out.append(f"| {p} | " + " | ".join(_num((r.get("layers") or {}).get(p), 1) for r in cols) + " |")
    out += ["", "Rows below the first three: SQNR (dB) of each traced point against the float model.", ""]
    return out


def _front(points: list[tuple[int, float]]) -> list[bool]:
    """On the Pareto front of (cells, error): no other point has fewer or equal cells and a higher
    SQNR, with one of them strictly better."""
    out = []
    for i, (c, q) in enumerate(points):
        beaten = any((c2 <= c and q2 >= q) and (c2 < c or q2 > q) for j, (c2, q2) in enumerate(points) if j != i)
        out.append(not beaten)
    return out


def variant_costs_section(rows: list[dict], block_costs: dict) -> list[str]:
    """Each variant's block beside its error: cells, flip-flops, longest path, memory bits
    (hwvit.analysis.variant_cost), logits SQNR and the front per family."""
    base = baseline_row(rows) or rows[0]
    out = ["", "## What each arithmetic costs in logic", ""]
    out += [
        "Generic yosys synthesis of the block that computes each arithmetic (`hwvit synth`; GELU "
        "variants are all tables on rtl/gelu.v). Error: the logits SQNR against the float model "
        "(higher is better); front: no other arithmetic of that block is both smaller and more accurate.",
        "",
        "| block | arithmetic | cells | flip-flops | longest path (cells) | memory bits | logits SQNR (dB) | front |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for family, pts in _cost_points(rows, base, block_costs).items():
        front = _front([(p[1], p[2]) for p in pts])
        for (name, cells, sqnr, res), on in zip(pts, front):
            out.append(
                f"| {family} | {name} | {cells} | {res.flip_flops} | {res.longest_path} | {res.memory_bits} "
                f"| {_num(sqnr, 2)} | {'yes' if on else ''} |"
            )
    missing = sorted(f"{f}={n}" for (f, n), res in block_costs.items() if res is None)
    if missing:
        out += ["", f"No Verilog block synthesized for: {', '.join(missing)}."]
    out += ["", "![variants pareto](variants_pareto.png)", ""]
    return out


def _cost_points(rows: list[dict], base: dict, block_costs: dict) -> dict[str, list[tuple]]:
    """family -> [(variant, cells, logits SQNR, SynthResult)], the baseline's arithmetic first."""
    from hwvit import variants

    out: dict[str, list[tuple]] = {}
    for (family, name), res in block_costs.items():
        if res is None:
            continue
        if variants.is_default(family, name):
            row = base
        else:
            row = next((r for r in rows if r["factor"] == family and r["label"] == name), None)
        if row is None or row["logits_sqnr_db"] is None:
            continue
        out.setdefault(family, []).append((name, res.cells, float(row["logits_sqnr_db"]), res))
    for family, pts in out.items():
        pts.sort(key=lambda p, f=family: (not variants.is_default(f, p[0]), p[1]))
    return out


def variants_pareto_plot(rows: list[dict], block_costs: dict, path: Path) -> None:
    """variants_pareto.png: ``variants_pareto_figure``."""
    variants_pareto_figure(rows, block_costs).savefig(path, dpi=110)


def variants_pareto_figure(rows: list[dict], block_costs: dict):
    """Logits SQNR against cells, one panel per block family, the front of each joined, every
    point named where no other label or marker is."""
    from matplotlib.figure import Figure

    from hwvit.report.plots import freeze_layout, place_labels

    base = baseline_row(rows) or rows[0]
    groups = _cost_points(rows, base, block_costs)
    fig = Figure(figsize=(4.2 * max(1, len(groups)), 4.2), layout="constrained")
    panels = []
    for i, (family, pts) in enumerate(groups.items()):
        ax = fig.add_subplot(1, len(groups), i + 1)
        front = _front([(p[1], p[2]) for p in pts])
        for (_, cells, sqnr, _res), on in zip(pts, front):
            ax.scatter([cells], [sqnr], s=60 if on else 30, color=RED if on else BLUE, zorder=3)
        line = sorted((p[1], p[2]) for p, on in zip(pts, front) if on)
        ax.step([c for c, _ in line], [q for _, q in line], where="post", color=RED, lw=1)
        ax.set_title(f"{family}", fontsize=10)
        ax.set_xlabel("cells (yosys generic synth)")
        ax.set_ylabel("logits SQNR against float (dB)")
        ax.grid(alpha=0.3)
        ax.margins(x=0.35, y=0.25)
        panels.append((ax, pts))
    fig.suptitle("Error against logic per arithmetic; red: Pareto front", fontsize=10)
    renderer = freeze_layout(fig)
    for ax, pts in panels:
        place_labels(ax, renderer, [(cells, sqnr, name, {"fontsize": 7}) for name, cells, sqnr, _ in pts])
    return fig


def write_sweep(
    rows: list[dict], out_dir: str | Path, model: str, meta: dict | None = None, block_costs: dict | None = None
) -> Path:
    """Write sweep.csv, sweep.md, sweep.png and sweep.json into ``out_dir`` atomically; return the directory.

    ``out_dir`` must not exist, be empty, or hold a previous hwvit sweep (replaced whole); ValueError otherwise.
    """
    if not rows:
        raise ValueError("no sweep rows to write")
    with staged_dir(out_dir, KIND, FILES) as (tmp, final):
        (tmp / "sweep.csv").write_text(render_csv(rows), encoding="utf-8")
        front = (meta or {}).get("front", "both")
        md = render_md(rows, model, front)
        if block_costs:
            md += "\n".join(variant_costs_section(rows, block_costs))
            variants_pareto_plot(rows, block_costs, tmp / "variants_pareto.png")
        (tmp / "sweep.md").write_text(md, encoding="utf-8")
        sweep_plot(plot_rows(rows), PLOT_COLUMNS, tmp / "sweep.png")
        pareto_plot(rows, tmp / "pareto.png", front)
        doc = {"kind": KIND, "hwvit": __version__, "model": model, **(meta or {}), "rows": rows}
        (tmp / "sweep.json").write_text(json.dumps(json_safe(doc), indent=2), encoding="utf-8")
    return final
