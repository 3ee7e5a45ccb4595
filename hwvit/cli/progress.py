"""Progress on stderr: a bar while stderr is a terminal, one plain line elsewhere, nothing with -q."""

from __future__ import annotations

import contextlib

import click

from hwvit.textfiles import count


def progress_bar(total: int, desc: str, unit: str, quiet: bool = False, line: str | None = None, **options):
    """A tqdm bar on stderr while stderr is a terminal; anywhere else (a log file, a pipe, CI) no
    bar, whose carriage returns would run into the result line, but ``line`` once, a plain line
    naming the stage. -q: neither. ``options`` go to tqdm (unit_scale, ...)."""
    import sys

    from tqdm import tqdm

    terminal = sys.stderr.isatty()
    if line and not quiet and not terminal:
        click.echo(line, err=True)
    return tqdm(
        total=total, desc=desc, unit=unit, disable=quiet or not terminal, leave=False, mininterval=0.5, **options
    )


@contextlib.contextmanager
def progress(data, quiet: bool, what: str = "evaluating"):
    """A progress bar over a streamed evaluation set (`progress_bar`; silenced by -q)."""
    if not hasattr(data.inputs, "progress"):
        yield
        return
    n = len(data.inputs)
    with progress_bar(n, what, "img", quiet, line=f"{what} {count(n, 'image')}") as bar:
        data.inputs.progress = bar.update
        try:
            yield
        finally:
            data.inputs.progress = None
