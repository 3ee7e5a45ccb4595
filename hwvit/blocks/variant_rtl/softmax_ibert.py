"""softmax_ibert's Verilog twin: ``rtl/softmax_ibert.v`` (I-BERT's i-exp, QuantAct(16), 2^32 / sum),
with ``rtl/divu.v`` for R = floor(2^(K+63) / P) and f = floor(2^32 / S) once per row.

The layer's constants (hwvit/variants/ibert.py softmax_constants) are configuration ports read from
the set's manifest; the row length is sampled with each row's first input.
"""

from __future__ import annotations

from hwvit.blocks.variant_rtl import rtl, stream_ports
from hwvit.byo.kinds import Config, Field, Kind, bits_count, bits_fixed, bits_param


def _param(name: str):
    return lambda p: int(p[name])


PORTS = Kind(
    "softmax_ibert",
    inputs={"x": Field("x", bits_param("in_bits"), True, "score, in_bits signed")},
    output=("y", Field("y", bits_param("out_bits"), False, "probability, out_bits unsigned (scale 2^-out_bits)")),
    config={
        "row_len": Config(_param("row_len"), bits_count("row_len"), "row length N"),
        "x0_int": Config(_param("x0_int"), bits_fixed(16), "x0 = floor(-ln2 / s), signed, in [-22713, -1]"),
        "b_int": Config(_param("b_int"), bits_fixed(17), "b = floor(b' / s), unsigned"),
        "c_int": Config(_param("c_int"), bits_fixed(32), "c = floor(c' / s^2), unsigned, >= 1"),
        "exp_num": Config(_param("exp_num"), bits_fixed(53), "P: S_exp = P / 2^K, odd"),
        "exp_den_log2": Config(_param("exp_den_log2"), bits_fixed(7), "K: S_exp = P / 2^K, <= 114"),
        "act_multiplier": Config(_param("act_multiplier"), bits_fixed(32), "M of QuantAct(16), <= 2^31"),
        "act_shift": Config(_param("act_shift"), bits_fixed(8), "E of QuantAct(16), >= 1"),
    },
    row_len=lambda v: int(v.params["row_len"]),
    parameters={"IN_BITS": "in_bits", "OUT_BITS": "out_bits"},
    fixed={"MAX_N": 4096},
    doc="I-BERT integer softmax: i-exp, QuantAct(16), floor(2^32 / sum) (docs/variants/ibert.md)",
)

FIELDS = {
    "rtl": rtl("softmax_ibert", "row_max", "divu"),
    "ports": PORTS,
    "reference_ports": stream_ports(PORTS),
    "synth": {"MAX_N": 64},
}
