"""`hwvit vectors-random`: a unit-test vector set of random cases for one block kind (no model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from hwvit import blocks
from hwvit.cli.common import fail, refuse
from hwvit.cli.outdir import vector_output_options
from hwvit.cli.vectors import write_vectors
from hwvit.textfiles import first_line, parse_yaml, read_yaml

# option -> block parameter; an option is refused for a kind whose contract has no such parameter.
_PARAM_OPTIONS = {
    "row_len": "--row-len",
    "c": "--channels",
    "k": "--k",
    "n": "--n",
    "in_bits": "--in-bits",
    "out_bits": "--out-bits",
    "entries": "--entries",
    "a_signed": "--a-signed/--a-unsigned",
}


def _parse_set(values: tuple[str, ...]) -> dict[str, Any]:
    """--set KEY=VALUE pairs; VALUE is read as YAML (ints, floats, true/false)."""
    out = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            fail(f"--set {item!r}: expected KEY=VALUE")
        try:
            out[key.strip()] = parse_yaml(raw, f"--set {item!r}: value")
        except ValueError as exc:
            fail(str(exc))
    return out


def _block_config(path: str | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        data = read_yaml(path)
    except ValueError as exc:
        fail(str(exc))
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        fail(f"{path}: expected a mapping of block parameters (e.g. `row_len: 197`)")
    return data


def _load_lut(path: str, kind: str, params: dict[str, Any]) -> Any:
    """A LUT from .npy (1-D integers) or .hex (one two's-complement value a line)."""
    import numpy as np

    from hwvit.vectors.format import VectorSetError, decode_hex

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


def _refuse_unused(kind: str, options: dict[str, Any], lut: str | None) -> None:
    """Options naming a parameter that ``kind`` does not have do nothing: refuse them."""
    from hwvit.vectors.schema import LUT_TENSOR, PARAMS

    for name, value in options.items():
        if value is not None and name not in PARAMS[kind]:
            takers = [k for k, spec in blocks.kinds().items() if name in PARAMS[k] and not spec.variant]
            refuse(f"{_PARAM_OPTIONS[name]} applies to {' and '.join(takers)}, not {kind}")
    if lut and kind not in LUT_TENSOR:
        refuse(f"--lut applies to {' and '.join(LUT_TENSOR)}, not {kind}")


def _with_variant(kind: str, variant: str | None, set_values: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """``--variant NAME`` (hwvit.variants): softmax and LayerNorm take the variant's own kind
    (``softmax --variant ibert`` is kind softmax_ibert); gelu the table that variant makes
    (``variant=NAME``); requant and gemm its rounding (``rounding=NAME``)."""
    if variant is None:
        return kind, set_values
    from hwvit import variants

    spec = blocks.get(kind)
    family = spec.family or ("requant" if kind == "gemm" else "")
    if not family or spec.variant:
        takers = sorted({s.family for s in blocks.kinds().values() if s.family} | {"gemm"})
        refuse(f"--variant applies to {', '.join(takers)}, not {kind}")
    try:
        variants.get(family, variant)
    except ValueError as exc:
        refuse(first_line(exc))
    if family in ("softmax", "layernorm"):
        return (kind if variants.is_default(family, variant) else f"{family}_{variant}"), set_values
    key = "variant" if family == "gelu" else "rounding"
    return kind, (*set_values, f"{key}={variant}")


def _random_record(kind, cases, seed, options: dict[str, Any], block_config, set_values, lut):
    from hwvit.vectors import random_record
    from hwvit.vectors.schema import LUT_TENSOR

    named = {k: v for k, v in options.items() if v is not None}
    extra = _parse_set(set_values)
    twice = sorted(set(named) & set(extra))
    if twice:
        refuse(f"--set {twice[0]}=... repeats {_PARAM_OPTIONS[twice[0]]}; give it once")
    params = {**_block_config(block_config), **named, **extra}
    if lut:
        params[LUT_TENSOR[kind]] = _load_lut(lut, kind, params)
    try:
        return random_record(kind, cases, seed, **params)
    except (ValueError, OverflowError) as exc:
        fail(first_line(exc))


@click.command()
@click.argument("kind", type=click.Choice([k for k, spec in blocks.kinds().items() if spec.variant != "custom"]))
@click.option(
    "--cases",
    type=click.IntRange(1, 1 << 24),
    help="Elements (requant, gelu, residual_add, divu, isqrt), rows (softmax, layernorm) or m (gemm)  "
    "[default: 64; divu, isqrt: 400, so that every edge case fits]",
)
@click.option("--row-len", type=click.IntRange(1, 4096), help="softmax: row length.")
@click.option("--channels", "c", type=click.IntRange(1, 4096), help="layernorm: channels C.")
@click.option("--k", type=click.IntRange(1, 65535), help="gemm: inner dimension K.")
@click.option("--n", type=click.IntRange(1, 1 << 16), help="gemm: output channels N.")
@click.option("--in-bits", type=click.IntRange(2, 62), help="gelu, softmax (2..16), isqrt (4..62, even): input width.")
@click.option("--out-bits", type=click.IntRange(2, 16), help="Output width.")
@click.option("--entries", type=click.IntRange(1, 1 << 16), help="softmax: exp table entries.")
@click.option("--a-signed/--a-unsigned", default=None, help="gemm: signed or unsigned 8-bit A.")
@click.option(
    "--lut",
    type=click.Path(exists=True, dir_okay=False),
    help="gelu, softmax: the table (.npy, or .hex one value a line) instead of a computed one.",
)
@click.option(
    "--set",
    "set_values",
    multiple=True,
    metavar="KEY=VALUE",
    help="Any other block parameter (repeatable), e.g. --set scale_in=0.05.",
)
@click.option(
    "--block-config",
    type=click.Path(exists=True, dir_okay=False),
    help="YAML mapping of block parameters (the options above override it).",
)
@click.option(
    "--variant",
    metavar="NAME",
    help="An arithmetic variant (`hwvit info` lists them): softmax, layernorm: the set of its kind "
    "(softmax --variant ibert = softmax_ibert); gelu: the table it makes; requant, gemm: its rounding.",
)
@vector_output_options("Output directory: the set.")
def vectors_random(
    kind,
    cases,
    row_len,
    c,
    k,
    n,
    in_bits,
    out_bits,
    entries,
    a_signed,
    lut,
    set_values,
    block_config,
    variant,
    out_dir,
    force,
    seed,
    quiet,
):
    """Write one unit-test vector set of random cases for block KIND, edge cases first.

    KIND is one of the block kinds of the vector-set contract; the outputs are computed with
    hwvit.ops. For the sets of a traced model, see `hwvit vectors`.

    \b
    Example:
      hwvit vectors-random softmax --cases 16 --row-len 197 --seed 1 --out vec/softmax
      hwvit vectors-random gemm --cases 8 --k 64 --n 16 --a-unsigned --out vec/gemm
      hwvit vectors-random divu --cases 40 --set n_bits=48 --set d_bits=32 --set q_bits=25 --out vec/divu
      hwvit vectors-random softmax --variant ibert --cases 16 --row-len 197 --out variants/softmax_ibert
    """
    from hwvit import vectors as vec
    from hwvit.cli.outdir import check_out_dir

    kind, set_values = _with_variant(kind, variant, set_values)
    options = {
        "row_len": row_len,
        "c": c,
        "k": k,
        "n": n,
        "in_bits": in_bits,
        "out_bits": out_bits,
        "entries": entries,
        "a_signed": a_signed,
    }
    _refuse_unused(kind, options, lut)
    check_out_dir(out_dir, force, "vectors")
    if cases is None:
        from hwvit.vectors.random_sets import default_cases

        cases = default_cases(kind)
    record = _random_record(kind, cases, seed, options, block_config, set_values, lut)

    def write():
        path = vec.write_set(record, out_dir, seed=seed, force=force)
        return vec.WriteSummary(
            1, len(record.tensors), _tree_bytes(path), sum(t.data.size for t in record.tensors.values())
        )

    summary = write_vectors(out_dir, write)
    click.echo(f"{summary.line()} -> {out_dir}")


def _tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())
