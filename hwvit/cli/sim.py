"""`hwvit sim`: run every vector set under a directory against its Verilog block."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from hwvit.cli import sim_coverage
from hwvit.cli.cluster_options import cluster_client, cluster_options
from hwvit.cli.common import fail, given, json_option, quiet_option, refuse
from hwvit.cli.progress import progress_bar
from hwvit.cli.sim_options import (
    block_kind_option,
    build_dir_option,
    byo_options,
    jobs_option,
    require_simulators,
    simulator_option,
)
from hwvit.textfiles import count


@click.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@simulator_option()
@block_kind_option("Only sets of this block kind (repeatable).", multiple=True)
@jobs_option()
@click.option("--waves", is_flag=True, help="Dump a waveform per run (VCD on Verilator, FST on Icarus).")
@click.option(
    "--stress",
    is_flag=True,
    help="Also run each set through a reset in every state of the block, back-to-back jobs (gemm) and "
    "unstalled against the timing model (as pytest does); their bins count in --coverage.",
)
@build_dir_option
@quiet_option("Only failures and the summary line.")
@byo_options
@cluster_options
@click.option(
    "--junit",
    "junit_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Also write the results as JUnit XML (one test case per set and simulator) for CI.",
)
@json_option
@click.option(
    "--vector",
    type=click.IntRange(min=0),
    metavar="I",
    help="Run only vector I of the one set DIRECTORY (an element, or a row of softmax, LayerNorm, "
    "GEMM), written as a set of its own: what a mismatch line's rerun command does.",
)
@sim_coverage.coverage_options
def sim(
    directory,
    simulator,
    kinds,
    jobs,
    waves,
    stress,
    build_dir,
    quiet,
    rtl_files,
    top,
    bind_path,
    cluster,
    junit_path,
    as_json,
    vector,
    coverage,
    coverage_out,
):
    """Run every vector set under DIRECTORY through its RTL block; exit 0 only if all are bit-exact.

    \b
    Example:
      hwvit sim vec/softmax --simulator both
      hwvit sim vec/ --simulator icarus --cluster local:2 --junit results.xml
      hwvit sim vec/digits/layers.0.attn.softmax --simulator icarus --waves
      hwvit sim vec/softmax --coverage --coverage-out cov/
      hwvit rtl export team/
      hwvit sim vec/softmax --rtl team/rtl/softmax.v --rtl team/rtl/divu.v \\
          --bind team/bind/softmax.yaml --simulator icarus
    """
    from hwvit import vectors

    if as_json and quiet:
        refuse("--json prints only the JSON; -q/--quiet has nothing to silence")
    if cluster is not None and given("jobs"):
        refuse("-j/--jobs applies without --cluster (the cluster's workers set the parallelism)")
    sim_coverage.check(
        coverage, coverage_out, simulator, cluster=cluster, byo=bool(rtl_files or top or bind_path), as_json=as_json
    )
    if stress and (cluster is not None or rtl_files or bind_path):
        refuse("--stress runs the reference testbenches locally: not with --cluster or --rtl/--bind")
    sims = require_simulators(simulator)
    sets = vectors.find_sets(Path(directory))
    if not sets:
        fail(f"no vector sets (manifest.yaml) under {directory}")
    if vector is not None:
        sets = [_one_vector(sets, directory, vector, quiet or as_json)]
    if rtl_files or top or bind_path:
        if not (rtl_files and bind_path):
            refuse("--rtl and --bind go together: your block's Verilog and the bind file that maps its ports")
        if kinds:
            refuse("--block does not apply with --bind: the bind file's kind picks the sets")
        if cluster is not None or junit_path or as_json:
            refuse("--cluster, --junit and --json apply to the reference blocks, not with --rtl/--bind")
        _sim_own_block(sets, sims, directory, rtl_files, top, bind_path, jobs, waves, build_dir, quiet)
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

    started = time.monotonic()
    if cluster is None:

        def show(res):
            if not as_json and (not quiet or not res.passed):
                click.echo(res.line())

        results = run_many(
            jobs_list, workers=jobs, waves=waves, build_root=build_dir, on_result=show, coverage=coverage, stress=stress
        )
    else:
        results = _on_cluster(cluster, jobs_list, waves, build_dir, quiet, as_json)
    failed = sum(not r.passed for r in results)
    if junit_path:
        from hwvit.junit import write_junit

        try:
            write_junit(junit_path, results, directory, time.monotonic() - started)
        except OSError as exc:
            fail(f"cannot write {junit_path}: {exc.strerror or exc}")
    if as_json:
        from hwvit.junit import to_json

        click.echo(to_json(results))
    else:
        if coverage:
            sim_coverage.report(results, coverage_out)
        click.echo(f"{len(results) - failed} passed, {failed} failed")
    sys.exit(0 if failed == 0 else 1)


def _on_cluster(cluster, jobs_list, waves, build_dir, quiet, as_json):
    """The runs as Dask tasks: lines as they finish (completion order) above a progress bar."""
    from hwvit.simulate import run_on_cluster

    n = len(jobs_list)
    with (
        cluster_client(cluster) as client,
        progress_bar(
            n, "simulating", "run", quiet or as_json, line=f"simulating {count(n, 'run')} on the cluster"
        ) as bar,
    ):

        def show(res):
            if not as_json and (not quiet or not res.passed):
                bar.write(res.line())
            bar.update()

        return run_on_cluster(client, jobs_list, waves=waves, build_root=build_dir, on_result=show)


def _sim_own_block(sets, sims, directory, rtl_files, top, bind_path, jobs, waves, build_dir, quiet) -> None:
    """Every set of the bind's kind through the team's block; the bind is checked before any run."""
    from hwvit import toolchain, vectors
    from hwvit.byo import BindError
    from hwvit.byo import run as byo

    try:
        toolchain.require("yosys")  # elaborates the block to check the bind's ports and widths
        kind = byo.load(bind_path).kind
        chosen = [d for d in sets if _kind_of(d) == kind]
        if not chosen:
            fail(f"no {kind} vector sets under {directory} (the kind of {bind_path})")
        design = byo.prepare(list(rtl_files), bind_path, top, chosen)
    except (BindError, vectors.VectorSetError, toolchain.ToolMissing) as exc:
        fail(str(exc).splitlines()[0])

    def show(res):
        if not quiet or not res.passed:
            click.echo(res.line())

    results = byo.run_many(
        design,
        [(str(d), s) for d in chosen for s in sims],
        workers=jobs,
        waves=waves,
        build_root=build_dir,
        on_result=show,
    )
    failed = sum(not r.passed for r in results)
    skipped = len(sets) - len(chosen)
    click.echo(
        f"{len(results) - failed} passed, {failed} failed"
        + (f" ({skipped} sets of other kinds skipped)" if skipped else "")
    )
    sys.exit(0 if failed == 0 else 1)


def _kind_of(set_dir) -> str | None:
    from hwvit import vectors

    try:
        return vectors.read_manifest(set_dir).get("kind")
    except Exception:  # noqa: BLE001 - an unreadable set is not of the bind's kind
        return None


def _one_vector(sets, directory, index: int, quiet: bool) -> Path:
    """The set holding only vector ``index`` of the one set under ``directory``, in a new temporary
    directory (kept, and named, so its waveform and files can be looked at)."""
    import tempfile

    from hwvit import vectors
    from hwvit.vectors.pick import one_vector

    if len(sets) != 1:
        refuse(f"--vector takes one vector set; {directory} holds {len(sets)}")
    try:
        vset = vectors.read(sets[0])
        out = one_vector(vset, index, Path(tempfile.mkdtemp(prefix="hwvit-vector-")) / "set")
    except (ValueError, OSError) as exc:
        fail(str(exc).splitlines()[0])
    if not quiet:
        click.echo(f"vector {index} of {sets[0]} -> {out}")
    return out
