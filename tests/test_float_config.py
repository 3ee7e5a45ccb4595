"""ViTConfig, presets and config files: what loads, and the one-line errors for what does not."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from hwvit.float.config import ViTConfig, list_presets, load_config, load_preset

PRESETS = ["digits", "ecg1d", "simple-vit", "vit-b16", "vit-tiny"]


def test_presets_are_listed_and_load():
    assert list_presets() == PRESETS
    for name in PRESETS:
        cfg = load_preset(name)
        assert cfg.name == name
        assert isinstance(cfg.norm_eps, float)


def test_vit_b16_is_google_vit_base_patch16_224():
    cfg = load_preset("vit-b16")
    assert (cfg.image_size, cfg.patch_size, cfg.dim, cfg.depth, cfg.heads, cfg.mlp_dim) == (224, 16, 768, 12, 12, 3072)
    assert (cfg.qkv, cfg.qkv_bias, cfg.norm_eps, cfg.pool, cfg.pos, cfg.num_classes) == (
        "separate",
        True,
        1e-12,
        "cls",
        "learned",
        1000,
    )
    assert cfg.num_tokens == 197 and cfg.head_dim == 64


def test_vit_tiny_simple_and_ecg_presets():
    tiny = load_preset("vit-tiny")
    assert (tiny.dim, tiny.heads, tiny.qkv, tiny.qkv_bias, tiny.norm_eps) == (192, 3, "fused", True, 1e-6)
    simple = load_preset("simple-vit")
    assert (simple.embed, simple.pos, simple.pool, simple.qkv, simple.qkv_bias, simple.norm_eps) == (
        "simple",
        "sincos2d",
        "mean",
        "fused",
        False,
        1e-5,
    )
    assert simple.cls_token is False and simple.inner_dim == 8 * 64
    ecg = load_preset("ecg1d")
    assert (ecg.ndim, ecg.embed, ecg.cls_token, ecg.pool, ecg.attn_scale, ecg.pos_every_layer, ecg.head_pre) == (
        1,
        "linear1d",
        True,
        "mean",
        "post_softmax_sqrt_dim",
        True,
        "linear_norm",
    )
    assert ecg.num_tokens == 188 and ecg.input_shape == (187, 1)


def test_digits_preset_is_small():
    cfg = load_preset("digits")
    assert cfg.num_tokens == 17 and cfg.dim == 64 and cfg.input_shape == (1, 8, 8)


def test_unknown_preset_lists_presets():
    with pytest.raises(ValueError, match="unknown preset 'vit-huge'.*digits, ecg1d, simple-vit, vit-b16, vit-tiny"):
        load_preset("vit-huge")


def test_round_trip_through_yaml(tmp_path):
    cfg = load_preset("ecg1d")
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg.to_dict()))
    assert load_config(path) == cfg


def test_eps_written_without_a_dot_still_loads(tmp_path):
    data = load_preset("digits").to_dict()
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data).replace("1.0e-05", "1e-5"))
    assert "1e-5" in path.read_text()
    assert load_config(path).norm_eps == 1e-5


def test_unknown_and_missing_fields_are_named(tmp_path):
    data = load_preset("digits").to_dict()
    del data["depth"], data["heads"]
    data["dropout"] = 0.1
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError) as err:
        load_config(path)
    msg = str(err.value)
    assert "unknown fields dropout" in msg and "missing fields depth, heads" in msg and str(path) in msg


@pytest.mark.parametrize(
    "change, pattern",
    [
        ({"embed": "conv3d"}, "bad embed='conv3d' .one of conv, simple, linear1d"),
        ({"heads": 0}, "bad heads=0"),
        ({"dim": True}, "bad dim=True"),
        ({"qkv_bias": "yes"}, "bad qkv_bias='yes'"),
        ({"norm_eps": "tiny"}, "norm_eps 'tiny' is not a number"),
        ({"image_size": 9}, "not a multiple of patch_size"),
        ({"pool": "cls", "cls_token": False}, "pool 'cls' needs a cls token"),
        ({"pos": "sincos2d", "dim": 66, "heads": 2}, "sincos2d needs"),
        ({"ndim": 1}, "linear1d"),
    ],
)
def test_bad_values_give_one_line(change, pattern):
    with pytest.raises(ValueError, match=pattern):
        load_preset("digits").replace(**change)


def test_bad_yaml_and_missing_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ValueError, match="not valid YAML"):
        load_config(bad)
    with pytest.raises(ValueError, match="cannot read config"):
        load_config(tmp_path / "nope.yaml")
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match="expected a mapping"):
        load_config(listed)


def test_config_is_frozen_and_head_dim_defaults():
    cfg = load_preset("vit-tiny")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.dim = 3  # type: ignore[misc]
    assert cfg.head_dim == 64
    assert ViTConfig.from_dict({**cfg.to_dict(), "head_dim": None}).head_dim == 64
