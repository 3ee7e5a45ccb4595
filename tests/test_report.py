"""hwvit.report.write / `hwvit compare --out`: the written float-vs-fixed report.

One comparison of the digits demo model (40 held-out images, 64 calibration images) is computed
once and written; the tests read the files back and check them against the CompareResult and
against numbers recomputed here from the raw logits.
"""

from __future__ import annotations

import base64
import json
import math
import re
import struct

import numpy as np
import pytest
from click.testing import CliRunner

from hwvit import pipeline
from hwvit.analysis.compare import compare
from hwvit.cli import main
from hwvit.quant import QuantConfig, quantize_model
from hwvit.report import plots
from hwvit.report import write as report_write
from hwvit.report.write import FILES, write_report

IMAGES = 40


@pytest.fixture(scope="session")  # session: kept when xdist runs other modules between its tests
def result():
    source = pipeline.load_source("digits")
    int_model = quantize_model(source.model, pipeline.calibration_inputs(source, 64), QuantConfig())
    inputs, labels = pipeline.eval_inputs(source, IMAGES)
    return compare(source.model, int_model, inputs, labels, name=source.name)


@pytest.fixture(scope="session")  # session: kept when xdist runs other modules between its tests
def report(result, tmp_path_factory):
    out = tmp_path_factory.mktemp("rep") / "report"
    path = write_report(result, out)
    assert path == out / "report.html"
    return out


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    return struct.unpack(">II", data[16:24])


def _md_tables(text: str) -> list[list[list[str]]]:
    """Every markdown table of ``text`` as rows of cells (header row first, separator dropped)."""
    tables, cur = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= {"-"} for c in cells):
                cur.append(cells)
        elif cur:
            tables.append(cur)
            cur = []
    return tables


def _table_with(text: str, first_header: str) -> list[list[str]]:
    for t in _md_tables(text):
        if t[0][0] == first_header:
            return t
    raise AssertionError(f"no table starting with {first_header!r}")


def _num(cell: str) -> float:
    return math.inf if cell == "inf" else float(cell)


def test_files_and_plots(report, result):
    assert sorted(p.name for p in report.iterdir()) == sorted(FILES)
    for name in report_write.PLOTS:
        w, h = _png_size((report / name).read_bytes())
        assert w >= 500 and h >= 350, f"{name} is {w}x{h} px"
    # The SQNR bar chart grows with the number of points (0.2 in each), so labels never overlap.
    _, h = _png_size((report / "sqnr.png").read_bytes())
    assert h >= 0.2 * plots.DPI * (len(result.layers) - 1)


def test_md_point_table_matches_result(report, result):
    rows = _table_with((report / "report.md").read_text(), "point")
    body = rows[1:]
    assert [r[0] for r in body] == [layer["path"] for layer in result.layers]  # one row per point, model order
    d = result.to_dict()
    for cells, layer in zip(body, d["layers"]):
        assert cells[1] == "x".join(map(str, layer["shape"]))
        sq = _num(cells[2])
        assert sq == layer["sqnr_db"] if math.isinf(layer["sqnr_db"]) else abs(sq - layer["sqnr_db"]) <= 0.005
        assert abs(float(cells[3]) - layer["cosine"]) <= 5e-7
        assert abs(float(cells[4]) - layer["max_err_lsb"]) <= 5e-4
        assert abs(float(cells[5]) - layer["mean_err_lsb"]) <= 5e-5
        assert cells[-1] == str(layer["bits"]) and rows[0][-1] == "bits"


