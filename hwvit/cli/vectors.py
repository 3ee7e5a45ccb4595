"""`hwvit vectors` (golden vector sets of a traced model) and `hwvit check` (validate sets before a
simulator sees them). Random unit-test sets: hwvit/cli/vectors_random.py."""

from __future__ import annotations

import contextlib
import fnmatch
import signal
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from typing import Any

import click

from hwvit.cli.common import fail, refuse
from hwvit.cli.loading import build_models, data_options, describe_data
from hwvit.cli.model_options import calib_images_option, compute_options, model_options, qconfig_options, recipe_option
from hwvit.cli.outdir import check_out_dir, vector_output_options
from hwvit.cli.progress import progress_bar
from hwvit.cli.sim_options import block_kind_option
from hwvit.textfiles import count, first_line


@contextlib.contextmanager
def _sigterm_as_exit():
    """SIGTERM unwinds like Ctrl-C, so the writer's cleanup removes its temporary directory."""

    def handler(signum, frame):
        raise SystemExit(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def write_vectors(out_dir: str, write: Callable[[], Any]) -> Any:
    """Run ``write`` (which writes vector sets under ``out_dir``) with SIGTERM unwinding like Ctrl-C
    and the writer's errors as one line. Shared by `hwvit vectors` and `hwvit vectors-random`."""
    from hwvit import vectors as vec

    with _sigterm_as_exit():
        try:
            return write()
        except FileExistsError as exc:
            fail(str(exc))
        except (vec.VectorSetError, ValueError) as exc:
            fail(first_line(exc))
        except OSError as exc:
            fail(f"{exc.filename or out_dir}: {exc.strerror or exc}")


def _plain_config(value: Any) -> Any:
    from hwvit.quant.config import QuantConfig, plain_dict

    if isinstance(value, QuantConfig):
        return plain_dict(value)  # a variant only where one was chosen
    return asdict(value) if is_dataclass(value) and not isinstance(value, type) else value


def _model_records(kw, qconfig, calib_images, seed, quiet, device="cpu"):
    """(records, source_sha256, model_config, provenance) of one traced run of the integer model
    (``kw['recipe']``: --recipe; ``device``: hwvit.intvit.int_forward's, e.g. cuda for the torch
    forward on the GPU)."""
    recipe = kw.pop("recipe", None)
    from hwvit.intvit import trace_model
    from hwvit.vectors.provenance import provenance

    images_path = kw["images_path"]
    limit = kw["limit"] = kw["limit"] or 1  # only the traced samples are decoded
    source, data, int_model = build_models(kw, qconfig, calib_images, seed, recipe)
    describe_data(data, quiet)
    inputs = data.first(limit)
    try:
        _, records, _ = trace_model(int_model, inputs.numpy(), device=device)
    except (ValueError, OverflowError) as exc:
        fail(first_line(exc))
    model_config = {
        "model": _plain_config(source.model.cfg),
        "quant": _plain_config(qconfig),
        "source": source.name,
        "inputs": str(images_path) if images_path else limit,
        "seed": seed,
    }
    if recipe is not None:
        model_config["recipe"] = recipe.to_dict()
    made = provenance(source.model, data.calib, inputs, model_config)
    return records, source.sha256, model_config, made


def _select(records: list, patterns: str | None, kind: str | None) -> list:
    """Records whose path matches one of the comma-separated glob ``patterns`` (and of ``kind``)."""
    chosen = [r for r in records if kind is None or r.kind == kind]
    if patterns:
        globs = [p.strip() for p in patterns.split(",") if p.strip()]
        chosen = [r for r in chosen if any(fnmatch.fnmatchcase(r.path, g) for g in globs)]
    if not chosen:
        known = ", ".join(sorted({r.path for r in records})[:8])
        fail(
            f"no traced block matches --blocks {patterns!r}{f' of kind {kind}' if kind else ''} "
            f"(paths look like: {known}, ...)"
        )
    return chosen


@click.command()
@model_options
@qconfig_options
@recipe_option
@calib_images_option
@data_options(
    "Inputs traced, the first ones (digits: its held-out split; without --images: seeded random).  [default: 1]"
)
@click.option(
    "--blocks",
    metavar="LIST",
    help="Only blocks whose path matches one of these comma-separated globs, e.g. 'layers.0.*,head'.",
)
@block_kind_option("Only blocks of this kind.")
@vector_output_options("Output directory: one set per traced block under it.")
@compute_options
def vectors(qconfig, recipe, calib_images, blocks, kind, out_dir, force, seed, quiet, device, **kw):
    """Trace the integer model and write one golden vector set per block instance.

    Each set is a directory (OUT/layers.3.attn.softmax/, ...) holding manifest.yaml plus .hex
    ($readmemh) and .npy per tensor. For random unit-test sets of one block kind, without a
    model, see `hwvit vectors-random`.

    \b
    Example:
      hwvit vectors --model digits --limit 1 --calib-images 64 --out vec/digits
      hwvit vectors --model digits --calib-images 64 --blocks 'layers.0.*' --block softmax --out vec/digits --force
      hwvit vectors --checkpoint vit/ --images photos/ --limit 1 --blocks 'layers.0.*' --out vit-vectors/
      hwvit vectors --model digits --calib-images 64 --blocks 'layers.0.*' --block softmax --out vec/again

    The same model, images and options give byte-identical sets on every machine (`hwvit check
    vec/digits --against vec/again` compares two copies; docs/vectors.md). With --device cuda the trace
    runs on the GPU (the same sets, byte for byte; worth it when --limit is large).
    """
    from hwvit import vectors as vec
    from hwvit.record import UNIT_KINDS

    if kind in UNIT_KINDS:
        refuse(f"--block {kind}: a traced model has no {kind} blocks of its own; use `hwvit vectors-random {kind}`")
    check_out_dir(out_dir, force, "vectors")
    records, source_sha, model_config, made = _model_records(
        {**kw, "recipe": recipe}, qconfig, calib_images, seed, quiet, device
    )
    records = _select(records, blocks, kind)
    summary = write_vectors(
        out_dir, lambda: _write_tree(vec, records, out_dir, seed, source_sha, model_config, made, force, quiet)
    )
    click.echo(f"{summary.line()} -> {out_dir}")


def _write_tree(vec, records, out_dir, seed, source_sha, model_config, made, force, quiet):
    total = sum(int(t.data.size) for r in records for t in r.tensors.values())
    what = f"writing {count(len(records), 'set')}"
    with progress_bar(total, what, "el", quiet, line=f"{what} ({total} elements)", unit_scale=True) as bar:
        return vec.write_sets(
            records,
            out_dir,
            seed=seed,
            source_sha256=source_sha,
            model_config=model_config,
            provenance=made,
            force=force,
            progress=lambda path, elements: bar.update(elements),
        )


@click.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("-v", "--verbose", is_flag=True, help="Also list the valid sets (with --against: the identical ones).")
@click.option(
    "--against",
    metavar="OTHER",
    type=click.Path(exists=True, file_okay=False),
    help="Also compare with the sets under OTHER (paired by path): the first field, tensor and element "
    "that differ, and what made each; exit 1 if any set differs.",
)
def check(directory, verbose, against):
    """Validate a vector set, or every set under DIRECTORY; exit 1 if any is invalid.

    Checks the manifest schema and block contract, that every file is present and inside the
    set, line counts, hex digits, value widths, .hex == .npy and sha256. Simulators load
    malformed $readmemh files silently: run this first.

    With --against OTHER, the sets under DIRECTORY and OTHER (e.g. one made on a laptop, one on
    a CI machine) are compared after both are validated.

    \b
    Example:
      hwvit check vec/digits
      hwvit check vec/digits/layers.0.attn.softmax
      hwvit check vec/digits --against vec/again
    """
    from hwvit import vectors as vec

    if against is not None:
        _check_against(directory, against, verbose)
        return
    try:
        results = vec.check(directory)
    except vec.VectorSetError as exc:
        fail(str(exc))
    bad = [(d, e) for d, e in results if e is not None]
    if len(results) == 1 and bad:
        fail(bad[0][1])
    for set_dir, error in results:
        if error is not None:
            click.echo(f"FAIL {error}")
        elif verbose:
            click.echo(f"ok   {set_dir}")
    if bad:
        fail(f"{len(bad)} of {len(results)} sets invalid")
    click.echo(f"{len(results)} set{'s' * (len(results) != 1)} valid")


def _check_against(directory: str, other: str, verbose: bool) -> None:
    """`hwvit check DIRECTORY --against OTHER`: one line per set that differs, what made the first
    one that differs on each side, a summary; exit 1 if any set differs."""
    from hwvit.vectors.against import compare_trees
    from hwvit.vectors.format import VectorSetError

    try:
        diffs = compare_trees(directory, other)
    except VectorSetError as exc:
        fail(str(exc))
    bad = [d for d in diffs if d.differs]
    for d in diffs:
        if d.differs:
            click.echo(f"DIFF {d.line()}")
        elif verbose:
            click.echo(f"same {d.name}")
    first = next((d for d in bad if d.problem is None), None)
    if first is not None:
        click.echo(f"first difference: {first.name}")
        for line in first.made_lines():
            click.echo(line)
    if bad:
        fail(f"{len(bad)} of {len(diffs)} sets differ from {other}")
    click.echo(f"{len(diffs)} set{'s' * (len(diffs) != 1)} identical to {other}")
