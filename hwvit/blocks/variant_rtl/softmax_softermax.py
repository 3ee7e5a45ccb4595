"""softmax_softermax: Softermax's Verilog twin (``rtl/softmax_softermax.v``).

Rows stream in as for ``rtl/softmax.v`` (the row length sampled with a row's first input,
``out_last_o`` on its last output); the slope K (the manifest's ``mult``) is a configuration port;
the 17-entry pow2 and reciprocal tables are written together through one table port (address
0..16, one data port per table) before the rows.
"""

from __future__ import annotations

from hwvit.blocks.variant_rtl import rtl, stream_ports
from hwvit.byo.kinds import Config, Field, Kind, Table, bits_count, bits_fixed, bits_param

PORTS = Kind(
    "softmax_softermax",
    inputs={"x": Field("x", bits_param("in_bits"), True, "input score, in_bits signed")},
    output=("y", Field("y", bits_param("out_bits"), False, "probability at 2^-out_bits, out_bits unsigned")),
    config={
        "row_len": Config(lambda p: int(p["row_len"]), bits_count("row_len"), "row length N"),
        "mult": Config(lambda p: int(p["mult"]), bits_fixed(31), "K = round(s_in log2(e) 2^16), unsigned"),
    },
    table=Table(
        {
            "tbl_pow2": Field("pow2_table", bits_fixed(17), False, "pow2 knot C[s] = round(2^15 2^(s/16))"),
            "tbl_recip": Field("recip_table", bits_fixed(17), False, "reciprocal knot R[s] = round(2^16 / (1 + s/16))"),
        },
        lambda v: max(len(v["pow2_table"]), len(v["recip_table"])),
        bits_fixed(5),
        "knot s at address s (0..16) of both tables",
    ),
    row_len=lambda v: int(v.params["row_len"]),
    parameters={"IN_BITS": "in_bits", "OUT_BITS": "out_bits"},
    fixed={"MAX_N": 4096},
    doc="Softermax over rows of row_len (hwvit/variants/hwsoftmax.py)",
)

FIELDS = {
    "rtl": rtl("softmax_softermax"),
    "ports": PORTS,
    "reference_ports": stream_ports(PORTS),
    "synth": {"MAX_N": 64},
}
