"""gelu_shiftgelu's Verilog twin: ``rtl/gelu_shiftgelu.v`` (I-ViT's released ShiftGELU and its QuantAct: the
sigmoid on the row's maximum, ``e1 = ShiftExp(x - max, 23)``, ``e2 = ShiftExp(-max, 23)`` once per row,
``floor((2^31 - 1) / min(e1 + e2, 2^31 - 1))`` per element on an eight-stage pipelined divider, then
``round_half_even(x sig M / 2^E)``, saturated).

A row is a token's hidden features, streamed as a softmax row is (``out_last_o`` with each row's last
output); I_0 of ``s_in * 1.702`` and QuantAct's ``(M, E)`` are configuration ports read from the set's
manifest; the row length is sampled with each row's first input.
"""

from __future__ import annotations

from hwvit.blocks.variant_rtl import rtl, stream_ports
from hwvit.byo.kinds import Config, Field, Kind, bits_count, bits_fixed, bits_param

PORTS = Kind(
    "gelu_shiftgelu",
    inputs={"x": Field("x", bits_param("in_bits"), True, "input, in_bits signed")},
    output=("y", Field("y", bits_param("out_bits"), True, "GELU(x) at s_out, out_bits signed")),
    config={
        "row_len": Config(lambda p: int(p["n"]), bits_count("n"), "row length N (the set's n)"),
        "i0": Config(lambda p: int(p["i0"]), bits_fixed(17), "I_0 = ceil(1 / (1.702 s_in)), in [1, 2^16]"),
        "multiplier": Config(lambda p: int(p["multiplier"]), bits_fixed(32), "QuantAct's M, in [2^30, 2^31]"),
        "shift": Config(lambda p: int(p["shift"]), bits_fixed(7), "QuantAct's E, in [0, 127]"),
    },
    row_len=lambda v: int(v.params["n"]),
    parameters={"IN_BITS": "in_bits", "OUT_BITS": "out_bits"},
    fixed={"MAX_N": 4096},
    doc="I-ViT's released ShiftGELU: the sigmoid on the row's maximum, a division per element, QuantAct "
    "(docs/variants/ivit.md)",
)

FIELDS = {
    "rtl": rtl("gelu_shiftgelu", "row_max", "round_sat"),
    "ports": PORTS,
    "reference_ports": stream_ports(PORTS),
    "synth": {"MAX_N": 64},
    # by name prefix, before the rest of sim/test_variants*.py: every row maximum, then each scale (I_0
    # from 1 to 2^16, the sum's clamp), then the random sets with resets
    "mutate_first": (
        "test_gelu_shiftgelu_every_max_bit_exact",
        "test_gelu_shiftgelu_dividend_low_bytes_bit_exact",
        "test_gelu_shiftgelu_scales_bit_exact",
        "test_gelu_shiftgelu_sum_clamp_bit_exact",
        "test_variant_random_sets_bit_exact",
    ),
}
