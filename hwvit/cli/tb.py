"""`hwvit tb export KIND --set DIR -o DIR`: a plain SystemVerilog self-checking testbench."""

from __future__ import annotations

import click

from hwvit.cli.common import fail
from hwvit.cli.outdir import force_option


@click.group()
def tb() -> None:
    """SystemVerilog testbenches for sign-off simulators (docs/tb-export.md).

    `tb export` writes a self-checking bench of one block kind on one vector set:
    $readmemh of the set's .hex files, random stalls on both handshakes (+seed=N), every output
    compared, one PASS/FAIL line and exit status 0/1; plain SystemVerilog, run here on Icarus and
    Verilator.

    \b
    Example:
      hwvit vectors-random gelu --cases 16 --out sets/gelu
      hwvit tb export gelu --set sets/gelu -o tb/gelu
    """


@tb.command("export")
@click.argument("kind")
@click.option(
    "--set",
    "set_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="The vector set the bench drives and checks (a set of KIND).",
)
@click.option(
    "-o",
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Directory to write: the bench, the set's .hex files, manifest.yaml, the block's Verilog (rtl/) and files.f.",
)
@click.option(
    "--rtl",
    "rtl_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Your block's Verilog (repeatable: every file it needs)  [default: the reference block in rtl/]",
)
@click.option("--top", help="Your top module  [default: `top:` of the bind file, else the reference block's]")
@click.option(
    "--bind",
    "bind_path",
    type=click.Path(exists=True, dir_okay=False),
    help="Bind file mapping your ports, reset and parameters onto KIND (`hwvit bind template KIND`).",
)
@force_option
def export_cmd(kind, set_dir, out_dir, rtl_files, top, bind_path, force):
    """Write a self-checking SystemVerilog testbench of block KIND on the vector set --set.

    KIND: requant, residual_add, gelu, softmax, layernorm and the arithmetic variants' blocks such
    as softmax_ibert (streams; `hwvit info` lists the blocks), divu, isqrt (one request at a time)
    or gemm (operand memories served by the bench); layernorm_custom and softmax_custom (a team's
    own function) have no Verilog of their own and are refused.
    The bench (tb_KIND.sv, module hwvit_tb_KIND) loads the configuration and table ports, streams
    the set with random stalls on the input and output handshakes, compares every output element
    and ends with PASS ($finish, exit 0) or FAIL ($fatal, exit 1), the first mismatch named as
    `hwvit sim` names it. Port widths come from the block
    elaborated by yosys for the set's parameters. --rtl FILE: your block with the reference ports;
    with --bind too, your streaming block (valid_ready or AXI4-Stream) through its bind file. The
    block's Verilog is copied into the output directory (rtl/) and files.f names every file
    relatively: the directory alone runs on another machine. Run it from there, e.g. `iverilog
    -g2012 -s hwvit_tb_gelu -o tb.vvp -f files.f && vvp -n tb.vvp +seed=3`; plusargs +seed=N,
    +stall=PERCENT, +vectors=DIR.

    \b
    Example:
      hwvit vectors-random softmax --cases 4 --row-len 16 --out sets/softmax
      hwvit tb export softmax --set sets/softmax -o tb/softmax
    """
    from hwvit import tbexport

    try:
        done = tbexport.export(kind, set_dir, out_dir, bind_path=bind_path, rtl=rtl_files, top=top, force=force)
    except tbexport.ExportError as exc:
        fail(str(exc))
    click.echo(
        f"{done.bench}: {done.top} ({kind}), {done.elements} output elements; "
        f"run it from {done.out_dir} with files.f (docs/tb-export.md)"
    )
