"""`hwvit sweep`: what each quantization choice costs in accuracy (one factor at a time)."""

from __future__ import annotations

import math
import time
from contextlib import nullcontext

import click

from hwvit import toolchain
from hwvit.cli.cluster_options import cluster_client, cluster_options
from hwvit.cli.common import fail, quiet_option, seed_option
from hwvit.cli.loading import data_options, describe_data, load_data
from hwvit.cli.model_options import (
    calib_images_option,
    model_options,
    parse_variants,
    recipe_option,
    refuse_seed_for_digits,
)
from hwvit.cli.outdir import check_out_dir, force_option, out_option
from hwvit.textfiles import count, first_line

# A quantized ONNX file's sweep: the variants of the points it leaves float (hwvit.onnx).
ONNX_FAMILIES = ("softmax", "layernorm")
ONNX_AXES = {"softmax": ("round_each",)}


def _int_list(text: str | None, lo: int, hi: int, name: str) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        vals = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a comma-separated list of integers", param_hint=name) from None
    for v in vals:
        if not lo <= v <= hi:
            raise click.BadParameter(f"{v} is outside [{lo}, {hi}]", param_hint=name)
    return vals


def _float_list(text: str | None, lo: float, hi: float, name: str) -> tuple[float, ...] | None:
    if text is None:
        return None
    try:
        vals = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a comma-separated list of numbers", param_hint=name) from None
    for v in vals:
        if not (lo <= v <= hi):
            raise click.BadParameter(f"{v:g} is outside [{lo:g}, {hi:g}]", param_hint=name)
    return vals


def _fmt_db(v: float) -> str:
    return "inf" if v == math.inf else f"{v:.2f}"


