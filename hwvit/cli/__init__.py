"""The hwvit command line. Each command lives in its own module of this package."""

from __future__ import annotations

import importlib

import click

from hwvit import __version__

# (module in hwvit.cli, click command attribute). One line per command; the command is named
# after the attribute (underscores become dashes), so one module may provide several commands.
COMMANDS = [
    ("demo", "demo"),
    ("info", "info"),
    ("compare", "compare"),
    ("sweep", "sweep"),
    ("sensitivity", "sensitivity"),
    ("bench", "bench"),
    ("sim", "sim"),
    ("synth", "synth"),
    ("mutate", "mutate"),
    ("vectors", "vectors"),
    ("vectors_random", "vectors_random"),
    ("vectors", "check"),
    ("bench_vectors", "bench_vectors"),
    ("train_demo", "train_demo"),
    ("onnx_demo", "onnx_demo"),
    ("rtl", "rtl"),
    ("bind", "bind"),
    ("core", "compile"),
    ("core", "core"),
    ("tb", "tb"),
]


class _Group(click.Group):
    """Loads command modules lazily, so `hwvit --help` does not import torch."""

    def list_commands(self, ctx):
        return sorted(attr.replace("_", "-") for _, attr in COMMANDS)

    def get_command(self, ctx, cmd_name):
        for module, attr in COMMANDS:
            if attr.replace("_", "-") == cmd_name:
                from hwvit.blocks import BlockError

                try:  # a command's choices list the block kinds: a team's module may fail to load
                    return getattr(importlib.import_module(f"hwvit.cli.{module}"), attr)
                except BlockError as exc:
                    raise click.ClickException(str(exc)) from None
        return None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hwvit")
def main() -> None:
    """hwvit: bit-accurate integer ViT, golden vectors and cocotb checks for ViT accelerators.

    \b
    Typical flow:
      hwvit vectors --model digits --limit 1 --out vec/digits  golden vector sets of a traced model
      hwvit vectors-random softmax --cases 64 --out vec/sm     random unit-test set of one block
      hwvit check vec/                                         validate sets before a simulator sees them
      hwvit sim vec/ --simulator verilator                     RTL vs vectors, bit for bit
      hwvit compare --model digits --out report/               float vs fixed, per layer

    Output directories: a non-empty one is replaced only with --force, and only if it holds a
    previous hwvit output of the same kind and no file hwvit did not write.
    """
    from hwvit import heap

    try:
        heap.keep()  # large arrays reused between kernels instead of mapped afresh (hwvit/heap.py)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
