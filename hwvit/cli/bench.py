"""`hwvit bench`: integer vs float forward speed (and vector writing throughput)."""

from __future__ import annotations

import json

import click

from hwvit.cli.common import fail, first_line, json_option


@click.command()
@click.option("--model", "preset", default="vit-b16", show_default=True, help="Preset to time (random weights).")
@click.option("--repeats", type=click.IntRange(1), default=5, show_default=True, help="Timed runs (median).")
@json_option
def bench(preset, repeats, as_json):
    """Time the bit-exact integer forward against the float forward, side by side, batch 1.

    Prints int_ms, float_ms, their ratio (target <= 0.5) and the share of integer time spent
    outside GEMM (target <= 50%).

    \b
    Example:
      hwvit bench --model digits --repeats 3
    """
    from hwvit.bench import bench_forward

    try:
        res = bench_forward(preset, repeats)
    except ValueError as exc:
        fail(first_line(exc))
    if as_json:
        click.echo(json.dumps(res, indent=2))
        return
    click.echo(f"{res['model']} batch 1, {res['threads']} threads, median of {res['repeats']}:")
    click.echo(f"  int_ms {res['int_ms']:.1f}  float_ms {res['float_ms']:.1f}  ratio {res['ratio']:.2f}"
               f"  (target <= 0.5)")
    click.echo(f"  gemm_ms {res['gemm_ms']:.1f}  outside GEMM {100 * res['outside_gemm_share']:.0f}%"
               f"  (target <= 50%)")
