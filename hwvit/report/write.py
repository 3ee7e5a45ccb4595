"""Write a float-vs-fixed comparison to disk: report.md, report.html, report.json and three PNGs.

The directory is built in a temporary sibling and renamed into place (hwvit.report.publish), so a
failed run never leaves a half-written report. An existing ``--out`` directory is replaced only
if it is empty or holds exactly a previous hwvit report; anything else is refused.
"""

from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path

import numpy as np

from hwvit import __version__
from hwvit.analysis.compare import CompareResult
from hwvit.analysis.diagnose import by_stage, suggestion, worst_points
from hwvit.report.plots import error_histogram, logits_scatter, sqnr_bars
from hwvit.report.publish import json_safe, staged_dir
from hwvit.textfiles import count

KIND = "compare-report"
PLOTS = {
    "sqnr.png": "SQNR per traced point",
    "worst_error.png": "Error histogram of the worst point",
    "logits.png": "Float vs integer logits",
}
FILES = ("report.md", "report.html", "report.json", *PLOTS)


def fmt_db(v: float) -> str:
    """SQNR in dB, 2 decimals; +inf (no error at all) is written ``inf``."""
    if v == math.inf:
        return "inf"
    if v == -math.inf:
        return "-inf"
    return f"{v:.2f}"


def fmt_pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100.0 * v:.2f}%"


def _iso(r: dict, key: str, fmt) -> str:
    v = r.get(f"isolated_{key}")
    return "n/a" if v is None else fmt(v)


def layer_table(result: CompareResult) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the per-point table, one row per traced point in model order."""
    head = [
        "point",
        "shape",
        "SQNR (dB)",
        "cosine",
        "max err (LSB)",
        "mean err (LSB)",
        "isolated SQNR (dB)",
        "isolated max err (LSB)",
        "clip rate",
        "range used",
        "scale",
        "calibration",
        "elements",
        "bits",  # the point's integer width (a recipe's act_bits; probabilities: softmax_bits, unsigned)
    ]
    rows = [
        [
            r["path"],
            "x".join(map(str, r["shape"])),
            fmt_db(r["sqnr_db"]),
            f"{r['cosine']:.6f}",
            f"{r['max_err_lsb']:.3f}",
            f"{r['mean_err_lsb']:.4f}",
            _iso(r, "sqnr_db", fmt_db),
            _iso(r, "max_err_lsb", lambda v: f"{v:.3f}"),
            f"{100.0 * r['clip_rate']:.3f}%" if "clip_rate" in r else "n/a",
            f"{100.0 * r['range_used']:.1f}%" if "range_used" in r else "n/a",
            f"{r['scale']:.4g}" if "scale" in r else "n/a",
            result.calibration.get(r["path"], "n/a"),
            str(r.get("elements", "n/a")),
            str(r.get("bits", "n/a")),
        ]
        for r in result.layers
    ]
    return head, rows


def loss_summary(result: CompareResult) -> list[str]:
    """'What loses accuracy': one line per worst point."""
    lines = []
    for r in worst_points(result):
        iso_txt = (
            f"isolated {fmt_db(r['isolated_sqnr_db'])} dB, max {r['isolated_max_err_lsb']:.2f} LSB (the "
            "error it adds by itself)"
            if "isolated_sqnr_db" in r
            else "isolated error not measured"
        )
        clip = f"clips {100.0 * r['clip_rate']:.3f}%" if "clip_rate" in r else "clip rate n/a"
        used = f"uses {100.0 * r['range_used']:.0f}% of its range" if "range_used" in r else ""
        lines.append(
            f"{r['path']}: {fmt_db(r['sqnr_db'])} dB accumulated, {iso_txt}, {clip}, {used}; suggested: {suggestion(r)}"
        )
    return lines


def block_table(result: CompareResult) -> tuple[list[str], list[list[str]]]:
    """One row per stage (embedding, each transformer block, head): the SQNR at its output and its worst point."""
    stages = by_stage(result.layers)
    head = [
        "block",
        "points",
        "output point",
        "output SQNR (dB)",
        "worst point",
        "worst SQNR (dB)",
        "worst point max err (LSB)",
    ]
    rows = []
    for name, pts in stages.items():
        measured = [p for p in pts if p["path"] != "input"] or pts
        worst = min(measured, key=lambda p: p["sqnr_db"])
        out = pts[-1]
        rows.append(
            [
                name,
                str(len(pts)),
                out["path"],
                fmt_db(out["sqnr_db"]),
                worst["path"],
                fmt_db(worst["sqnr_db"]),
                f"{worst['max_err_lsb']:.3f}",
            ]
        )
    return head, rows


def summary_table(result: CompareResult) -> tuple[list[str], list[list[str]]]:
    n = result.images
    disagree = round((1.0 - result.agreement) * n)
    rows = [["images", str(n)], ["top-1 float", fmt_pct(result.top1_float)], ["top-1 int", fmt_pct(result.top1_int)]]
    if result.top1_float is not None and result.top1_int is not None:
        delta = 100.0 * (result.top1_int - result.top1_float)
        rows.append(["top-1 change (int - float)", f"{delta:+.2f} percentage points"])
    rows += [
        ["top-1 agreement float vs int", f"{fmt_pct(result.agreement)} ({disagree} of {count(n, 'image')} differ)"],
        ["logits SQNR", f"{fmt_db(result.logits_sqnr_db)} dB"],
    ]
    worst = result.worst_layer()
    if worst is not None:
        rows.append(
            ["worst point", f"{worst['path']}: {fmt_db(worst['sqnr_db'])} dB, max err {worst['max_err_lsb']:.2f} LSB"]
        )
    return ["quantity", "value"], rows


def quant_line(quant: dict) -> str:
    if not quant:
        return "quantization: not recorded"
    parts = [f"{k} = {v}" for k, v in quant.items()]
    return "quantization: " + ", ".join(parts)


def recipe_line(recipe: dict | None) -> str:
    """The recipe's per-layer overrides (its default is the quantization line)."""
    if not recipe:
        return ""
    d = recipe["default"]
    over = "; ".join(f"{g}: " + ", ".join(f"{k} = {v}" for k, v in o.items()) for g, o in recipe["layers"].items())
    return f". Recipe {recipe.get('source') or '(given in code)'}: weights {d['weight_bits']} bit {d['weights']}" + (
        f"; per layer: {over}" if over else ""
    )


