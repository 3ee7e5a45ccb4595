"""layernorm_ptf: FQ-ViT's QIntLayerNorm ('int' mode) as released (``rtl/layernorm_ptf.v``, with the binary64
unit ``rtl/f64_unit.v``).

Row sums of ``z = x << (alpha - min alpha)``; per row and per channel FQ-ViT's binary64 steps in its order,
each correctly rounded (mean, std, ``A_c``, its ``N_c`` and ``M_c``, ``B_c``; a row of variance 0 takes beta
alone); per element ``round_half_even((sign M z + B) / 2^N)``, saturated; ``out_last_o`` on each row's last
output. gamma, beta (binary64 bit patterns) and alpha per channel through the table port; s and s_out
(binary64) as the table's entry 0.
"""

from __future__ import annotations

from typing import Any

from hwvit.blocks.variant_rtl import channel_ports, rtl
from hwvit.byo.kinds import Config, Field, Kind, bits_count, bits_fixed, bits_param, channel_table

DOMAIN = 400  # s, s_out and each nonzero gamma, beta within 2^-DOMAIN..2^DOMAIN in magnitude (rtl header)


def domain_error(params: Any) -> str | None:
    """Where a set's float constants (a vector set or a mapping with ``gamma_f64``, ``beta_f64``,
    ``s_f64``, ``s_out_f64``: binary64 bit patterns) leave the Verilog block's binary64 domain, in
    words; None inside it. Inside, every float rtl/layernorm_ptf.v forms is zero or normal (its
    header derives it): rtl/f64_unit.v handles no subnormal, infinity or NaN."""
    import numpy as np

    for name, zero_ok in (("s_f64", False), ("s_out_f64", False), ("gamma_f64", True), ("beta_f64", True)):
        v = np.abs(np.ascontiguousarray(np.asarray(params[name], dtype=np.int64)).view(np.float64))
        bad = ~((v >= 2.0**-DOMAIN) & (v <= 2.0**DOMAIN)) & ~((v == 0) & zero_ok)
        if bad.any():
            i = int(np.argmax(bad))
            return (
                f"layernorm_ptf: {name}[{i}] = {float(v[i])!r} in magnitude is outside the Verilog block's "
                f"binary64 domain ({'0 or ' if zero_ok else ''}2^-{DOMAIN}..2^{DOMAIN})"
            )
    return None


PORTS = Kind(
    "layernorm_ptf",
    inputs={"x": Field("x", bits_param("in_bits"), True, "input, in_bits signed (2..12)")},
    output=("y", Field("y", bits_param("out_bits"), True, "normalized value, out_bits signed")),
    config={"c": Config(lambda p: int(p["c"]), bits_count("c"), "row length C")},
    table=channel_table(
        {
            "prm_gamma": Field("gamma_f64", bits_fixed(64), True, "gamma of channel i, binary64 bit pattern"),
            "prm_beta": Field("beta_f64", bits_fixed(64), True, "beta of channel i, binary64 bit pattern"),
            "prm_alpha": Field("alpha", bits_fixed(2), False, "power-of-two factor alpha of channel i (0..3)"),
            "prm_s": Field("s_f64", bits_fixed(64), True, "entry 0: the input scale s, binary64 bit pattern"),
            "prm_s_out": Field("s_out_f64", bits_fixed(64), True, "entry 0: the output scale, binary64 bit pattern"),
        },
        "channel i at address i; s and s_out at address 0",
    ),
    row_len=lambda v: int(v.params["c"]),
    parameters={"IN_BITS": "in_bits", "OUT_BITS": "out_bits"},
    fixed={"MAX_C": 4096},
    # the float program: per row 3 conversions and 7 operations, per channel 5, each <= 55 clocks + 3
    row_work=lambda p: 600 + 300 * int(p["c"]),
    doc="FQ-ViT's released QIntLayerNorm: row sums of x << (alpha - min alpha), its binary64 per-row and "
    "per-channel constants, round((sign M z + B) / 2^N) (docs/variants/ivit.md)",
)

FIELDS = {
    "rtl": rtl("layernorm_ptf", "row_moments", "f64_unit"),
    "ports": PORTS,
    "reference_ports": channel_ports(PORTS),
    "synth": {"MAX_C": 64},
    # hwvit sim refuses a set whose constants leave the binary64 unit's normal range (the header's domain)
    "rtl_domain": domain_error,
    # by name prefix, before the rest of its suite (sim/test_variants*.py): the block's corner rows, then the
    # binary64 unit alone on its thousands of cases (rtl/f64_unit.v, a module no kind owns, runs them too)
    "mutate_first": ("test_layernorm_ptf_rails_and_constant_rows", "test_f64_unit_against_python_floats"),
}
