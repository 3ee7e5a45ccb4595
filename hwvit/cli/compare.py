"""`hwvit compare`: float vs fixed point, end to end and per layer."""

from __future__ import annotations

import json
import math

import click

from hwvit.cli.common import (build_models, data_options, describe_data, fail, model_options, progress, quant_config,
                              quant_options, user_error)


def _fmt(v: float) -> str:
    return "inf" if v == math.inf else f"{v:.2f}"


@click.command()
@model_options
@data_options
@quant_options
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Write report.md, report.html and plots here.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of random weights and inputs.")
@click.option("-q", "--quiet", is_flag=True, help="Only the summary line.")
def compare(as_json, out_dir, seed, quiet, **kw):
    """Compare the float model with its integer model: top-1, agreement, SQNR per layer.

    \b
    Example:
      hwvit compare --model digits
      hwvit compare --model digits --act-bits 6 --json
      hwvit compare --checkpoint vit-dir/ --images photos/
      hwvit compare --checkpoint vit.safetensors --heads 3 --images photos/ --resize 256 --crop 224 --mean 0.5 --std 0.5
    """
    from hwvit import pipeline
    from hwvit.report.compare import compare as run_compare

    qc = quant_config(kw)
    source, data, int_model = build_models(kw, qc, seed)
    describe_data(source, data, quiet or as_json)
    try:
        with progress(data, quiet or as_json):
            result = run_compare(source.model, int_model, data.inputs, data.labels, name=source.name)
    except ValueError as exc:
        user_error(exc)
    random = pipeline.random_note(source, data)
    if out_dir:
        from hwvit.report.write import write_report

        try:
            written = write_report(result, out_dir)
        except (ValueError, OSError) as exc:
            fail(str(exc))
    if as_json:
        click.echo(json.dumps({**result.to_dict(), "notes": data.notes + ([random] if random else [])},
                              indent=2, default=float))
        return
    if not quiet:
        click.echo(f"{'point':<28} {'SQNR dB':>8} {'cosine':>8} {'max LSB':>8} {'mean LSB':>9}")
        for row in result.layers:
            click.echo(f"{row['path']:<28} {_fmt(row['sqnr_db']):>8} {row['cosine']:>8.5f} "
                       f"{row['max_err_lsb']:>8.2f} {row['mean_err_lsb']:>9.3f}")
    parts = [f"{result.model}: {result.images} images" + (f" ({random})" if random else "")]
    if result.top1_float is not None:
        parts.append(f"top-1 float {100 * result.top1_float:.2f}%, int {100 * result.top1_int:.2f}%")
    parts.append(f"agreement {100 * result.agreement:.2f}%, logits SQNR {_fmt(result.logits_sqnr_db)} dB")
    click.echo(", ".join(parts))
    if out_dir:
        click.echo(f"report: {written}")
