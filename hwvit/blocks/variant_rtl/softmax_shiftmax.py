"""softmax_shiftmax's Verilog twin: ``rtl/softmax_shiftmax.v`` (I-ViT's Shiftmax as released: ShiftExp
with the exponent clamped at 15, the row sum clamped to 2^31 - 1, IntDiv), with ``rtl/divu.v`` for
factor = floor((2^31 - 1) / min(S, 2^31 - 1)) once per row.

The same streams and ports as softmax_shiftmax_exact's block; I_0 = ceil(1 / s_in) (I-ViT's rounding)
is a configuration port read from the set's manifest; the row length is sampled with each row's first
input.
"""

from __future__ import annotations

from dataclasses import replace

from hwvit.blocks.variant_rtl import rtl
from hwvit.blocks.variant_rtl import softmax_shiftmax_exact as exact
from hwvit.byo.kinds import Config, bits_fixed

PORTS = replace(
    exact.PORTS,
    name="softmax_shiftmax",
    config={
        **exact.PORTS.config,
        "i0": Config(lambda p: int(p["i0"]), bits_fixed(17), "I_0 = ceil(1 / s_in), in [1, 2^16]"),
    },
    doc="I-ViT's released Shiftmax: ShiftExp of x - max clamped at 15, sum clamped to 2^31 - 1, IntDiv "
    "(docs/variants/ivit.md)",
)

FIELDS = {
    "rtl": rtl("softmax_shiftmax", "row_max", "divu"),
    "ports": PORTS,
    "reference_ports": exact.FIELDS["reference_ports"],
    "synth": {"MAX_N": 64},
    # by name prefix, before the rest of sim/test_variants*.py: each difference once (both clamps at
    # the wide scale), the random sets with resets
    "mutate_first": (
        "test_softmax_variant_wide_difference_sweep",
        "test_softmax_variant_difference_sweep",
        "test_variant_random_sets_bit_exact",
    ),
}
