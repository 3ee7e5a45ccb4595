"""The user's images: folders, labels, arrays, HF preprocessing on real photographs, conversion to
the model's channels as transformers does it, images that cannot be used left out by name (or, with
--strict, the first one an error), and the one-line refusals (empty folder, labels not in the head)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from float_originals import randomize
from PIL import Image

from hwvit import pipeline
from hwvit.cli import main
from hwvit.dataset import Preprocess, from_hf, label_indices, open_images

PRE = {
    "do_resize": True,
    "size": {"shortest_edge": 40},
    "resample": 0,
    "do_center_crop": True,
    "crop_size": {"height": 32, "width": 32},
    "do_rescale": True,
    "rescale_factor": 1 / 255,
    "do_normalize": True,
    "image_mean": [0.4, 0.5, 0.6],
    "image_std": [0.2, 0.25, 0.3],
}


def _photos(root):
    import skimage.data

    root.mkdir()
    photos = {
        "astronaut.png": skimage.data.astronaut(),
        "chelsea.jpg": skimage.data.chelsea(),
        "coffee.png": skimage.data.coffee(),
    }
    for name, pixels in photos.items():
        Image.fromarray(pixels).save(root / name, quality=95)
    return photos


@pytest.fixture(scope="session")  # session: kept when xdist runs other modules between its tests
def vit_dir(tmp_path_factory):
    """A HF ViT (32x32 inputs, 3 named classes) saved with the preprocessor above."""
    from transformers import ViTConfig, ViTForImageClassification

    path = tmp_path_factory.mktemp("vit") / "model"
    cfg = ViTConfig(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=48,
        image_size=32,
        patch_size=8,
        id2label={0: "cat", 1: "coffee", 2: "person"},
        label2id={"cat": 0, "coffee": 1, "person": 2},
    )
    torch.manual_seed(0)
    randomize(ViTForImageClassification(cfg), seed=31).save_pretrained(path)
    (path / "preprocessor_config.json").write_text(json.dumps(PRE))
    return path


def test_photographs_reach_the_model_preprocessed(tmp_path, vit_dir):
    photos = _photos(tmp_path / "photos")
    source = pipeline.load_source(checkpoint=str(vit_dir))
    data = pipeline.plan_data(source, images=str(tmp_path / "photos"), calib=str(tmp_path / "photos"))
    seen = []
    with torch.no_grad():
        for batch in data.inputs:
            source.model(batch, record=lambda path, t: seen.append(t) if path == "input" else None)
    x = torch.cat(seen).numpy()
    assert x.shape == (3, 3, 32, 32) and x.dtype == np.float32  # (N, C, H, W), files in sorted order
    # One pixel by hand: coffee is 400x600; shortest edge 40 -> 40x60 (nearest: source pixel 10 i + 5),
    # center crop 32 -> top 4, left 14; so x[2][c, 3, 7] comes from coffee[10 * 7 + 5, 10 * 21 + 5, c].
    coffee = photos["coffee.png"]
    for c, (mean, std) in enumerate(zip(PRE["image_mean"], PRE["image_std"])):
        assert x[2, c, 3, 7] == pytest.approx((coffee[75, 215, c] / 255 - mean) / std, abs=1e-6)
    # The whole tensor as transformers' own image processor makes it (CLIP: shortest edge + crop).
    from transformers import CLIPImageProcessor

    hf = CLIPImageProcessor(**{k: v for k, v in PRE.items() if k != "do_resize"})
    for i, name in enumerate(["astronaut.png", "chelsea.jpg", "coffee.png"]):
        ref = hf(images=[np.asarray(Image.open(tmp_path / "photos" / name))], return_tensors="np")["pixel_values"]
        assert np.abs(ref[0] - x[i]).max() <= 1e-6


def test_preprocessing_is_printed_and_flags_override(tmp_path, vit_dir):
    _photos(tmp_path / "photos")
    res = CliRunner().invoke(
        main,
        [
            "compare",
            "--checkpoint",
            str(vit_dir),
            "--images",
            str(tmp_path / "photos"),
            "--crop",
            "32",
            "--resize",
            "36",
            "--mean",
            "0.5",
            "--std",
            "0.5",
        ],
    )
    assert res.exit_code == 0, res.output
    assert (
        f"preprocessing: resize shortest edge 36 nearest, center crop 32x32, rescale 1/255, mean 0.5 std 0.5 "
        f"({vit_dir}/preprocessor_config.json + flags)"
    ) in res.output
    assert res.output.strip().splitlines()[-1].startswith(f"{vit_dir}: 2 images, agreement ")  # no labels


def test_folder_labels_csv_and_arrays(tmp_path):
    root = tmp_path / "flat"
    root.mkdir()
    for name in ("b.png", "a.png"):
        Image.fromarray(np.zeros((8, 8), np.uint8)).save(root / name)
    (root / "labels.csv").write_text("file,label\na.png,3\nb.png,1\n")
    images = open_images(root)
    assert [p.name for p in images.paths] == ["a.png", "b.png"] and images.labels == ["3", "1"]
    assert list(label_indices(images.labels, 10, None, "x")) == [3, 1]
    z = tmp_path / "d.npz"
    np.savez(z, images=np.arange(2 * 64, dtype=np.float32).reshape(2, 1, 8, 8), labels=np.array([4, 5]))
    arr = open_images(z)
    assert len(arr) == 2 and arr.labels == ["4", "5"]
    batch = next(arr.batches(Preprocess(), (1, 8, 8)))
    assert torch.equal(batch, torch.arange(128, dtype=torch.float32).reshape(2, 1, 8, 8))  # floats as they are
    px = tmp_path / "px.npy"
    np.save(px, np.full((3, 8, 8), 255, np.uint8))  # pixels: rescaled
    assert float(next(open_images(px).batches(Preprocess(), (1, 8, 8))).max()) == 1.0


def test_label_names_and_numbers():
    assert list(label_indices(["person", "cat"], 3, ["cat", "coffee", "person"], "x")) == [2, 0]
    assert list(label_indices(["dog", "ant", "dog"], 3, None, "x")) == [1, 0, 1]  # ImageFolder order
    with pytest.raises(
        ValueError, match="labels do not match the head's classes: 'dog' is not among the model's 3 class names"
    ):
        label_indices(["dog", "cat"], 3, ["cat", "coffee", "person"], "x")
    with pytest.raises(ValueError, match="labels do not match the head's 3 classes: label '7' would be class 7"):
        label_indices(["0", "7"], 3, None, "x")


def test_hf_preprocessor_sizes():
    assert from_hf({"size": 224}).size == (224, 224)  # old configs: an int is a square
    pre = from_hf({"size": {"height": 16, "width": 24}, "do_normalize": False})
    assert (pre.size, pre.mean, pre.rescale) == ((16, 24), None, 1 / 255)
    with pytest.raises(ValueError, match="longest_edge is not supported"):
        from_hf({"size": {"shortest_edge": 8, "longest_edge": 16}})


def _cli(*args):
    """(exit code, last line): what the user was told went wrong (info lines on stderr may precede it)."""
    res = CliRunner().invoke(main, ["compare", *args])
    assert "Traceback" not in res.output
    return res.exit_code, res.output.strip().splitlines()[-1]


def test_every_mode_comes_to_the_channels_as_transformers_brings_it():
    """Greyscale, palette, transparent (onto white) and CMYK images to RGB: the pixels of
    transformers' own convert_to_rgb; a colour image to a one-channel model: PIL's luma."""
    from transformers.image_transforms import convert_to_rgb

    from hwvit.dataset.preprocess import conversion, to_channels

    rng = np.random.default_rng(5)
    rgba = Image.fromarray(rng.integers(0, 256, (6, 7, 4), dtype=np.uint8))
    images = {
        "greyscale": Image.fromarray(rng.integers(0, 256, (6, 7), dtype=np.uint8)),
        "palette": rgba.convert("RGB").convert("P"),
        "transparent": rgba,
        "mode CMYK": rgba.convert("CMYK"),
        "black-and-white": rgba.convert("1"),
    }
    for what, img in images.items():
        assert conversion(img, 3, "x") == what
        assert np.array_equal(np.asarray(to_channels(img, 3, "x")), convert_to_rgb(img, return_numpy=True)), what
    rgb = rgba.convert("RGB")
    assert conversion(rgb, 3, "x") is None and to_channels(rgb, 3, "x") is rgb
    assert conversion(rgb, 1, "x") == "colour" and np.array_equal(
        np.asarray(to_channels(rgb, 1, "x")), rgb.convert("L")
    )
    wide = Image.fromarray(np.full((4, 4), 4000, np.uint16))
    assert conversion(wide, 1, "x") is None  # a one-channel model reads its values as they are
    with pytest.raises(ValueError, match="x: I;16 greyscale pixels are wider than 8 bits"):
        conversion(wide, 3, "x")


def test_images_that_cannot_be_used_are_left_out_by_name(tmp_path, vit_dir):
    root = tmp_path / "imgs"
    (root / "cat").mkdir(parents=True)
    rgb = np.zeros((32, 32, 3), np.uint8)
    Image.fromarray(rgb).save(root / "cat" / "0.png")
    Image.fromarray(np.zeros((32, 32), np.uint8)).save(root / "cat" / "1.png")  # greyscale
    Image.fromarray(rgb).convert("P").save(root / "cat" / "2.png")  # palette
    Image.fromarray(np.zeros((32, 32, 4), np.uint8)).save(root / "cat" / "3.png")  # transparent
    (root / "cat" / "4.png").write_bytes(b"not a png at all")
    Image.fromarray(np.zeros((32, 32), np.uint16)).save(root / "cat" / "5.png")  # 16-bit greyscale
    args = ["compare", "--checkpoint", str(vit_dir), "--images", str(root), "--calib", str(root / "cat" / "0.png")]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    lines = res.output.strip().splitlines()
    bad = f"{root}/cat/4.png: cannot read image (cannot identify image file '{root}/cat/4.png')"
    assert f"skipped {bad}" in lines
    assert any(ln.startswith(f"skipped {root}/cat/5.png: I;16 greyscale pixels are wider than 8 bits") for ln in lines)
    assert f"{root}: left out 2 of 6 images (--strict stops at the first instead)" in lines
    converted = f"{root}: converted 3 images to RGB (1 greyscale, 1 palette, 1 transparent), as Hugging Face's image"
    assert [ln for ln in lines if "converted" in ln] == [converted + " processors do"]  # said once
    assert lines[-1].startswith(f"{vit_dir}: 4 images, top-1 float ")
    code, line = _cli(*args[1:], "--strict")
    assert code == 1 and line == f"Error: {bad}"
    # a one-channel model takes a colour photograph's luma
    noise = tmp_path / "noise.png"
    Image.fromarray(np.random.default_rng(2).integers(0, 256, (24, 24, 3), dtype=np.uint8)).save(noise)
    code, line = _cli("--model", "digits", "--images", str(noise), "--calib", str(noise))
    assert code == 0 and line.startswith("digits: 1 image, ")
    (tmp_path / "empty").mkdir()
    code, line = _cli("--model", "digits", "--images", str(tmp_path / "empty"))
    assert code == 1 and line == f"Error: {tmp_path}/empty: no PNG or JPEG images (in it or in class sub-folders)"
    (root / "dog").mkdir()
    Image.fromarray(rgb).save(root / "dog" / "0.png")
    Image.fromarray(rgb).save(root / "cat" / "2.png")
    code, line = _cli("--checkpoint", str(vit_dir), "--images", str(root))
    assert code == 1 and line == (
        f"Error: {root}: labels do not match the head's classes: 'dog' is not among the model's 3 class names"
    )
    code, line = _cli("--model", "digits", "--images", str(root / "dog" / "0.png"))
    assert code == 1 and "one image cannot be split" in line and "--calib" in line


def test_evaluation_data_calibrates_on_a_disjoint_part(tmp_path):
    x = np.random.default_rng(1).normal(size=(8, 1, 8, 8)).astype(np.float32) * 5  # inputs scaled x5
    np.savez(tmp_path / "x.npz", images=x, labels=np.arange(8) % 10)
    source = pipeline.load_source("digits")
    data = pipeline.plan_data(source, images=str(tmp_path / "x.npz"), seed=3)
    assert data.notes == [f"calibrated on 2 of the 8 samples of {tmp_path / 'x.npz'}, evaluated on the other 6"]
    evaluated = torch.cat(list(data.inputs)).numpy()
    assert data.calib.shape == (2, 1, 8, 8) and evaluated.shape == (6, 1, 8, 8)
    together = np.concatenate([data.calib.numpy(), evaluated])
    assert sorted(map(bytes, together)) == sorted(map(bytes, x))  # disjoint, and together all of them
    assert list(data.labels) == [i for i in range(8) if x[i].tobytes() in set(map(bytes, evaluated))]


def test_folders_stream_one_batch_at_a_time(tmp_path, monkeypatch):
    for i in range(10):
        Image.fromarray(np.full((8, 8), i, np.uint8)).save(tmp_path / f"{i}.png")
    decoded = []
    images = open_images(tmp_path)
    real = type(images).item
    monkeypatch.setattr(type(images), "item", lambda self, i, *a: decoded.append(i) or real(self, i, *a))
    stream = pipeline.Stream(images, Preprocess(), (1, 8, 8), batch_size=4)
    first = next(iter(stream))
    assert first.shape == (4, 1, 8, 8) and decoded == [0, 1, 2, 3]  # nothing beyond the batch is decoded
    assert [len(b) for b in stream] == [4, 4, 2]


def test_random_weights_and_inputs_are_said(tmp_path):
    res = CliRunner().invoke(main, ["compare", "--model", "vit-tiny", "--limit", "1", "--calib-images", "1", "-q"])
    assert res.exit_code == 0, res.output
    assert res.output.strip().splitlines()[-1].startswith("vit-tiny: 1 image (random weights/inputs), agreement ")
    _photos(tmp_path / "photos")
    res = CliRunner().invoke(
        main, ["compare", "--model", "vit-tiny", "--images", str(tmp_path / "photos"), "-q", "--limit", "1"]
    )
    assert res.exit_code == 0, res.output
    assert res.output.strip().splitlines()[-1].startswith("vit-tiny: 1 image (random weights), agreement ")
