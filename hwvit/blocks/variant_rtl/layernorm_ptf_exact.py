"""layernorm_ptf_exact: FQ-ViT's power-of-two factor on hwvit's exact LayerNorm path, ``rtl/layernorm.v`` with PTF = 1.

The statistics on ``z = x << alpha_c`` (alpha per channel, 0..3), then hwvit's LayerNorm path with
``T = 8``; ``out_last_o`` on each row's last output. gamma, beta and alpha per channel through the
table port; eps_int, the requant multiplier and shift as configuration.
"""

from __future__ import annotations

from dataclasses import replace

from hwvit.blocks import layernorm as ln
from hwvit.byo.kinds import Config, Field, bits_fixed

PORTS = replace(
    ln.PORTS,
    name="layernorm_ptf_exact",
    config={
        **ln.PORTS.config,
        "eps": Config(lambda p: int(p["eps_int"]), bits_fixed(62), "eps_int (units of V << 16)"),
    },
    table=replace(
        ln.PORTS.table,
        data={
            **ln.PORTS.table.data,
            "prm_alpha": Field("alpha", bits_fixed(2), False, "power-of-two factor alpha of channel i (0..3)"),
        },
    ),
    fixed={"MAX_C": 4096, "PTF": 1},
    doc="FQ-ViT power-of-two-factor LayerNorm: statistics on x << alpha_c, then hwvit's path (T = 8)",
)

FIELDS = {
    "rtl": ln.LN_RTL,
    "toplevel": "layernorm",
    "ports": PORTS,
    "reference_ports": {
        **ln.REFERENCE_PORTS,
        "ports": {**ln.REFERENCE_PORTS["ports"], "prm_alpha": "prm_alpha_i"},
        "tie": {},
    },
    "synth": {"MAX_C": 64, "PTF": 1},
}
