"""`hwvit info`: versions of the toolchain and the shipped presets."""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version

import click

from hwvit import __version__, toolchain


def _pkg(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


@click.command()
def info() -> None:
    """Print the versions of python, torch, cocotb, iverilog, verilator, yosys and the presets.

    \b
    Example:
      hwvit info
    """
    from hwvit.float.config import list_presets

    rows = [
        ("hwvit", __version__),
        ("python", platform.python_version()),
        ("torch", _pkg("torch")),
        ("numpy", _pkg("numpy")),
        ("cocotb", _pkg("cocotb")),
        ("iverilog", toolchain.version("icarus")),
        ("verilator", toolchain.version("verilator")),
        ("yosys", toolchain.version("yosys")),
        ("presets", ", ".join(list_presets())),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        click.echo(f"{key:<{width}}  {value}")
