"""`hwvit rtl export DIR`: copy the reference blocks and their docs for a team to start from."""

from __future__ import annotations

import click

from hwvit.cli.common import fail
from hwvit.cli.outdir import force_option


@click.group()
def rtl() -> None:
    """The reference RTL that ships with hwvit: copy it out to start your own blocks from.

    \b
    Example:
      hwvit rtl export team/
    """


@rtl.command("export")
@click.argument("directory", type=click.Path(file_okay=False))
@force_option
def export_cmd(directory, force):
    """Copy the reference blocks (rtl/*.v), docs/rtl.md, docs/arithmetic.md and a bind template per
    block kind (bind/KIND.yaml) into DIRECTORY.

    \b
    Example:
      hwvit rtl export team/
      hwvit sim vec/ --rtl team/rtl/softmax.v --rtl team/rtl/divu.v --bind team/bind/softmax.yaml
    """
    from hwvit import toolchain
    from hwvit.byo.export import export

    try:
        files = export(directory, force=force)
    except (FileExistsError, toolchain.ToolMissing) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{exc.filename or directory}: {exc.strerror or exc}")
    rtl_count = sum(1 for f in files if f.parts[0] == "rtl")
    click.echo(
        f"{rtl_count} Verilog files, docs and {sum(1 for f in files if f.parts[0] == 'bind')} bind "
        f"templates -> {directory}"
    )
