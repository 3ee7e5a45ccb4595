"""Output directories: the --out option, --force, and the rule every command that writes one follows.

The rule (`check_out_dir`, the same for every such command): a missing or empty directory is
written; a non-empty one only with --force, and --force replaces only a previous hwvit output of
the same kind (vector sets, a compare report, a sweep) holding nothing else: a file hwvit did not
write there (a committed README, someone's notes) makes it refuse, naming the file. It is checked
before any work starts.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import click

from hwvit.cli.common import F, fail, options, quiet_option, seed_option
from hwvit.textfiles import first_line

force_option = click.option(
    "--force",
    is_flag=True,
    help="Replace a non-empty output directory holding a previous hwvit output of the same kind and nothing else.",
)


def out_option(
    help: str, *, required: bool = False, default: str | None = None, name: str = "--out", dest: str = "out_dir"
) -> Callable[[F], F]:
    """An output directory option (checked with `check_out_dir` before the work starts)."""
    return click.option(
        name,
        dest,
        type=click.Path(file_okay=False),
        required=required,
        default=default,
        show_default=default is not None,
        help=help,
    )


def vector_output_options(out_help: str) -> Callable[[F], F]:
    """--out DIR --force --seed N -q: the options both vector commands share."""
    return options(
        out_option(out_help, required=True),
        force_option,
        seed_option("Seed of the random inputs and cases."),
        quiet_option(),
    )


OUTPUT_KINDS = ("vectors", "compare-report", "sweep")


def _check_previous(out: Path, kind: str) -> None:
    """Fail unless the non-empty ``out`` holds a previous hwvit output of ``kind`` (what --force replaces)."""
    if kind == "vectors":
        from hwvit.vectors.write import check_replaceable

        try:
            check_replaceable(out)
        except FileExistsError as exc:
            fail(str(exc))
        return
    from hwvit.report import publish

    if kind == "compare-report":
        from hwvit.report.write import FILES
    else:
        from hwvit.report.sweep_write import FILES
    try:
        publish.check_out_dir(out, kind, FILES)
    except ValueError as exc:
        fail(first_line(exc))


def check_out_dir(out_dir: str | os.PathLike | None, force: bool, kind: str) -> None:
    """Refuse an output directory before any work: see the module docstring for the rule."""
    assert kind in OUTPUT_KINDS, kind
    if out_dir is None:
        return
    out = Path(out_dir)
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        fail(f"{out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            fail(f"{out} already exists (use --force to replace it)")
        _check_previous(out, kind)
        return
    parent = next((p for p in out.absolute().parents if p.exists()), None)
    if parent is None or not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        fail(f"{out}: cannot create it ({parent} is not a writable directory)")
