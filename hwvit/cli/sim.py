"""`hwvit sim`: run every vector set under a directory against its Verilog block."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from hwvit.cli.common import (block_kind_option, build_dir_option, fail, jobs_option, quiet_option,
                              require_simulators, simulator_option)


@click.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@simulator_option()
@block_kind_option("Only sets of this block kind (repeatable).", multiple=True)
@jobs_option()
@click.option("--waves", is_flag=True, help="Dump a waveform per run (VCD on Verilator, FST on Icarus).")
@build_dir_option
@quiet_option("Only failures and the summary line.")
def sim(directory, simulator, kinds, jobs, waves, build_dir, quiet):
    """Run every vector set under DIRECTORY through its RTL block; exit 0 only if all are bit-exact.

    \b
    Example:
      hwvit sim vec/ --simulator both -j 2
      hwvit sim vectors/layers.0.attn.softmax --simulator icarus --waves
    """
    from hwvit import vectors

    sims = require_simulators(simulator)
    sets = vectors.find_sets(Path(directory))
    if not sets:
        fail(f"no vector sets (manifest.yaml) under {directory}")
    jobs_list = []
    for set_dir in sets:
        if kinds:
            try:
                kind = vectors.read_manifest(set_dir).get("kind")
            except Exception:  # noqa: BLE001 - unreadable sets are reported by the run itself
                kind = None
            if kind not in kinds:
                continue
        jobs_list.extend((str(set_dir), s) for s in sims)
    if not jobs_list:
        fail(f"no vector sets of kind {', '.join(kinds)} under {directory}")
    from hwvit.simulate import run_many

    def show(res):
        if not quiet or not res.passed:
            click.echo(res.line())

    results = run_many(jobs_list, workers=jobs, waves=waves, build_root=build_dir, on_result=show)
    failed = sum(not r.passed for r in results)
    click.echo(f"{len(results) - failed} passed, {failed} failed")
    sys.exit(0 if failed == 0 else 1)
