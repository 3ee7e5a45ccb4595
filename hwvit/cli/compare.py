"""`hwvit compare`: float vs fixed point, end to end and per layer."""

from __future__ import annotations

import json
import math

import click

from hwvit.cli.common import (build_models, calib_images_option, check_out_dir, eval_inputs, fail, first_line,
                              force_option, input_options, json_option, model_options, out_option,
                              qconfig_options, quiet_option, refuse, refuse_seed_for_digits, seed_option)


def _fmt(v: float) -> str:
    return "inf" if v == math.inf else f"{v:.2f}"


@click.command()
@model_options
@qconfig_options
@calib_images_option
@input_options("Evaluation images (digits: the held-out split, all by default; else 8 seeded random).")
@seed_option()
@json_option
@out_option("Also write report.md, report.html, report.json and plots to this directory.")
@force_option
@quiet_option("Only the summary line.")
def compare(preset, checkpoint, family, config_path, qconfig, calib_images, images, inputs_path, seed, as_json,
            out_dir, force, quiet):
    """Compare the float model with its integer model: top-1, agreement, SQNR per layer.

    \b
    Example:
      hwvit compare --model digits --images 40 --calib-images 64
      hwvit compare --model digits --act-bits 6 --images 40 --calib-images 64 --json
      hwvit compare --model digits --images 40 --calib-images 64 --out report/
      hwvit compare --checkpoint vit.safetensors --family hf --config vit.yaml --images 4 --calib-images 16
    """
    from hwvit.report.compare import compare as run_compare

    if as_json and quiet:
        refuse("--json prints only the JSON; -q/--quiet has nothing to silence")
    if force and not out_dir:
        refuse("--force applies to --out only")
    refuse_seed_for_digits(preset, checkpoint)
    check_out_dir(out_dir, force, "compare-report")
    source, int_model = build_models(preset, checkpoint, family, config_path, qconfig, calib_images, seed)
    inputs, labels = eval_inputs(source, images, inputs_path, seed)
    try:
        result = run_compare(source.model, int_model, inputs, labels, name=source.name)
    except ValueError as exc:
        fail(first_line(exc))
    if out_dir:
        from hwvit.report.write import write_report

        try:
            written = write_report(result, out_dir)
        except (ValueError, OSError) as exc:
            fail(first_line(exc))
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, default=float))
        return
    if not quiet:
        click.echo(f"{'point':<28} {'SQNR dB':>8} {'cosine':>8} {'max LSB':>8} {'mean LSB':>9}")
        for row in result.layers:
            click.echo(f"{row['path']:<28} {_fmt(row['sqnr_db']):>8} {row['cosine']:>8.5f} "
                       f"{row['max_err_lsb']:>8.2f} {row['mean_err_lsb']:>9.3f}")
    parts = [f"{result.model}: {result.images} images"]
    if result.top1_float is not None:
        parts.append(f"top-1 float {100 * result.top1_float:.2f}%, int {100 * result.top1_int:.2f}%")
    parts.append(f"agreement {100 * result.agreement:.2f}%, logits SQNR {_fmt(result.logits_sqnr_db)} dB")
    click.echo(", ".join(parts))
    if out_dir:
        click.echo(f"report: {written}")
