"""`hwvit vectors` (golden vector sets) and `hwvit check` (validate sets before a simulator sees them)."""

from __future__ import annotations

import contextlib
import fnmatch
import signal
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

import click

from hwvit.cli.common import DATA_KEYS, MODEL_KEYS, data_options, fail, model_options, quant_options
from hwvit.record import KINDS


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


def _plain_config(value: Any) -> Any:
    return asdict(value) if is_dataclass(value) and not isinstance(value, type) else value


# --- model mode -------------------------------------------------------------------------------
def _model_records(seed, quiet, kw):
    """(records, source_sha256, model_config) of one traced run of the integer model."""
    from hwvit.cli.common import build_models, describe_data, quant_config
    from hwvit.intvit import trace_model

    qconfig = quant_config(kw)
    images_path, limit = kw.get("images_path"), kw.get("limit") or 1
    kw["limit"] = limit  # only the traced samples are decoded
    source, data, int_model = build_models(kw, qconfig, seed)
    describe_data(source, data, quiet)
    try:
        _, records, _ = trace_model(int_model, data.first(limit).numpy())
    except (ValueError, OverflowError) as exc:
        fail(str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__)
    model_config = {"model": _plain_config(source.model.cfg), "quant": _plain_config(qconfig),
                    "source": source.name, "inputs": str(images_path) if images_path else limit, "seed": seed}
    return records, source.sha256, model_config


def _select(records: list, patterns: str | None, kind: str | None) -> list:
    """Records whose path matches one of the comma-separated glob ``patterns`` (and of ``kind``)."""
    chosen = [r for r in records if kind is None or r.kind == kind]
    if patterns:
        globs = [p.strip() for p in patterns.split(",") if p.strip()]
        chosen = [r for r in chosen if any(fnmatch.fnmatchcase(r.path, g) for g in globs)]
    if not chosen:
        known = ", ".join(sorted({r.path for r in records})[:8])
        fail(f"no traced block matches --blocks {patterns!r}{f' of kind {kind}' if kind else ''} "
             f"(paths look like: {known}, ...)")
    return chosen


# --- random mode ------------------------------------------------------------------------------
def _parse_set(values: tuple[str, ...]) -> dict[str, Any]:
    """--set KEY=VALUE pairs; VALUE is read as YAML (ints, floats, true/false)."""
    import yaml

    out = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            fail(f"--set {item!r}: expected KEY=VALUE")
        try:
            out[key.strip()] = yaml.safe_load(raw)
        except yaml.YAMLError:
            fail(f"--set {item!r}: unreadable value")
    return out


def _block_config(path: str | None) -> dict[str, Any]:
    import yaml

    if path is None:
        return {}
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        fail(f"{path}: not a readable YAML file ({exc.__class__.__name__})")
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        fail(f"{path}: expected a mapping of block parameters (e.g. `row_len: 197`)")
    return data


def _load_lut(path: str, kind: str, params: dict[str, Any]) -> Any:
    """A LUT from .npy (1-D integers) or .hex (one two's-complement value a line)."""
    import numpy as np

    from hwvit.vectors.format import VectorSetError, decode_hex

    if kind not in ("gelu", "softmax"):
        fail(f"--lut applies to gelu and softmax, not {kind}")
    if path.endswith(".npy"):
        try:
            table = np.load(path, allow_pickle=False)
        except (ValueError, OSError) as exc:
            fail(f"{path}: not a readable .npy array ({exc.__class__.__name__})")
        if table.ndim != 1 or not np.issubdtype(table.dtype, np.integer):
            fail(f"{path}: the LUT must be a 1-D integer array, got {table.dtype} {table.shape}")
        return table.astype(np.int64)
    raw = Path(path).read_bytes()
    bits, signed = (24, False) if kind == "softmax" else (int(params.get("out_bits", 8)), True)
    try:
        return decode_hex(raw, raw.count(b"\n"), bits, signed)
    except VectorSetError as exc:
        fail(f"{path}: {exc}")


def _random_record(kind, cases, seed, options: dict[str, Any], block_config, set_values, lut):
    from hwvit.vectors import random_record

    params = {**_block_config(block_config), **{k: v for k, v in options.items() if v is not None},
              **_parse_set(set_values)}
    if lut:
        params["exp_table" if kind == "softmax" else "table"] = _load_lut(lut, kind, params)
    try:
        return random_record(kind, cases, seed, **params)
    except (ValueError, OverflowError) as exc:
        fail(str(exc).splitlines()[0])


@click.command()
@model_options
@data_options
@quant_options
@click.option("--blocks", metavar="LIST", help="Model mode: only blocks whose path matches one of these "
              "comma-separated globs, e.g. 'layers.0.*,head'.")
@click.option("--block", "kind", type=click.Choice(KINDS), help="Only this block kind; with --random, the kind "
              "of the unit-test set.")
@click.option("--random", "random_mode", is_flag=True, help="Random unit-test set of --block KIND (no model).")
@click.option("--cases", type=click.IntRange(1, 1 << 24), default=64, show_default=True,
              help="Random mode: elements (requant, gelu, residual_add), rows (softmax, layernorm) or m (gemm).")
