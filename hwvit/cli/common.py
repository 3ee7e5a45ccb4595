"""Options and helpers shared by several commands."""

from __future__ import annotations

import functools

import click


def model_options(func):
    """--model PRESET | --checkpoint PATH --family F: where the float model comes from."""

    @click.option("--model", "preset", metavar="PRESET", help="A shipped preset (see `hwvit info`).")
    @click.option("--checkpoint", type=click.Path(exists=True, dir_okay=False), help="A checkpoint file.")
    @click.option("--family", type=click.Choice(["hf", "timm", "simple_vit", "ecg1d", "hwvit"]),
                  help="Checkpoint key-name family.", show_default=True)
    @click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False),
                  help="Model config YAML for a checkpoint (default: inferred from the family/keys).")
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if kwargs.get("preset") and kwargs.get("checkpoint"):
            raise click.UsageError("give --model or --checkpoint, not both")
        return func(*args, **kwargs)

    return wrapper


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
    """The quantization knobs of hwvit.quant.QuantConfig."""

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
                  help="Calibration inputs (digits: training images; otherwise random).")
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapper


def quant_config(kwargs: dict):
    """QuantConfig from the options of quant_options (pops them from kwargs)."""
    from hwvit.quant import QuantConfig

    return QuantConfig(act_bits=kwargs.pop("act_bits"), softmax_bits=kwargs.pop("softmax_bits"),
                       exp=kwargs.pop("exp_mode"), exp_entries=kwargs.pop("exp_entries"),
                       calibration=kwargs.pop("calibration"), percentile=kwargs.pop("percentile"))


def build_models(preset, checkpoint, family, config_path, qconfig, calib_images: int, seed: int = 0):
    """(Source, IntViT) for the model options; bad input becomes a one-line ClickException."""
    from hwvit import pipeline
    from hwvit.quant import quantize_model

    try:
        source = pipeline.load_source(preset, checkpoint, family, config_path, seed=seed)
        calib = pipeline.calibration_inputs(source, calib_images, seed=seed)
        return source, quantize_model(source.model, calib, qconfig)
    except (ValueError, OSError, KeyError) as exc:
        fail(str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__)
