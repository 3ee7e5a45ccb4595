"""Options and helpers shared by several commands."""

from __future__ import annotations

import contextlib
import functools

import click


def model_options(func):
    """--model PRESET | --checkpoint PATH [--family F] [--config C] [--heads H]: the float model."""

    @click.option("--model", "preset", metavar="PRESET", help="A shipped preset (see `hwvit info`).")
    @click.option("--checkpoint", type=click.Path(exists=True),
                  help="A checkpoint file (.safetensors, .pt/.pth/.bin) or a model directory (save_pretrained).")
    @click.option("--family", type=click.Choice(["hf", "timm", "simple_vit", "ecg1d", "hwvit"]),
                  help="Checkpoint key-name family  [default: read from the key names]")
    @click.option("--config", "config_path", metavar="PRESET|FILE",
                  help="Model config: a preset or a YAML/JSON file in hwvit, HF (config.json), timm or lucidrains "
                       "names, whole or partial; checked against the weights.")
    @click.option("--heads", type=click.IntRange(1), help="Attention heads (the one field weights never say).")
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if kwargs.get("preset") and kwargs.get("checkpoint"):
            raise click.UsageError("give --model or --checkpoint, not both")
        return func(*args, **kwargs)

    return wrapper


def data_options(func):
    """--images/--calib PATH, --labels, --limit and the preprocessing flags: the user's data."""

    @click.option("--images", "images_path", type=click.Path(exists=True), metavar="PATH",
                  help="Evaluation data: a folder of PNG/JPEG (class sub-folders or labels.csv give labels), "
                       "one image, or an .npy/.npz array  [default: digits test split; else random]")
    @click.option("--calib", "calib_path", type=click.Path(exists=True), metavar="PATH",
                  help="Calibration data, same forms  [default: a disjoint part of --images]")
    @click.option("--labels", "labels_csv", type=click.Path(exists=True, dir_okay=False), metavar="CSV",
                  help="Labels of --images as file,label rows.")
    @click.option("--limit", type=click.IntRange(1), help="Evaluate on at most N samples (the first ones).")
    @click.option("--resize", metavar="N|HxW", help="Resize: shortest edge to N, or to exactly HxW "
                  "[default: preprocessor_config.json, else the model's size]")
    @click.option("--crop", metavar="N|HxW", help="Center crop after resizing.")
    @click.option("--rescale", type=float, help="Pixel factor before normalizing  [default: 1/255]")
    @click.option("--mean", metavar="M[,M,M]", help="Per-channel mean subtracted after rescaling.")
    @click.option("--std", metavar="S[,S,S]", help="Per-channel std divided by after the mean.")
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapper


DATA_KEYS = ("images_path", "calib_path", "labels_csv", "limit", "resize", "crop", "rescale", "mean", "std")
MODEL_KEYS = ("preset", "checkpoint", "family", "config_path", "heads")


def require_simulators(simulator: str) -> list[str]:
    """The simulators named by --simulator (icarus, verilator or both), each checked installed,
    and the source checkout's rtl/ and sim/; a missing one is a one-line error with its install
    command."""
    from hwvit import toolchain

    sims = list(toolchain.SIMULATORS) if simulator == "both" else [simulator]
    try:
        for sim in sims:
            toolchain.require(sim)
        toolchain.repo()
    except toolchain.ToolMissing as exc:
        fail(str(exc))
    return sims


def fail(message: str) -> None:
    """One-line error, non-zero exit, no traceback."""
    raise click.ClickException(message)


def quant_options(func):
    """The quantization knobs of hwvit.intvit.QuantConfig."""

    @click.option("--act-bits", type=click.IntRange(2, 8), default=8, show_default=True,
                  help="Activation width (per tensor, symmetric).")
    @click.option("--softmax-bits", type=click.IntRange(2, 8), default=8, show_default=True,
                  help="Softmax probability width.")
    @click.option("--exp", "exp_mode", type=click.Choice(["table", "shift"]), default="table", show_default=True,
                  help="Softmax exp: table lookup (the RTL) or shift-and-add.")
    @click.option("--exp-entries", type=click.IntRange(1, 256), default=256, show_default=True,
                  help="Exp table entries.")
    @click.option("--calibration", type=click.Choice(["minmax", "percentile"]), default="minmax",
                  show_default=True, help="Activation range estimate.")
    @click.option("--percentile", type=click.FloatRange(50.0, 100.0), default=99.99, show_default=True,
                  help="Percentile of |x| for --calibration percentile.")
    @click.option("--calib-images", type=click.IntRange(1), default=256, show_default=True,
                  help="At most N calibration samples (digits: training images; --calib: a seeded choice).")
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapper


def quant_config(kwargs: dict):
    """QuantConfig from the options of quant_options (pops them from kwargs)."""
    from hwvit.intvit import QuantConfig

    return QuantConfig(act_bits=kwargs.pop("act_bits"), softmax_bits=kwargs.pop("softmax_bits"),
                       exp=kwargs.pop("exp_mode"), exp_entries=kwargs.pop("exp_entries"),
                       calibration=kwargs.pop("calibration"), percentile=kwargs.pop("percentile"))


def load_data(kwargs: dict, seed: int = 0, calib_images: int = 256):
    """(Source, Data) for the options of model_options and data_options (popped from kwargs)."""
    from hwvit import pipeline

    m = {k: kwargs.pop(k, None) for k in MODEL_KEYS}
    d = {k: kwargs.pop(k, None) for k in DATA_KEYS}
    try:
        source = pipeline.load_source(m["preset"], m["checkpoint"], m["family"], m["config_path"], seed=seed,
                                      heads=m["heads"])
        pre = pipeline.preprocessing(source, d["resize"], d["crop"], d["mean"], d["std"], d["rescale"])
        data = pipeline.plan_data(source, d["images_path"], d["calib_path"], d["labels_csv"], calib_images,
                                  d["limit"], seed, pre=pre)
    except (ValueError, OSError, KeyError) as exc:
        fail(str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__)
    return source, data


def describe_data(source, data, quiet: bool) -> None:
    """The preprocessing and where calibration data came from, on stderr (stdout stays for results)."""
    if quiet:
        return
    if data.pre is not None:
        click.echo(f"preprocessing: {data.pre.describe()}", err=True)
    for note in data.notes:
        click.echo(note, err=True)


@contextlib.contextmanager
def progress(data, quiet: bool, what: str = "evaluating"):
    """A tqdm bar over a streamed evaluation set (silenced by -q)."""
    from tqdm import tqdm

    if not hasattr(data.inputs, "progress"):
        yield
        return
    with tqdm(total=len(data.inputs), unit="img", disable=quiet, leave=False, desc=what, mininterval=0.5) as bar:
        data.inputs.progress = bar.update
        try:
            yield
        finally:
            data.inputs.progress = None


def build_models(kwargs: dict, qconfig, seed: int = 0):
    """(Source, Data, IntViT) for the model and data options; bad input becomes a one-line ClickException."""
    from hwvit.intvit import quantize_model

    source, data = load_data(kwargs, seed, kwargs["calib_images"])
    try:
        return source, data, quantize_model(source.model, data.calib, qconfig)
    except (ValueError, OSError, KeyError) as exc:
        fail(str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__)


def user_error(exc: BaseException) -> None:
    """One line for an error met while running on the user's data."""
    fail(str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__)
