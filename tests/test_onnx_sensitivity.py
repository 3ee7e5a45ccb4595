"""`hwvit sensitivity --checkpoint model.onnx`: the file's own model as the baseline, one layer's
weights at a time re-quantized from the file's (hwvit.onnx.requantize, docs/onnx.md)."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from onnx_zoo import gemm_rows

from hwvit.onnx import build, requantize, runtime

pytestmark = pytest.mark.xdist_group("onnx")  # one worker makes the session's files


def _narrowed_ref(codes, scale, axis, bits):
    """requantize.narrowed element by element in exact rationals of the float32 scales: the new scale
    is float32(s * peak / top), each code the real value over it rounded half to even."""
    top = 2 ** (bits - 1) - 1
    c = np.asarray(codes, np.int64)
    moved = np.moveaxis(c, axis, 0) if np.size(scale) > 1 else c[None]
    scales = np.asarray(scale, np.float32).reshape(-1)
    out_c, out_s = np.zeros_like(moved), []
    for ch in range(moved.shape[0]):
        s = Fraction(float(scales[ch if scales.size > 1 else 0]))
        peak = int(np.abs(moved[ch]).max())
        new = Fraction(float(np.float32(float(s) * peak / top))) if peak else s
        out_s.append(float(new))
        for idx, v in np.ndenumerate(moved[ch]):
            q = Fraction(int(v)) * s / new
            r = round(q)  # Python's round on a Fraction: half to even
            out_c[(ch, *idx)] = max(-top, min(top, r))
    out_c = np.moveaxis(out_c, 0, axis) if np.size(scale) > 1 else out_c[0]
    return out_c, np.asarray(out_s if np.size(scale) > 1 else out_s[0], np.float32)


@pytest.mark.parametrize("bits", [2, 3, 4, 7, 8])
def test_narrowed_equals_reference(bits):
    """Per output channel (a MatMul's weights (K, N), axis 1; a Conv's (D, C, kh, kw), axis 0; a
    channel of zeros keeps its scale) and per tensor: the codes and scales of the exact reference;
    every code within the symmetric b-bit range and each channel's largest at its edge."""
    rng = np.random.default_rng(bits)
    cases = [
        (rng.integers(-127, 128, (12, 5)), rng.uniform(1e-3, 0.1, 5), 1),
        (np.concatenate([rng.integers(-90, 91, (3, 2, 2, 2)), np.zeros((1, 2, 2, 2), np.int64)]),
         rng.uniform(1e-3, 0.1, 4), 0),
        (rng.integers(-127, 128, (7, 9)), np.asarray(0.02), 1),
    ]  # fmt: skip
    top = 2 ** (bits - 1) - 1
    for codes, scale, axis in cases:
        codes = codes.astype(np.int8)
        got_c, got_s = requantize.narrowed(codes, np.asarray(scale, np.float32), axis, bits)
        ref_c, ref_s = _narrowed_ref(codes, scale, axis, bits)
        assert got_c.dtype == np.int8 and np.array_equal(got_c, ref_c)
        assert got_s.dtype == np.float32 and np.array_equal(got_s, ref_s)
        assert np.abs(got_c).max() == top
    with pytest.raises(ValueError, match="2 to 8 bits"):
        requantize.narrowed(np.zeros((2, 2), np.int8), np.float32(1.0), 1, 9)


WIDTHS = {"embed.proj": 5, "layers.0.mlp.fc1": 4, "layers.1.attn.qkv": 3, "head": 2}
NARROW_POINTS = ("embed", "layers.0.mlp.fc1", "layers.1.attn.qkv", "logits")  # their outputs' points


def _narrowed_side(onnx_zoo, config: str, images: int | None):
    """(file's Imported, edited Imported, its side-by-side GEMM rows, the narrowed layers' rows)."""
    imported, _ = onnx_zoo.side("digits", config)
    edited = build.build(requantize.weights_at(imported.graph.model, WIDTHS, imported.weights), imported.path)
    rows = gemm_rows(runtime.side_by_side(edited, *onnx_zoo.data("digits", images)), "off")
    return imported, edited, rows, [d for d in rows if d.point in NARROW_POINTS]


@pytest.mark.parametrize("config", ["symmetric", "default"])
def test_narrowed_layers_are_a_qdq_file_onnxruntime_agrees_with(onnx_zoo, config):
    """Layers at 2 to 5 bits (per-channel and per-tensor weights, with and without activation zero
    points): only those layers' weights and biases change, their codes in their width; the edited
    model is a QDQ file whose GEMMs alone onnxruntime computes as hwvit's model of it does, within
    1 LSB, the narrowed ones on at most 2 of their 10^5 outputs here (16 images; the whole split:
    tests below)."""
    imported, edited, rows, narrow = _narrowed_side(onnx_zoo, config, 16)
    assert list(edited.weights) == list(imported.weights)

    def linears(m):
        out = {"embed.proj": m.embed.patch_embed.proj, "head": m.readout.head}
        for i, b in enumerate(m.blocks):
            out.update({f"layers.{i}.attn.qkv": b.attn.qkv, f"layers.{i}.attn.proj": b.attn.proj})
            out.update({f"layers.{i}.mlp.fc1": b.fc1, f"layers.{i}.mlp.fc2": b.fc2})
        return out

    ours, theirs = linears(edited.int_model), linears(imported.int_model)
    assert set(ours) == set(imported.weights)
    for path, lin in ours.items():
        same = np.array_equal(lin.w, theirs[path].w) and np.array_equal(lin.bias, theirs[path].bias)
        if path in WIDTHS:
            assert not same and np.abs(lin.w).max() == 2 ** (WIDTHS[path] - 1) - 1, path
        else:
            assert same, path
    assert len(rows) == 2 + 5 * imported.int_model.config.depth and all(d.max_lsb <= 1 for d in rows)
    assert len(narrow) == 4 and sum(d.differ for d in narrow) <= 2, narrow


