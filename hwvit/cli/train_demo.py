"""`hwvit train-demo`: train the digits demo ViT and write the shipped checkpoint."""

from __future__ import annotations

import time

import click

from hwvit.cli.common import fail


@click.command()
@click.option("--out", "out_path", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Checkpoint to write (.safetensors; a .yaml record is written beside it). "
                   "Default: the shipped hwvit/data/digits.safetensors.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of initialisation and batching (the test split is always the seed-0 split).")
@click.option("--epochs", type=click.IntRange(min=1), default=None,
              help="Training epochs.  [default: the recipe's, see hwvit.float.digits.EPOCHS]")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def train_demo(out_path: str | None, seed: int, epochs: int | None, quiet: bool) -> None:
    """Train the small ViT on scikit-learn's bundled 8x8 digits and report its float test accuracy.

    \b
    Example:
      hwvit train-demo                        rewrite the shipped model (about 1-2 min on one core)
      hwvit train-demo --out /tmp/d.safetensors --seed 1
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
        fail(str(exc))
    click.echo(f"wrote {out}; float test accuracy {100 * acc:.2f}% "
               f"({epochs} epochs, seed {seed}, {time.monotonic() - start:.0f} s)")
