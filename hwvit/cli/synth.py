"""`hwvit synth`: yosys cell counts per RTL block."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from hwvit import toolchain
from hwvit.atomic import write_atomic
from hwvit.cli.common import fail
from hwvit.synth import BLOCKS


@click.command()
@click.option(
    "--block",
    "blocks",
    type=click.Choice(list(BLOCKS)),
    multiple=True,
    help="Only this block (repeatable) [default: all].",
)
@click.option("--out", "out_path", type=click.Path(dir_okay=False), help="Write the markdown table here.")
def synth(blocks, out_path):
    """Synthesize each block with yosys and print its cell count.

    \b
    Example:
      hwvit synth --block requant --block gelu --out synth.md
    """
    from hwvit.synth import report_markdown, synth_block

    try:
        toolchain.require("yosys")
        toolchain.repo()
    except toolchain.ToolMissing as exc:
        fail(str(exc))
    names = list(dict.fromkeys(blocks)) or list(BLOCKS)
    results = []
    for name in names:
        res = synth_block(name)
        results.append(res)
        if res.ok:
            click.echo(
                f"{name:<18} {res.cells:8d} cells {res.flip_flops:7d} flip-flops  longest path "
                f"{res.longest_path:4d} cells {res.memory_bits:8d} memory bits"
            )
        else:
            click.echo(f"{name:<18} FAILED: {res.message}")
    if out_path:
        text = report_markdown(results)
        out = Path(out_path)
        write_atomic(out, text)
        click.echo(f"wrote {out}")
    failed = sum(not r.ok for r in results)
    click.echo(f"{len(results) - failed} synthesized, {failed} failed")
    sys.exit(1 if failed else 0)
