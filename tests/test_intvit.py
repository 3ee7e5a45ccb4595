"""The integer ViT: every family converts and runs; its trace obeys the slow reference kernels."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hwvit import ops
from hwvit.analysis.compare import compare
from hwvit.float.config import load_preset
from hwvit.float.model import ViT
from hwvit.intvit import Trace, trace_model
from hwvit.ops import reference as ref
from hwvit.quant import QuantConfig, quantize_model

# Small shapes of each family: same structure as the presets, sizes a test can afford.
SMALL = {
    "vit-b16": dict(image_size=16, patch_size=8, dim=32, depth=2, heads=2, mlp_dim=64, num_classes=5),
    "vit-tiny": dict(image_size=16, patch_size=8, dim=24, depth=1, heads=3, mlp_dim=48, num_classes=4),
    "simple-vit": dict(image_size=16, patch_size=4, dim=32, depth=1, heads=2, head_dim=16, mlp_dim=64),
    "ecg1d": dict(image_size=24, dim=16, depth=2, heads=2, mlp_dim=64),
}


def small_model(preset: str, seed: int = 0) -> ViT:
    torch.manual_seed(seed)
    cfg = load_preset(preset).replace(**SMALL[preset])
    model = ViT(cfg).eval()
    with torch.no_grad():  # timm-style init leaves biases and pos at ~0; give them real values
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model


def inputs_for(model: ViT, n: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn((n, *model.cfg.input_shape), generator=gen)


@pytest.mark.parametrize("preset", sorted(SMALL))
def test_family_converts_and_tracks_float(preset):
    model = small_model(preset)
    int_model = quantize_model(model, inputs_for(model, 16, 1))
    res = compare(model, int_model, inputs_for(model, 8, 2), name=preset)
    paths = [row["path"] for row in res.layers]
    assert "layers.0.attn.softmax" not in paths  # compare rows are float record points
    for point in ("tokens", "layers.0.norm1", "layers.0.attn.probs", "layers.0.add2", "logits"):
        assert point in paths, f"{preset}: no comparison at {point}"
    first_ln = next(r for r in res.layers if r["path"] == "layers.0.norm1")
    assert first_ln["sqnr_db"] > 20.0, f"{preset}: first LayerNorm SQNR {first_ln['sqnr_db']:.1f} dB"
    assert res.logits_sqnr_db > 12.0, f"{preset}: logits SQNR {res.logits_sqnr_db:.1f} dB"


def _check_record(rec) -> None:
    """Recompute a record's outputs with the slow plain-int reference kernels."""
    t = {k: v.data for k, v in rec.tensors.items()}
    p = rec.params
    if rec.kind == "gemm":
        acc = ref.gemm_ref(t["a"].tolist(), t["w"].tolist(), t["bias"].tolist())
        assert np.array_equal(np.array(acc), t["acc"]), rec.path
        y = [ref.requant_ref(row, t["multiplier"].tolist(), t["shift"].tolist(), p["out_bits"]) for row in acc]
        assert np.array_equal(np.array(y), t["y"]), rec.path
    elif rec.kind == "layernorm":
        for row, out in zip(t["x"], t["y"]):
            want = ref.layernorm_ref(
                row.tolist(),
                t["gamma"].tolist(),
                t["beta"].tolist(),
                p["eps_int"],
                p["multiplier"],
                p["shift"],
                p["out_bits"],
            )
            assert out.tolist() == want, rec.path
    elif rec.kind == "softmax":
        for row, out in zip(t["x"], t["p"]):
            assert out.tolist() == ref.softmax_ref(row.tolist(), t["exp_table"].tolist(), p["out_bits"]), rec.path
    elif rec.kind == "gelu":
        assert t["y"].tolist() == ref.gelu_ref(t["x"].tolist(), t["table"].tolist(), p["in_bits"]), rec.path
    elif rec.kind == "residual_add":
        want = ref.residual_add_ref(
            t["a"].tolist(), t["b"].tolist(), p["mult_a"], p["mult_b"], p["shift"], p["out_bits"]
        )
        assert t["y"].tolist() == want, rec.path
    elif rec.kind == "requant":
        want = ref.requant_ref(t["acc"].tolist(), t["multiplier"].tolist(), t["shift"].tolist(), p["out_bits"])
        assert t["y"].tolist() == want, rec.path
    else:
        raise AssertionError(f"unexpected kind {rec.kind}")


