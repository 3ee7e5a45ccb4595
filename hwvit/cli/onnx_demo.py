"""`hwvit onnx-demo`: a quantized ONNX file of the bundled digits ViT, as an ML team's tools write one."""

from __future__ import annotations

from pathlib import Path

import click

from hwvit.cli.common import fail
from hwvit.onnx.make import CONFIGS
from hwvit.textfiles import first_line


@click.command()
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False),
    required=True,
    help="The ONNX file to write (.onnx).",
)
@click.option(
    "--config",
    "config",
    type=click.Choice(list(CONFIGS)),
    default="symmetric",
    show_default=True,
    help="onnxruntime quantize_static options: symmetric int8 with per-channel weights; its defaults "
    "(asymmetric int8 activations, per-tensor weights); uint8 activations with zero points.",
)
@click.option(
    "--calib-images",
    type=click.IntRange(1, 1024),
    default=256,
    show_default=True,
    help="Training images the quantizer calibrates on (the held-out split stays unseen).",
)
@click.option("--pow2", is_flag=True, help="Round every scale up to a power of two (and requantize the weights).")
@click.option("--force", is_flag=True, help="Replace an existing file.")
def onnx_demo(out_path: str, config: str, calib_images: int, pow2: bool, force: bool) -> None:
    """Write a quantized ONNX file of the bundled digits ViT (QDQ, onnxruntime's quantize_static),
    a stand-in for the file your ML team hands over: `--checkpoint model.onnx` then reads it as its
    own integer model (docs/onnx.md).

    \b
    Example:
      hwvit onnx-demo --out model.onnx
      hwvit compare --checkpoint model.onnx --limit 16 -q
      hwvit vectors --checkpoint model.onnx --limit 1 --blocks 'layers.0.*' --out onnx-vectors/
    """
    from hwvit.onnx import is_onnx
    from hwvit.onnx.make import digits_file

    path = Path(out_path)
    if not is_onnx(path):
        fail(f"--out {path}: an ONNX file's name ends in .onnx")
    if path.exists() and not force:
        fail(f"{path} exists; --force replaces it")
    if not path.parent.is_dir():
        fail(f"--out {path}: no folder {path.parent}")
    try:
        digits_file(path, config, calib_images, pow2)
    except (ValueError, OSError) as exc:
        fail(first_line(exc))
    scales = ", power-of-two scales" if pow2 else ""
    click.echo(f"wrote {path}: the digits ViT quantized by onnxruntime ({config}, {calib_images} images{scales})")
