"""layernorm_ibert: I-BERT's IntLayerNorm with its per-channel requant (``rtl/layernorm_ibert.v``).

The mean rounded half to even (one small division per row), ``var = sum (x - mean)^2`` from the
row sums, ``std = floor(sqrt(var))`` (what Algorithm 4's Newton iteration returns),
``factor = floor(2^31 / std)`` (one division per row), ``floor(y factor / 2) + bias_int``, then
I-BERT's requant (``round_half_even(z M_c / 2^E_c)``, saturated) per channel; ``out_last_o`` on each
row's last output. bias_int, M and E per channel through the table port; the block takes
``ln_shift = 0`` (every int8 set of C <= 4096 has it), ``|bias_int| < 2^47``, ``E`` in 0..127.
"""

from __future__ import annotations

from hwvit.blocks.variant_rtl import channel_ports, rtl
from hwvit.byo.kinds import Config, Field, Kind, bits_count, bits_fixed, bits_param, channel_table

RTL = rtl("layernorm_ibert", "row_moments", "row_meanvar", "inv_sqrt", "isqrt", "divu")

PORTS = Kind(
    "layernorm_ibert",
    inputs={"x": Field("x", bits_fixed(8), True, "int8 input")},
    output=("y", Field("y", bits_param("out_bits"), True, "normalized value, out_bits signed")),
    config={"c": Config(lambda p: int(p["c"]), bits_count("c"), "row length C")},
    table=channel_table(
        {
            "prm_bias": Field("bias_int", bits_fixed(48), True, "bias_int of channel i (beta / gamma / S_n)"),
            "prm_mult": Field("multiplier", bits_fixed(33), True, "requant mantissa M of channel i, |M| <= 2^31"),
            "prm_shift": Field("shift", bits_fixed(7), False, "requant shift E of channel i, 0..127"),
        },
    ),
    row_len=lambda v: int(v.params["c"]),
    parameters={"OUT_BITS": "out_bits"},
    fixed={"MAX_C": 4096},
    doc="I-BERT IntLayerNorm: rounded mean, variance, integer sqrt, 2^31 / std, bias_int; per-channel I-BERT requant",
)

FIELDS = {
    "rtl": RTL,
    "ports": PORTS,
    "reference_ports": channel_ports(PORTS),
    "synth": {"MAX_C": 64},
}
