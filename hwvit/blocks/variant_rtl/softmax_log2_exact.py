"""softmax_log2_exact's Verilog twin: ``rtl/softmax_log2_exact.v`` (hwvit's exact log-int-softmax: I-BERT's i-exp at
the working scale, the row sum, log2 codes by integer thresholds on S^2, y = 2^(M - code)).

The layer's constants (hwvit/variants/hwsoftmax.py _log2_prepare) are configuration ports read from
the set's manifest; the row length is sampled with each row's first input.
"""

from __future__ import annotations

from hwvit.blocks.variant_rtl import rtl, stream_ports
from hwvit.byo.kinds import Config, Field, Kind, bits_count, bits_fixed, bits_param


def _param(name: str):
    return lambda p: int(p[name])


PORTS = Kind(
    "softmax_log2_exact",
    inputs={"x": Field("x", bits_param("in_bits"), True, "score, in_bits signed")},
    output=("y", Field("y", bits_param("out_bits"), False, "probability 2^(M - code), out_bits unsigned")),
    config={
        "row_len": Config(_param("row_len"), bits_count("row_len"), "row length N"),
        "in_shift": Config(_param("in_shift"), bits_fixed(5), "k: scores shifted left by k, <= 19"),
        "q_ln2": Config(_param("q_ln2"), bits_fixed(24), "q_ln2 = floor(ln2 / s), >= 5"),
        "q_b": Config(_param("q_b"), bits_fixed(25), "q_b = floor(1.353 / s)"),
        "q_c": Config(_param("q_c"), bits_fixed(48), "q_c = floor(0.344 / (0.3585 s^2))"),
        "exp_shift": Config(_param("exp_shift"), bits_fixed(6), "n, signed, in [-31, 11]"),
    },
    row_len=lambda v: int(v.params["row_len"]),
    parameters={"IN_BITS": "in_bits", "OUT_BITS": "out_bits"},
    fixed={"MAX_N": 4096},
    doc="FQ-ViT log-int-softmax: i-exp, sum, log2 codes, 2^(M - code) (docs/variants/hwsoftmax.md)",
)

FIELDS = {
    "rtl": rtl("softmax_log2_exact", "row_max"),
    "ports": PORTS,
    "reference_ports": stream_ports(PORTS),
    "synth": {"MAX_N": 64},
}
