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
@click.option(
    "--variants",
    "by_variant",
    is_flag=True,
    help="One row per arithmetic variant (hwvit.variants) instead: the block that computes it (its own "
    "kind, requant at its ROUNDING/WRAP, the GELU table), each synthesized once.",
)
@click.option(
    "--core",
    is_flag=True,
    help="The whole accelerator core (rtl/vit_core.v) at docs/synth.md's small parameters instead (a few "
    "minutes); with --out, its row in that page's accelerator-core table is replaced.",
)
@click.option("--out", "out_path", type=click.Path(dir_okay=False), help="Write the markdown table here.")
def synth(blocks, by_variant, core, out_path):
    """Synthesize each block with yosys and print its cells, flip-flops, longest path and memory bits.

    \b
    Example:
      hwvit synth --block requant --block gelu --out synth.md
    """
    from hwvit.synth import keep_sections, report_markdown, synth_block

    try:
        toolchain.require("yosys")
        toolchain.repo()
    except toolchain.ToolMissing as exc:
        fail(str(exc))
    if core:
        if blocks or by_variant:
            fail("--core synthesizes the accelerator core alone: leave out --block and --variants")
        _core(out_path)
        return
    if by_variant:
        if blocks:
            fail("--variants synthesizes every variant's block: leave out --block")
        _variants(out_path)
        return
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
        out = Path(out_path)
        text = keep_sections(report_markdown(results), out.read_text() if out.is_file() else None)
        write_atomic(out, text)
        click.echo(f"wrote {out}")
    failed = sum(not r.ok for r in results)
    click.echo(f"{len(results) - failed} synthesized, {failed} failed")
    sys.exit(1 if failed else 0)


def _core(out_path: str | None) -> None:
    from hwvit.synth import CORE_PARAMS, core_row, synth_block, with_core_row

    page = None
    if out_path:  # checked before minutes of yosys
        out = Path(out_path)
        page = out.read_text() if out.is_file() else ""
        try:
            with_core_row(page, "| vit_core |")
        except ValueError as exc:
            fail(f"{out}: {exc}")
    res = synth_block("vit_core", CORE_PARAMS, timeout=3600)
    if not res.ok:
        fail(f"vit_core: {res.message}")
    click.echo(f"vit_core {res.cells:8d} cells {res.flip_flops:7d} flip-flops  longest path {res.longest_path} cells")
    if page is not None:
        write_atomic(Path(out_path), with_core_row(page, core_row(res)))
        click.echo(f"wrote {out_path}")


def _variants(out_path: str | None) -> None:
    """A row per (family, variant): the cost of the block that computes it."""
    from hwvit import variants
    from hwvit.analysis.variant_cost import block_of
    from hwvit.synth import synth_block

    done: dict[tuple, object] = {}
    rows = []
    for family, name in sorted(variants.every(), key=lambda k: (k[0], not variants.is_default(*k), k[1])):
        target = block_of(family, name)
        if target is None:
            rows.append((family, name, "-", None))
            continue
        block, params = target
        key = (block, tuple(sorted(params.items())))
        if key not in done:
            done[key] = synth_block(block, params)
        res = done[key]
        label = block + ("" if not params else " (" + ", ".join(f"{k}={v}" for k, v in params.items()) + ")")
        rows.append((family, name, label, res))
        if res.ok:
            click.echo(
                f"{family + '=' + name:<26} {res.cells:8d} cells {res.flip_flops:7d} flip-flops  longest path "
                f"{res.longest_path:4d} cells {res.memory_bits:8d} memory bits  [{label}]"
            )
        else:
            click.echo(f"{family + '=' + name:<26} FAILED: {res.message}  [{label}]")
    if out_path:
        lines = [
            "| block | variant | Verilog (parameters) | cells | flip-flops | longest path (cells) | memory bits |",
            "|---|---|---|---:|---:|---:|---:|",
        ]
        for family, name, label, res in rows:
            if res is None or not res.ok:
                lines.append(f"| {family} | {name} | {label} | - | - | - | - |")
            else:
                lines.append(
                    f"| {family} | {name} | {label} | {res.cells} | {res.flip_flops} | {res.longest_path} "
                    f"| {res.memory_bits} |"
                )
        write_atomic(Path(out_path), "\n".join(lines) + "\n")
        click.echo(f"wrote {out_path}")
    failed = sum(1 for *_, res in rows if res is not None and not res.ok)
    sys.exit(1 if failed else 0)
