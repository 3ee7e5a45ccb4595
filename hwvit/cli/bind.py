"""`hwvit bind template KIND`: a commented bind file to start from."""

from __future__ import annotations

import click

from hwvit import blocks
from hwvit.cli.common import fail


@click.group()
def bind() -> None:
    """Bind files: map your block's ports and parameters onto an hwvit block kind (docs/byo.md).

    \b
    Example:
      hwvit bind template softmax
    """


@bind.command("template")
@click.argument("kind", type=click.Choice(blocks.names()))
def template_cmd(kind):
    """Print a commented bind file for KIND that fits the reference block as it is.

    \b
    Example:
      hwvit bind template softmax > softmax.yaml
      hwvit sim vec/softmax --rtl my_softmax.v --bind softmax.yaml
    """
    from hwvit.byo import kinds
    from hwvit.byo.template import template

    if kind not in kinds.KINDS:
        fail(
            f"{kind}: no bind; the GEMM engine reads operand memories, not a stream: docs/rtl.md "
            "(gemm, operand-memory interface) describes the adapter to write"
        )
    click.echo(template(kind), nl=False)
