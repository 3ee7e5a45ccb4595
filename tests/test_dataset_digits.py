"""The digits data set written as a PNG ImageFolder gives, through --images/--calib, the same float
and integer top-1 as the built-in digits path."""

from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner
from PIL import Image

from hwvit.cli import main
from hwvit.float.digits import load_digits_split

CALIB = 64  # the built-in path calibrates on the first CALIB training images
IMAGES = 120  # and evaluates on the first IMAGES of the held-out split


def _write(root, x, y=None):
    """8-bit grayscale PNGs holding the raw 0..16 pixel values (read back with --rescale 1/16)."""
    for i, img in enumerate(x):
        folder = root / str(int(y[i])) if y is not None else root
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray((img[0].numpy() * 16).round().astype(np.uint8), mode="L").save(folder / f"{i:04d}.png")


def _compare(*args):
    res = CliRunner().invoke(main, ["compare", "--model", "digits", "--calib-images", str(CALIB), "--json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_digits_as_png_folder_matches_the_builtin_path(tmp_path):
    x_train, _, x_test, y_test = load_digits_split()
    _write(tmp_path / "test", x_test[:IMAGES], y_test[:IMAGES])
    _write(tmp_path / "calib", x_train[:CALIB])
    assert len(list((tmp_path / "test").rglob("*.png"))) == IMAGES and len(list((tmp_path / "test").iterdir())) == 10
    builtin = _compare("--limit", str(IMAGES))
    folder = _compare("--images", str(tmp_path / "test"), "--calib", str(tmp_path / "calib"), "--rescale", "0.0625")
    assert folder["images"] == builtin["images"] == IMAGES
    assert builtin["top1_float"] > 0.9
    assert (folder["top1_float"], folder["top1_int"]) == (builtin["top1_float"], builtin["top1_int"])
    assert folder["agreement"] == builtin["agreement"]
    assert folder["notes"] == [f"calibrated on {CALIB} samples of {tmp_path / 'calib'}"]
