"""softmax_round_each's Verilog twin: ``rtl/softmax_round_each.v`` (hwvit's exp table and one
reciprocal per row, each probability rounded half to even on its own), with ``rtl/divu.v`` for
R = floor((Qm 2^24 + floor(S/2)) / S) once per row.

Qm = round(2^16 / s_p) is a configuration port read from the set's manifest (``q_mult``); the exp
table is written through the table port before the rows, one entry per input difference
d = 0 .. 2^in_bits - 1 (the set's table zero-padded: d past it gives E = 0, as in the kernel); the
row length is sampled with each row's first input.
"""

from __future__ import annotations

from hwvit.blocks.variant_rtl import rtl, stream_ports
from hwvit.byo.kinds import Config, Field, Kind, Table, bits_count, bits_fixed, bits_param

PORTS = Kind(
    "softmax_round_each",
    inputs={"x": Field("x", bits_param("in_bits"), True, "score, in_bits signed")},
    output=("y", Field("y", bits_param("out_bits"), False, "probability, out_bits unsigned (scale 2^16 / q_mult)")),
    config={
        "row_len": Config(lambda p: int(p["row_len"]), bits_count("row_len"), "row length N"),
        "q_mult": Config(lambda p: int(p["q_mult"]), bits_fixed(24), "Qm = round(2^16 / s_p), in [1, 2^24 - 1]"),
    },
    table=Table(
        {"tbl_data": Field("exp_table", bits_fixed(24), False, "exp table entry, T[0] = 2^23")},
        lambda v: 1 << int(v.params["in_bits"]),
        bits_param("in_bits"),
        "entry d at address d (d = max - x), 0 past the set's table",
    ),
    row_len=lambda v: int(v.params["row_len"]),
    parameters={"IN_BITS": "in_bits", "OUT_BITS": "out_bits"},
    fixed={"MAX_N": 4096},
    doc="softmax with each probability rounded half to even on its own (hwvit/variants/round_each.py)",
)

FIELDS = {
    "rtl": rtl("softmax_round_each", "row_max", "divu"),
    "ports": PORTS,
    "reference_ports": stream_ports(PORTS),
    "synth": {"MAX_N": 64},
    # by name prefix, before the rest of sim/test_variants*.py: the directed rounding rows, each
    # difference once, the random sets with resets
    "mutate_first": (
        "test_softmax_round_each_rounding_points",
        "test_softmax_variant_difference_sweep",
        "test_variant_random_sets_bit_exact",
    ),
}
