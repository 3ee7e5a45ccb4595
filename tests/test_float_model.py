"""The float ViT: structure the integer model walks, record points, and hand-checked arithmetic."""

from __future__ import annotations

import math

import pytest
import torch

from hwvit.float.config import load_preset
from hwvit.float.model import ViT


def small(name: str, **change):
    """A preset shrunk to test size (same kinds of embedding, pooling, attention)."""
    cfg = load_preset(name)
    shrink = {"depth": 2, "num_classes": 5, "dim": 32, "heads": 4, "head_dim": None, "mlp_dim": 48}
    shrink.update({"image_size": 8, "patch_size": 2} if cfg.ndim == 2 else {"image_size": 12})
    if name == "simple-vit":
        shrink.update(head_dim=16)  # inner 64 != dim 32, as SimpleViT's dim_head allows
    shrink.update(change)
    return cfg.replace(**shrink)


def _records(model, x):
    rec = {}
    out = model(x, record=lambda path, t: rec.__setitem__(path, t))
    return out, rec


@pytest.mark.parametrize("name", ["digits", "vit-tiny", "simple-vit", "ecg1d"])
def test_record_points_and_shapes(name):
    torch.manual_seed(0)
    cfg = small(name)
    model = ViT(cfg).eval()
    x = torch.randn(2, *cfg.input_shape)
    with torch.no_grad():
        out, rec = _records(model, x)
        plain = model(x)
    assert torch.equal(out, plain), "recording must not change the result"
    b, t, d, h, hd = 2, cfg.num_tokens, cfg.dim, cfg.heads, cfg.head_dim
    assert rec["input"].shape == x.shape
    assert rec["embed"].shape == (b, cfg.num_patches, d)
    assert rec["tokens"].shape == (b, t, d)
    for i in range(cfg.depth):
        p = f"layers.{i}"
        for n in "qkv":
            assert rec[f"{p}.attn.{n}"].shape == (b, h, t, hd)
        assert rec[f"{p}.attn.scores"].shape == (b, h, t, t)
        assert torch.allclose(rec[f"{p}.attn.probs"].sum(-1), torch.ones(b, h, t), atol=1e-6)
        assert rec[f"{p}.attn.context"].shape == (b, t, h * hd)
        assert rec[f"{p}.mlp.fc1"].shape == (b, t, cfg.mlp_dim)
        assert torch.allclose(rec[f"{p}.add2"], rec[f"{p}.add1"] + rec[f"{p}.mlp.fc2"], atol=1e-6)
        assert (f"{p}.pos_add" in rec) == (cfg.pos_every_layer and i > 0)
    assert rec["pool"].shape == (b, d)
    assert rec["logits"].shape == (b, cfg.num_classes)
    assert ("norm" in rec) == cfg.final_norm
    assert ("pre_head.fc" in rec) == (cfg.head_pre == "linear_norm")


def test_structure_the_integer_model_walks():
    m = ViT(small("vit-b16"))
    assert isinstance(m.patch_embed.proj, torch.nn.Conv2d) and m.patch_embed.norm_in is None
    assert m.cls_token.shape == (1, 1, 32) and m.pos_embed.shape == (1, 17, 32)
    attn = m.layers[0].attn
    assert attn.qkv is None and attn.q.weight.shape == (32, 32) and attn.q.bias is not None
    assert (attn.heads, attn.head_dim, attn.scale_mode) == (4, 8, "standard")
    assert m.layers[0].mlp.fc1.out_features == 48 and m.norm is not None and m.head.out_features == 5
    s = ViT(small("simple-vit"))
    assert isinstance(s.patch_embed.proj, torch.nn.Linear) and s.patch_embed.norm_in.normalized_shape == (3 * 2 * 2,)
    assert s.cls_token is None and s.layers[0].attn.qkv.weight.shape == (3 * 64, 32)
    assert s.layers[0].attn.qkv.bias is None and s.layers[0].attn.proj.bias is None
    assert "pos_embed" not in s.state_dict()  # fixed table, recomputed from the config
    e = ViT(small("ecg1d"))
    assert e.patch_embed.norm_out is not None and e.pre_head.fc is not None and e.norm is None


