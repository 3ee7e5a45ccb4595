"""gelu: y = T[x + 2^(in_bits-1)], a loadable table of 2^in_bits entries (``rtl/gelu.v``).

The table holds GELU at every input code (``hwvit.quant.params.gelu_table``); the block is its
lookup, so any element-wise function of an in_bits input has the same block.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hwvit import ops
from hwvit.blocks._common import fill, int_option, rails
from hwvit.blocks.base import BlockKind
from hwvit.byo.kinds import Field, Kind, Table, bits_param
from hwvit.formats import OUT_BITS
from hwvit.ops.reference import gelu_ref
from hwvit.record import BlockRecord, Spec, make_record

PARAMS = {"in_bits": (int, (2, 16)), "out_bits": (int, OUT_BITS)}


def _pow2_in_bits(params: dict[str, Any]) -> int:
    return 1 << params["in_bits"]


CONTRACT = {
    "x": Spec("input", ("n",), "in_bits", True),
    "table": Spec("parameter", (_pow2_in_bits,), "out_bits", True),
    "y": Spec("output", ("n",), "out_bits", True),
}


def traced(path: str, x, table, y, in_bits: int, out_bits: int, scales: dict, variant: str = "lut") -> BlockRecord:
    """The record of one GELU of the integer model (flattened); a variant other than hwvit's
    table is recorded as the set's ``variant`` parameter (its table made by that variant)."""
    params = {"in_bits": in_bits, "out_bits": out_bits}
    if variant != "lut":
        params["variant"] = variant
    return make_record("gelu", path, params, scales, x=x.reshape(-1), table=table, y=y.reshape(-1))


def random_set(rng: np.random.Generator, cases: int, opts: dict[str, Any]) -> BlockRecord:
    from hwvit import ops
    from hwvit.quant.params import gelu_table

    in_bits, out_bits = int_option(opts, "in_bits", 2, 16), int_option(opts, "out_bits", 2, 16)
    half = 1 << (in_bits - 1)
    s_in = opts["scale_in"] or 6.0 / half  # inputs cover [-6, 6)
    s_out = opts["scale_out"] or 5.0 / ((1 << (out_bits - 1)) - 1)  # GELU(x > 5) saturates
    params: dict[str, Any] = {"in_bits": in_bits, "out_bits": out_bits}
    variant = opts.get("variant")
    if opts["table"] is not None:
        if variant is not None:
            raise ValueError("gelu: give a table or a variant, not both")
        table = np.asarray(opts["table"], dtype=np.int64).reshape(-1)
        s_in, s_out = opts["scale_in"], opts["scale_out"]
    elif variant not in (None, "lut"):  # another GELU arithmetic: its value at every input code
        from hwvit.variants.base import GeluContext

        v = _table_variant(str(variant))
        ctx = GeluContext(s_in, in_bits, s_out, out_bits)
        table = np.asarray(v.kernel(np.arange(-half, half, dtype=np.int64), v.prepare(ctx)), dtype=np.int64)
        params["variant"] = str(variant)
    else:
        table = gelu_table(s_in, s_out, in_bits, out_bits)
    # Every table entry once (in order, then the sweep shuffled), then random inputs.
    sweep = np.arange(-half, half)
    x = fill(
        np.concatenate([sweep[[0, -1, half, half - 1]], rng.permutation(sweep)]),
        cases,
        lambda c: rng.integers(-half, half, c),
    )
    y = ops.gelu(x, table, in_bits)
    return make_record(
        "gelu",
        "random",
        params,
        {"x": s_in, "table": s_out, "y": s_out},
        x=x,
        table=table,
        y=y,
    )


def _table_variant(name: str):
    """A GELU variant that is a function of each code, so a table; ValueError for one that works on
    rows (its sets are kind ``gelu_<name>``, hwvit.blocks.variant_kinds)."""
    from hwvit import variants

    v = variants.get("gelu", name)
    if v.row:
        raise ValueError(f"gelu={name} works on rows, not on each code (no table): its sets are kind gelu_{name}")
    return v