@click.command()
@model_options
@data_options(
    "Evaluate on at most N inputs, the first ones (digits: its held-out split, all by default, 120 "
    "with --quick; without --images: 8 seeded random)."
)
@calib_images_option
@click.option("--quick", is_flag=True, help="One step per knob (6 points) on at most 120 images.")
@click.option("--act-bits", "act_bits", metavar="LIST", help="Activation widths to try, e.g. 6,7 [default: 6].")
@click.option("--softmax-bits", "softmax_bits", metavar="LIST", help="Probability widths, e.g. 4,6 [default: 4,6].")
@click.option(
    "--exp-entries", "exp_entries", metavar="LIST", help="Exp table sizes, e.g. 16,64 [default: 16,32,64,128]."
)
@click.option("--percentiles", metavar="LIST", help="Percentile calibrations, e.g. 99.9 [default: 99.9,99.99].")
@click.option("--no-shift", is_flag=True, help="Leave out the shift-and-add exp.")
@click.option(
    "--variants",
    "variant_lists",
    multiple=True,
    metavar="BLOCK=LIST",
    help="Block arithmetics to compare, e.g. softmax=ibert,shiftmax (hwvit.variants); repeatable. "
    "sweep.md then puts them side by side, layer by layer.",
)
@click.option(
    "--synth",
    "synth_costs",
    is_flag=True,
    help="With --variants: synthesize each arithmetic's Verilog block (yosys) and add its cells, flip-flops, "
    "longest path and memory bits to sweep.md, with variants_pareto.png (error against cells).",
)
@click.option(
    "--front",
    type=click.Choice(["both", "top1", "sqnr"]),
    default="both",
    show_default=True,
    help="What pareto.png's front (and the pareto column) weighs against cost: top-1 (agreement without "
    "labels) and logits SQNR, or one of them. Top-1 on a few dozen images moves in steps and ties.",
)
@click.option(
    "--threads",
    type=click.IntRange(0),
    default=1,
    show_default=True,
    help="torch threads (0: torch's default). 1 is fastest for small models such as digits.",
)
@recipe_option
@cluster_options
@seed_option()
@out_option("Write sweep.csv, sweep.md, sweep.png, pareto.png and sweep.json here.", default="sweep")
@force_option
@quiet_option("Only the summary line.")
def sweep(
    calib_images,
    quick,
    act_bits,
    softmax_bits,
    exp_entries,
    percentiles,
    no_shift,
    variant_lists,
    synth_costs,
    front,
    threads,
    recipe,
    cluster,
    seed,
    out_dir,
    force,
    quiet,
    **kw,
):
    """Vary one quantization knob at a time around the int8 design (or --recipe) and measure what it costs.

    Knobs: activation bits, softmax output bits, exp approximation (table or shift-and-add) and
    table size, calibration (min/max or percentile). Each point is quantized (calibration
    included) and compared with the float model on the same images. Writes sweep.csv (one row
    per point), sweep.md (table with changes against the baseline and a cost note) and
    sweep.png (accuracy and logits SQNR against cost, one panel per knob, the arithmetic variants
    in one of their own) and pareto.png (accuracy and logits SQNR against storage cost, the Pareto
    front of --front marked, the baseline a star).

    \b
    Example:
      hwvit sweep --model digits --quick --limit 24 --calib-images 48
      hwvit sweep --model digits --act-bits 4 --softmax-bits 6 --exp-entries 64 --percentiles 99.9 \\
        --no-shift --limit 24 --calib-images 48 --out sweep2/
      hwvit sweep --model digits --quick --limit 24 --calib-images 48 --variants softmax=ibert,shiftmax \\
        --variants layernorm=ibert --out sweep3/
      hwvit sweep --model digits --quick --limit 24 --calib-images 48 --variants gelu=shiftgelu,tanh_lut --synth \\
        --out sweep4/

    A quantized ONNX file (--checkpoint model.onnx, docs/onnx.md) fixes every width, scale, table
    and rounding; what hwvit chooses there is the arithmetic of the points the file leaves float:
    its sweep varies the softmax and LayerNorm variants (default: softmax=round_each; more with
    --variants softmax=...,layernorm=...) around the file's model with hwvit's own.
    """
    import torch

    from hwvit import pipeline
    from hwvit.analysis.sweep import DEFAULT_AXES, QUICK_AXES, one_factor_grid
    from hwvit.analysis.sweep import sweep as run_sweep
    from hwvit.report.sweep_write import table, write_sweep

    axes = dict(QUICK_AXES if quick else DEFAULT_AXES)
    given = {
        "act_bits": _int_list(act_bits, 2, 8, "--act-bits"),
        "softmax_bits": _int_list(softmax_bits, 2, 8, "--softmax-bits"),
        "exp_entries": _int_list(exp_entries, 1, 256, "--exp-entries"),
        "percentile": _float_list(percentiles, 50.0, 100.0, "--percentiles"),
    }
    axes.update({k: v for k, v in given.items() if v is not None})
    for spec in variant_lists:  # BLOCK=A,B,C: each name checked as --variant BLOCK=NAME would be
        family, _, names = spec.partition("=")
        chosen = [parse_variants([f"{family}={name}"])[family] for name in names.split(",") if name]
        if not chosen:
            parse_variants([spec])  # refuses in one line
        axes[family] = tuple(dict.fromkeys([*axes.get(family, ()), *chosen]))
    if no_shift:
        axes["exp"] = ()
    from hwvit.onnx import is_onnx

    imported = bool(kw.get("checkpoint")) and is_onnx(kw["checkpoint"])
    if imported:  # only the arithmetic of the points the file leaves float is hwvit's to vary
        fixed = [name for name, v in (("--act-bits", act_bits), ("--softmax-bits", softmax_bits),
                 ("--exp-entries", exp_entries), ("--percentiles", percentiles), ("--no-shift", no_shift),
                 ("--recipe", recipe)) if v]  # fmt: skip
        others = [f for f in (s.partition("=")[0] for s in variant_lists) if f not in ONNX_FAMILIES]
        if fixed or others:
            what = fixed[0] if fixed else f"--variants {others[0]}=..."
            fail(f"{what}: a quantized ONNX file fixes it; its sweep varies the softmax and layernorm arithmetic")
        given_families = {s.partition("=")[0] for s in variant_lists}
        axes = {f: tuple(dict.fromkeys([*ONNX_AXES.get(f, ()), *(axes[f] if f in given_families else ())]))
                for f in ONNX_FAMILIES}  # fmt: skip
    if synth_costs:
        if not variant_lists:
            fail("--synth prices the arithmetic variants: give --variants too")
        try:
            toolchain.require("yosys")
        except toolchain.ToolMissing as exc:
            fail(str(exc))
    if quick and kw["limit"] is None:
        kw["limit"] = 120
    refuse_seed_for_digits(kw["preset"], kw["checkpoint"])
    check_out_dir(out_dir, force, "sweep")  # refuse before minutes of work, not after
    try:
        grid = one_factor_grid(axes, base=recipe.base) if recipe is not None else one_factor_grid(axes)
    except (ValueError, OSError, KeyError) as exc:
        fail(first_line(exc))
    if imported:
        from dataclasses import replace

        grid[0] = replace(grid[0], label="the file's model")
    source, data = load_data(kw, seed, calib_images)
    describe_data(data, quiet)
    if isinstance(data.inputs, pipeline.Stream) and len(data.inputs) <= 1024:
        try:  # decoded once for every point (1024 ViT-B inputs: 0.6 GB); streamed per point above that
            data.inputs = torch.cat(list(data.inputs))
        except ValueError as exc:
            fail(first_line(exc))

    def progress(i: int, n: int, row: dict) -> None:
        acc = row["top1_int"] if row["top1_int"] is not None else row["agreement"]
        what = "top-1" if row["top1_int"] is not None else "agreement"
        click.echo(
            f"[{i}/{n}] {row['factor']:<12} {row['label']:<16} {what} {100 * acc:6.2f}%  "
            f"logits SQNR {_fmt_db(row['logits_sqnr_db']):>6} dB  ({row['seconds']:.1f} s)",
            err=True,
        )

    t0 = time.perf_counter()
    try:
        with cluster_client(cluster) if cluster else nullcontext() as client:  # one task per point there
            rows = run_sweep(
                source,
                grid,
                seed=seed,
                threads=threads or None,
                progress=None if quiet else progress,
                data=data,
                recipe=recipe,
                client=client,
                front=front,
            )
        meta = {
            "images": rows[0]["images"],
            "calib_images": calib_images,
            "seed": seed,
            "checkpoint_sha256": source.sha256,
            "axes": {k: list(v) for k, v in axes.items()},
            "front": front,
            "recipe": recipe.to_dict() if recipe is not None else None,
        }
        block_costs = None
        if synth_costs:
            from hwvit.analysis import variant_cost
            from hwvit.analysis.sweep import VARIANT_FAMILIES

            block_costs = variant_cost.costs(rows, VARIANT_FAMILIES)
        written = write_sweep(rows, out_dir, source.name, meta, block_costs)
    except (ValueError, OSError) as exc:
        fail(first_line(exc))
    elapsed = time.perf_counter() - t0
    if not quiet:
        head, body = table(rows)
        keep = [0, 1, 8, 9, 10, 11] if len(head) == 14 else [0, 1, 8, 9, 10, 11, 12]
        widths = [max(len(head[k]), *(len(r[k]) for r in body)) for k in keep]
        click.echo("  ".join(head[k].ljust(w) for k, w in zip(keep, widths)))
        for r in body:
            click.echo("  ".join(r[k].ljust(w) for k, w in zip(keep, widths)))
    base = rows[0]
    key = "top1_int" if base["top1_int"] is not None else "agreement"
    others = [r for r in rows if r is not base and r[key] is not None]
    n = len(rows)
    random = pipeline.random_note(source, data)
    summary = f"{source.name}: {count(n, 'configuration')} on {count(base['images'], 'image')}"
    summary += (f" ({random})" if random else "") + f" in {elapsed:.0f} s"
    summary += f", baseline {'top-1' if key == 'top1_int' else 'agreement'} {100 * base[key]:.2f}%"
    if others:  # ties in accuracy (common on few images) are broken by the logits SQNR
        worst = min(others, key=lambda r: (r[key], r["logits_sqnr_db"]))
        summary += (
            f", largest loss {worst['factor']} {worst['label']} ({100 * (worst[key] - base[key]):+.2f} points, "
            f"logits SQNR {worst['logits_sqnr_db'] - base['logits_sqnr_db']:+.1f} dB)"
        )
    click.echo(f"{summary}; wrote {written}/")
