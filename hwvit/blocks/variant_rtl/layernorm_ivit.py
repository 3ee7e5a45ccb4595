"""layernorm_ivit: I-ViT's I-LayerNorm as released, with its per-channel QuantAct (``rtl/layernorm_ivit.v``).

Inputs of in_bits (I-ViT's residual stream: 16); the mean rounded half to even, ``var = sum (x - mu)^2``
from the row sums, ten Newton steps from 2^16 for std, ``factor = floor((2^31 - 1) / std)``,
``floor(d factor / 2) + bias``, then ``round_half_even(z M_c / 2^E_c)``, saturated, per channel;
``out_last_o`` on each row's last output. bias, M and E per channel through the table port.
"""

from __future__ import annotations

from hwvit.blocks.variant_rtl import layernorm_ibert as ibert
from hwvit.blocks.variant_rtl import rtl
from hwvit.byo.kinds import Config, Field, Kind, bits_count, bits_fixed, bits_param, channel_table

PORTS = Kind(
    "layernorm_ivit",
    inputs={"x": Field("x", bits_param("in_bits"), True, "input, in_bits signed")},
    output=("y", Field("y", bits_param("out_bits"), True, "normalized value, out_bits signed")),
    config={"c": Config(lambda p: int(p["c"]), bits_count("c"), "row length C")},
    table=channel_table(
        {
            "prm_bias": Field(
                "bias", bits_fixed(41), True, "bias of channel i (floor(beta / gamma / s_y)), |bias| < 2^40"
            ),
            "prm_mult": Field("multiplier", bits_fixed(33), True, "QuantAct mantissa M of channel i, |M| <= 2^31"),
            "prm_shift": Field("shift", bits_fixed(7), False, "QuantAct shift E of channel i"),
        },
    ),
    row_len=lambda v: int(v.params["c"]),
    parameters={"IN_BITS": "in_bits", "OUT_BITS": "out_bits"},
    fixed={"MAX_C": 4096},
    doc="I-ViT's released IntLayerNorm: rounded mean, variance, ten Newton steps, (2^31 - 1) / std, bias; "
    "per-channel QuantAct (docs/variants/ivit.md)",
)

FIELDS = {
    "rtl": rtl("layernorm_ivit", "row_moments", "divu"),
    "ports": PORTS,
    "reference_ports": ibert.FIELDS["reference_ports"],
    "synth": {"MAX_C": 64},
    # by name prefix, before the rest of sim/test_variants*.py: the channel table's ends and ties, the
    # Newton start, the held output (a second each), then the random sets
    "mutate_first": (
        "test_layernorm_ivit_contract_ends_and_ties",
        "test_layernorm_ivit_newton_start_rows",
        "test_layernorm_ivit_output_held_past_the_next_rows_calc",
        "test_variant_random_sets_bit_exact",
    ),
}