@pytest.mark.onnx
@pytest.mark.parametrize("config", ["symmetric", "default"])
def test_narrowed_layers_on_the_whole_split(onnx_zoo, config):
    """The held-out split (449 images, 2.9 M outputs of the narrowed layers): within 1 LSB of
    onnxruntime on at most 5 per million, as the file's own GEMMs."""
    _, _, rows, narrow = _narrowed_side(onnx_zoo, config, None)
    assert all(d.max_lsb <= 1 for d in rows)
    assert 1e6 * sum(d.differ for d in narrow) <= 5 * sum(d.elements for d in narrow), narrow


def test_sensitivity_of_a_file(onnx_zoo, tmp_path):
    """The CLI on the symmetric file: the baseline is the file's own model (its top-1 and SQNR as
    hwvit compare computes them), each row its group's weights at --bits, in JSON, markdown and the
    bar chart."""
    import torch
    from click.testing import CliRunner

    from hwvit.analysis.compare import compare
    from hwvit.cli import main

    path = onnx_zoo.file("digits", "symmetric")
    out = tmp_path / "sens"
    args = ["sensitivity", "--checkpoint", str(path), "--bits", "3", "--limit", "16"]
    res = CliRunner().invoke(main, [*args, "--groups", "layers.0.*,head", "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "sensitivity.json").read_text())
    meta, rows = doc["meta"], doc["rows"]
    imported = build.load(path)
    x, y = (torch.as_tensor(a) for a in onnx_zoo.data("digits", 16))
    base = compare(imported.model, imported.int_model, x, y, isolated=False)
    assert meta["baseline_acc"] == base.top1_int and meta["baseline_sqnr_db"] == pytest.approx(base.logits_sqnr_db)
    assert meta["calib_images"] is None and meta["images"] == 16
    assert {r["group"] for r in rows} == {"layers.0.*", "head"} and all(r["bits"] == 3 for r in rows)
    row = next(r for r in rows if r["group"] == "layers.0.*")
    assert row["layers"] == ["layers.0.attn.qkv", "layers.0.attn.proj", "layers.0.mlp.fc1", "layers.0.mlp.fc2"]
    edited = build.build(requantize.weights_at(imported.graph.model, dict.fromkeys(row["layers"], 3),
                                               imported.weights), path)  # fmt: skip
    r = compare(imported.model, edited.int_model, x, y, isolated=False)
    assert row["logits_sqnr_db"] == pytest.approx(r.logits_sqnr_db) and row["top1"] == r.top1_int
    assert row["logits_sqnr_db"] < meta["baseline_sqnr_db"]  # 3-bit weights in a whole block cost SQNR
    assert "the file's scales" in (out / "sensitivity.md").read_text() and (out / "sensitivity.png").exists()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--knob", "act_bits"], "--knob act_bits: a quantized ONNX file fixes it"),
        (["--target-top1-drop", "1"], "--target-top1-drop: a quantized ONNX file fixes it"),
    ],
)
def test_sensitivity_refusals(onnx_zoo, tmp_path, extra, message):
    from click.testing import CliRunner

    from hwvit.cli import main

    out = tmp_path / "no"
    args = ["sensitivity", "--checkpoint", str(onnx_zoo.file("digits", "symmetric")), *extra, "--out", str(out)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code != 0 and message in res.output and len(res.output.strip().splitlines()) == 1, res.output
    assert not out.exists()


@pytest.mark.onnx
def test_sensitivity_of_a_qonnx_file(onnx_zoo, tmp_path):
    """A QONNX file (Brevitas, make test-onnx): its float biases read at the new accumulator scale;
    the classifier at 4 bits costs logits SQNR against the file's own model, and its codes lie in 4
    bits."""
    from click.testing import CliRunner

    from hwvit import pipeline
    from hwvit.cli import main

    path = onnx_zoo.qonnx_files()[0]
    out = tmp_path / "sens"
    args = ["sensitivity", "--checkpoint", str(path), "--bits", "4", "--limit", "16", "--groups", "head"]
    res = CliRunner().invoke(main, [*args, "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "sensitivity.json").read_text())
    (row,) = doc["rows"]
    assert row["layers"] == ["head"] and row["logits_sqnr_db"] < doc["meta"]["baseline_sqnr_db"]
    imported = pipeline.load_source(None, str(path)).imported
    edited = build.build(requantize.weights_at(imported.graph.model, {"head": 4}, imported.weights), path)
    assert np.abs(edited.int_model.readout.head.w).max() == 7