def _md_table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _html_table(head: list[str], rows: list[list[str]], sortable: bool = False) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    cls = ' class="sortable"' if sortable else ""
    return f"<table{cls}><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _html_text(text: str) -> str:
    """A paragraph; lines starting with '- ' become a list."""
    esc = html.escape
    lines = text.split("\n")
    items = [line[2:] for line in lines if line.startswith("- ")]
    out = "".join(f"<p>{esc(line)}</p>" for line in lines if not line.startswith("- "))
    return out + ("<ul>" + "".join(f"<li>{esc(i)}</li>" for i in items) + "</ul>" if items else "")


# Click a header of a sortable table to sort by that column (numbers as numbers, 'inf' largest,
# 'n/a' last); click again to reverse. Plain JS, nothing loaded from elsewhere.
_SORT_JS = """
document.querySelectorAll('table.sortable').forEach(function (t) {
  t.querySelectorAll('th').forEach(function (th, col) {
    th.style.cursor = 'pointer';
    th.title = 'click to sort';
    th.addEventListener('click', function () {
      var asc = th.dataset.dir !== 'asc';
      th.dataset.dir = asc ? 'asc' : 'desc';
      var key = function (tr) {
        var s = tr.children[col].textContent.trim();
        if (s === 'inf') return Infinity;
        if (s === '-inf') return -Infinity;
        var v = parseFloat(s);
        return isNaN(v) ? s : v;
      };
      var body = t.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (x === y) return 0;
        if (typeof x !== typeof y) return typeof x === 'number' ? -1 : 1;
        return (x < y ? -1 : 1) * (asc ? 1 : -1);
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


_UNITS = (
    "Every figure is over all elements of the point on all evaluated images (the 'elements' column). "
    "SQNR = 10 log10(sum float^2 / sum (float - int*scale)^2), in dB: accumulated along the model. "
    "Isolated: the same with each layer's inputs replaced by the float model's activations quantized "
    "at their calibrated scales, i.e. the error this layer adds by itself. "
    "Errors are |float - int*scale| / scale: in LSB of that point's own output scale, so 0.5 LSB is "
    "the error of ideal rounding. cosine is the cosine similarity of the flattened tensors. "
    "Clip rate: share of elements whose float value at this scale rounds outside the integer range. "
    "Range used: largest |int| reached / largest |int| representable. Calibration: how the point's "
    "range was estimated (minmax, percentile, mse = MSE-optimal clip, entropy = KL-optimal clip); "
    "embed with a class token and a shared qkv projection widen it to cover the cls token or q, k, v."
)

_POOL_CLS = (
    "pool selects token 0 (the class token) without arithmetic: its SQNR is that token's own SQNR "
    "in the point before it, while that point's SQNR is over all tokens. A class token whose "
    "values are small next to the other tokens' (which set the shared per-tensor scale) spans few "
    "LSB, so its relative error is larger: pool's SQNR can be far below its input's."
)


_ONNXRUNTIME = (
    "The quantized ONNX file run in onnxruntime beside its integer model on the same images. Per "
    "point: where its values come from (file: every parameter from the file; hwvit arithmetic: what "
    "the file leaves float), and how many integers differ from onnxruntime's (largest difference in "
    "LSB): alone (the layer on onnxruntime's codes at its inputs) and accumulated (from the image "
    "on), with onnxruntime's graph optimizations off (the file's meaning) and on (what it deploys)."
)


def onnxruntime_table(side: dict) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the onnxruntime side by side (hwvit.onnx.runtime SideBySide.to_dict())."""
    head = ["point", "origin", "elements", "alone", "alone, opt", "accumulated", "accum., opt"]
    cols = [side["isolated"]["off"], side["isolated"]["on"], side["points"]["off"], side["points"]["on"]]
    cols = [{d["point"]: d for d in col} for col in cols]

    def cell(d) -> str:
        return "n/a" if d is None else f"{d['differ']} ({d['max_lsb']} LSB)" if d["differ"] else "0"

    rows = [[d["point"], d["origin"], str(d["elements"]), *(cell(c.get(d["point"])) for c in cols)]
            for d in side["isolated"]["off"]]  # fmt: skip
    return head, rows


