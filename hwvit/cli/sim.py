"""`hwvit sim`: run every vector set under a directory against its Verilog block."""

from __future__ import annotations

import concurrent.futures as cf
import sys
from pathlib import Path

import click

from hwvit import toolchain


def _run_one(set_dir: str, simulator: str, waves: bool, build_root: str | None):
    """One set on one simulator; every failure becomes a FAIL result, never an exception."""
    from hwvit import simulate, vectors

    try:
        return simulate.run(set_dir, simulator, waves=waves, build_root=Path(build_root) if build_root else None)
    except vectors.VectorSetError as exc:
        return simulate.SimResult("?", set_dir, simulator, False, message=f"bad vector set: {exc}")
    except Exception as exc:  # noqa: BLE001 - report, don't crash the whole run
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return simulate.SimResult("?", set_dir, simulator, False, message=f"{exc.__class__.__name__}: {first}")


@click.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--simulator", type=click.Choice(["icarus", "verilator", "both"]), default="verilator",
              show_default=True, help="Simulator(s) to run.")
@click.option("--block", "kinds", multiple=True, help="Only sets of this block kind (repeatable).")
@click.option("-j", "--jobs", type=click.IntRange(1), default=1, show_default=True, help="Parallel simulations.")
@click.option("--waves", is_flag=True, help="Dump a waveform (FST) per run.")
@click.option("--build-dir", type=click.Path(file_okay=False), help="Where builds are cached [default: sim_build/].")
@click.option("-q", "--quiet", is_flag=True, help="Only failures and the summary line.")
def sim(directory, simulator, kinds, jobs, waves, build_dir, quiet):
    """Run every vector set under DIRECTORY through its RTL block; exit 0 only if all are bit-exact.

    \b
    Example:
      hwvit sim vectors/ --simulator both -j 2
      hwvit sim vectors/layers.0.softmax --waves
    """
    from hwvit import vectors

    sims = list(toolchain.SIMULATORS) if simulator == "both" else [simulator]
    try:
        for s in sims:
            toolchain.require(s)
        toolchain.repo()
    except toolchain.ToolMissing as exc:
        raise click.ClickException(str(exc)) from None
    sets = vectors.find_sets(Path(directory))
    if not sets:
        raise click.ClickException(f"no vector sets (manifest.yaml) under {directory}")
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
        raise click.ClickException(f"no vector sets of kind {', '.join(kinds)} under {directory}")
    passed = failed = 0
    with cf.ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(_run_one, d, s, waves, build_dir) for d, s in jobs_list]
        for fut in futures:  # in submission order: output is stable
            res = fut.result()
            if res.passed:
                passed += 1
            else:
                failed += 1
            if not quiet or not res.passed:
                click.echo(res.line())
    click.echo(f"{passed} passed, {failed} failed")
    sys.exit(0 if failed == 0 else 1)
