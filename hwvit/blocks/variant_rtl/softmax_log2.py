"""softmax_log2's Verilog twin: ``rtl/softmax_log2.v`` (FQ-ViT's released log-int-softmax: I-BERT's i-exp
at s_in, the row sum, v = round(S / E) as the float64 division rounds it, 4-bit log2 codes, y = 2^(M - code)),
one division per element in the output stage.

I-BERT's constants at s_in (hwvit/variants/fqvit_released.py _lis_prepare) are configuration ports read
from the set's manifest (x0 as its magnitude -x0); the row length is sampled with each row's first input.
"""

from __future__ import annotations

from hwvit.blocks.variant_rtl import rtl, stream_ports
from hwvit.byo.kinds import Config, Field, Kind, bits_count, bits_fixed, bits_param

PORTS = Kind(
    "softmax_log2",
    inputs={"x": Field("x", bits_param("in_bits"), True, "score, in_bits signed")},
    output=("y", Field("y", bits_param("out_bits"), False, "probability 2^(M - code), out_bits unsigned")),
    config={
        "row_len": Config(lambda p: int(p["row_len"]), bits_count("row_len"), "row length N"),
        "x0_mag": Config(lambda p: -int(p["x0_int"]), bits_fixed(9), "X = -x0 = ceil(0.6931 / s_in), 1..355"),
        "b": Config(lambda p: int(p["b_int"]), bits_fixed(11), "b = floor(2.7073 / s_in), < 2^11"),
        "c": Config(
            lambda p: int(p["c_int"]),
            bits_fixed(20),
            "c = floor(2.7921 / s_in^2): c - rem (b - rem) in [1, c] for rem < X",
        ),
    },
    row_len=lambda v: int(v.params["row_len"]),
    parameters={"IN_BITS": "in_bits", "OUT_BITS": "out_bits"},
    fixed={"MAX_N": 4096},
    doc="FQ-ViT's released log-int-softmax: i-exp, round(S / E) as float64 rounds it, 4-bit log2 codes, "
    "2^(M - code) (docs/variants/hwsoftmax.md)",
)

FIELDS = {
    "rtl": rtl("softmax_log2", "row_max"),
    "ports": PORTS,
    "reference_ports": stream_ports(PORTS),
    "synth": {"MAX_N": 64},
    # by name prefix, before the rest of sim/test_variants*.py: each difference once, the random sets
    "mutate_first": (
        "test_softmax_variant_wide_difference_sweep",
        "test_softmax_variant_difference_sweep",
        "test_variant_random_sets_bit_exact",
    ),
}
