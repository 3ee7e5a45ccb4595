"""PNG plots of a float-vs-fixed comparison and of a design-space sweep (matplotlib, Agg).

Figures are built with ``matplotlib.figure.Figure`` and saved through the Agg canvas, never through
pyplot: no global figure state, no display needed, nothing left open after a call. Each function
writes one PNG and returns its path.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.text import Text

DPI = 110

# Colour of a traced point by the kind of block that produced it (what an architect scans for).
_GROUPS = (
    ("attention", "#4C72B0", (".attn.q", ".attn.k", ".attn.v", ".attn.scores", ".attn.context", ".attn.proj")),
    ("softmax", "#DD8452", (".attn.probs",)),
    ("MLP", "#55A868", (".mlp.fc1", ".mlp.gelu", ".mlp.fc2")),
    ("LayerNorm", "#8172B3", ("norm1", "norm2", "norm", "norm_in", "norm_out", "pre_head.norm")),
    ("residual add", "#937860", ("add1", "add2", "pos_add", "tokens")),
)
_OTHER = ("embed / pool / head", "#808080")


def point_group(path: str) -> tuple[str, str]:
    """(group name, colour) of a traced point such as ``layers.1.mlp.fc2``."""
    for name, colour, suffixes in _GROUPS:
        if any(path.endswith(s) or path == s for s in suffixes):
            return name, colour
    return _OTHER


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=DPI)
    return path


# --- labels that neither overlap nor leave their axes --------------------------------------------
# Places tried for a label around its marker, nearest first: (dx, dy) in points and the alignment
# that puts the text on that side: beside it (right, left), above, below, the corners, then further out.
_SIDES = (
    (8, 0, "left", "center"),
    (-8, 0, "right", "center"),
    (0, 8, "center", "bottom"),
    (0, -8, "center", "top"),
    (7, 7, "left", "bottom"),
    (-7, 7, "right", "bottom"),
    (7, -7, "left", "top"),
    (-7, -7, "right", "top"),
)
_OFFSETS = [(dx * k, dy * k, ha, va) for k in (1, 2, 3, 4, 6, 8) for dx, dy, ha, va in _SIDES]
_LEADER = {"arrowstyle": "-", "color": "#999999", "lw": 0.6, "shrinkA": 1, "shrinkB": 4}


def freeze_layout(fig: Figure):
    """Lay the figure out once (constrained layout) and keep it: labels placed in display
    coordinates stay where they were measured. Returns the renderer to measure with."""
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    fig.set_layout_engine("none")
    return fig.canvas.get_renderer()


def place_labels(ax, renderer, items: list[tuple[float, float, str, dict]], marker_pt: float = 9.0) -> list:
    """Annotate each (x, y, text, text options) of ``items`` at the first place around its point
    where the text overlaps no label placed before it and no marker, and lies inside the axes
    (``freeze_layout`` first); a thin leader line joins a label to its point. Points at the same
    place should come as one item with one line per name. ``marker_pt``: the markers' size, or an
    item's own as ``marker_pt`` in its options (a large star). Returns the annotations."""
    inside = ax.get_window_extent(renderer).padded(-2)
    dots = []
    for x, y, _, options in items:
        half = options.get("marker_pt", marker_pt) * renderer.points_to_pixels(1.0) / 2
        px, py = ax.transData.transform((x, y))
        dots.append((px - half, py - half, px + half, py + half))
    placed: list[tuple[float, float, float, float]] = []
    out = []
    for x, y, text, options in items:
        options = {k: v for k, v in options.items() if k != "marker_pt"}
        best = None
        for dx, dy, ha, va in _OFFSETS:
            ann = ax.annotate(
                text,
                (x, y),
                xytext=(dx, dy),
                textcoords="offset points",
                ha=ha,
                va=va,
                arrowprops=_LEADER,
                **options,
            )
            ann.update_positions(renderer)
            box = Text.get_window_extent(ann, renderer)  # the text's own box, not its leader line
            box = (box.x0, box.y0, box.x1, box.y1)
            clash = sum(_overlap(box, other) for other in placed + dots)
            outside = not (inside.x0 <= box[0] and box[2] <= inside.x1 and inside.y0 <= box[1] and box[3] <= inside.y1)
            score = clash + (1e9 if outside else 0.0)
            if best is None or score < best[0]:
                if best is not None:
                    best[1].remove()
                best = (score, ann, box)
            else:
                ann.remove()
            if score == 0:
                break
        placed.append(best[2])
        out.append(best[1])
    return out


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    """Area shared by two boxes (x0, y0, x1, y1) in pixels."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0


def sqnr_bars(layers: list[dict], path: Path, title: str = "") -> Path:
    """Horizontal bars of SQNR (dB) per traced point, in model order from top to bottom.

    Horizontal bars keep 40-100 point names readable at any model depth (the figure grows 0.2 in
    per point). A point with no error at all (SQNR +inf) gets a hatched bar to the axis end and the
    label "exact".
    """
    rows = [r for r in layers if r["path"] != "input"] or list(layers)
    names = [r["path"] for r in rows]
    values = [float(r["sqnr_db"]) for r in rows]
    finite = [v for v in values if math.isfinite(v)]
    top = (max(finite) if finite else 40.0) * 1.12 + 1.0
    low = min(0.0, min(finite) * 1.1 if finite else 0.0)
    fig = Figure(figsize=(8.0, 1.4 + 0.2 * len(rows)), layout="constrained")
    ax = fig.add_subplot()
    y = np.arange(len(rows))
    for yi, (name, v) in enumerate(zip(names, values)):
        colour = point_group(name)[1]
        if math.isfinite(v):
            ax.barh(yi, v, color=colour, height=0.75)
            ax.text(v + 0.01 * (top - low), yi, f"{v:.1f}", va="center", fontsize=7)
        else:  # +inf: the integer point equals the float point exactly
            ax.barh(yi, top - low, left=low, color="white", edgecolor=colour, hatch="//", height=0.75)
            ax.text(low + 0.01 * (top - low), yi, "exact", va="center", fontsize=7)
    worst = min(range(len(values)), key=lambda i: values[i]) if values else None
    ax.set_yticks(y, names, fontsize=7)
    if worst is not None:
        ax.get_yticklabels()[worst].set_fontweight("bold")
        ax.get_yticklabels()[worst].set_color("#C44E52")
    ax.invert_yaxis()  # model order, first point at the top
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(low, top + 0.08 * (top - low))  # room for the value labels
    ax.set_xlabel("SQNR of the integer point vs the float point (dB, higher is better)")
    ax.grid(axis="x", alpha=0.3)
    seen = []
    for name in names:
        g = point_group(name)
        if g not in seen:
            seen.append(g)
    # Below the axes, not inside: inside, it hides the bars of the last points.
    fig.legend(
        handles=[Patch(color=c, label=n) for n, c in seen],
        loc="outside lower center",
        ncols=min(len(seen), 6),
        fontsize=7,
        frameon=False,
    )
    ax.set_title(title or "SQNR per traced point (worst in red)", fontsize=10)
    return _save(fig, path)


def error_histogram(
    errors: np.ndarray | None, path: Path, point: str, sqnr_db: float | None = None, total: int | None = None
) -> Path:
    """Histogram of the signed error (float - int) at one traced point, in LSB of its output scale.

    The count axis is logarithmic so the rare large errors (the tails that matter for a block's
    worst case) stay visible beside the bulk within +-0.5 LSB.
    """
    fig = Figure(figsize=(7.5, 4.0), layout="constrained")
    ax = fig.add_subplot()
    err = np.asarray(errors if errors is not None else [], dtype=np.float64).reshape(-1)
    if err.size == 0:
        ax.text(0.5, 0.5, f"no error samples recorded for {point}", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return _save(fig, path)
    span = max(float(np.abs(err).max()), 0.5)
    bins = np.linspace(-span, span, 81)  # 80 bins, symmetric around 0
    ax.hist(err, bins=bins, color="#C44E52", alpha=0.85)
    ax.set_yscale("log")
    ax.axvline(0.0, color="black", lw=0.8)
    for edge in (-0.5, 0.5):  # an ideal rounding of the float value lands within +-0.5 LSB
        ax.axvline(edge, color="black", lw=0.8, ls=":")
    ax.set_xlabel("error: float - int (LSB of the point's output scale)")
    ax.set_ylabel("elements (log)")
    shown = f"first {err.size} of {total} elements" if total and total > err.size else f"all {err.size} elements"
    stats = (
        f"{shown}\nmean {err.mean():+.3f} LSB\nstd {err.std():.3f} LSB\n"
        f"max |err| {np.abs(err).max():.2f} LSB (of these)\n"
        f"within +-0.5 LSB: {100.0 * float(np.mean(np.abs(err) <= 0.5)):.1f}%"
    )
    ax.text(
        0.98,
        0.97,
        stats,
        transform=ax.transAxes,
        ha="right",
        va="top",
        fontsize=8,
        bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "#999999"},
    )
    sq = "" if sqnr_db is None else f", SQNR {sqnr_db:.1f} dB"
    ax.set_title(f"Error at the worst point: {point}{sq}", fontsize=10)
    return _save(fig, path)


def logits_scatter(
    logits_float: np.ndarray,
    logits_int: np.ndarray,
    path: Path,
    sqnr_db: float | None = None,
    agreement: float | None = None,
) -> Path:
    """Every logit of every image: float (x) vs dequantized integer (y), with the line y = x.

    For each image whose top-1 class differs between the two models, the logits of both contested
    classes (float's top-1 and int's top-1) are marked with a red cross: with 1000 classes,
    colouring all of an image's logits would hide where the disagreement is.
    """
    lf = np.asarray(logits_float, dtype=np.float64)
    li = np.asarray(logits_int, dtype=np.float64)
    if lf.ndim == 1:
        lf, li = lf[:, None], li[:, None]
    fig = Figure(figsize=(5.8, 5.6), layout="constrained")
    ax = fig.add_subplot()
    ax.scatter(lf.ravel(), li.ravel(), s=6, alpha=0.35, color="#4C72B0", lw=0, label="all logits")
    top_f, top_i = lf.argmax(1), li.argmax(1)
    differ = np.flatnonzero(top_f != top_i)
    if differ.size:
        rows = np.concatenate([differ, differ])
        cols = np.concatenate([top_f[differ], top_i[differ]])
        n = differ.size
        ax.scatter(
            lf[rows, cols],
            li[rows, cols],
            s=28,
            marker="x",
            color="#C44E52",
            lw=1.2,
            label=f"contested top-1 logits ({n} image{'s differ' if n != 1 else ' differs'})",
        )
    lo = float(min(lf.min(), li.min()))
    hi = float(max(lf.max(), li.max()))
    pad = 0.04 * (hi - lo if hi > lo else 1.0)
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="black", lw=0.9, ls="--", label="y = x")
    ax.set_xlim(lo - pad, hi + pad)
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_aspect("equal")
    ax.set_xlabel("float logit")
    ax.set_ylabel("integer logit (dequantized)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    parts = [f"{lf.shape[0]} images x {lf.shape[1]} logits"]
    if sqnr_db is not None:
        parts.append(f"SQNR {sqnr_db:.1f} dB")
    if agreement is not None:
        parts.append(f"agreement {100.0 * agreement:.1f}%")
    ax.set_title("Float vs integer logits: " + ", ".join(parts), fontsize=9)
    return _save(fig, path)


Columns = list[tuple[str, tuple[str, ...], str, str, Callable[[dict], str], Callable[[dict], bool] | None]]


def sweep_plot(rows: list[dict], columns: Columns, path: Path) -> Path:
    """sweep.png: ``sweep_figure``."""
    return _save(sweep_figure(rows, columns), path)


def sweep_figure(rows: list[dict], columns: Columns) -> Figure:
    """Accuracy and logits SQNR against each knob's hardware cost: one column per knob.

    ``rows`` are sweep rows (hwvit.analysis.sweep). ``columns`` is
    ``[(title, factors, x label, cost key, tick, apart)]``: a column shows the baseline row plus the
    rows whose ``factor`` is in ``factors``, from cheapest to dearest by ``row[cost key]`` (bits,
    table bits; equal cost keeps grid order), one tick each, labelled ``tick(row)``. Points for
    which ``apart(row)`` holds are a different kind of design (shift-and-add beside table sizes):
    drawn as diamonds, not joined to the line.
    Top row: top-1 of the integer model (or top-1 agreement with the float model when there are no
    labels), the float top-1 dashed. Bottom row: logits SQNR in dB. Every point carries its value.
    A column is as wide as its ticks need (0.8 in a point, 2.9 in at least); a tick label of two
    lines stands upright, one of more than three single-line ticks is slanted.
    """
    labelled = any(r.get("top1_int") is not None for r in rows)
    base = [r for r in rows if r["factor"] == "baseline"]
    cols = [c for c in columns if any(r["factor"] in c[1] for r in rows)]
    ncol = max(len(cols), 1)
    widths = [max(2.9, 0.8 * (len(base) + sum(r["factor"] in c[1] for r in rows))) for c in cols] or [2.9]
    fig = Figure(figsize=(sum(widths) + 0.8, 6.0), layout="constrained")
    axes = fig.subplots(2, ncol, squeeze=False, sharey="row", width_ratios=widths)
    for c, (title, factors, xlabel, key, tick, apart) in enumerate(cols):
        pts = sorted(base + [r for r in rows if r["factor"] in factors], key=lambda r: r[key])
        xs = list(range(len(pts)))
        acc = [100.0 * (r["top1_int"] if labelled else r["agreement"]) for r in pts]
        sq = [r["logits_sqnr_db"] if math.isfinite(r["logits_sqnr_db"]) else np.nan for r in pts]
        top, bottom = axes[0][c], axes[1][c]
        alone = [apart is not None and apart(r) for r in pts]
        for ax, ys, colour, marker in ((top, acc, "#4C72B0", "o"), (bottom, sq, "#DD8452", "s")):
            ax.plot(
                [x for x, a in zip(xs, alone) if not a],
                [y for y, a in zip(ys, alone) if not a],
                marker + "-",
                color=colour,
            )
            if any(alone):
                ax.plot(
                    [x for x, a in zip(xs, alone) if a], [y for y, a in zip(ys, alone) if a], "D", color=colour, ms=7
                )
        if labelled and pts[0].get("top1_float") is not None:
            top.axhline(100.0 * pts[0]["top1_float"], color="black", ls="--", lw=0.8, label="float")
            top.legend(fontsize=7, loc="lower right")
        for ax, ys, fmt in ((top, acc, "{:.1f}"), (bottom, sq, "{:.1f}")):
            for x, yv in zip(xs, ys):
                if not math.isnan(yv):
                    ax.annotate(
                        fmt.format(yv),
                        (x, yv),
                        textcoords="offset points",
                        xytext=(0, 6),
                        ha="center",
                        fontsize=7,
                        bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 0.5},
                    )
            ax.grid(alpha=0.3)
            ax.margins(x=0.15, y=0.2)
            ticks = [tick(r) + ("*" if r["factor"] == "baseline" else "") for r in pts]
            slant = len(pts) > 3 and not any("\n" in t for t in ticks)
            ax.set_xticks(xs, ticks, fontsize=7, rotation=30 if slant else 0, ha="right" if slant else "center")
        bottom.set_xlabel(xlabel, fontsize=8)
        top.set_title(title, fontsize=9)
    lo, hi = axes[0][0].get_ylim()  # shared by the row; a percentage above 100 is meaningless
    axes[0][0].set_ylim(lo, min(hi, 101.5))
    axes[0][0].set_ylabel("top-1 int (%)" if labelled else "top-1 agreement with float (%)")
    axes[1][0].set_ylabel("logits SQNR (dB)")
    fig.suptitle("What each choice costs: accuracy vs hardware cost, cheapest left (* = int8 baseline)", fontsize=10)
    return fig
