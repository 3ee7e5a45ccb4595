"""softmax_ita: ITA's streaming integer softmax as Verilog (``rtl/softmax_ita.v``, ``rtl/divu.v``).

Rows stream in as for ``rtl/softmax.v`` (the row length sampled with a row's first input,
``out_last_o`` on its last output); the slope K (the manifest's ``mult``) is a configuration port.
"""

from __future__ import annotations

from hwvit.blocks.variant_rtl import rtl, stream_ports
from hwvit.byo.kinds import Config, Field, Kind, bits_count, bits_fixed, bits_param

PORTS = Kind(
    "softmax_ita",
    inputs={"x": Field("x", bits_param("in_bits"), True, "input score, in_bits signed")},
    output=("y", Field("y", bits_param("out_bits"), False, "probability at 1/(2^out_bits - 1), out_bits unsigned")),
    config={
        "row_len": Config(lambda p: int(p["row_len"]), bits_count("row_len"), "row length N"),
        "mult": Config(lambda p: int(p["mult"]), bits_fixed(31), "K = round(s_in log2(e) 2^16), unsigned"),
    },
    row_len=lambda v: int(v.params["row_len"]),
    parameters={"IN_BITS": "in_bits", "OUT_BITS": "out_bits"},
    fixed={"MAX_N": 4096},
    doc="ITA's streaming integer softmax over rows of row_len (hwvit/variants/hwsoftmax.py)",
)

FIELDS = {
    "rtl": rtl("softmax_ita", "row_max", "divu"),
    "ports": PORTS,
    "reference_ports": stream_ports(PORTS),
    "synth": {"MAX_N": 64},
}
