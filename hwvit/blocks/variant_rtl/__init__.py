"""The Verilog twins of the arithmetic-variant kinds (hwvit.blocks.variant_kinds).

A module here named after a variant kind (``softmax_ibert.py`` for ``softmax_ibert``) declares
``FIELDS``: the BlockKind fields that make the kind a block with RTL, merged into the kind the
registry builds:

- ``rtl``: its Verilog files, the block's own first (``rtl(...)`` below: ``rtl/softmax_ibert.v``, the row
  engine ``rtl/row_stream.v``, then e.g. ``rtl/row_max.v``, ``rtl/divu.v``);
- ``ports``: the streaming interface (hwvit.byo.kinds.Kind), its configuration ports read from the
  set's manifest integers and its table (if any) from the set's parameter tensors;
- ``reference_ports``: the ports of the Verilog block for the generic stream bench (sim/byotb.py)
  and for `hwvit bind template`;
- ``synth``: the parameters `hwvit synth` builds it with;
- optionally ``toplevel`` (a variant that is a parameter of another kind's block: layernorm_ptf is
  ``rtl/layernorm.v`` with PTF = 1, its ``fixed`` parameters in ``ports``), ``hdl_parameters``,
  ``mutate_first``, ``mutate_parts``, ``reset_states``.

A kind without such a module has golden vectors only (a team's own block is checked through a bind
file against them). Modules here must import nothing heavy (no torch, no numba): the registry loads
them with every CLI call and every simulation.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

ALLOWED = frozenset(
    {
        "rtl",
        "ports",
        "reference_ports",
        "synth",
        "toplevel",
        "hdl_parameters",
        "mutate_first",
        "mutate_parts",
        "reset_states",
        "seen_bins",
        "rtl_domain",
    }
)


def rtl(block: str, *parts: str) -> tuple[str, ...]:
    """The Verilog of a softmax or LayerNorm block: its own file, the row engine every such block is
    built on (rtl/row_stream.v), then ``parts`` (module names: ``"row_max"``, ``"divu"``)."""
    return (f"rtl/{block}.v", "rtl/row_stream.v", *(f"rtl/{part}.v" for part in parts))


def stream_ports(kind: Any) -> dict[str, Any]:
    """The reference ports of a softmax block whose scores stream on ``in_data_i``, probabilities on
    ``out_data_o`` (``out_last_o`` with a row's last) and each configuration value ``name`` of ``kind``
    (hwvit.byo.kinds.Kind) on port ``name_i``; a table's write enable, address and data ports
    likewise (``tbl_we_i``, ``tbl_addr_i``, ``<data>_i``)."""
    table = () if kind.table is None else ("tbl_we", "tbl_addr", *kind.table.data)
    return {
        "fields": {"x": "in_data_i"},
        "out": "out_data_o",
        "last": "out_last_o",
        "ports": {name: f"{name}_i" for name in (*kind.config, *table)},
    }


def channel_ports(kind: Any) -> dict[str, Any]:
    """The reference ports of a LayerNorm-style block with a per-channel table: x on ``in_data_i``, y on
    ``out_data_o`` (``out_last_o`` with a row's last), each configuration value ``name`` of ``kind`` on
    ``cfg_<name>_i`` and its table on ``prm_we_i``, ``prm_addr_i`` and ``<data>_i``."""
    return {
        "fields": {"x": "in_data_i"},
        "out": "out_data_o",
        "last": "out_last_o",
        "ports": {
            **{name: f"cfg_{name}_i" for name in kind.config},
            "tbl_we": "prm_we_i",
            "tbl_addr": "prm_addr_i",
            **{name: f"{name}_i" for name in kind.table.data},
        },
    }


# Variant kinds whose Verilog twin is planned but not written: the kind, and what its block will be.
# `hwvit sim` refuses their sets with this line; their sets are golden vectors meanwhile.
PENDING: dict[str, str] = {}


def fields(kind: str) -> dict[str, Any]:
    """The RTL fields of variant kind ``kind`` ({} if it has no Verilog twin)."""
    name = f"{__name__}.{kind}"
    if importlib.util.find_spec(name) is None:
        return {}
    module = importlib.import_module(name)
    got = dict(module.FIELDS)
    unknown = set(got) - ALLOWED
    if unknown:
        raise ValueError(f"{name}: FIELDS names {', '.join(sorted(unknown))}, not RTL fields of a kind")
    return got
