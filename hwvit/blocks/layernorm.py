"""layernorm: integer LayerNorm over rows of C int8 channels (``rtl/layernorm.v``).

Mean and variance as exact integer sums, 1/sqrt by ``rtl/isqrt.v`` and ``rtl/divu.v``, gamma and
beta per channel, one requant to the output (docs/arithmetic.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hwvit import ops
from hwvit.blocks._common import SIZE, U31, int_option, rails, row_text, spec
from hwvit.blocks.base import BlockKind
from hwvit.blocks.variant_rtl import rtl
from hwvit.byo.kinds import Config, Field, Kind, bits_count, bits_fixed, bits_param, channel_table
from hwvit.formats import BETA, GAMMA, INT8, MULT_MAX, OUT_BITS, SHIFT_MAX
from hwvit.ops.reference import layernorm_ref
from hwvit.record import BlockRecord, Spec, make_record

# rtl/layernorm.v on the row engine, with its statistics and output stage; the variants no_eps and ptf
# are this block at EPS = 0 and PTF = 1 (hwvit/blocks/variant_rtl/).
LN_RTL = rtl("layernorm", "row_moments", "inv_sqrt", "ln_affine", "isqrt", "divu", "round_sat")

PARAMS = {
    "rows": (int, SIZE),
    "c": (int, (1, 4096)),
    "out_bits": (int, OUT_BITS),
    "eps_int": (int, (0, 1 << 61)),
    "multiplier": (int, U31),
    "shift": (int, (0, SHIFT_MAX)),
}
CONTRACT = {
    "x": spec("input", ("rows", "c"), INT8),
    "gamma": spec("parameter", ("c",), GAMMA),
    "beta": spec("parameter", ("c",), BETA),
    "y": Spec("output", ("rows", "c"), "out_bits", True),
}


def traced(
    path: str, rows, gamma, beta, y, eps_int: int, multiplier: int, shift: int, out_bits: int, scales: dict
) -> BlockRecord:
    """The record of one LayerNorm of the integer model (2-D rows in and out)."""
    params = {
        "rows": rows.shape[0],
        "c": rows.shape[1],
        "out_bits": out_bits,
        "eps_int": eps_int,
        "multiplier": multiplier,
        "shift": shift,
    }
    return make_record("layernorm", path, params, scales, x=rows, gamma=gamma, beta=beta, y=y)


def largest_variance(c: int) -> int:
    """The largest V = C*Sxx - Sx^2 an int8 row of C values can have (k values at -128, the rest 127)."""
    return max(c * (k * 128 * 128 + (c - k) * 127 * 127) - (127 * (c - k) - 128 * k) ** 2 for k in range(c + 1))


def operands(params: dict[str, Any], t: dict[str, np.ndarray], nd_index: list[int]) -> str:
    i = int(nd_index[0])
    x = t["x"][i].astype(object)  # exact Python ints: C*Sxx reaches 2^33 and beyond
    c, sx = len(x), int(sum(x))
    var_c2 = c * int(sum(v * v for v in x)) - sx * sx  # C^2 times the variance (docs/arithmetic.md)
    j = int(nd_index[1])
    return (
        f"LayerNorm row {i} x {row_text(t['x'][i])}: mean {sx}/{c} = {sx / c:.4f}, variance "
        f"{var_c2}/{c * c} = {var_c2 / (c * c):.4f} (C*Sxx - Sx^2 = {var_c2}); gamma[{j}] {int(t['gamma'][j])}, "
        f"beta[{j}] {int(t['beta'][j])}; requant multiplier {params['multiplier']}, shift {params['shift']}"
    )


def random_set(rng: np.random.Generator, cases: int, opts: dict[str, Any]) -> BlockRecord:
    from hwvit import ops
    from hwvit.quant.params import layernorm_params

    c, out_bits = int_option(opts, "c", 1, 4096), int_option(opts, "out_bits", 2, 16)
    s_x, s_out = float(opts["scale_in"]), float(opts["scale_out"])
    gamma = rng.normal(1.0, 0.4, c)
    beta = rng.normal(0.0, 0.5, c)
    gamma[: min(c, 2)] = [2.5, -1.0][: min(c, 2)]  # a large and a negative gain: saturation, sign
    lp = layernorm_params(gamma, beta, float(opts["eps"]), c, s_x, s_out, out_bits)
    eps_int = lp["eps_int"] if opts["eps_int"] is None else int_option(opts, "eps_int", 0, 1 << 61)
    mult = int(lp["multiplier"]) if opts["multiplier"] is None else int_option(opts, "multiplier", 0, MULT_MAX)
    shift = int(lp["shift"]) if opts["shift"] is None else int_option(opts, "shift", 0, SHIFT_MAX)

    def row(i: int) -> np.ndarray:
        pattern = i % 9
        if pattern == 0:
            return rng.integers(-128, 127, c, endpoint=True)
        if pattern == 1:  # constant: variance 0, only eps keeps the divisor off 0
            return np.full(c, rng.integers(-128, 127, endpoint=True))
        if pattern == 2:  # alternating extremes: the largest variance
            return np.where(np.arange(c) % 2 == 0, 127, -128)
        if pattern == 3:  # one outlier in a flat row
            r = np.zeros(c, np.int64)
            r[rng.integers(c)] = 127
            return r
        if pattern == 4:  # spread of one LSB
            return rng.integers(0, 1, c, endpoint=True)
        if pattern == 5:
            return np.full(c, -128)
        if pattern == 6:  # all max but one min
            r = np.full(c, 127)
            r[rng.integers(c)] = -128
            return r
        if pattern == 7:  # activation-like bell
            return np.clip(np.round(rng.normal(0, 20, c)), -128, 127).astype(np.int64)
        return rng.integers(-4, 4, c, endpoint=True)

    x = np.stack([row(i) for i in range(cases)])
    y = ops.layernorm(x, lp["gamma"], lp["beta"], eps_int, mult, shift, out_bits)
    params = {
        "rows": int(cases),
        "c": c,
        "out_bits": out_bits,
        "eps_int": int(eps_int),
        "multiplier": mult,
        "shift": shift,
    }
    return make_record(
        "layernorm", "random", params, {"x": s_x, "y": s_out}, x=x, gamma=lp["gamma"], beta=lp["beta"], y=y
    )


def count_bins(params, inputs, outputs, limits) -> dict[str, int]:
    x = inputs["x"].astype(object)  # Python ints: C * Sxx reaches 2^39
    rows, c = x.shape
    var = [c * int((r * r).sum()) - int(r.sum()) ** 2 for r in x]
    high, low = rails(outputs.get("y"), int(params["out_bits"]))
    return {
        "var_zero": sum(v == 0 for v in var),
        "var_max": sum(v == largest_variance(c) for v in var),
        "sat_high": high,
        "sat_low": low,
        "row_len_1": rows if c == 1 else 0,
        "row_len_max": rows if c == int(limits.get("MAX_C", -1)) else 0,
    }


PORTS = Kind(
    "layernorm",
    inputs={"x": Field("x", bits_fixed(8), True, "int8 input")},
    output=("y", Field("y", bits_param("out_bits"), True, "normalized value, out_bits signed")),
    config={
        "c": Config(lambda p: int(p["c"]), bits_count("c"), "row length C"),
        "eps": Config(lambda p: int(p["eps_int"]), bits_fixed(62), "eps_int"),
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
    fixed={"MAX_C": 1024},
    doc="integer LayerNorm over rows of C channels (docs/arithmetic.md)",
)

# rtl/layernorm.v's ports as a bind names them; prm_alpha_i is used only with PTF = 1 (layernorm_ptf).
REFERENCE_PORTS = {
    "fields": {"x": "in_data_i"},
    "out": "out_data_o",
    "last": "out_last_o",
    "ports": {
        "c": "cfg_c_i",
        "eps": "cfg_eps_i",
        "mult": "cfg_mult_i",
        "shift": "cfg_shift_i",
        "tbl_we": "prm_we_i",
        "tbl_addr": "prm_addr_i",
        "prm_gamma": "prm_gamma_i",
        "prm_beta": "prm_beta_i",
    },
    "tie": {"prm_alpha_i": 0},
}

KIND = BlockKind(
    name="layernorm",
    family="layernorm",
    doc=PORTS.doc,
    seed=4,
    kernel=ops.layernorm,
    reference=layernorm_ref,
    params=PARAMS,
    contract=CONTRACT,
    random=random_set,
    defaults={
        "c": 64,
        "out_bits": 8,
        "eps": 1e-6,
        "scale_in": 0.05,
        "scale_out": 0.05,
        "eps_int": None,
        "multiplier": None,
        "shift": None,
    },
    bins=("var_zero", "var_max", "sat_high", "sat_low", "row_len_1", "row_len_max", "out_stall"),
    count_bins=count_bins,
    reset_states=("fill", "mul1", "mul2", "sqrt", "div", "out", "out_fill"),
    rtl=LN_RTL,
    operands=operands,
    traced=traced,
    testbench="sim/test_layernorm.py",
    rows="rows",
    shared=("gamma", "beta"),
    ports=PORTS,
    reference_ports=REFERENCE_PORTS,
    synth={"MAX_C": 64},
    mutate_first=("test_reset_midstream", "test_inv_rounding_rows", "test_throughput_unstalled"),  # each under 2 s
)