def test_attention_by_hand():
    """One head, two tokens: softmax(q k^T / sqrt(hd)) v computed with plain Python floats."""
    torch.manual_seed(1)
    cfg = small("digits", dim=4, heads=1, mlp_dim=4, depth=1)
    attn = ViT(cfg).layers[0].attn.eval()
    x = torch.randn(1, 2, 4)
    w, bias = attn.qkv.weight.tolist(), attn.qkv.bias.tolist()
    rows = x[0].tolist()
    lin = [[sum(w[o][i] * r[i] for i in range(4)) + bias[o] for o in range(12)] for r in rows]
    q, k, v = ([r[j * 4 : (j + 1) * 4] for r in lin] for j in range(3))
    ctx = []
    for a in range(2):
        logits = [sum(q[a][i] * k[b][i] for i in range(4)) / math.sqrt(4) for b in range(2)]
        e = [math.exp(z - max(logits)) for z in logits]
        p = [z / sum(e) for z in e]
        ctx.append([sum(p[b] * v[b][i] for b in range(2)) for i in range(4)])
    pw, pb = attn.proj.weight.tolist(), attn.proj.bias.tolist()
    want = [[sum(pw[o][i] * c[i] for i in range(4)) + pb[o] for o in range(4)] for c in ctx]
    with torch.no_grad():
        got = attn(x)
    assert torch.allclose(got[0], torch.tensor(want), atol=1e-6)


def test_ecg_scaling_divides_probabilities_by_sqrt_dim():
    torch.manual_seed(2)
    cfg = small("ecg1d")
    m = ViT(cfg).eval()
    x = torch.randn(1, cfg.image_size)
    with torch.no_grad():
        _, rec = _records(m, x)
    p = "layers.0.attn"
    q, k, v = rec[f"{p}.q"], rec[f"{p}.k"], rec[f"{p}.v"]
    assert torch.allclose(rec[f"{p}.scores"], q @ k.transpose(-2, -1), atol=1e-5)  # no 1/sqrt(hd)
    ctx = (rec[f"{p}.probs"] / math.sqrt(cfg.dim)) @ v
    assert torch.allclose(rec[f"{p}.context"], ctx.transpose(1, 2).reshape(1, cfg.num_tokens, cfg.dim), atol=1e-6)
    assert torch.allclose(rec["layers.1.pos_add"], rec["layers.0.add2"] + m.pos_embed, atol=1e-6)
    assert torch.allclose(rec["pool"], rec["layers.1.add2"].mean(1), atol=1e-6)  # cls included


def test_sincos_table_matches_the_formula():
    cfg = small("simple-vit")
    table = ViT(cfg).pos_embed[0]
    grid, quarter = cfg.grid, cfg.dim // 4
    for n in (0, 3, grid * grid - 1):
        row, col = divmod(n, grid)
        for j in (0, quarter - 1):
            omega = 10000.0 ** (-j / (quarter - 1))
            expect = [math.sin(col * omega), math.cos(col * omega), math.sin(row * omega), math.cos(row * omega)]
            got = [float(table[n, j + s * quarter]) for s in range(4)]
            assert got == pytest.approx(expect, abs=1e-6)


def test_wrong_input_shape_is_one_line():
    m = ViT(small("digits")).eval()
    with pytest.raises(ValueError, match=r"takes input \(B, 1, 8, 8\), got \(2, 3, 8, 8\)"):
        m(torch.zeros(2, 3, 8, 8))
    e = ViT(small("ecg1d")).eval()
    with pytest.raises(ValueError, match=r"\(B, 12, 1\) or \(B, L\)"):
        e(torch.zeros(2, 13))
