"""The sweep's plots read (issue 54): every plot is rendered (Agg) and the boxes of its texts asked
from the renderer: no label, tick label, title or legend entry on another, none outside the figure;
the baseline drawn over every other point; every point named; the front the one asked for; the
arithmetic variants in sweep.png as in the tables.

The rows are those of `hwvit sweep --model digits --quick --limit 24 --calib-images 48 --variants
softmax=ibert,shiftmax --variants layernorm=ibert` (the figures the plots take, as sweep.json keeps
them): five points at the baseline's cost with one top-1, a cheaper one that loses 13 dB.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from hwvit.analysis.sweep import COLUMNS, pareto
from hwvit.report.plots import sweep_figure
from hwvit.report.sweep_write import PLOT_COLUMNS, pareto_figure, plot_rows, variants_pareto_figure

# factor, label, act_bits, softmax_bits, exp, exp_entries, calibration, percentile, top1_int, sqnr, cost_bits
MEASURED = [
    ("baseline", "int8 baseline", 8, 8, "table", 256, "minmax", None, 0.958333, 31.171115, 461584),
    ("act_bits", "6 bit", 6, 8, "table", 256, "minmax", None, 0.958333, 17.911064, 354660),
    ("softmax_bits", "4 bit", 8, 4, "table", 256, "minmax", None, 0.958333, 20.060041, 447712),
    ("exp", "shift", 8, 8, "shift", 0, "minmax", None, 0.916667, 29.054411, 455440),
    ("exp_entries", "32 entries", 8, 8, "table", 32, "minmax", None, 0.916667, 18.136063, 456208),
    ("calibration", "percentile 99.9", 8, 8, "table", 256, "percentile", 99.9, 0.958333, 26.995933, 461584),
    ("softmax", "ibert", 8, 8, "table", 256, "minmax", None, 0.958333, 33.037070, 461584),
    ("softmax", "shiftmax", 8, 8, "table", 256, "minmax", None, 0.958333, 28.140631, 461584),
    ("layernorm", "ibert", 8, 8, "table", 256, "minmax", None, 0.958333, 28.708066, 461584),
]


def _rows(front: str = "both") -> list[dict]:
    rows = []
    for f, label, act, sm, exp, entries, calib, pct, top1, sqnr, cost in MEASURED:
        row = dict.fromkeys(COLUMNS)
        row.update(factor=f, label=label, act_bits=act, softmax_bits=sm, exp=exp, exp_entries=entries)
        row.update(table_bits=24 * entries, calibration=calib, percentile=pct, images=24, top1_float=0.958333)
        row.update(top1_int=top1, agreement=1.0 if top1 > 0.95 else 0.958333, logits_sqnr_db=sqnr, cost_bits=cost)
        rows.append(row)
    for r, on in zip(rows, pareto(rows, "top1_int", front)):
        r["pareto"] = on
    return rows


def _text_boxes(fig) -> list[tuple[str, tuple[float, float, float, float]]]:
    """(text, display box) of every text the figure draws: titles, axis labels, the tick labels of
    ticks in view, annotations, legend entries, figure texts."""
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts: list[Text] = [*fig.texts, *(t for leg in fig.legends for t in leg.get_texts())]  # suptitle: a fig.text
    for ax in fig.axes:
        texts += [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        if ax.get_legend() is not None:
            texts += ax.get_legend().get_texts()
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            texts += [t.label1 for t in axis.get_major_ticks() if lo <= t.get_loc() <= hi and t.label1.get_visible()]
    out = []
    for t in texts:
        if t.get_visible() and t.get_text().strip():
            b = Text.get_window_extent(t, renderer)  # an annotation's text, not its leader line
            out.append((t.get_text(), (b.x0, b.y0, b.x1, b.y1)))
    return out


def _readable(fig) -> None:
    """No two texts overlap (by more than a pixel's rounding) and every text lies inside the figure."""
    boxes = _text_boxes(fig)
    width, height = fig.canvas.get_width_height()
    outside = [t for t, (x0, y0, x1, y1) in boxes if x0 < -0.5 or y0 < -0.5 or x1 > width + 0.5 or y1 > height + 0.5]
    assert outside == [], f"texts outside the {width}x{height} figure: {outside}"
    clashes = []
    for (ta, a), (tb, b) in itertools.combinations(boxes, 2):
        w, h = min(a[2], b[2]) - max(a[0], b[0]), min(a[3], b[3]) - max(a[1], b[1])
        if w > 1 and h > 1:
            clashes.append((ta, tb))
    assert clashes == [], f"texts on each other: {clashes}"


def test_the_front_is_the_one_asked_for():
    """`both` (the default): no other row costs no more and is no worse in top-1 and SQNR; on
    top-1 alone the cheap 6-bit row hides the rows that keep 13 dB more."""
    names = {front: [(r["factor"], r["label"]) for r in _rows(front) if r["pareto"]] for front in ("both", "top1")}
    assert names["top1"] == [("act_bits", "6 bit")]
    rows = _rows("both")
    for r in rows:
        dominated = any(
            o["cost_bits"] <= r["cost_bits"]
            and o["top1_int"] >= r["top1_int"]
            and o["logits_sqnr_db"] >= r["logits_sqnr_db"]
            and (o is not r)
            and (
                o["cost_bits"] < r["cost_bits"]
                or o["top1_int"] > r["top1_int"]
                or o["logits_sqnr_db"] > r["logits_sqnr_db"]
            )
            for o in rows
        )
        assert r["pareto"] == (not dominated), r
    assert ("softmax", "ibert") in names["both"] and ("act_bits", "6 bit") in names["both"]
    with pytest.raises(ValueError, match="unknown front"):
        pareto(rows, "top1_int", "cells")


@pytest.mark.parametrize("front", ["both", "top1"])
def test_pareto_png_reads(front, tmp_path):
    rows = _rows(front)
    fig = pareto_figure(rows, front)
    _readable(fig)
    fig.savefig(tmp_path / "pareto.png")
    accuracy, sqnr = fig.axes
    for ax in (accuracy, sqnr):
        star = max(ax.collections, key=lambda c: c.get_zorder())
        assert star.get_sizes()[0] >= 200 and star.get_offsets()[0][0] == 1.0  # the baseline, at cost 1
        assert all(c.get_zorder() < star.get_zorder() for c in ax.collections if c is not star)  # drawn over all
        labels = "\n".join(t.get_text() for t in ax.texts)
        for r in rows:  # every point named once in each panel
            name = "int8 baseline" if r["factor"] == "baseline" else f"{r['factor']}: {r['label']}"
            assert labels.count(name) == 1, (name, labels)
    assert "Pareto front of cost against " + ("accuracy and logits SQNR" if front == "both" else "accuracy") in (
        fig._suptitle.get_text()
    )


def test_sweep_png_has_the_variants_and_reads(tmp_path):
    fig = sweep_figure(plot_rows(_rows()), PLOT_COLUMNS)
    _readable(fig)
    fig.savefig(tmp_path / "sweep.png")
    panel = next(ax for ax in fig.axes if ax.get_title() == "block arithmetic")
    ticks = [t.get_text() for t in panel.get_xticklabels()]
    assert ticks == ["hwvit*", "softmax=\nibert", "softmax=\nshiftmax", "layernorm=\nibert"]


def test_variants_pareto_png_reads(tmp_path):
    synth = {
        ("softmax", "hwvit"): 5210,
        ("softmax", "ibert"): 8830,
        ("softmax", "shiftmax"): 4105,
        ("layernorm", "hwvit"): 9120,
        ("layernorm", "ibert"): 9190,
    }
    costs = {k: SimpleNamespace(cells=v, flip_flops=v // 10, longest_path=40, memory_bits=0) for k, v in synth.items()}
    fig = variants_pareto_figure(_rows(), costs)
    _readable(fig)
    fig.savefig(tmp_path / "variants_pareto.png")
    assert sorted(ax.get_title() for ax in fig.axes) == ["layernorm", "softmax"]
