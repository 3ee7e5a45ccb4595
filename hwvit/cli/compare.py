"""`hwvit compare`: float vs fixed point, end to end and per layer."""

from __future__ import annotations

import json
from contextlib import nullcontext

import click
import numpy as np

from hwvit.cli.cluster_options import cluster_client, cluster_options
from hwvit.cli.common import batch_option, fail, json_option, quiet_option, refuse, seed_option
from hwvit.cli.loading import build_models, data_options, describe_data
from hwvit.cli.model_options import (
    calib_images_option,
    compute_options,
    model_options,
    qconfig_options,
    recipe_option,
    refuse_seed_for_digits,
)
from hwvit.cli.outdir import check_out_dir, force_option, out_option
from hwvit.cli.progress import progress
from hwvit.textfiles import count, first_line


@click.command()
@model_options
@qconfig_options
@recipe_option
@calib_images_option
@data_options(
    "Evaluate on at most N inputs, the first ones (digits: its held-out split, all by default; "
    "without --images: 8 seeded random)."
)
@seed_option()
@json_option
@out_option("Also write report.md, report.html, report.json and plots to this directory.")
@force_option
@quiet_option("Only the summary line.")
@batch_option(None, "Images per forward (default: as many as keep one batch's traces within 1 GB, at most 64).")
@compute_options
@cluster_options
def compare(qconfig, recipe, calib_images, seed, as_json, out_dir, force, quiet, batch, device, cluster, **kw):
    """Compare the float model with its integer model: top-1, agreement, SQNR per layer.

    \b
    Example:
      hwvit compare --model digits --limit 40 --calib-images 64
      hwvit compare --model digits --act-bits 6 --limit 40 --calib-images 64 --json
      hwvit compare --model digits --limit 40 --calib-images 64 --out report/
      hwvit compare --checkpoint vit.safetensors --family hf --config vit.yaml --limit 4 --calib-images 16
      hwvit compare --checkpoint vit/ --images photos/
      hwvit compare --checkpoint vit.safetensors --heads 4 --images photos/ --resize 40 --crop 32 --mean 0.5 --std 0.5
      hwvit compare --model digits --limit 64 --calib-images 64 --batch 16 --gemm float64

    A quantized ONNX file (QDQ) runs in onnxruntime beside its integer model too: per point, where
    its values came from, how many integers differ from onnxruntime's (graph optimizations off: the
    file's meaning; on: what it deploys) and by how much, alone (each layer on onnxruntime's inputs)
    and accumulated, and the first point where they part.
    """
    from hwvit import pipeline
    from hwvit.analysis.compare import compare as run_compare
    from hwvit.report.write import fmt_db  # the report's own format: the table shows its figures

    if as_json and quiet:
        refuse("--json prints only the JSON; -q/--quiet has nothing to silence")
    if force and not out_dir:
        refuse("--force applies to --out only")
    refuse_seed_for_digits(kw["preset"], kw["checkpoint"])
    check_out_dir(out_dir, force, "compare-report")
    source, data, int_model = build_models(kw, qconfig, calib_images, seed, recipe)
    describe_data(data, quiet or as_json)
    try:
        batch = batch or pipeline.batch_size_for(source.model.cfg)
        if isinstance(data.inputs, pipeline.Stream):
            data.inputs.batch_size = batch
        with progress(data, quiet or as_json), cluster_client(cluster) if cluster else nullcontext() as client:
            result = run_compare(
                source.model,
                int_model,
                data.inputs,
                data.labels,
                name=source.name,
                batch_size=batch,
                device=device,
                client=client,
            )
        side = None
        if source.imported is not None:
            from hwvit.onnx.runtime import side_by_side

            x = data.inputs.first(len(data.inputs)) if isinstance(data.inputs, pipeline.Stream) else data.inputs
            side = side_by_side(source.imported, np.asarray(x, np.float32), data.labels, batch=batch)
            result.onnxruntime = side.to_dict()
    except ValueError as exc:
        fail(first_line(exc))
    random = pipeline.random_note(source, data)
    if out_dir:
        from hwvit.report.write import write_report

        try:
            written = write_report(result, out_dir)
        except (ValueError, OSError) as exc:
            fail(first_line(exc))
    if as_json:
        click.echo(
            json.dumps(
                {**result.to_dict(), "notes": data.notes + ([random] if random else [])},
                indent=2,
                default=float,
            )
        )
        return
    if side is not None and not quiet:
        _print_side(side)
    if not quiet:
        # "isolated": the error the point's layer adds by itself (its inputs from the float model)
        click.echo(f"{'point':<28} {'SQNR dB':>8} {'isolated':>8} {'cosine':>8} {'max LSB':>8} {'mean LSB':>9}")
        for row in result.layers:
            iso = row.get("isolated_sqnr_db")
            click.echo(
                f"{row['path']:<28} {fmt_db(row['sqnr_db']):>8} {'n/a' if iso is None else fmt_db(iso):>8} "
                f"{row['cosine']:>8.5f} {row['max_err_lsb']:>8.2f} {row['mean_err_lsb']:>9.3f}"
            )
    parts = [f"{result.model}: {count(result.images, 'image')}" + (f" ({random})" if random else "")]
    if result.top1_float is not None:
        parts.append(f"top-1 float {100 * result.top1_float:.2f}%, int {100 * result.top1_int:.2f}%")
    parts.append(f"agreement {100 * result.agreement:.2f}%, logits SQNR {fmt_db(result.logits_sqnr_db)} dB")
    if side is not None:
        first = side.first_part["off"] or "none"
        parts.append(
            f"with onnxruntime: agreement {100 * side.agreement['off']:.2f}%, first point that differs {first}"
        )
    click.echo(", ".join(parts))
    if out_dir:
        click.echo(f"report: {written}")


def _print_side(side) -> None:
    """The onnxruntime side-by-side table: per point, its origin and the integers that differ, alone
    and accumulated, with onnxruntime's graph optimizations off (the file's meaning) and on."""
    click.echo(
        f"{'point (vs onnxruntime)':<28} {'origin':<17} {'alone':>14} {'alone, opt':>14} {'accumulated':>14} "
        f"{'accum., opt':>14}"
    )
    cols = [side.isolated["off"], side.isolated["on"], side.levels["off"], side.levels["on"]]
    cols = [{d.point: d for d in col} for col in cols]

    def cell(d) -> str:
        return "n/a" if d is None else f"{d.differ} ({d.max_lsb} LSB)" if d.differ else "0"

    for d in side.isolated["off"]:
        cells = " ".join(f"{cell(col.get(d.point)):>14}" for col in cols)
        click.echo(f"{d.point:<28} {d.origin:<17} {cells}")
    for level in ("off", "on"):
        first = side.first_part[level] or "none"
        click.echo(
            f"onnxruntime (optimizations {level}): top-1 agreement {100 * side.agreement[level]:.2f}%, "
            f"logits SQNR {side.logits_sqnr_db[level]:.1f} dB, first point that differs: {first}"
        )
    click.echo(
        f"with the file's own float at hwvit's arithmetic points: top-1 agreement "
        f"{100 * side.file_float_agreement:.2f}% (what is left parts for reasons other than hwvit's arithmetic)"
    )
