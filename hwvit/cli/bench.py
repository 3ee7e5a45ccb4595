"""`hwvit bench`: integer vs float forward speed (and vector writing throughput)."""

from __future__ import annotations

import json

import click

from hwvit.cli.common import (
    batch_option,
    compute_options,
    fail,
    first_line,
    json_option,
)


@click.command()
@click.option("--model", "preset", default="vit-b16", show_default=True, help="Preset to time (random weights).")
@click.option("--repeats", type=click.IntRange(1), default=5, show_default=True, help="Timed runs (median).")
@batch_option(1, "Images per forward (--batch 64: images/s of both forwards).")
@compute_options
@json_option
def bench(preset, repeats, batch, device, as_json):
    """Time the bit-exact integer forward against the float forward, side by side.

    Prints int_ms, float_ms, their ratio (target <= 0.5 with int8 dot-product instructions,
    <= 1.0 on AVX2-only CPUs), the share of integer time spent outside GEMM (target <= 50%),
    images/s of both, the GEMM backend and the CPU (model, capability, flags). The targets are
    for the default model, ViT-B/16: `hwvit bench` (batch 1) and `hwvit bench --batch 64`, on a
    GPU `hwvit bench --device cuda --batch 64`.

    \b
    Example:
      hwvit bench --model digits --repeats 3
      hwvit bench --model digits --json
      hwvit bench --model vit-tiny --batch 8 --repeats 1 --gemm float64
    """
    from hwvit.bench import bench_forward

    try:
        res = bench_forward(preset, repeats, batch=batch, device=device)
    except ValueError as exc:
        fail(first_line(exc))
    if as_json:
        click.echo(json.dumps(res, indent=2))
        return
    click.echo(
        f"{res['model']} batch {res['batch']} on {res['device']}, {res['threads']} threads, "
        f"median of {res['repeats']}, load average {res['load_avg_1min']:.1f}:"
    )
    click.echo(
        f"  int_ms {res['int_ms']:.1f}  float_ms {res['float_ms']:.1f}  ratio {res['ratio']:.2f}"
        f"  (target <= 0.5 with int8 dot products, <= 1.0 AVX2-only)"
    )
    click.echo(f"  images/s  int {res['int_images_per_s']:.1f}  float {res['float_images_per_s']:.1f}")
    if res["gemm_ms"] is not None:
        click.echo(
            f"  gemm_ms {res['gemm_ms']:.1f}  outside GEMM {100 * res['outside_gemm_share']:.0f}%  (target <= 50%)"
        )
    click.echo(f"  GEMM backend {res['gemm_backend']}")
    if res.get("gemm_probe_ms"):
        click.echo("  probe (197x768x768) ms: " + ", ".join(f"{k} {v:.1f}" for k, v in res["gemm_probe_ms"].items()))
    click.echo(f"  heap: {res['heap']}")
    click.echo(f"  CPU {res['cpu']}, capability {res['cpu_capability']}, flags {' '.join(res['cpu_flags']) or 'none'}")
    if res.get("gpu"):
        click.echo(f"  GPU {res['gpu']}")
