"""hwvit's own arithmetic as variants: what every block computes unless a recipe picks another.

- ``requant=half_up``: ``sat((acc * M + 2^(s-1)) >> s)`` (rtl/requant.v, rtl/round_sat.v);
- ``gelu=lut``: a table of GELU at every input code (rtl/gelu.v);
- ``softmax=hwvit``: a 24-bit exp table, one reciprocal per row, cumulative rounding (rtl/softmax.v);
- ``layernorm=hwvit``: exact sums, isqrt and one division per row, gamma/beta, requant (rtl/layernorm.v).

docs/arithmetic.md derives each; the kernels are hwvit.ops', the references hwvit.ops.reference's.
"""

from __future__ import annotations

import numpy as np

from hwvit import ops
from hwvit.ops import reference as ref
from hwvit.variants.base import GeluContext, LayerNormContext, Params, RequantContext, SoftmaxContext, Variant


def _requant_prepare(ctx: RequantContext) -> Params:
    from hwvit.quant.params import quantize_multiplier

    m, s = quantize_multiplier(ctx.scale)
    return {"multiplier": int(m), "shift": int(s), "out_bits": ctx.out_bits}


def _requant_ref(x, p: Params):
    flat = [int(v) for v in np.asarray(x).reshape(-1)]
    out = ref.requant_ref(flat, int(p["multiplier"]), int(p["shift"]), int(p["out_bits"]))
    return np.array(out, dtype=np.int64).reshape(np.shape(x)).tolist()


def _gelu_prepare(ctx: GeluContext) -> Params:
    from hwvit.quant.params import gelu_table

    return {
        "table": gelu_table(ctx.s_in, ctx.s_out, ctx.in_bits, ctx.out_bits),
        "in_bits": ctx.in_bits,
        "out_bits": ctx.out_bits,
    }


def _gelu_ref(x, p: Params):
    flat = [int(v) for v in np.asarray(x).reshape(-1)]
    out = ref.gelu_ref(flat, [int(v) for v in p["table"]], int(p["in_bits"]))
    return np.array(out, dtype=np.int64).reshape(np.shape(x)).tolist()


def _softmax_prepare(ctx: SoftmaxContext) -> Params:
    from hwvit.quant.params import exp_table

    entries = min(ctx.entries, 1 << ctx.in_bits)
    return {"exp_table": exp_table(ctx.s_in, entries), "in_bits": ctx.in_bits, "out_bits": ctx.out_bits}


def _softmax_kernel(x: np.ndarray, p: Params) -> np.ndarray:
    return ops.softmax(x, p["exp_table"], int(p["out_bits"]), int(p["in_bits"]))


def _softmax_ref(x, p: Params):
    rows = np.asarray(x).reshape(-1, np.shape(x)[-1]).tolist()
    table = [int(v) for v in p["exp_table"]]
    out = [ref.softmax_ref(row, table, int(p["out_bits"])) for row in rows]
    return np.array(out, dtype=np.int64).reshape(np.shape(x)).tolist()


def _layernorm_prepare(ctx: LayerNormContext) -> Params:
    from hwvit.quant.params import layernorm_params

    c = len(ctx.gamma)
    lp = layernorm_params(ctx.gamma, ctx.beta, ctx.eps, c, ctx.s_in, ctx.s_out, ctx.out_bits)
    return {**lp, "out_bits": ctx.out_bits}


def _layernorm_kernel(x: np.ndarray, p: Params) -> np.ndarray:
    return ops.layernorm(
        x, p["gamma"], p["beta"], int(p["eps_int"]), int(p["multiplier"]), int(p["shift"]), int(p["out_bits"])
    )


def _layernorm_ref(x, p: Params):
    rows = np.asarray(x).reshape(-1, np.shape(x)[-1]).tolist()
    g, b = [int(v) for v in p["gamma"]], [int(v) for v in p["beta"]]
    out = [
        ref.layernorm_ref(r, g, b, int(p["eps_int"]), int(p["multiplier"]), int(p["shift"]), int(p["out_bits"]))
        for r in rows
    ]
    return np.array(out, dtype=np.int64).reshape(np.shape(x)).tolist()


VARIANTS = [
    Variant(
        "requant",
        "half_up",
        "sat((acc * M + 2^(s-1)) >> s): round half up, saturate",
        "hwvit docs/arithmetic.md (requant); the RTL's round_sat.v",
        _requant_prepare,
        lambda x, p: ops.requant(x, p["multiplier"], p["shift"], int(p["out_bits"])),
        _requant_ref,
        lambda ctx, p: float("nan"),  # the output scale is the layer's, set by its calibration
    ),
    Variant(
        "gelu",
        "lut",
        "a table of GELU(x * s_in) / s_out at every input code, rounded half away from zero",
        "hwvit docs/arithmetic.md (GELU)",
        _gelu_prepare,
        lambda x, p: ops.gelu(x, p["table"], int(p["in_bits"])),
        _gelu_ref,
        lambda ctx, p: ctx.s_out,
    ),
    Variant(
        "softmax",
        "hwvit",
        "24-bit exp table, one reciprocal per row, probabilities by cumulative rounding (rows sum to 2^bits - 1)",
        "hwvit docs/arithmetic.md (softmax)",
        _softmax_prepare,
        _softmax_kernel,
        _softmax_ref,
        lambda ctx, p: 1.0 / ((1 << ctx.out_bits) - 1),
    ),
    Variant(
        "layernorm",
        "hwvit",
        "exact integer mean and variance, isqrt, one division per row, gamma/beta, requant",
        "hwvit docs/arithmetic.md (LayerNorm)",
        _layernorm_prepare,
        _layernorm_kernel,
        _layernorm_ref,
        lambda ctx, p: ctx.s_out,
    ),
]
