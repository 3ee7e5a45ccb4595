"""`hwvit sim --coverage`: its options, their checks and the report (kept apart from sim.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from hwvit.cli.common import fail, refuse
from hwvit.toolchain import Simulator

F = TypeVar("F", bound=Callable)

# Not "coverage": a directory of that name in the working directory shadows coverage.py on sys.path
# (numba imports it), so tests run from there would break.
DEFAULT_OUT = "coverage-report"
MERGE_KEY = "hwvit.coverage_merge"  # click context meta: keeps sim.py's signature as it is


def _keep_merge(ctx: click.Context, _param, value):
    ctx.meta[MERGE_KEY] = value
    return value


def coverage_options(func: F) -> F:
    func = click.option(
        "--coverage-merge",
        type=click.Path(file_okay=False),
        metavar="DIR",
        expose_value=False,
        callback=_keep_merge,
        help="With --coverage: also merge every *.dat in DIR (the pytest testbenches' runs under "
        "HWVIT_COVERAGE_DIR, make coverage).",
    )(func)
    func = click.option(
        "--coverage-out",
        type=click.Path(file_okay=False),
        metavar="DIR",
        help=f"Where --coverage writes its report (default ./{DEFAULT_OUT}; an earlier report there is replaced).",
    )(func)
    return click.option(
        "--coverage",
        is_flag=True,
        help="Verilator line and toggle coverage (a build of its own) and functional bins: writes "
        "merged.dat, annotated sources, untoggled.txt and report.json; prints per file and per block.",
    )(func)


def check(coverage: bool, coverage_out, simulator: str, *, cluster, byo: bool, as_json: bool) -> None:
    """Refuse the combinations --coverage cannot serve, each in one line."""
    if coverage_out and not coverage:
        refuse("--coverage-out applies with --coverage")
    if click.get_current_context().meta.get(MERGE_KEY) and not coverage:
        refuse("--coverage-merge applies with --coverage")
    if not coverage:
        return
    if simulator != Simulator.VERILATOR:
        refuse("--coverage needs --simulator verilator (Icarus has no line or toggle coverage)")
    if cluster is not None or byo or as_json:
        refuse("--coverage runs the reference blocks locally: not with --cluster, --rtl/--bind or --json")


def report(results, coverage_out) -> None:
    """Merge the runs' coverage, write the report directory and print its summary."""
    from hwvit import coverage, toolchain

    dest = Path(coverage_out or DEFAULT_OUT)
    if not any("coverage_dat" in r.extra for r in results):
        fail("no run wrote coverage data (every run failed before the end?); no report written")
    root = toolchain.repo().root
    extra: list[Path] = []
    merge_dir = click.get_current_context().meta.get(MERGE_KEY)
    if merge_dir:
        if not Path(merge_dir).is_dir():
            fail(f"--coverage-merge {merge_dir}: no such directory")
        extra = sorted(Path(merge_dir).glob("*.dat"))
        if not extra:
            fail(f"--coverage-merge {merge_dir}: no .dat files there (run the testbenches with HWVIT_COVERAGE_DIR)")
    try:
        waivers = coverage.load_waivers(root / coverage.WAIVERS, root) if (root / coverage.WAIVERS).exists() else []
        data = coverage.write_report(results, dest, root, extra, waivers)
    except coverage.WaiverError as exc:
        fail(str(exc))
    except (OSError, FileExistsError) as exc:
        fail(f"cannot write the coverage report to {dest}: {getattr(exc, 'strerror', None) or exc}")
    for line in coverage.report_lines(data):
        click.echo(line)
    merged = f" + {data['merged_runs']} testbench runs merged" if data["merged_runs"] else ""
    click.echo(f"coverage of {data['runs']} runs{merged} -> {dest}")
