"""softmax: integer softmax over rows of row_len, an exp table and a reciprocal (``rtl/softmax.v``).

p = round(Q * E(max - x) / sum E) with E from a 24-bit table (T[0] = 2^23) and the division by
``rtl/divu.v``; docs/arithmetic.md gives every width.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hwvit import ops
from hwvit.blocks._common import SIZE, int_option, row_text, spec
from hwvit.blocks.base import BlockKind
from hwvit.blocks.variant_rtl import rtl
from hwvit.byo.kinds import Config, Field, Kind, Table, bits_count, bits_fixed, bits_param
from hwvit.formats import EXP, OUT_BITS, signed
from hwvit.ops.reference import softmax_ref
from hwvit.record import BlockRecord, Spec, make_record

PARAMS = {
    "in_bits": (int, (2, 16)),
    "out_bits": (int, OUT_BITS),
    "entries": (int, (1, 1 << 16)),
    "rows": (int, SIZE),
    "row_len": (int, (1, 4096)),
}
CONTRACT = {
    "x": Spec("input", ("rows", "row_len"), "in_bits", True),
    "exp_table": spec("parameter", ("entries",), EXP),  # T[0] = 2^23 (docs/arithmetic.md)
    "p": Spec("output", ("rows", "row_len"), "out_bits", False),
}


def check_params(params: dict[str, Any]) -> str | None:
    if params["entries"] > 1 << params["in_bits"]:
        return f"softmax entries={params['entries']} > 2^in_bits"
    return None


def traced(path: str, rows, exp_table, p, in_bits: int, out_bits: int, scales: dict) -> BlockRecord:
    """The record of one softmax of the integer model (2-D rows in and out)."""
    params = {
        "in_bits": in_bits,
        "out_bits": out_bits,
        "entries": len(exp_table),
        "rows": rows.shape[0],
        "row_len": rows.shape[1],
    }
    return make_record("softmax", path, params, scales, x=rows, exp_table=exp_table, p=p)


def operands(params: dict[str, Any], t: dict[str, np.ndarray], nd_index: list[int]) -> str:
    i = int(nd_index[0])
    x = t["x"][i]
    return f"softmax row {i} x {row_text(x)}, row max {int(x.max())}"


def random_set(rng: np.random.Generator, cases: int, opts: dict[str, Any]) -> BlockRecord:
    from hwvit import ops
    from hwvit.ops.softmax import EXP_ONE
    from hwvit.quant.params import exp_table

    in_bits, out_bits = int_option(opts, "in_bits", 2, 16), int_option(opts, "out_bits", 2, 16)
    row_len = int_option(opts, "row_len", 1, 4096)
    lo, hi = signed(in_bits).range
    if opts["exp_table"] is not None:
        table = np.asarray(opts["exp_table"], dtype=np.int64).reshape(-1)
        s_in = opts["scale_in"]
    else:
        entries = opts["entries"] if opts["entries"] is not None else min(1 << in_bits, 256)
        entries = int_option({"entries": entries}, "entries", 1, 1 << in_bits)
        s_in = opts["scale_in"] or 16.0 / (1 << in_bits)  # exp(-d s_in) reaches 0 within 8 bits
        table = exp_table(s_in, entries)
    entries = len(table)

    def row(i: int) -> np.ndarray:
        pattern = i % 10
        if pattern == 0:  # uniform over the whole range
            return rng.integers(lo, hi, row_len, endpoint=True)
        if pattern == 1:  # all equal: p = Q / N everywhere
            return np.full(row_len, rng.integers(lo, hi, endpoint=True))
        if pattern == 2:  # one hot: a max among minima, d = 2^in_bits - 1 (beyond a short table)
            r = np.full(row_len, lo)
            r[rng.integers(row_len)] = hi
            return r
        if pattern == 3:
            return np.full(row_len, hi)
        if pattern == 4:  # narrow spread: every d near 0
            return np.clip(hi - 3 - rng.integers(0, 8, row_len), lo, hi)
        if pattern == 5:  # two levels: ties at the max
            return np.where(rng.random(row_len) < 0.5, hi, hi - 1)
        if pattern == 6:  # d around the table end L (E drops to 0 beyond it)
            d = np.clip(entries - 2 + rng.integers(0, 4, row_len), 0, hi - lo)
            d[0] = 0
            return hi - d
        if pattern == 7:  # attention-like: a few large scores over a bell
            r = np.clip(np.round(rng.normal(0, (hi - lo) / 8, row_len)), lo, hi).astype(np.int64)
            r[rng.integers(row_len, size=max(1, row_len // 16))] = hi - rng.integers(0, 4)
            return r
        if pattern == 8:  # d sweeps the table: every entry used
            return hi - (np.arange(row_len) % min(entries + 1, hi - lo + 1))
        return rng.integers(lo, lo + 16, row_len, endpoint=True)  # low values only

    x = np.stack([row(i) for i in range(cases)])
    p = ops.softmax(x, table, out_bits, in_bits)
    params = {"in_bits": in_bits, "out_bits": out_bits, "entries": entries, "rows": int(cases), "row_len": row_len}
    return make_record(
        "softmax",
        "random",
        params,
        {"x": s_in, "exp_table": 1.0 / EXP_ONE, "p": 1.0 / ((1 << out_bits) - 1)},
        x=x,
        exp_table=table,
        p=p,
    )


def count_bins(params, inputs, outputs, limits) -> dict[str, int]:
    x = inputs["x"]
    rows, n = x.shape
    top = x.max(axis=1)
    equal = np.all(x == x[:, :1], axis=1)
    # One hot: a single element at the row's max, every other element equal (and below it).
    single = np.count_nonzero(x == top[:, None], axis=1) == 1
    rest = np.where(x == top[:, None], x.min(axis=1)[:, None], x)
    flat_rest = np.all(rest == rest.min(axis=1)[:, None], axis=1)
    p = outputs.get("p")
    full = (1 << int(params["out_bits"])) - 1
    return {
        "all_equal": int(np.count_nonzero(equal)),
        "one_hot": int(np.count_nonzero(single & flat_rest & (n > 1))),
        "p_full": 0 if p is None else int(np.count_nonzero(p == full)),
        "row_len_1": rows if n == 1 else 0,
        "row_len_max": rows if n == int(limits.get("MAX_N", -1)) else 0,
    }


PORTS = Kind(
    "softmax",
    inputs={"x": Field("x", bits_param("in_bits"), True, "input, in_bits signed")},
    output=("p", Field("p", bits_param("out_bits"), False, "probability, out_bits unsigned")),
    config={"row_len": Config(lambda p: int(p["row_len"]), bits_count("row_len"), "row length N")},
    table=Table(
        {"tbl_data": Field("exp_table", bits_fixed(24), False, "exp table entry, T[0] = 2^23")},
        lambda v: int(v.params["entries"]),
        lambda p: max(1, (int(p["entries"]) - 1).bit_length()),
        "entry d at address d (d = max - x); the block gives E = 0 for d >= entries",
    ),
    row_len=lambda v: int(v.params["row_len"]),
    parameters={"IN_BITS": "in_bits", "OUT_BITS": "out_bits", "ENTRIES": "entries"},
    fixed={"MAX_N": 256},
    doc="integer softmax over rows of row_len (docs/arithmetic.md)",
)

KIND = BlockKind(
    name="softmax",
    family="softmax",
    doc=PORTS.doc,
    seed=3,
    kernel=ops.softmax,
    reference=softmax_ref,
    params=PARAMS,
    contract=CONTRACT,
    random=random_set,
    defaults={"row_len": 64, "in_bits": 8, "out_bits": 8, "entries": None, "exp_table": None, "scale_in": None},
    bins=("all_equal", "one_hot", "p_full", "row_len_1", "row_len_max", "out_stall"),
    count_bins=count_bins,
    reset_states=("load", "sum", "div", "out", "out_load"),
    rtl=rtl("softmax", "row_max", "divu"),
    operands=operands,
    traced=traced,
    testbench="sim/test_softmax.py",
    lut="exp_table",
    check_params=check_params,
    rows="rows",
    shared=("exp_table",),
    ports=PORTS,
    reference_ports={
        "fields": {"x": "in_data_i"},
        "out": "out_data_o",
        "last": "out_last_o",
        "ports": {"row_len": "row_len_i", "tbl_we": "tbl_we_i", "tbl_addr": "tbl_addr_i", "tbl_data": "tbl_data_i"},
    },
    synth={"MAX_N": 64},
    mutate_first=("test_reciprocal_rounding_rows", "test_reset_midstream", "test_row_len_clamped"),  # each a few s
)