def test_md_end_to_end_recomputed(report, result):
    text = (report / "report.md").read_text()
    summary = {r[0]: r[1] for r in _table_with(text, "quantity")[1:]}
    labels = pipeline.eval_inputs(pipeline.load_source("digits"), IMAGES)[1]
    lf, li = result.logits_float, result.logits_int
    top1_f = 100.0 * np.mean(lf.argmax(1) == labels)
    top1_i = 100.0 * np.mean(li.argmax(1) == labels)
    agree = 100.0 * np.mean(lf.argmax(1) == li.argmax(1))
    sqnr = 10.0 * np.log10(np.sum(lf**2) / np.sum((lf - li) ** 2))
    assert summary["images"] == str(IMAGES)
    assert abs(float(summary["top-1 float"].rstrip("%")) - top1_f) <= 0.005
    assert abs(float(summary["top-1 int"].rstrip("%")) - top1_i) <= 0.005
    m = re.match(r"([\d.]+)% \((\d+) of (\d+) images differ\)", summary["top-1 agreement float vs int"])
    assert m and abs(float(m.group(1)) - agree) <= 0.005
    assert int(m.group(2)) == int(np.sum(lf.argmax(1) != li.argmax(1))) and int(m.group(3)) == IMAGES
    assert abs(float(summary["logits SQNR"].split()[0]) - sqnr) <= 0.005
    # The worst point named in the summary (and plotted as a histogram) is the lowest SQNR of the table.
    worst = min((lay for lay in result.layers if lay["path"] != "input"), key=lambda lay: lay["sqnr_db"])
    assert summary["worst point"].startswith(worst["path"] + ":")
    assert f"({worst['path']})" in text


def test_md_block_table(report, result):
    rows = _table_with((report / "report.md").read_text(), "block")[1:]
    by_path = {lay["path"]: lay for lay in result.layers}
    depth = len(pipeline.load_source("digits").model.layers)
    blocks = [r for r in rows if r[0].startswith("layers.")]
    assert [r[0] for r in blocks] == [f"layers.{i}" for i in range(depth)]
    for r in blocks:
        assert r[2] == f"{r[0]}.add2"  # a transformer block ends at its second residual add
        assert abs(_num(r[3]) - by_path[r[2]]["sqnr_db"]) <= 0.005
        inside = [lay for p, lay in by_path.items() if p.startswith(r[0] + ".")]
        assert int(r[1]) == len(inside)
        assert r[4] == min(inside, key=lambda lay: lay["sqnr_db"])["path"]
    assert sum(int(r[1]) for r in rows) == len(result.layers)


def test_html_is_self_contained(report):
    html = (report / "report.html").read_text()
    embedded = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(embedded) == len(report_write.PLOTS)
    assert sorted(base64.b64decode(e) for e in embedded) == sorted(
        (report / n).read_bytes() for n in report_write.PLOTS
    )
    assert "http://" not in html and "https://" not in html  # nothing fetched from elsewhere
    assert "<table>" in html and html.rstrip().endswith("</html>")


def test_json_marker(report, result):
    meta = json.loads((report / "report.json").read_text())
    assert meta["kind"] == "compare-report"
    assert meta["result"]["agreement"] == result.agreement
    assert [lay["path"] for lay in meta["result"]["layers"]] == [lay["path"] for lay in result.layers]


def test_replace_previous_and_refuse_foreign(result, tmp_path, monkeypatch):
    out = tmp_path / "rep"
    write_report(result, out)
    first = (out / "report.md").read_text()
    write_report(result, out)  # a previous report is replaced whole
    assert (out / "report.md").read_text() == first

    # A failure while writing leaves the previous report as it was, and no temporary directory.
    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(report_write, "render_html", boom)
    with pytest.raises(RuntimeError):
        write_report(result, out)
    monkeypatch.undo()
    assert (out / "report.md").read_text() == first and (out / "report.html").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]

    # A directory holding a file hwvit did not write is never replaced.
    (out / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="did not write"):
        write_report(result, out)
    assert (out / "notes.txt").read_text() == "mine"
    other = tmp_path / "other"
    other.mkdir()
    (other / "data.csv").write_text("1,2\n")
    with pytest.raises(ValueError, match="not a previous hwvit"):
        write_report(result, other)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        write_report(result, tmp_path / "file")
    empty = tmp_path / "empty"
    empty.mkdir()
    write_report(result, empty)
    assert (empty / "report.md").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_cli_compare_out(tmp_path):
    out = tmp_path / "rep"
    runner = CliRunner()
    res = runner.invoke(
        main, ["compare", "--model", "digits", "--limit", "16", "--calib-images", "32", "-q", "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert f"report: {out / 'report.html'}" in res.output
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES)
    (out / "keep.txt").write_text("mine")
    res = runner.invoke(
        main,
        ["compare", "--model", "digits", "--limit", "16", "--calib-images", "32", "-q", "--out", str(out), "--force"],
    )  # --force replaces only a previous report
    assert res.exit_code == 1 and "keep.txt" in res.output
    assert "Error:" in res.output and "Traceback" not in res.output
    assert (out / "keep.txt").read_text() == "mine"
