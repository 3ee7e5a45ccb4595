"""`hwvit bench`: integer vs float forward speed (and vector writing throughput)."""

from __future__ import annotations

import json

import click

from hwvit.ops.gemm_backends import BACKENDS


@click.command()
@click.option("--model", "preset", default="vit-b16", show_default=True, help="Preset to time (random weights).")
@click.option("--repeats", type=click.IntRange(1), default=5, show_default=True, help="Timed runs (median).")
@click.option("--batch", type=click.IntRange(1), default=1, show_default=True, help="Images per forward.")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
              help="Where the integer and float forwards run.")
@click.option("--gemm", "gemm_name", type=click.Choice(["auto", *BACKENDS]),
              default=None, help="GEMM backend on CPU (default: HWVIT_GEMM, else the per-machine probe).")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def bench(preset, repeats, batch, device, gemm_name, as_json):
    """Time the bit-exact integer forward against the float forward, side by side.

    Prints int_ms, float_ms, their ratio (target <= 0.5 with int8 dot-product instructions,
    <= 1.0 on AVX2-only CPUs), the share of integer time spent outside GEMM (target <= 50%),
    images/s of both, the GEMM backend and the CPU.

    \b
    Example:
      hwvit bench --model vit-b16 --repeats 5
      hwvit bench --batch 64 --repeats 1
      hwvit bench --device cuda --batch 64
    """
    from hwvit.bench import bench_forward
    from hwvit.ops import gemm_backends

    try:
        if gemm_name:
            gemm_backends.set_backend(gemm_name)
        res = bench_forward(preset, repeats, batch=batch, device=device)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(res, indent=2))
        return
    click.echo(f"{res['model']} batch {res['batch']} on {res['device']}, {res['threads']} threads, "
               f"median of {res['repeats']}, load average {res['load_avg_1min']:.1f}:")
    click.echo(f"  int_ms {res['int_ms']:.1f}  float_ms {res['float_ms']:.1f}  ratio {res['ratio']:.2f}"
               f"  (target <= 0.5 with int8 dot products, <= 1.0 AVX2-only)")
    click.echo(f"  images/s  int {res['int_images_per_s']:.1f}  float {res['float_images_per_s']:.1f}")
    if res["gemm_ms"] is not None:
        click.echo(f"  gemm_ms {res['gemm_ms']:.1f}  outside GEMM {100 * res['outside_gemm_share']:.0f}%"
                   f"  (target <= 50%)")
    click.echo(f"  GEMM backend {res['gemm_backend']}")
    if res.get("gemm_probe_ms"):
        click.echo("  probe (197x768x768) ms: " + ", ".join(f"{k} {v:.1f}" for k, v in res["gemm_probe_ms"].items()))
    click.echo(f"  CPU {res['cpu']}, capability {res['cpu_capability']}, flags {' '.join(res['cpu_flags']) or 'none'}")
    if res.get("gpu"):
        click.echo(f"  GPU {res['gpu']}")