# A recipe with per-layer activation widths (hwvit.quant.recipe): every producer kind narrows.
MIXED = {
    "layers": {
        "input": {"act_bits": 7},
        "embed*": {"act_bits": 5},
        "layers.0.*": {"act_bits": 6},
        "layers.*.mlp.fc1": {"act_bits": 4},
        "head": {"act_bits": 7},
    }
}


@pytest.mark.parametrize("mixed", [False, True], ids=["plain", "mixed_act_bits"])
@pytest.mark.parametrize("preset", ["vit-b16", "ecg1d", "simple-vit"])
def test_trace_obeys_reference_kernels_and_chains(preset, mixed):
    from hwvit.analysis.isolate import point_range
    from hwvit.quant.recipe import from_dict

    model = small_model(preset)
    int_model = quantize_model(model, inputs_for(model, 8, 1), recipe=from_dict(MIXED) if mixed else None)
    logits, records, values = trace_model(int_model, inputs_for(model, 1, 3).numpy())
    kinds = {r.kind for r in records}
    assert {"gemm", "layernorm", "softmax", "gelu", "residual_add"} <= kinds
    for rec in records:
        _check_record(rec)
    widths = {r.path: r.params["out_bits"] for r in records if "out_bits" in r.params}
    for path, (q, _scale) in values.items():  # every traced value lies in its point's width
        lo, hi = point_range(path, int_model.bits_at(path))
        assert lo <= q.min() and q.max() <= hi, path
        assert q.dtype == np.int64, path  # the forward's narrow arrays are kept as int64
    if mixed:
        assert widths["layers.0.mlp.fc1"] == 4 and widths["layers.0.norm1"] == 6 and widths["head"] == 7
        assert widths["layers.0.mlp.gelu"] == 6 and widths.get("layers.1.norm1", 8) == 8
        assert int_model.input_bits == 7 and int_model.blocks[0].gelu.in_bits == 4
    by_path = {r.path: r for r in records}
    # The blocks chain: what one block writes is what the next one reads.
    assert np.array_equal(
        by_path["layers.0.norm2"].tensors["x"].data.reshape(-1), by_path["layers.0.add1"].tensors["y"].data
    )
    assert np.array_equal(
        by_path["layers.0.mlp.gelu"].tensors["x"].data, by_path["layers.0.mlp.fc1"].tensors["y"].data.reshape(-1)
    )
    assert np.array_equal(by_path["head"].tensors["y"].data.reshape(-1), logits.reshape(-1))


def test_integer_forward_is_deterministic_and_integer(monkeypatch):
    monkeypatch.setenv("HWVIT_GEMM", "int16_avx2")  # the backend that requantizes inside the GEMM
    model = small_model("vit-tiny")
    int_model = quantize_model(model, inputs_for(model, 8, 1))
    x = inputs_for(model, 3, 4).numpy()
    a, b = int_model.forward(x), int_model.forward(x)
    assert a.dtype == np.int64 and np.array_equal(a, b)
    # Batched and one-by-one runs agree (no cross-talk between images).
    one = np.concatenate([int_model.forward(x[i : i + 1]) for i in range(3)])
    assert np.array_equal(a, one)
    # With records the linear layers keep their accumulators (gemm, then requant); without, the
    # int16_avx2 backend requantizes inside the GEMM: the same logits and traced values.
    traced, _records, values = trace_model(int_model, x)
    plain = Trace(values=True)
    assert np.array_equal(int_model.forward(x, trace=plain), traced)
    assert values.keys() == plain.values.keys()
    for path, (q, scale) in values.items():
        assert np.array_equal(q, plain.values[path][0]) and scale == plain.values[path][1], path


