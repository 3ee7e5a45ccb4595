"""softmax_shiftmax_exact's Verilog twin: ``rtl/softmax_shiftmax_exact.v`` (hwvit's corrected Shiftmax:
ShiftExp with 15 fraction bits, the row sum, IntDiv),
with ``rtl/divu.v`` for F = floor(2^62 / S) once per row.

I_0 = floor(1 / s_in) is a configuration port read from the set's manifest; the row length is
sampled with each row's first input.
"""

from __future__ import annotations

from hwvit.blocks.variant_rtl import rtl, stream_ports
from hwvit.byo.kinds import Config, Field, Kind, bits_count, bits_fixed, bits_param

PORTS = Kind(
    "softmax_shiftmax_exact",
    inputs={"x": Field("x", bits_param("in_bits"), True, "score, in_bits signed")},
    output=("y", Field("y", bits_param("out_bits"), False, "probability, out_bits unsigned (scale 2^-(out_bits-1))")),
    config={
        "row_len": Config(lambda p: int(p["row_len"]), bits_count("row_len"), "row length N"),
        "i0": Config(lambda p: int(p["i0"]), bits_fixed(17), "I_0 = floor(1 / s_in), in [1, 2^16]"),
    },
    row_len=lambda v: int(v.params["row_len"]),
    parameters={"IN_BITS": "in_bits", "OUT_BITS": "out_bits"},
    fixed={"MAX_N": 4096},
    doc="I-ViT Shiftmax: ShiftExp of x - max, sum, IntDiv (docs/variants/ivit.md)",
)

FIELDS = {
    "rtl": rtl("softmax_shiftmax_exact", "row_max", "divu"),
    "ports": PORTS,
    "reference_ports": stream_ports(PORTS),
    "synth": {"MAX_N": 64},
}
