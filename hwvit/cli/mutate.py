"""`hwvit mutate`: mutation score of a block's testbench (single-point RTL source mutants)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from hwvit import toolchain
from hwvit.atomic import write_atomic
from hwvit.cli.common import fail, seed_option
from hwvit.cli.sim_options import jobs_option

JOURNAL_DEFAULT = "build/mutate/journal.jsonl"


@click.command()
@click.option(
    "--block",
    "blocks",
    multiple=True,
    help="Block kind: rtl/<block>.v mutated, sim/test_<block>.py run (repeatable) [default: requant, divu].",
)
@click.option(
    "--simulator",
    type=click.Choice(list(toolchain.SIMULATORS)),
    default=toolchain.Simulator.VERILATOR.value,
    show_default=True,
    help="Simulator the suite runs on for each mutant (Verilator: ~3 s builds with ccache, fast on big sets).",
)
@jobs_option()
@click.option("--sample", type=click.IntRange(1), help="Run this many mutants, drawn at random [default: all].")
@seed_option("Seed of the sample.")
@click.option(
    "--timeout",
    type=click.IntRange(10),
    help="Seconds a suite may take on one mutant; longer counts as killed (a hang) "
    "[default: 4x the unmutated suite's time, at least 120].",
)
@click.option(
    "--line",
    "lines",
    type=click.IntRange(1),
    multiple=True,
    help="Only mutants of this source line (repeatable); with --all, the table still counts every mutant.",
)
@click.option(
    "--source",
    metavar="FILE",
    help="Mutate this part of the block instead of rtl/<block>.v (gemm: gemm_array.v, gemm_out.v, "
    "gemm_pe.v; requant, residual_add: round_sat.v); the block's suite runs on it.",
)
@click.option("--list", "list_only", is_flag=True, help="Only list the mutants, run nothing.")
@click.option(
    "--all",
    "every",
    is_flag=True,
    help="Every mutant of every file of every block with a suite (parts included, each file once) and of "
    "the core, journaled and resumable (make mutate); --block narrows it to those blocks.",
)
@click.option(
    "--journal",
    type=click.Path(dir_okay=False),
    help=f"With --all: the journal of outcomes a rerun resumes from [default: {JOURNAL_DEFAULT}].",
)
@click.option("--fresh", is_flag=True, help="With --all: start a new journal (the old one is renamed *.old).")
@click.option(
    "--table",
    "table_only",
    is_flag=True,
    help="Print the campaign table of the journal (per block and file, with the machine and simulator "
    "each outcome ran on), run nothing; implies --all.",
)
@click.option("--no-core", is_flag=True, help="With --all: leave out the core (its suite compiles and runs a model).")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), help="Write the report as JSON here.")
@click.option("--force", is_flag=True, help="Replace an existing --out report.")
def mutate(
    blocks,
    simulator,
    jobs,
    sample,
    seed,
    timeout,
    lines,
    source,
    list_only,
    every,
    journal,
    fresh,
    table_only,
    no_core,
    out_path,
    force,
):
    """Mutate a block's RTL one point at a time and report which mutants its testbench kills.

    Each mutant is a copy of the tree in a temporary directory; the simulator must build it, then
    sim/test_<block>.py runs on it, cheap tests first, stopping at the first failure. Mutants
    listed with a reason in sim/mutants_equivalent.yaml count as equivalent. Exit 1 when a mutant
    survives. A mutant takes ~5-40 s on Verilator (make mutate: the blocks of MUTATE_BLOCKS,
    --sample MUTATE_SAMPLE).

    \b
    Example:
      hwvit mutate --block requant --list
      hwvit mutate --block divu --list
      hwvit mutate --block gemm --source gemm_pe.v --list
      hwvit mutate --all --table
    """
    from hwvit import mutate as mut

    try:
        root = toolchain.repo().root
    except toolchain.ToolMissing as exc:
        fail(str(exc))
    if every or table_only:  # the table is the whole campaign's: --table alone means --all --table
        _campaign(mut, blocks, simulator, jobs, timeout, journal, fresh, table_only, no_core, out_path, force, lines)
        return
    if journal or fresh or no_core:
        fail("--journal, --fresh and --no-core go with --all")
    names = list(blocks) or ["requant", "divu"]
    for name in names:
        if not mut.has_suite(name):
            fail(f"block {name!r} has no rtl/{name}.v with its suite ({' '.join(mut.suite_of(name)[0])})")
    if source is not None and len(names) != 1:
        fail("--source names a part of one block: give exactly one --block")
    try:
        files = {name: mut.source_of(name, source) for name in names}
    except ValueError as exc:
        fail(str(exc))
    if list_only:
        for name in names:
            for m in mut.mutants((root / files[name]).read_text(), files[name]):
                if lines and m.line not in lines:
                    continue
                click.echo(f"{m.file}:{m.line}: {m.operator:<12} {m.before}  ->  {m.after}")
        return
    if out_path and Path(out_path).exists() and not force:
        fail(f"{out_path} exists; pass --force to replace it")
    try:
        toolchain.require(simulator)
        toolchain.require("icarus")
        mut.load_equivalent(root)
    except (toolchain.ToolMissing, ValueError) as exc:
        fail(str(exc))

    def show(outcome):
        m = outcome.mutant
        click.echo(f"{outcome.status:<16} {m.file}:{m.line} {m.operator:<12} {m.after}  ({outcome.seconds:.0f} s)")

    reports = []
    for name in names:
        try:
            report = mut.run(
                name,
                simulator=simulator,
                jobs=jobs,
                sample=sample,
                seed=seed,
                timeout=timeout,
                on_outcome=show,
                lines=set(lines),
                source=source,
            )
        except RuntimeError as exc:
            fail(str(exc))
        reports.append(report)
    survivors = 0
    for report in reports:
        for o in report.outcomes:
            if o.status == "survived":
                survivors += 1
                click.echo(f"SURVIVED {o.mutant.file}:{o.mutant.line}: {o.mutant.before}  ->  {o.mutant.after}")
        click.echo(report.summary())
    if out_path:
        out = Path(out_path)
        write_atomic(out, json.dumps([r.to_dict() for r in reports], indent=1))
        click.echo(f"wrote {out}")
    sys.exit(1 if survivors else 0)


def _campaign(mut, blocks, simulator, jobs, timeout, journal, fresh, table_only, no_core, out_path, force, lines=()):
    """`--all`: every mutant, resumed from the journal; the table at the end (and with --out, as markdown)."""
    import time

    chosen = mut.targets(include_core=not no_core)
    if blocks:
        known = {b for b, _ in mut.targets()}
        unknown = [b for b in blocks if b not in known]
        if unknown:
            fail(f"--block {unknown[0]}: not a block with a suite; choose from {', '.join(sorted(known))}")
        chosen = [(b, f) for b, f in chosen if b in blocks]
    path = Path(journal or JOURNAL_DEFAULT)
    if fresh and path.exists():
        path.replace(path.with_name(path.name + ".old"))
    if out_path and Path(out_path).exists() and not force:
        fail(f"{out_path} exists; pass --force to replace it")
    try:
        mut.load_equivalent(toolchain.repo().root)
        book = mut.Journal(path)
    except (ValueError, OSError) as exc:
        fail(str(exc))

    def show(block, outcome):
        m = outcome.mutant
        where = f"{block:<12} {m.file}:{m.line}"
        click.echo(f"{outcome.status:<16} {where} {m.operator:<12} {m.after}  ({outcome.seconds:.0f} s)")

    t0 = time.monotonic()
    try:
        rows = mut.campaign(
            chosen,
            book,
            simulator=simulator,
            jobs=jobs,
            timeout=timeout,
            on_outcome=show,
            run=not table_only,
            lines=set(lines) or None,
        )
    except (RuntimeError, toolchain.ToolMissing) as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        fail(f"interrupted: the outcomes so far are in {path}; run the same command again to resume")
    text = mut.table(rows)
    for row in mut.survivors(chosen, book):
        click.echo(f"SURVIVED {row['block']} {row['file']}:{row['line']}: {row['before']}  ->  {row['after']}")
    wrong = mut.killed_yet_equivalent(chosen, book)
    for row in wrong:
        click.echo(
            f"KILLED BUT LISTED EQUIVALENT {row['block']} {row['file']}:{row['line']}: {row['after']}"
            f"  ({row['detail'][:120]}): review its entry in {mut.EQUIVALENT_FILE}"
        )
    click.echo(text)
    if not table_only:
        click.echo(f"this run: {(time.monotonic() - t0) / 60:.1f} min wall on -j {jobs}; journal {path}")
    if out_path:
        write_atomic(Path(out_path), text + "\n")
        click.echo(f"wrote {out_path}")
    pending = sum(r.pending for r in rows)
    survived = sum(r.counts.get("survived", 0) for r in rows)
    sys.exit(1 if survived or wrong or (pending and not table_only) else 0)
