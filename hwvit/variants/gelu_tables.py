"""GELU tables of other GELU formulas, looked up exactly like hwvit's ``gelu=lut``.

- ``gelu=tanh_lut``: the tanh form of GELU (Hendrycks & Gimpel, "Gaussian Error Linear Units",
  2016, Sec. 2: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``), the approximation BERT and
  GPT-2 ship, tabulated at every input code and rounded and saturated as hwvit's table is
  (``hwvit.quant.params.gelu_table``: ``sat_out(round_half_away(g / s_out))`` through
  ``hwvit.ops.requant.quantize``).

The lookup is ``y = table[x + 2^(in_bits-1)]`` (``hwvit.ops.gelu``, rtl/gelu.v): x signed
``in_bits`` (<= 16 bits), the index unsigned ``in_bits``, y signed ``out_bits``; no other
intermediate. docs/variants/hwsoftmax.md states the formula and the choices.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hwvit.variants.base import GeluContext, Params, Variant

TANH_C = math.sqrt(2.0 / math.pi)
TANH_K = 0.044715


def gelu_tanh(v: float) -> float:
    """``0.5 v (1 + tanh(z))``, z = sqrt(2/pi) (v + 0.044715 v^3), written as ``v * sigmoid(2z)``
    (``1 + tanh z = 2 / (1 + e^(-2z))``) so that negative inputs keep their relative precision."""
    z = TANH_C * (v + TANH_K * v * v * v)
    if z >= 0:
        return v / (1.0 + math.exp(-2.0 * z))
    t = math.exp(2.0 * z)
    return v * t / (1.0 + t)


def tanh_table(s_in: float, s_out: float, in_bits: int = 8, out_bits: int = 8) -> np.ndarray:
    """The ``2^in_bits`` entries ``sat_out(round_half_away(gelu_tanh(q * s_in) / s_out))``, q = i - 2^(in_bits-1)."""
    from hwvit.ops.requant import quantize

    for name, s in (("s_in", s_in), ("s_out", s_out)):
        if not (math.isfinite(float(s)) and float(s) > 0):
            raise ValueError(f"{name} must be finite and > 0, got {s!r}")
    if not 2 <= in_bits <= 16 or not 2 <= out_bits <= 16:
        raise ValueError(f"tanh_table: in_bits and out_bits must lie in [2, 16], got {in_bits}, {out_bits}")
    half = 1 << (in_bits - 1)
    g = np.array([gelu_tanh(q * float(s_in)) for q in range(-half, half)], dtype=np.float64)
    return np.asarray(quantize(g, float(s_out), out_bits), dtype=np.int64)


def _tanh_prepare(ctx: GeluContext) -> Params:
    return {
        "table": tanh_table(ctx.s_in, ctx.s_out, ctx.in_bits, ctx.out_bits),
        "in_bits": ctx.in_bits,
        "out_bits": ctx.out_bits,
    }


def _tanh_kernel(x: Any, p: Params) -> np.ndarray:
    """``table[x + 2^(in_bits-1)]`` (hwvit.ops.gelu: range-checked lookup, int64 out)."""
    from hwvit import ops

    return ops.gelu(x, p["table"], int(p["in_bits"]))


def _tanh_ref(x, p: Params):
    bits = int(p["in_bits"])
    table = [int(v) for v in p["table"]]
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def look(v: int) -> int:
        if not lo <= v <= hi:
            raise ValueError(f"x: {v} outside [{lo}, {hi}]")
        return table[v - lo]

    def walk(node):
        return [walk(n) for n in node] if isinstance(node, list) else look(int(node))

    return walk(np.asarray(x).tolist())


VARIANTS = [
    Variant(
        "gelu",
        "tanh_lut",
        "a table of the tanh-form GELU 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))), rounded half away, saturated",
        "Hendrycks & Gimpel, Gaussian Error Linear Units (GELUs), 2016, Sec. 2 (the tanh approximation)",
        _tanh_prepare,
        _tanh_kernel,
        _tanh_ref,
        lambda ctx, p: ctx.s_out,
    ),
]