@click.option("--row-len", type=click.IntRange(1, 4096), help="Random softmax: row length.")
@click.option("--channels", "c", type=click.IntRange(1, 4096), help="Random layernorm: channels C.")
@click.option("--k", type=click.IntRange(1, 65535), help="Random gemm: inner dimension K.")
@click.option("--n", type=click.IntRange(1, 1 << 16), help="Random gemm: output channels N.")
@click.option("--in-bits", type=click.IntRange(2, 16), help="Random gelu/softmax: input width.")
@click.option("--out-bits", type=click.IntRange(2, 16), help="Random sets: output width.")
@click.option("--entries", type=click.IntRange(1, 1 << 16), help="Random softmax: exp table entries.")
@click.option("--a-signed/--a-unsigned", default=None, help="Random gemm: signed or unsigned 8-bit A.")
@click.option("--lut", type=click.Path(exists=True, dir_okay=False),
              help="Random gelu/softmax: the table (.npy, or .hex one value a line) instead of a computed one.")
@click.option("--set", "set_values", multiple=True, metavar="KEY=VALUE",
              help="Random mode: any other block parameter (repeatable), e.g. --set scale_in=0.05.")
@click.option("--block-config", type=click.Path(exists=True, dir_okay=False),
              help="Random mode: YAML mapping of block parameters (options override it).")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True, help="Seed of inputs and cases.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), required=True,
              help="Output directory (model mode: one set per block under it; random mode: the set).")
@click.option("--force", is_flag=True, help="Replace an existing output directory.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar, only the summary line.")
def vectors(blocks, kind, random_mode, cases, row_len, c, k, n, in_bits, out_bits, entries, a_signed, lut,
            set_values, block_config, seed, out_dir, force, quiet, **kw):
    """Write golden vector sets: manifest.yaml plus .hex ($readmemh) and .npy per tensor.

    Model mode traces the integer model and writes one set per block instance
    (OUT/layers.3.attn.softmax/, ...). Random mode (--block KIND --random) writes one
    unit-test set of random cases, edge cases first, outputs from hwvit.ops.

    \b
    Example:
      hwvit vectors --model digits --limit 1 --out vectors/
      hwvit vectors --checkpoint vit-dir/ --images photos/ --limit 2 --out vectors/
      hwvit vectors --model digits --blocks 'layers.0.*' --out vectors/ --force
      hwvit vectors --block softmax --random --cases 100 --row-len 197 --seed 1 --out vec/softmax
      hwvit vectors --block gemm --random --cases 8 --k 64 --n 16 --a-unsigned --out vec/gemm
    """
    from hwvit import vectors as vec

    random_opts = {"row_len": row_len, "c": c, "k": k, "n": n, "in_bits": in_bits, "out_bits": out_bits,
                   "entries": entries, "a_signed": a_signed}
    if random_mode:
        if kind is None:
            raise click.UsageError("--random needs --block KIND")
        if blocks or any(kw.get(key) for key in MODEL_KEYS + DATA_KEYS):
            raise click.UsageError("--random makes a unit-test set; it takes no --model/--checkpoint/"
                                   "--images/--calib/--limit/--blocks")
    else:
        used = [f"--{name.replace('_', '-')}" for name, v in random_opts.items() if v is not None]
        used += ["--lut"] * bool(lut) + ["--set"] * bool(set_values) + ["--block-config"] * bool(block_config)
        if used:
            raise click.UsageError(f"{used[0]} is a random-mode option (add --block KIND --random)")
    with _sigterm_as_exit():
        try:
            if random_mode:
                record = _random_record(kind, cases, seed, random_opts, block_config, set_values, lut)
                path = vec.write_set(record, out_dir, seed=seed, force=force)
                summary = vec.WriteSummary(1, len(record.tensors), _tree_bytes(path),
                                           sum(t.data.size for t in record.tensors.values()))
            else:
                records, source_sha, model_config = _model_records(seed, quiet, kw)
                records = _select(records, blocks, kind)
                summary = _write_tree(vec, records, out_dir, seed, source_sha, model_config, force, quiet)
        except FileExistsError as exc:
            fail(str(exc))
        except (vec.VectorSetError, ValueError) as exc:
            fail(str(exc).splitlines()[0])
        except OSError as exc:
            fail(f"{exc.filename or out_dir}: {exc.strerror or exc}")
    click.echo(f"{summary.line()} -> {out_dir}")


def _tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def _write_tree(vec, records, out_dir, seed, source_sha, model_config, force, quiet):
    from tqdm import tqdm

    total = sum(int(t.data.size) for r in records for t in r.tensors.values())
    with tqdm(total=total, unit="el", unit_scale=True, disable=quiet, leave=False, mininterval=0.5,
              desc=f"writing {len(records)} sets") as bar:
        return vec.write_sets(records, out_dir, seed=seed, source_sha256=source_sha, model_config=model_config,
                              force=force, progress=lambda path, elements: bar.update(elements))


@click.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("-v", "--verbose", is_flag=True, help="Also list the valid sets.")
def check(directory, verbose):
    """Validate a vector set, or every set under DIRECTORY; exit 1 if any is invalid.

    Checks the manifest schema and block contract, that every file is present and inside the
    set, line counts, hex digits, value widths, .hex == .npy and sha256. Simulators load
    malformed $readmemh files silently: run this first.

    \b
    Example:
      hwvit check vectors/
      hwvit check vectors/layers.0.attn.softmax
    """
    from hwvit import vectors as vec

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
