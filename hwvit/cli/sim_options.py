"""Options of the commands that run simulators: --simulator, -j, --build-dir, --block, and a
team's own block (--rtl, --top, --bind); `require_simulators` checks the named ones are installed."""

from __future__ import annotations

from collections.abc import Callable

import click

from hwvit import blocks, toolchain
from hwvit.cli.common import F, fail, options


class _SimulatorChoice(click.Choice):
    """Every simulator cocotb's runner drives Verilog on, and "both"; a VHDL-only one of cocotb's
    (ghdl, nvc) is refused in one line that says why."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value in toolchain.VHDL_ONLY:
            self.fail(toolchain.vhdl_only(value), param, ctx)
        return super().convert(value, param, ctx)


def simulator_option(
    help: str = "Simulator(s) to run: both = icarus + verilator (the two installed here); the others "
    "need their vendor's executables on PATH (docs/verification.md, Simulators).",
) -> Callable[[F], F]:
    return click.option(
        "--simulator",
        type=_SimulatorChoice([*toolchain.RUNNER_SIMULATORS, "both"]),
        default=toolchain.Simulator.VERILATOR.value,
        show_default=True,
        help=help,
    )


def jobs_option(default: int = 1) -> Callable[[F], F]:
    return click.option(
        "-j", "--jobs", type=click.IntRange(1), default=default, show_default=True, help="Parallel simulations."
    )


build_dir_option = click.option(
    "--build-dir",
    type=click.Path(file_okay=False),
    help="Where simulator builds are cached  [default: $XDG_CACHE_HOME/hwvit/sim_build, else ~/.cache/hwvit/sim_build]",
)


def block_kind_option(help: str, multiple: bool = False) -> Callable[[F], F]:
    """--block KIND: a block kind of the vector-set contract."""
    return click.option(
        "--block", "kinds" if multiple else "kind", type=click.Choice(blocks.names()), multiple=multiple, help=help
    )


def require_simulators(simulator: str) -> list[str]:
    """The simulators named by --simulator (one of toolchain.RUNNER_SIMULATORS, or both = icarus
    and verilator), each checked installed, and the source checkout's rtl/ and sim/; a missing one
    is a one-line error (exit 1) with its install command, or the executables it lacks on PATH."""
    sims = list(toolchain.SIMULATORS) if simulator == "both" else [simulator]
    try:
        for sim in sims:
            toolchain.require(sim)
        toolchain.repo()
    except toolchain.ToolMissing as exc:
        fail(str(exc))
    return sims


def byo_options(func: F) -> F:
    """--rtl FILE (repeatable) --top NAME --bind FILE: a team's own block instead of the reference one."""
    return options(
        click.option(
            "--rtl",
            "rtl_files",
            multiple=True,
            type=click.Path(exists=True, dir_okay=False),
            help="Your block's Verilog (repeatable: every file it needs), checked through --bind.",
        ),
        click.option("--top", help="Your top module  [default: `top:` of the bind file]"),
        click.option(
            "--bind",
            "bind_path",
            type=click.Path(exists=True, dir_okay=False),
            help="Bind file mapping your ports and parameters onto the block kind "
            "(`hwvit bind template KIND` prints one).",
        ),
    )(func)
