"""layernorm_ivit_exact: hwvit's corrected I-LayerNorm (``rtl/layernorm_ivit_exact.v``).

The mean rounded half up (one small division per row), ``Var = sum (x - mu)^2 + eps_int`` from the
row sums, ``std = floor(sqrt(Var))`` (what the kernel's 10-step Newton iteration returns),
``factor = floor(2^62 / std)`` (one division per row), ``y = factor (x - mu) >> 46``, hwvit's
gamma/beta fixed point and a requant; ``out_last_o`` on each row's last output. gamma/beta per
channel through the table port; eps_int, the requant multiplier and shift as configuration.
"""

from __future__ import annotations

from hwvit.blocks import layernorm as ln
from hwvit.blocks.variant_rtl import rtl
from hwvit.byo.kinds import Config, Field, Kind, bits_count, bits_fixed, bits_param, channel_table

RTL = rtl("layernorm_ivit_exact", "row_moments", "row_meanvar", "inv_sqrt", "ln_affine", "isqrt", "divu", "round_sat")

PORTS = Kind(
    "layernorm_ivit_exact",
    inputs={"x": Field("x", bits_fixed(8), True, "int8 input")},
    output=("y", Field("y", bits_param("out_bits"), True, "normalized value, out_bits signed")),
    config={
        "c": Config(lambda p: int(p["c"]), bits_count("c"), "row length C"),
        "eps": Config(lambda p: int(p["eps_int"]), bits_fixed(41), "eps_int (units of Var, <= 2^40)"),
        "mult": Config(lambda p: int(p["multiplier"]), bits_fixed(31), "requant multiplier M"),
        "shift": Config(lambda p: int(p["shift"]), bits_fixed(6), "requant shift s"),
    },
    table=channel_table(
        {
            "prm_gamma": Field("gamma", bits_fixed(15), True, "gamma G of channel i"),
            "prm_beta": Field("beta", bits_fixed(31), True, "beta B of channel i"),
        },
    ),
    row_len=lambda v: int(v.params["c"]),
    parameters={"OUT_BITS": "out_bits"},
    fixed={"MAX_C": 4096},
    doc="I-ViT I-LayerNorm: rounded mean, exact variance, integer sqrt, IntDiv, gamma/beta, requant",
)

FIELDS = {
    "rtl": RTL,
    "ports": PORTS,
    # rtl/layernorm.v's port names: the same configuration, table and stream (no alpha input to tie)
    "reference_ports": {k: v for k, v in ln.REFERENCE_PORTS.items() if k != "tie"},
    "synth": {"MAX_C": 64},
}
