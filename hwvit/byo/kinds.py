"""The logical interface of each streaming block kind, as a bind file names it.

A kind has one input stream (each beat carries one value of every input field), one output stream
(one value per beat), steady configuration ports, and optionally a table written one entry per
clock before streaming. Widths follow the vector-set contract (hwvit.vectors.schema.CONTRACT) and
the reference blocks in rtl/ (docs/rtl.md); each kind's module in hwvit.blocks declares its own.
Everything here is a function of a set's parameters,
so the bind checker and the cocotb testbench (sim/byotb.py) compute the same widths and values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Params = dict[str, Any]
Bits = Callable[[Params], int]


def bits_fixed(n: int) -> Bits:
    return lambda p: n


def bits_param(name: str) -> Bits:
    return lambda p: int(p[name])


def bits_count(name: str) -> Bits:
    """Bits that hold the value of parameter ``name`` (a length: 197 -> 8)."""
    return lambda p: max(1, int(p[name]).bit_length())


@dataclass(frozen=True)
class Field:
    """One value of a beat: the set's tensor it comes from (or goes to), width and signedness."""

    tensor: str
    bits: Bits
    signed: bool
    doc: str


@dataclass(frozen=True)
class Config:
    """A steady configuration input: its value comes from the set's parameters."""

    value: Callable[[Params], int]
    bits: Bits  # the narrowest port that holds every legal value
    doc: str


@dataclass(frozen=True)
class Table:
    """A write port (we, addr, one data port per tensor) loaded one entry per clock."""

    data: dict[str, Field]  # logical data port -> field
    entries: Callable[[Any], int]  # entries to write for a set (table padded with zeros)
    addr_bits: Bits  # narrowest address port
    doc: str


def channel_table(data: dict[str, Field], doc: str = "channel i at address i") -> Table:
    """The per-channel table of a block with a row of C channels: C entries, channel i at address i, the
    narrowest address port for C."""
    return Table(data, lambda v: int(v.params["c"]), lambda p: max(1, (int(p["c"]) - 1).bit_length()), doc)


@dataclass(frozen=True)
class Kind:
    name: str
    inputs: dict[str, Field]
    output: tuple[str, Field]
    config: dict[str, Config] = field(default_factory=dict)
    table: Table | None = None
    row_len: Callable[[Any], int] | None = None  # elements per row (tlast); None: the whole set
    parameters: dict[str, str] = field(default_factory=dict)  # reference RTL parameter -> manifest field
    fixed: dict[str, int] = field(default_factory=dict)  # reference RTL parameters with a fixed value
    doc: str = ""
    # clocks a row's per-row work may take beyond a few per element (benches' time limits); None: none
    row_work: Callable[[Params], int] | None = None


def __getattr__(name: str):
    """``KINDS`` (kind -> Kind) and ``REFERENCE_PORTS`` (kind -> the ports of its reference block, the
    bind `hwvit bind template` starts from): every streaming kind of the registry (hwvit.blocks)."""
    from hwvit import blocks

    if name == "KINDS":
        return {k.name: k.ports for k in blocks.kinds().values() if k.ports is not None}
    if name == "REFERENCE_PORTS":
        return {k.name: k.reference_ports for k in blocks.kinds().values() if k.ports is not None}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get(kind: str) -> Kind:
    found = __getattr__("KINDS")
    if kind not in found:
        raise KeyError(kind)
    return found[kind]


def input_words(spec: Kind, vset) -> list[tuple[int, ...]]:
    """The input beats of a set: one tuple of field values (in ``spec.inputs`` order) per beat."""
    cols = [np.asarray(vset[f.tensor]).reshape(-1).tolist() for f in spec.inputs.values()]
    return list(zip(*cols))


def expected(spec: Kind, vset) -> np.ndarray:
    return np.asarray(vset[spec.output[1].tensor], dtype=np.int64).reshape(-1)


def row_ends(spec: Kind, vset) -> list[int]:
    """Flat index of the last element of every row (the beats that carry tlast)."""
    total = int(expected(spec, vset).size)
    n = spec.row_len(vset) if spec.row_len else total
    return list(range(n - 1, total, n))


def table_entries(spec: Kind, vset) -> list[tuple[int, ...]]:
    """Rows of (data values in ``spec.table.data`` order) for addresses 0, 1, ..., zero-padded."""
    assert spec.table is not None
    count = spec.table.entries(vset)
    cols = []
    for f in spec.table.data.values():
        values = np.asarray(vset[f.tensor], dtype=np.int64).reshape(-1).tolist()
        cols.append(values + [0] * (count - len(values)))
    return list(zip(*cols))
