"""`hwvit train-demo`: train the digits demo ViT and write the shipped checkpoint."""

from __future__ import annotations

import time

import click

from hwvit.cli.common import fail, quiet_option, seed_option
from hwvit.textfiles import first_line


@click.command()
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Checkpoint to write (.safetensors; a .yaml record is written beside it). "
    "Default: the shipped hwvit/data/digits.safetensors.",
)
@seed_option("Seed of initialisation and batching (the test split is always the seed-0 split).")
@click.option(
    "--epochs",
    type=click.IntRange(min=1),
    default=None,
    help="Training epochs.  [default: the recipe's, see hwvit.float.digits.EPOCHS]",
)
@quiet_option("No progress bar.")
def train_demo(out_path: str | None, seed: int, epochs: int | None, quiet: bool) -> None:
    """Train the small ViT on scikit-learn's bundled 8x8 digits and report its float test accuracy.

    Without --out it rewrites the shipped model, hwvit/data/digits.safetensors (about 1-2 min on
    one core).

    \b
    Example:
      hwvit train-demo --out digits.safetensors --epochs 2 --seed 1
    """
    from hwvit.float import digits

    out = out_path or str(digits.DEMO_CHECKPOINT)
    epochs = epochs or digits.EPOCHS
    start = time.monotonic()
    try:
        if quiet:
            acc = digits.train_demo(out, seed=seed, epochs=epochs)
        else:
            with click.progressbar(length=epochs, label="training", show_pos=True) as bar:
                acc = digits.train_demo(out, seed=seed, epochs=epochs, progress=lambda _e, _l: bar.update(1))
    except (ValueError, OSError) as exc:
        fail(first_line(exc))
    click.echo(
        f"wrote {out}; float test accuracy {100 * acc:.2f}% "
        f"({epochs} epochs, seed {seed}, {time.monotonic() - start:.0f} s)"
    )