def onnxruntime_summary(side: dict) -> str:
    """One line per optimization level: agreement, logits SQNR, the first point that differs."""
    lines = [
        f"- optimizations {level}: top-1 agreement {fmt_pct(side['agreement'][level])}, logits SQNR "
        f"{fmt_db(side['logits_sqnr_db'][level])} dB, first point that differs: {side['first_part'][level] or 'none'}"
        for level in ("off", "on")
    ]
    lines.append(
        f"- with the file's own float at hwvit's arithmetic points (LayerNorm, softmax): top-1 agreement "
        f"{fmt_pct(side.get('file_float_agreement'))}; what is left parts for reasons other than hwvit's arithmetic"
    )
    return "\n".join(lines)


def _sections(result: CompareResult) -> list[tuple[str, str, tuple[list[str], list[list[str]]] | None]]:
    worst = result.worst_layer()
    worst_name = worst["path"] if worst else "n/a"
    n_hist = result.errors.get(worst_name, np.zeros(0)).size
    total = worst.get("elements", n_hist) if worst else 0
    sample = f"all {total} elements" if n_hist >= total else f"the first {n_hist} of its {total} elements"
    units = _UNITS + (" " + _POOL_CLS if result.pool_select else "")
    side = result.onnxruntime
    onnx = [] if side is None else [
        ("Side by side with onnxruntime", _ONNXRUNTIME + "\n" + onnxruntime_summary(side), onnxruntime_table(side))
    ]  # fmt: skip
    return onnx + [
        (
            "What loses accuracy",
            "The three points that add the most error by themselves (lowest isolated "
            "SQNR):\n" + "\n".join("- " + line for line in loss_summary(result)),
            None,
        ),
        ("End to end", quant_line(result.quant) + recipe_line(result.recipe), summary_table(result)),
        (
            "Per block",
            "One row per stage: the embedding, each transformer block (output: its second residual add) and the head.",
            block_table(result),
        ),
        ("Per traced point", "In model order. " + units, layer_table(result)),
        (
            "Plots",
            f"SQNR per point; signed error histogram of the worst point ({worst_name}) over {sample} "
            "(its max |err| in the table is over all of them); float vs integer logits.",
            None,
        ),
    ]