def count_bins(params, inputs, outputs, limits) -> dict[str, int]:
    x = inputs["x"].reshape(-1)
    half = 1 << (int(params["in_bits"]) - 1)
    high, _ = rails(outputs.get("y"), int(params["out_bits"]))
    return {
        "sat_high": high,
        "x_min": int(np.count_nonzero(x == -half)),  # the table's first and last entries
        "x_max": int(np.count_nonzero(x == half - 1)),
    }


def verify(vset) -> str | None:
    """A set of another GELU arithmetic (``variant``): its table made again by that variant
    (hwvit.variants) from the set's scales and widths."""
    name = vset.params.get("variant")
    if name is None or ":" in name:  # hwvit's table, or a team's function (checked where it runs)
        return None
    from hwvit.variants.base import GeluContext

    in_bits, out_bits = int(vset.params["in_bits"]), int(vset.params["out_bits"])
    s_in, s_out = vset.tensors["x"].scale, vset.tensors["y"].scale
    if s_in is None or s_out is None:
        return f"gelu ({name}): the set records no x or y scale to make the table from"
    v = _table_variant(name)
    half = 1 << (in_bits - 1)
    table = v.kernel(np.arange(-half, half, dtype=np.int64), v.prepare(GeluContext(s_in, in_bits, s_out, out_bits)))
    bad = np.flatnonzero(table != np.asarray(vset["table"]))
    if bad.size:
        i = int(bad[0])
        return f"gelu ({name}): table[{i}] is {int(vset['table'][i])}, the {name} kernel gives {int(table[i])}"
    return None


def operands(params: dict[str, Any], t: dict[str, np.ndarray], nd_index: list[int]) -> str:
    """y = table[x + 2^(in_bits-1)] (hwvit.ops.gelu)."""
    i = int(nd_index[0])
    x = int(t["x"][i])
    k = x + (1 << (int(params["in_bits"]) - 1))
    return f"x[{i}] {x} -> table[{k}] {int(t['table'][k])}"


PORTS = Kind(
    "gelu",
    inputs={"x": Field("x", bits_param("in_bits"), True, "input, in_bits signed")},
    output=("y", Field("y", bits_param("out_bits"), True, "T[x + 2^(in_bits-1)], out_bits signed")),
    table=Table(
        {"tbl_data": Field("table", bits_param("out_bits"), True, "entry i of the table")},
        lambda v: 1 << int(v.params["in_bits"]),
        bits_param("in_bits"),
        "entry i at address i; x reads entry x + 2^(in_bits-1)",
    ),
    parameters={"IN_BITS": "in_bits", "OUT_BITS": "out_bits"},
    doc="y = T[x + 2^(in_bits-1)], a loadable table",
)

KIND = BlockKind(
    name="gelu",
    doc=PORTS.doc,
    seed=2,
    kernel=ops.gelu,
    reference=gelu_ref,
    params=PARAMS,
    contract=CONTRACT,
    random=random_set,
    defaults={"in_bits": 8, "out_bits": 8, "table": None, "scale_in": None, "scale_out": None, "variant": None},
    # GELU(x) >= -0.17: its table never reaches the bottom rail, so no sat_low bin.
    bins=("sat_high", "x_min", "x_max", "out_stall"),
    count_bins=count_bins,
    reset_states=("empty", "output", "stalled"),
    rtl=("rtl/gelu.v",),
    operands=operands,
    traced=traced,
    testbench="sim/test_gelu.py",
    lut="table",
    verify=verify,
    family="gelu",
    shared=("table",),
    ports=PORTS,
    reference_ports={
        "fields": {"x": "in_data_i"},
        "out": "out_data_o",
        "ports": {"tbl_we": "tbl_we_i", "tbl_addr": "tbl_addr_i", "tbl_data": "tbl_data_i"},
    },
    synth={},
)
