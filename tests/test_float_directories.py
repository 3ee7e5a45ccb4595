"""Model directories and each family's own config vocabulary: HF (4.x and 5.x names, safetensors
and .bin, sharded), timm (hub config.json) and lucidrains (its kwargs) load with no option, match
the originals to 1e-5, and `hwvit compare --checkpoint DIR --images IMGS` runs on them."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import yaml
from click.testing import CliRunner
from float_originals import SimpleViT, TimmViT, randomize
from PIL import Image
from safetensors.torch import save_file
from test_float_importers import _hf_config, to_hf4

from hwvit.cli import main
from hwvit.float import load_float
from hwvit.float.importers import load_checkpoint

TOL = 1e-5


def _maxdiff(a, b) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return float((a - b).abs().max())


@pytest.fixture(scope="module")
def hf_model():
    from transformers import ViTForImageClassification

    torch.manual_seed(0)
    return randomize(ViTForImageClassification(_hf_config(num_labels=3)), seed=21)


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """Three small RGB images in two class folders (random pixels: the model is random too)."""
    root = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(0)
    for cls, n in (("0", 2), ("2", 2)):
        (root / cls).mkdir()
        for i in range(n):
            Image.fromarray(rng.integers(0, 256, (20, 24, 3), dtype=np.uint8)).save(root / cls / f"{i}.png")
    return root


def _write_hf_dir(path, hf, layout: str):
    """A model directory as transformers writes it, or (4.x) as it wrote it: names renamed by hand."""
    if layout == "5.x-safetensors":
        hf.save_pretrained(path)
    elif layout == "5.x-sharded":
        hf.save_pretrained(path, max_shard_size="20KB")
        assert (path / "model.safetensors.index.json").is_file()
    else:
        path.mkdir()
        hf.config.to_json_file(path / "config.json")
        sd = {k: v.contiguous() for k, v in to_hf4(hf.state_dict()).items()}
        if layout == "4.x-bin":
            torch.save(sd, path / "pytorch_model.bin")
        else:  # 4.x-sharded-bin: two shards and the index that names them
            keys = sorted(sd)
            shards = {
                "pytorch_model-00001-of-00002.bin": keys[: len(keys) // 2],
                "pytorch_model-00002-of-00002.bin": keys[len(keys) // 2 :],
            }
            for name, part in shards.items():
                torch.save({k: sd[k] for k in part}, path / name)
            index = {"metadata": {}, "weight_map": {k: n for n, part in shards.items() for k in part}}
            (path / "pytorch_model.bin.index.json").write_text(json.dumps(index))


@pytest.mark.parametrize("layout", ["5.x-safetensors", "5.x-sharded", "4.x-bin", "4.x-sharded-bin"])
def test_hf_directory_loads_with_no_option(tmp_path, hf_model, layout):
    path = tmp_path / "vit"
    _write_hf_dir(path, hf_model, layout)
    loaded = load_checkpoint(path)
    assert loaded.family == "hf" and loaded.model.cfg.heads == 4  # heads from config.json
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert _maxdiff(hf_model(pixel_values=x).logits, loaded.model(x)) <= TOL


def test_hf_directory_compare_with_only_checkpoint_and_images(tmp_path, hf_model, photos):
    from transformers import ViTImageProcessor

    path = tmp_path / "vit"
    hf_model.save_pretrained(path)
    ViTImageProcessor(size={"height": 16, "width": 16}).save_pretrained(path)
    res = CliRunner().invoke(main, ["compare", "--checkpoint", str(path), "--images", str(photos)])
    assert res.exit_code == 0, res.output
    out = res.output
    assert "preprocessing: resize 16x16 bilinear, rescale 1/255, mean 0.5,0.5,0.5 std 0.5,0.5,0.5" in out
    assert f"calibrated on 1 of the 4 samples of {photos}, evaluated on the other 3" in out
    assert "layers.1.mlp.fc2" in out and "logits" in out  # the per-layer report
    summary = out.strip().splitlines()[-1]
    assert summary.startswith(f"{path}: 3 images, top-1 float ") and "random" not in summary


def test_transformers_config_object_and_json(tmp_path, hf_model):
    sd = hf_model.state_dict()
    assert load_float(sd, config=hf_model.config).cfg.heads == 4
    path = tmp_path / "config.json"
    hf_model.config.to_json_file(path)
    assert load_float(sd, config=str(path)).cfg.heads == 4
    with pytest.raises(
        ValueError, match="hf checkpoint does not match the given config: mlp_dim: checkpoint 48, config 64"
    ):
        load_float(sd, config={**hf_model.config.to_dict(), "intermediate_size": 64})


def test_timm_hub_directory(tmp_path, photos):
    timm = randomize(TimmViT(img=16, patch=4, classes=3, dim=32, depth=2, heads=2, mlp_ratio=3.0), seed=22)
    path = tmp_path / "timm"
    path.mkdir()
    save_file({k: v.contiguous() for k, v in timm.state_dict().items()}, str(path / "model.safetensors"))
    hub = {
        "architecture": "vit_tiny_custom",
        "num_classes": 3,
        "global_pool": "token",
        "model_args": {
            "img_size": 16,
            "patch_size": 4,
            "embed_dim": 32,
            "depth": 2,
            "num_heads": 2,
            "mlp_ratio": 3.0,
            "qkv_bias": True,
            "class_token": True,
            "drop_path_rate": 0.1,
        },
        "pretrained_cfg": {
            "input_size": [3, 16, 16],
            "crop_pct": 0.8,
            "interpolation": "bicubic",
            "mean": [0.485, 0.456, 0.406],
            "std": [0.229, 0.224, 0.225],
        },
    }
    (path / "config.json").write_text(json.dumps(hub))
    loaded = load_checkpoint(path)
    assert loaded.family == "timm" and (loaded.model.cfg.heads, loaded.model.cfg.mlp_dim) == (2, 96)
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert _maxdiff(timm(x), loaded.model(x)) <= TOL
    res = CliRunner().invoke(main, ["compare", "--checkpoint", str(path), "--images", str(photos), "-q"])
    assert res.exit_code == 0, res.output
    assert "resize shortest edge 20 bicubic, center crop 16x16" not in res.output  # -q: summary only
    res = CliRunner().invoke(main, ["compare", "--checkpoint", str(path), "--images", str(photos)])
    assert (
        "preprocessing: resize shortest edge 20 bicubic, center crop 16x16, rescale 1/255, mean 0.485,0.456,"
        "0.406 std 0.229,0.224,0.225" in res.output
    )


def test_timm_kwargs_as_config_file(tmp_path):
    timm = randomize(TimmViT(class_token=False), seed=23)  # dim 32, 4 heads: not readable from the weights
    kwargs = {
        "embed_dim": 32,
        "num_heads": 4,
        "img_size": 16,
        "patch_size": 4,
        "in_chans": 3,
        "global_pool": "avg",
        "class_token": False,
        "mlp_ratio": 4.0,
        "qkv_bias": True,
        "fc_norm": True,
    }
    path = tmp_path / "timm.yaml"
    path.write_text(yaml.safe_dump(kwargs))
    ours = load_float(timm.state_dict(), config=str(path))
    assert ours.cfg.pool == "mean" and ours.cfg.head_pre == "norm"
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert _maxdiff(timm(x), ours(x)) <= TOL


def test_lucidrains_directory_with_its_kwargs(tmp_path, photos):
    sv = randomize(SimpleViT(image_size=16, patch_size=4, num_classes=3, dim=32, heads=4, dim_head=8), seed=24)
    path = tmp_path / "simple"
    path.mkdir()
    torch.save(sv.state_dict(), path / "simple_vit.pt")
    kwargs = {
        "image_size": 16,
        "patch_size": 4,
        "num_classes": 3,
        "dim": 32,
        "depth": 2,
        "heads": 4,
        "mlp_dim": 48,
        "channels": 3,
        "dim_head": 8,
    }
    (path / "config.json").write_text(json.dumps(kwargs))
    loaded = load_checkpoint(path)
    assert loaded.family == "simple_vit" and (loaded.model.cfg.head_dim, loaded.model.cfg.inner_dim) == (8, 32)
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert _maxdiff(sv(x), loaded.model(x)) <= TOL
    res = CliRunner().invoke(main, ["compare", "--checkpoint", str(path), "--images", str(photos)])
    assert res.exit_code == 0, res.output
    assert "preprocessing: resize 16x16 bilinear, rescale 1/255 (defaults)" in res.output


def test_partial_config_and_heads_flag(tmp_path, photos):
    timm = randomize(TimmViT(img=16, patch=4, classes=3), seed=25)
    ckpt = tmp_path / "t.pth"
    torch.save(timm.state_dict(), ckpt)
    partial = tmp_path / "heads.yaml"
    partial.write_text("heads: 4\n")
    assert load_float(ckpt, config=str(partial)).cfg.heads == 4
    res = CliRunner().invoke(
        main, ["compare", "--checkpoint", str(ckpt), "--heads", "4", "--images", str(photos), "-q"]
    )
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, ["compare", "--checkpoint", str(ckpt), "--images", str(photos)])
    assert res.exit_code == 1 and "pass heads=H (CLI: --heads H)" in res.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--family", "timm"], "Error: the checkpoint keys do not match family 'timm'; they match 'hf'"),
        (
            ["--config", "{cfg}"],
            "Error: hf checkpoint does not match the given config: depth: checkpoint 2, config 3; "
            "dim: checkpoint 32, config 48",
        ),
        (["--heads", "5"], "Error: hf checkpoint: q/k/v width 32 is not divisible by heads=5"),
    ],
)
def test_checkpoint_refusals_are_one_line(tmp_path, hf_model, photos, args, message):
    path = tmp_path / "vit"
    hf_model.save_pretrained(path)
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"embed_dim": 48, "depth": 3}))  # timm names, contradicting the weights
    args = [a.replace("{cfg}", str(cfg)) for a in args]
    res = CliRunner().invoke(main, ["compare", "--checkpoint", str(path), "--images", str(photos), *args])
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == [message]


def test_vectors_and_sweep_take_images(tmp_path, hf_model, photos):
    from hwvit import vectors

    path = tmp_path / "vit"
    hf_model.save_pretrained(path)
    out = tmp_path / "vec"
    res = CliRunner().invoke(
        main,
        [
            "vectors",
            "--checkpoint",
            str(path),
            "--images",
            str(photos),
            "--limit",
            "1",
            "--blocks",
            "layers.0.attn.softmax",
            "--out",
            str(out),
            "-q",
        ],
    )
    assert res.exit_code == 0, res.output
    man = vectors.read(out / "layers.0.attn.softmax").manifest
    assert man["params"]["row_len"] == 17 and man["params"]["rows"] == 4 * 17  # one image, 4 heads x 17 tokens
    from hwvit.pipeline import file_sha256

    assert man["source_sha256"] == file_sha256(path / "model.safetensors")
    res = CliRunner().invoke(
        main,
        [
            "sweep",
            "--checkpoint",
            str(path),
            "--images",
            str(photos),
            "--quick",
            "--act-bits",
            "6",
            "--softmax-bits",
            "4",
            "--exp-entries",
            "32",
            "--percentiles",
            "99.9",
            "--no-shift",
            "--out",
            str(tmp_path / "sw"),
            "-q",
        ],
    )
    assert res.exit_code == 0, res.output
    assert res.output.startswith(f"{path}: 5 configurations on 3 images in ")
    assert ", baseline top-1 " in res.output
