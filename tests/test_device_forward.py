"""The integer forward on a torch device equals the numpy/numba forward on every traced value."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_intvit import MIXED, SMALL, inputs_for, small_model

from hwvit.intvit import Trace
from hwvit.intvit.device import DeviceForward, resolve_device
from hwvit.quant import QuantConfig, quantize_model
from hwvit.quant.recipe import from_dict

DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda", id="cuda", marks=pytest.mark.gpu),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("preset", sorted(SMALL))
def test_device_forward_equals_cpu_forward_on_every_value(preset, device):
    model = small_model(preset)
    qc = QuantConfig(exp="shift") if preset == "vit-tiny" else QuantConfig()
    # simple-vit with per-layer activation widths: the device forward follows each layer's width
    recipe = from_dict(MIXED) if preset == "simple-vit" else None
    int_model = quantize_model(model, inputs_for(model, 16, 1), qc, recipe=recipe)
    x = inputs_for(model, 3, 2).numpy()
    cpu, dev = Trace(records=True, values=True), Trace(records=True, values=True)
    want = int_model.forward(x, trace=cpu)
    got = DeviceForward(int_model, device)(x, trace=dev)
    assert np.array_equal(got, want)
    assert list(dev.values) == list(cpu.values)  # same points, same order
    for path, (q, scale) in cpu.values.items():
        q2, scale2 = dev.values[path]
        assert q2.shape == q.shape and np.array_equal(q2, q), path
        assert scale2 == scale, path
    assert_same_records(dev.records, cpu.records)


def assert_same_records(got, want):
    """Block records (what `hwvit vectors` writes) equal: kind, path, params, every tensor's
    format, scale, shape and values, in the same order."""
    assert [(r.kind, r.path) for r in got] == [(r.kind, r.path) for r in want]
    assert {r.kind for r in want} >= {"gemm", "layernorm", "gelu", "residual_add"}
    for g, w in zip(got, want, strict=True):
        assert g.params == w.params, w.path
        assert list(g.tensors) == list(w.tensors), w.path
        for name, t in w.tensors.items():
            u = g.tensors[name]
            assert (u.bits, u.signed, u.role, u.scale, u.layout) == (t.bits, t.signed, t.role, t.scale, t.layout)
            assert u.data.shape == t.data.shape and np.array_equal(u.data, t.data), f"{w.path}.{name}"


def test_device_forward_records_of_a_pooled_model():
    """A mean-pooled model: the pool's requant record comes from the device path too."""
    model = small_model("simple-vit")
    int_model = quantize_model(model, inputs_for(model, 8, 1))
    assert int_model.readout.pool is not None
    x = inputs_for(model, 2, 2).numpy()
    cpu, dev = Trace(records=True), Trace(records=True)
    int_model.forward(x, trace=cpu)
    DeviceForward(int_model, "cpu")(x, trace=dev)
    assert "requant" in {r.kind for r in cpu.records}
    assert_same_records(dev.records, cpu.records)


def test_device_forward_refuses_forced_values():
    model = small_model("vit-tiny")
    int_model = quantize_model(model, inputs_for(model, 8, 1))
    with pytest.raises(ValueError, match="CPU forward only"):
        DeviceForward(int_model, "cpu")(inputs_for(model, 1, 2).numpy(), trace=Trace(force=lambda p, q, s: q))


def test_cuda_without_a_gpu_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="^device cuda: no CUDA GPU is available here"):
        resolve_device("cuda")
    assert resolve_device("cpu").type == "cpu"


def test_device_forward_refuses_what_the_cpu_forward_refuses():
    model = small_model("vit-tiny")
    int_model = quantize_model(model, inputs_for(model, 8, 1))
    x = inputs_for(model, 2, 2).numpy()
    x[1, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        int_model.forward(x)
    with pytest.raises(ValueError, match="NaN"):
        DeviceForward(int_model, "cpu")(x)
    with pytest.raises(ValueError, match="takes input"):
        DeviceForward(int_model, "cpu")(x[:, :1])


def test_compare_batches_and_device_give_the_same_report():
    from hwvit.analysis.compare import compare
    from hwvit.pipeline import batch_size_for

    model = small_model("vit-b16")
    int_model = quantize_model(model, inputs_for(model, 8, 1))
    x = inputs_for(model, 5, 2)
    one = compare(model, int_model, x, batch_size=5)
    for kw in ({"batch_size": 2}, {"batch_size": 3, "device": "cpu"}):
        other = compare(model, int_model, x, **kw)
        assert np.array_equal(other.logits_int, one.logits_int)
        assert [r["path"] for r in other.layers] == [r["path"] for r in one.layers]
        for a, b in zip(other.layers, one.layers, strict=True):  # the float model rounds differently per batch size
            assert {k: v for k, v in a.items() if k not in ("path", "shape")} == pytest.approx(
                {k: v for k, v in b.items() if k not in ("path", "shape")}, rel=1e-4
            ), a["path"]
    from hwvit.float.config import load_preset

    assert batch_size_for(load_preset("vit-b16")) == 1  # ~0.9 GB of traces per 224x224 image
    assert batch_size_for(model.cfg) == 64


@pytest.mark.parametrize(
    "command",
    [["compare", "--model", "digits", "--limit", "2"], ["bench", "--model", "digits"]],
)
def test_cli_device_cuda_without_gpu_is_one_line(command, monkeypatch):
    from click.testing import CliRunner

    from hwvit.cli import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    res = CliRunner().invoke(main, [*command, "--device", "cuda"])
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == [
        "Error: device cuda: no CUDA GPU is available here (torch.cuda.is_available() is False)"
    ]