def test_forward_on_the_vnni_kernel_equals_the_int64_forward(monkeypatch, vnni_here):
    """Every linear layer and attention product through int8_vnni (its requant in the tile; emulated
    where the CPU has no VNNI) gives the int64 backend's logits and traced values."""
    model = small_model("vit-tiny")
    int_model = quantize_model(model, inputs_for(model, 8, 1))
    x = inputs_for(model, 3, 4).numpy()
    runs = {}
    for name in ("int8_vnni", "int64"):
        monkeypatch.setenv("HWVIT_GEMM", name)
        trace = Trace(values=True)
        runs[name] = (int_model.forward(x, trace=trace), trace.values)
    (logits, values), (want, want_values) = runs["int8_vnni"], runs["int64"]
    assert np.array_equal(logits, want) and values.keys() == want_values.keys()
    for path, (q, _scale) in values.items():
        assert np.array_equal(q, want_values[path][0]), path


def test_quant_knobs_change_the_arithmetic():
    model = small_model("vit-b16")
    calib = inputs_for(model, 8, 1)
    x = inputs_for(model, 4, 5)
    base = compare(model, quantize_model(model, calib), x)
    low = compare(model, quantize_model(model, calib, QuantConfig(act_bits=4)), x)
    shift = quantize_model(model, calib, QuantConfig(exp="shift"))
    assert shift.blocks[0].attn.softmax.exp == "shift"
    assert low.logits_sqnr_db < base.logits_sqnr_db  # 4-bit activations lose accuracy


def test_bad_inputs_give_clear_errors():
    model = small_model("vit-tiny")
    calib = inputs_for(model, 4, 1)
    with pytest.raises(ValueError, match="calibration data is empty"):
        quantize_model(model, calib[:0])
    int_model = quantize_model(model, calib)
    with pytest.raises(ValueError, match="takes input"):
        int_model.forward(np.zeros((1, 3, 8, 8), dtype=np.float32))
    broken = small_model("vit-tiny")
    with torch.no_grad():
        broken.head.weight[0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN or Inf"):
        quantize_model(broken, calib)
    with pytest.raises(ValueError, match="act_bits"):
        QuantConfig(act_bits=12)
    with pytest.raises(ValueError):
        load_preset("no-such-preset")


def test_input_quantization_is_the_only_float_step():
    model = small_model("vit-b16")
    int_model = quantize_model(model, inputs_for(model, 8, 1))
    x = inputs_for(model, 2, 6).numpy()
    xq = int_model.quantize_input(x)
    assert xq.dtype == np.int64 and np.abs(xq).max() <= 127
    assert np.array_equal(int_model.forward(xq, quantized=True), int_model.forward(x))
    assert np.array_equal(int_model.forward(xq.astype(np.int8), quantized=True), int_model.forward(x))
    assert np.array_equal(xq, ops.quantize(x, int_model.s_input, 8))


@pytest.mark.parametrize("preset", ["vit-b16", "simple-vit", "ecg1d"])
def test_patches_feed_the_float_weights_in_their_order(preset):
    """int patches @ W^T equals the float embedding's projection (conv, SimpleViT, 1-D)."""
    model = small_model(preset)
    int_model = quantize_model(model, inputs_for(model, 4, 1))
    x = torch.randint(-8, 8, (2, *model.cfg.input_shape)).double()
    patches = int_model.embed.patch_embed.patches(x.numpy().astype(np.int64))
    pe = model.patch_embed.double()
    w = pe.proj.weight.detach().reshape(pe.proj.weight.shape[0], -1).numpy()
    with torch.no_grad():
        if preset == "vit-b16":
            want = pe.proj(x).flatten(2).transpose(1, 2) - pe.proj.bias
        else:
            want = pe.patches(x) @ pe.proj.weight.T
    assert patches.dtype == np.int64 and patches.shape == (2, model.cfg.num_patches, w.shape[1])
    assert np.allclose(patches @ w.T, want.numpy(), atol=1e-9)