def render_md(result: CompareResult) -> str:
    out = [
        f"# hwvit compare: {result.model}",
        "",
        f"Float model vs its integer model on {count(result.images, 'image')} (hwvit {__version__}).",
        "",
    ]
    for title, text, table in _sections(result):
        out += [f"## {title}", "", text, ""]
        if table is not None:
            out += [_md_table(*table), ""]
    for name, caption in PLOTS.items():
        out += [f"![{caption}]({name})", ""]
    return "\n".join(out)


_CSS = (
    "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:0.9em}"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "td:first-child,th:first-child{text-align:left;font-family:monospace}"
    "th{background:#f3f3f3}img{max-width:100%;border:1px solid #eee;margin:0.5em 0}"
)


def render_html(result: CompareResult, images: dict[str, bytes]) -> str:
    """Self-contained HTML: the PNGs are embedded as base64 data URIs."""
    esc = html.escape
    out = [
        "<!DOCTYPE html>",
        '<html><head><meta charset="utf-8">',
        f"<title>hwvit compare: {esc(result.model)}</title><style>{_CSS}</style></head><body>",
        f"<h1>hwvit compare: {esc(result.model)}</h1>",
        f"<p>Float model vs its integer model on {count(result.images, 'image')} (hwvit {esc(__version__)}).</p>",
    ]
    for title, text, table in _sections(result):
        out += [f"<h2>{esc(title)}</h2>", _html_text(text)]
        if table is not None:
            out.append(_html_table(*table, sortable=title == "Per traced point"))
    for name, caption in PLOTS.items():
        data = base64.b64encode(images[name]).decode("ascii")
        out.append(
            f'<figure><img alt="{esc(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{esc(caption)} ({esc(name)})</figcaption></figure>"
        )
    out.append(f"<script>{_SORT_JS}</script></body></html>")
    return "\n".join(out)


def write_plots(result: CompareResult, out: Path) -> dict[str, bytes]:
    """The three PNGs into ``out``; returns their bytes by file name."""
    worst = result.worst_layer()
    sqnr_bars(result.layers, out / "sqnr.png", title=f"{result.model}: SQNR per traced point (worst in red)")
    if worst is not None:
        error_histogram(
            result.errors.get(worst["path"]),
            out / "worst_error.png",
            worst["path"],
            worst["sqnr_db"],
            total=worst.get("elements"),
        )
    else:
        error_histogram(None, out / "worst_error.png", "no traced point")
    if result.logits_float is not None and result.logits_int is not None:
        logits_scatter(
            result.logits_float, result.logits_int, out / "logits.png", result.logits_sqnr_db, result.agreement
        )
    return {name: (out / name).read_bytes() for name in PLOTS}


def write_report(result: CompareResult, out_dir: str | Path) -> Path:
    """Write the report directory atomically; return the path of its report.html.

    ``out_dir`` must not exist, be empty, or hold a previous hwvit report (report.json of kind
    ``compare-report`` and no file hwvit did not write); a previous report is replaced whole.
    Raises ValueError otherwise.
    """
    if result.logits_float is None or result.logits_int is None:
        raise ValueError("the comparison has no logits to plot (was it built by hwvit.analysis.compare?)")
    with staged_dir(out_dir, KIND, FILES) as (tmp, final):
        images = write_plots(result, tmp)
        (tmp / "report.md").write_text(render_md(result), encoding="utf-8")
        (tmp / "report.html").write_text(render_html(result, images), encoding="utf-8")
        meta = {"kind": KIND, "hwvit": __version__, "result": json_safe(result.to_dict())}
        (tmp / "report.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return final / "report.html"
