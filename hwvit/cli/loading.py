"""The user's data, and the float and integer models built from the command's options: --images,
--calib, --labels, --limit and the preprocessing flags; `load_data` and `build_models` turn the
values of model_options and data_options into a Source, the data and an IntViT, any fault a
one-line error."""

from __future__ import annotations

import functools
from collections.abc import Callable

import click

from hwvit.cli.common import F, fail, options, refuse
from hwvit.textfiles import first_line

MODEL_KEYS = ("preset", "checkpoint", "family", "config_path", "heads")
DATA_KEYS = ("images_path", "calib_path", "labels_csv", "limit", "resize", "crop", "rescale", "mean", "std", "strict")
_PREPROCESS_FLAGS = (
    ("resize", "--resize"),
    ("crop", "--crop"),
    ("rescale", "--rescale"),
    ("mean", "--mean"),
    ("std", "--std"),
)


def data_options(limit_help: str) -> Callable[[F], F]:
    """--images/--calib PATH, --labels CSV, --limit N and the preprocessing flags: the user's data.

    A PATH is a folder of PNG/JPEG (class sub-folders or a labels.csv give labels), one image, or
    an .npy/.npz array. Images come to the model's channels as Hugging Face's processors bring them
    (greyscale and palette to RGB); one that cannot be read or converted is named and left out, or
    with --strict ends the run. The command receives the values under DATA_KEYS (see `load_data`)."""

    def deco(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if kwargs["labels_csv"] and not kwargs["images_path"]:
                refuse("--labels applies to --images only")
            if not (kwargs["images_path"] or kwargs["calib_path"]):
                for name, flag in _PREPROCESS_FLAGS:
                    if kwargs[name] is not None:
                        refuse(f"{flag} applies to --images/--calib only")
                if kwargs["strict"]:
                    refuse("--strict applies to --images/--calib only")
            return func(*args, **kwargs)

        return options(
            click.option(
                "--images",
                "images_path",
                type=click.Path(exists=True),
                metavar="PATH",
                help="Evaluation data: a folder of PNG/JPEG (labels from class sub-folders or labels.csv), "
                "one image, or an .npy/.npz array.  [default: digits' held-out split; else random]",
            ),
            click.option(
                "--calib",
                "calib_path",
                type=click.Path(exists=True),
                metavar="PATH",
                help="Calibration data, same forms.  [default: a disjoint part of --images]",
            ),
            click.option(
                "--labels",
                "labels_csv",
                type=click.Path(exists=True, dir_okay=False),
                metavar="CSV",
                help="Labels of --images as file,label rows.",
            ),
            click.option("--limit", type=click.IntRange(1), help=limit_help),
            click.option(
                "--resize",
                metavar="N|HxW",
                help="Resize: shortest edge to N, or to exactly HxW.  "
                "[default: the checkpoint's preprocessor_config.json, else the model's size]",
            ),
            click.option("--crop", metavar="N|HxW", help="Center crop after resizing."),
            click.option("--rescale", type=float, help="Factor on raw pixel values.  [default: 1/255]"),
            click.option("--mean", metavar="M[,M,M]", help="Per-channel mean, subtracted after rescaling."),
            click.option("--std", metavar="S[,S,S]", help="Per-channel std, divided by after the mean."),
            click.option(
                "--strict",
                is_flag=True,
                help="Stop at the first image that cannot be read, converted to the model's channels or "
                "preprocessed to its size.  [default: leave it out, naming it, and go on]",
            ),
        )(wrapper)  # type: ignore[return-value]

    return deco


def load_data(kwargs: dict, seed: int = 0, calib_images: int = 256):
    """(Source, Data) for the values of model_options and data_options (popped from ``kwargs``)."""
    from hwvit import pipeline

    m = {k: kwargs.pop(k, None) for k in MODEL_KEYS}
    d = {k: kwargs.pop(k, None) for k in DATA_KEYS}
    try:
        source = pipeline.load_source(
            m["preset"], m["checkpoint"], m["family"], m["config_path"], seed=seed, heads=m["heads"]
        )
        pre = pipeline.preprocessing(source, d["resize"], d["crop"], d["mean"], d["std"], d["rescale"])
        data = pipeline.plan_data(
            source,
            d["images_path"],
            d["calib_path"],
            d["labels_csv"],
            calib_images,
            d["limit"],
            seed,
            pre=pre,
            strict=bool(d["strict"]),
        )
    except (ValueError, OSError, KeyError) as exc:
        fail(first_line(exc))
    return source, data


def build_models(kwargs: dict, qconfig, calib_images: int, seed: int = 0, recipe=None):
    """(Source, Data, IntViT) for the model and data options; bad input becomes a one-line error."""
    from hwvit.quant import quantize_model

    source, data = load_data(kwargs, seed, calib_images)
    if source.imported is not None:  # a quantized ONNX file: its own integer model, hwvit's arithmetic
        # only where it computes in float (softmax, LayerNorm: --variant)
        if recipe is not None:
            refuse("--recipe does not apply to a quantized ONNX file: its quantizers are the file's")
        qc = qconfig or None
        softmax = getattr(qc, "softmax", "hwvit")
        layernorm = getattr(qc, "layernorm", "hwvit")
        named = getattr(qc, "requant", "half_up")  # hwvit's default: the file's own rounding
        requant = None if named in ("half_up", "half_even") else named
        if requant not in (None, "onnxruntime"):
            refuse(
                f"--variant requant={requant}: a quantized ONNX file's GEMMs round as its QuantizeLinear "
                "(half to even), or as onnxruntime's fused kernels: requant=onnxruntime"
            )
        if getattr(qc, "gelu", "lut") != "lut":
            refuse(f"--variant gelu={qc.gelu}: a quantized ONNX file's GELU is its own table")
        if (softmax, layernorm, requant) != ("hwvit", "hwvit", None):
            from hwvit.pipeline import load_quantized

            try:
                source.imported = load_quantized(source.name, seed, softmax, layernorm, requant)
            except (ValueError, OSError) as exc:
                fail(first_line(exc))
        return source, data, source.imported.int_model
    try:
        return source, data, quantize_model(source.model, data.calib, qconfig, recipe=recipe)
    except (ValueError, OSError, KeyError, OverflowError) as exc:  # a blank calibration set overflows a bias
        fail(first_line(exc))


def describe_data(data, quiet: bool) -> None:
    """The preprocessing and where calibration data came from, on stderr (stdout stays for results)."""
    if quiet:
        return
    if data.pre is not None:
        click.echo(f"preprocessing: {data.pre.describe()}", err=True)
    for note in data.notes:
        click.echo(note, err=True)
