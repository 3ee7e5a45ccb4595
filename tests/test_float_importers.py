"""Parity of every importer family: the original module (transformers' own ViT, or a faithful
restatement in float_originals.py) with random weights vs hwvit's ViT loaded from its state dict."""

from __future__ import annotations

import re

import pytest
import torch
from float_originals import CookbookAttention, ECGformer, SABlock, SimpleViT, TimmViT, randomize

from hwvit.float import load_float, load_preset
from hwvit.float.importers import _resolve_config
from hwvit.float.keymaps import hf_rules, timm_rules
from hwvit.float.loading import rename as _rename

TOL = 1e-5


def _maxdiff(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return float((a - b).abs().max())


# HuggingFace transformers ------------------------------------------------------------------------


def _hf_config(**kw):
    from transformers import ViTConfig as HFConfig

    base = dict(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=48,
        image_size=16,
        patch_size=4,
        num_channels=3,
        num_labels=7,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    base.update(kw)
    return HFConfig(**base)


# transformers 4.x spelled the same parameters differently; 5.x (installed) -> 4.x, per block:
HF_5_TO_4 = [
    (r"layers\.(\d+)\.attention\.q_proj\.", r"encoder.layer.\1.attention.attention.query."),
    (r"layers\.(\d+)\.attention\.k_proj\.", r"encoder.layer.\1.attention.attention.key."),
    (r"layers\.(\d+)\.attention\.v_proj\.", r"encoder.layer.\1.attention.attention.value."),
    (r"layers\.(\d+)\.attention\.o_proj\.", r"encoder.layer.\1.attention.output.dense."),
    (r"layers\.(\d+)\.mlp\.fc1\.", r"encoder.layer.\1.intermediate.dense."),
    (r"layers\.(\d+)\.mlp\.fc2\.", r"encoder.layer.\1.output.dense."),
    (r"layers\.(\d+)\.layernorm_(before|after)\.", r"encoder.layer.\1.layernorm_\2."),
]


def to_hf4(sd: dict) -> dict:
    """A 5.x state dict (ViTModel or ViTForImageClassification) renamed to the 4.x spelling."""
    out = {}
    for key, value in sd.items():
        prefix = "vit." if key.startswith("vit.") else ""
        rest = key[len(prefix) :]
        for pattern, repl in HF_5_TO_4:
            rest = re.sub("^" + pattern, repl, rest)
        out[prefix + rest] = value
    return out


def test_installed_transformers_uses_5x_names():
    from transformers import ViTForImageClassification

    keys = set(ViTForImageClassification(_hf_config()).state_dict())
    assert "vit.layers.0.attention.q_proj.weight" in keys and "vit.layers.1.mlp.fc2.bias" in keys
    assert "vit.embeddings.patch_embeddings.projection.weight" in keys and "classifier.weight" in keys
    four = to_hf4(dict.fromkeys(keys))
    assert "vit.encoder.layer.1.attention.attention.value.bias" in four
    assert "vit.encoder.layer.0.attention.output.dense.weight" in four
    assert "vit.encoder.layer.0.intermediate.dense.weight" in four and "vit.encoder.layer.0.output.dense.bias" in four
    assert "vit.encoder.layer.1.layernorm_after.weight" in four


@pytest.mark.parametrize("names", ["5.x", "4.x"])
def test_hf_classifier_parity(names):
    from transformers import ViTForImageClassification

    torch.manual_seed(0)
    hf = randomize(ViTForImageClassification(_hf_config()), seed=1)
    sd = hf.state_dict() if names == "5.x" else to_hf4(hf.state_dict())
    ours = load_float(sd, family="hf", config={"heads": 4})
    assert ours.cfg.norm_eps == 1e-12 and ours.cfg.qkv == "separate" and ours.cfg.num_tokens == 17
    x = torch.randn(3, 3, 16, 16)
    with torch.no_grad():
        assert _maxdiff(hf(pixel_values=x).logits, ours(x)) <= TOL


@pytest.mark.parametrize("names", ["5.x", "4.x"])
def test_hf_vitmodel_parity_pooler_ignored(names):
    from transformers import ViTModel

    hf = randomize(ViTModel(_hf_config(num_hidden_layers=1)), seed=2)
    sd = hf.state_dict() if names == "5.x" else to_hf4(hf.state_dict())
    assert any(k.startswith("pooler.") for k in sd)
    ours = load_float(sd, family="hf", heads=4)
    assert ours.head is None
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert _maxdiff(hf(pixel_values=x).last_hidden_state, ours.forward_tokens(x)) <= TOL


def test_hf_base_shape_infers_the_vit_b16_preset():
    """google/vit-base-patch16-224's shapes (built on the meta device: no memory) -> preset vit-b16."""
    from transformers import ViTConfig as HFConfig
    from transformers import ViTForImageClassification

    with torch.device("meta"):
        sd = ViTForImageClassification(HFConfig(num_labels=1000)).state_dict()
    weights, _, unexpected = _rename(sd, hf_rules(set(sd)), ())
    assert unexpected == []
    cfg = _resolve_config("hf", weights, {})  # heads 12 from the standard ViT-B width
    assert cfg == load_preset("vit-b16").replace(name="hf-import")


# timm ------------------------------------------------------------------------------------------


def timm_key_names(depth: int, avg: bool = False) -> list[str]:
    """timm VisionTransformer's state-dict names (vit_*_patch16_224, no layer scale, no reg tokens)."""
    names = ([] if avg else ["cls_token"]) + ["pos_embed", "patch_embed.proj.weight", "patch_embed.proj.bias"]
    for i in range(depth):
        for sub in ("norm1", "attn.qkv", "attn.proj", "norm2", "mlp.fc1", "mlp.fc2"):
            names += [f"blocks.{i}.{sub}.weight", f"blocks.{i}.{sub}.bias"]
    names += ["fc_norm.weight", "fc_norm.bias"] if avg else ["norm.weight", "norm.bias"]
    return names + ["head.weight", "head.bias"]


def test_restated_timm_has_timms_key_names():
    assert list(TimmViT(depth=2).state_dict()) == timm_key_names(2)
    assert list(TimmViT(depth=1, class_token=False).state_dict()) == timm_key_names(1, avg=True)


def test_timm_vit_tiny_shapes_infer_the_preset():
    shapes = {
        "cls_token": (1, 1, 192),
        "pos_embed": (1, 197, 192),
        "patch_embed.proj.weight": (192, 3, 16, 16),
        "patch_embed.proj.bias": (192,),
        "norm.weight": (192,),
        "norm.bias": (192,),
        "head.weight": (1000, 192),
        "head.bias": (1000,),
    }
    for i in range(12):
        shapes.update(
            {
                f"blocks.{i}.norm1.weight": (192,),
                f"blocks.{i}.norm1.bias": (192,),
                f"blocks.{i}.attn.qkv.weight": (576, 192),
                f"blocks.{i}.attn.qkv.bias": (576,),
                f"blocks.{i}.attn.proj.weight": (192, 192),
                f"blocks.{i}.attn.proj.bias": (192,),
                f"blocks.{i}.norm2.weight": (192,),
                f"blocks.{i}.norm2.bias": (192,),
                f"blocks.{i}.mlp.fc1.weight": (768, 192),
                f"blocks.{i}.mlp.fc1.bias": (768,),
                f"blocks.{i}.mlp.fc2.weight": (192, 768),
                f"blocks.{i}.mlp.fc2.bias": (192,),
            }
        )
    assert sorted(shapes) == sorted(timm_key_names(12))
    sd = {k: torch.empty(s, device="meta") for k, s in shapes.items()}
    weights, _, unexpected = _rename(sd, timm_rules(set(sd)), ())
    assert unexpected == []
    assert _resolve_config("timm", weights, {}) == load_preset("vit-tiny").replace(name="timm-import")


@pytest.mark.parametrize("class_token", [True, False])
def test_timm_parity(class_token):
    torch.manual_seed(3)
    timm = randomize(TimmViT(class_token=class_token), seed=4)
    ours = load_float(timm.state_dict(), family="timm", heads=4)
    assert ours.cfg.pool == ("cls" if class_token else "mean") and ours.cfg.norm_eps == 1e-6
    x = torch.randn(3, 3, 16, 16)
    with torch.no_grad():
        assert _maxdiff(timm(x), ours(x)) <= TOL


# lucidrains SimpleViT ----------------------------------------------------------------------------


@pytest.mark.parametrize("old_head", [False, True])
def test_simple_vit_parity(old_head):
    sv = randomize(SimpleViT(old_head=old_head), seed=5)
    geometry = {"image_size": 8, "patch_size": 2, "in_chans": 3}
    ours = load_float(sv.state_dict(), family="simple_vit", config={**geometry, "heads": 4})
    cfg = ours.cfg
    assert (cfg.heads, cfg.head_dim, cfg.qkv_bias, cfg.proj_bias) == (4, 16, False, False)
    assert cfg.final_norm is (not old_head) and cfg.head_pre == ("norm" if old_head else "none")
    x = torch.randn(3, 3, 8, 8)
    with torch.no_grad():
        assert _maxdiff(sv(x), ours(x)) <= TOL


def test_simple_vit_heads_from_the_default_dim_head():
    sv = SimpleViT(heads=2, dim_head=64)  # lucidrains' default dim_head: heads = q width / 64
    cfg = load_float(sv.state_dict(), family="simple_vit", config={"image_size": 8, "patch_size": 2, "in_chans": 3}).cfg
    assert (cfg.heads, cfg.head_dim, cfg.inner_dim) == (2, 64, 128)


def test_simple_vit_needs_image_geometry():
    sv = SimpleViT()
    with pytest.raises(ValueError, match="cannot read image_size, patch_size, in_chans from the weights"):
        load_float(sv.state_dict(), family="simple_vit")


# ECG transformer -------------------------------------------------------------------------------


def test_ecg1d_parity():
    torch.manual_seed(6)
    ecg = randomize(ECGformer(), seed=7)
    ours = load_float(ecg.state_dict(), family="ecg1d", heads=4)
    cfg = ours.cfg
    assert (cfg.image_size, cfg.in_chans, cfg.num_tokens, cfg.attn_scale) == (12, 1, 13, "post_softmax_sqrt_dim")
    x = torch.randn(4, 12, 1)
    with torch.no_grad():
        ref = ecg(x)
        assert _maxdiff(ref, ours(x)) <= TOL
        assert _maxdiff(ref, ours(x[..., 0])) <= TOL  # (B, L) accepted for one channel


def test_ecg1d_preset_shape_infers_heads():
    ecg = ECGformer(num_layers=1, signal_length=187, embed_size=192, num_heads=8)
    ours = load_float(ecg.state_dict(), family="ecg1d")
    assert ours.cfg == load_preset("ecg1d").replace(name="ecg1d-import", depth=1)


# Attention-only seeds --------------------------------------------------------------------------


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_sablock_parity(qkv_bias):
    sab = randomize(SABlock(qkv_bias=qkv_bias), seed=8)
    ours = load_float(sab.state_dict(), family="sablock", heads=4)
    assert (ours.attn.qkv.bias is not None) == qkv_bias
    x = torch.randn(2, 9, 64)
    with torch.no_grad():
        assert _maxdiff(sab(x), ours(x)) <= TOL


def test_cookbook_attention_parity_sequence_first():
    cb = randomize(CookbookAttention(), seed=9)
    ours = load_float(cb.state_dict(), family="cookbook_attention", heads=4)
    x = torch.randn(9, 2, 64)  # (N, B, C)
    with torch.no_grad():
        assert _maxdiff(cb(x), ours(x)) <= TOL


def test_attention_seed_shape_defaults_to_12_heads():
    sab = SABlock(hidden_size=768, num_heads=12, qkv_bias=True)
    assert load_float(sab.state_dict(), family="sablock").attn.heads == 12
    with pytest.raises(ValueError, match="pass heads=H"):
        load_float(SABlock().state_dict(), family="sablock")
