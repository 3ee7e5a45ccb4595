"""layernorm_no_eps: hwvit's LayerNorm without epsilon, ``rtl/layernorm.v`` with EPS = 0.

The block of hwvit's LayerNorm without the eps adder (a 60-bit radicand, cfg_eps_i tied off) and
its ``out_last_o`` on each row's last output. gamma/beta per channel through the table port, the
requant multiplier and shift as configuration.
"""

from __future__ import annotations

from dataclasses import replace

from hwvit.blocks import layernorm as ln

PORTS = replace(
    ln.PORTS,
    name="layernorm_no_eps",
    config={k: v for k, v in ln.PORTS.config.items() if k != "eps"},
    fixed={"MAX_C": 4096, "EPS": 0},
    doc="hwvit's integer LayerNorm with eps_int = 0 over rows of C channels (a constant row gives beta)",
)

FIELDS = {
    "rtl": ln.LN_RTL,
    "toplevel": "layernorm",
    "ports": PORTS,
    "reference_ports": {
        **ln.REFERENCE_PORTS,
        "ports": {k: v for k, v in ln.REFERENCE_PORTS["ports"].items() if k != "eps"},
        "tie": {"cfg_eps_i": 0, "prm_alpha_i": 0},
    },
    "synth": {"MAX_C": 64, "EPS": 0},
}
