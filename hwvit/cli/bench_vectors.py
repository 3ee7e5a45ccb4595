"""`hwvit bench-vectors`: vector-set writing throughput on one ViT-B/16 layer's trace."""

from __future__ import annotations

import json

import click

from hwvit.cli.common import json_option


@click.command()
@click.option("--repeats", type=click.IntRange(1), default=3, show_default=True, help="Timed writes (best).")
@click.option(
    "--dir",
    "root",
    type=click.Path(exists=True, file_okay=False),
    help="Where to write (a temporary subdirectory, removed afterwards): the file system under test "
    "[default: the current directory].",
)
@json_option
def bench_vectors(repeats, root, as_json):
    """Time writing the full trace of one ViT-B/16 layer (~16.7 M elements, 34 sets) as vector sets.

    Prints elements per second against the target of 50 M/s.

    \b
    Example:
      hwvit bench-vectors --repeats 1 --json
    """
    from hwvit.vectors.bench import bench_write

    res = bench_write(repeats=repeats, root=root)
    if as_json:
        click.echo(json.dumps(res, indent=2))
        return
    verdict = "meets" if res["meets_target"] else "BELOW"
    click.echo(
        f"vector writing: {res['elements'] / 1e6:.1f} M elements, {res['sets']} sets, "
        f"{res['bytes'] / 1e6:.1f} MB in {res['seconds']:.3f} s = "
        f"{res['elements_per_s'] / 1e6:.1f} M elements/s "
        f"({verdict} target >= {res['target_elements_per_s'] / 1e6:.0f} M/s)"
    )
    click.echo(
        f"  {res['cpu_seconds']:.3f} s CPU ({res['elements_per_cpu_s'] / 1e6:.1f} M elements per CPU second), "
        f"{res['threads']} writer threads, best of {res['repeats']}, in {res['dir']}"
    )
