"""The logical interface of each streaming block kind, as a bind file names it.

A kind has one input stream (each beat carries one value of every input field), one output stream
(one value per beat), steady configuration ports, and optionally a table written one entry per
clock before streaming. Widths follow the vector-set contract (hwvit.vectors.schema.CONTRACT) and
the reference blocks in rtl/ (docs/rtl.md). Everything here is a function of a set's parameters,
so the bind checker and the cocotb testbench (sim/byotb.py) compute the same widths and values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Params = dict[str, Any]
Bits = Callable[[Params], int]


def _fixed(n: int) -> Bits:
    return lambda p: n


def _param(name: str) -> Bits:
    return lambda p: int(p[name])


def _count_bits(name: str) -> Bits:
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


KINDS: dict[str, Kind] = {
    "requant": Kind(
        "requant",
        inputs={
            "acc": Field("acc", _fixed(32), True, "int32 accumulator"),
            "mult": Field("multiplier", _fixed(31), False, "multiplier M, 0..2^31-1"),
            "shift": Field("shift", _fixed(6), False, "right shift s, 0..62"),
        },
        output=("y", Field("y", _param("out_bits"), True, "requantized value, out_bits signed")),
        parameters={"OUT_BITS": "out_bits"},
        fixed={"ACC_BITS": 32},
        doc="y = sat((acc * M + 2^(s-1)) >>> s); multiplier and shift travel with every beat",
    ),
    "residual_add": Kind(
        "residual_add",
        inputs={"a": Field("a", _fixed(8), True, "int8 operand a"), "b": Field("b", _fixed(8), True, "int8 operand b")},
        output=("y", Field("y", _param("out_bits"), True, "sum at the output scale, out_bits signed")),
        config={
            "mult_a": Config(lambda p: int(p["mult_a"]), _fixed(31), "multiplier of a"),
            "mult_b": Config(lambda p: int(p["mult_b"]), _fixed(31), "multiplier of b"),
            "shift": Config(lambda p: int(p["shift"]), _fixed(6), "common right shift"),
        },
        parameters={"OUT_BITS": "out_bits"},
        fixed={"IN_BITS": 8},
        doc="y = sat((a * Ma + b * Mb + 2^(s-1)) >>> s)",
    ),
    "gelu": Kind(
        "gelu",
        inputs={"x": Field("x", _param("in_bits"), True, "input, in_bits signed")},
        output=("y", Field("y", _param("out_bits"), True, "T[x + 2^(in_bits-1)], out_bits signed")),
        table=Table(
            {"tbl_data": Field("table", _param("out_bits"), True, "entry i of the table")},
            lambda v: 1 << int(v.params["in_bits"]),
            _param("in_bits"),
            "entry i at address i; x reads entry x + 2^(in_bits-1)",
        ),
        parameters={"IN_BITS": "in_bits", "OUT_BITS": "out_bits"},
        doc="y = T[x + 2^(in_bits-1)], a loadable table",
    ),
    "softmax": Kind(
        "softmax",
        inputs={"x": Field("x", _param("in_bits"), True, "input, in_bits signed")},
        output=("p", Field("p", _param("out_bits"), False, "probability, out_bits unsigned")),
        config={"row_len": Config(lambda p: int(p["row_len"]), _count_bits("row_len"), "row length N")},
        table=Table(
            {"tbl_data": Field("exp_table", _fixed(24), False, "exp table entry, T[0] = 2^23")},
            lambda v: int(v.params["entries"]),
            lambda p: max(1, (int(p["entries"]) - 1).bit_length()),
            "entry d at address d (d = max - x); the block gives E = 0 for d >= entries",
        ),
        row_len=lambda v: int(v.params["row_len"]),
        parameters={"IN_BITS": "in_bits", "OUT_BITS": "out_bits", "ENTRIES": "entries"},
        fixed={"MAX_N": 256},
        doc="integer softmax over rows of row_len (docs/arithmetic.md)",
    ),
    "layernorm": Kind(
        "layernorm",
        inputs={"x": Field("x", _fixed(8), True, "int8 input")},
        output=("y", Field("y", _param("out_bits"), True, "normalized value, out_bits signed")),
        config={
            "c": Config(lambda p: int(p["c"]), _count_bits("c"), "row length C"),
            "eps": Config(lambda p: int(p["eps_int"]), _fixed(62), "eps_int"),
            "mult": Config(lambda p: int(p["multiplier"]), _fixed(31), "requant multiplier M"),
            "shift": Config(lambda p: int(p["shift"]), _fixed(6), "requant shift s"),
        },
        table=Table(
            {
                "prm_gamma": Field("gamma", _fixed(15), True, "gamma G of channel i"),
                "prm_beta": Field("beta", _fixed(31), True, "beta B of channel i"),
            },
            lambda v: int(v.params["c"]),
            lambda p: max(1, (int(p["c"]) - 1).bit_length()),
            "channel i at address i",
        ),
        row_len=lambda v: int(v.params["c"]),
        parameters={"OUT_BITS": "out_bits"},
        fixed={"MAX_C": 1024},
        doc="integer LayerNorm over rows of C channels (docs/arithmetic.md)",
    ),
}

# The ports of the reference blocks in rtl/: the bind that `hwvit bind template` starts from.
REFERENCE_PORTS: dict[str, dict[str, Any]] = {
    "requant": {"fields": {"acc": "in_acc_i", "mult": "in_mult_i", "shift": "in_shift_i"}, "out": "out_data_o"},
    "residual_add": {
        "fields": {"a": "in_a_i", "b": "in_b_i"},
        "out": "out_data_o",
        "ports": {"mult_a": "cfg_mult_a_i", "mult_b": "cfg_mult_b_i", "shift": "cfg_shift_i"},
    },
    "gelu": {
        "fields": {"x": "in_data_i"},
        "out": "out_data_o",
        "ports": {"tbl_we": "tbl_we_i", "tbl_addr": "tbl_addr_i", "tbl_data": "tbl_data_i"},
    },
    "softmax": {
        "fields": {"x": "in_data_i"},
        "out": "out_data_o",
        "last": "out_last_o",
        "ports": {"row_len": "row_len_i", "tbl_we": "tbl_we_i", "tbl_addr": "tbl_addr_i", "tbl_data": "tbl_data_i"},
    },
    "layernorm": {
        "fields": {"x": "in_data_i"},
        "out": "out_data_o",
        "ports": {
            "c": "cfg_c_i",
            "eps": "cfg_eps_i",
            "mult": "cfg_mult_i",
            "shift": "cfg_shift_i",
            "tbl_we": "prm_we_i",
            "tbl_addr": "prm_addr_i",
            "prm_gamma": "prm_gamma_i",
            "prm_beta": "prm_beta_i",
        },
    },
}


def get(kind: str) -> Kind:
    if kind not in KINDS:
        raise KeyError(kind)
    return KINDS[kind]


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
