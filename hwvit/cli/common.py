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


def fail(message: str) -> None:
    """One-line error, non-zero exit, no traceback."""
    raise click.ClickException(message)
