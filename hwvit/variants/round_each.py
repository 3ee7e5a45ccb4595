"""``softmax=round_each``: probabilities rounded each on its own, as a quantized model's runtime does.

A QDQ model leaves softmax float and quantizes its output: ``c_i = sat(round_half_even(p_i / s_p) + z)``.
Every probability is rounded by itself, so a row need not sum to ``1 / s_p`` (hwvit's own softmax
rounds the cumulative sums instead, and every row sums to ``2^bits - 1``). This variant keeps
hwvit's exp table and its one reciprocal per row and rounds each product, at any probability scale
``s_p`` (the file's, ``SoftmaxContext.s_out``; else ``1 / (2^bits - 1)``):

    d_i = max - x_i,   E_i = T[d_i]  (T[d] = round(2^23 exp(-d s_in)), 0 past the table)
    S   = sum_i E_i                                   <= 4096 * 2^23 = 2^35
    R   = floor((Qm * 2^24 + floor(S / 2)) / S)       Qm = round(2^16 / s_p) < 2^24: R < 2^26
    p_i = sat_[0, 2^bits - 1]( round_half_even(E_i * R / 2^40) )      E_i * R < 2^49

``R`` approximates ``2^40 / (s_p S)``, so ``p_i`` is ``E_i / (S s_p)`` rounded half to even. The
output is unsigned at scale ``2^16 / Qm`` (``s_p`` within 2^-24 relative). Its Verilog twin is
rtl/softmax_round_each.v: the row engine with rtl/softmax.v's exp table and reciprocal, the
prefix sum dropped and each product rounded half to even.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from hwvit.variants.base import Params, SoftmaxContext, Variant

EXP_FRAC = 23  # as hwvit's softmax: T[0] = 2^23
Q_FRAC = 16  # fractional bits of Qm = round(2^16 / s_p)
R_SHIFT = 40  # p = E * R / 2^40
MAX_ROW = 4096


def _prepare(ctx: SoftmaxContext) -> Params:
    from hwvit.quant.params import exp_table

    s_p = ctx.s_out if ctx.s_out is not None else 1.0 / ((1 << ctx.out_bits) - 1)
    if not (math.isfinite(s_p) and s_p > 0):
        raise ValueError(f"softmax round_each: probability scale must be > 0, got {s_p!r}")
    q_mult = math.floor(Fraction(1 << Q_FRAC) / Fraction(s_p) + Fraction(1, 2))
    if not 1 <= q_mult < 1 << 24:
        raise ValueError(f"softmax round_each: probability scale {s_p!r} outside [2^-8, 2^16)")
    entries = min(ctx.entries, 1 << ctx.in_bits)
    return {
        "exp_table": exp_table(ctx.s_in, entries),
        "q_mult": int(q_mult),
        "in_bits": int(ctx.in_bits),
        "out_bits": int(ctx.out_bits),
    }


def _kernel(x, p: Params) -> np.ndarray:
    """Rows along the last axis, int64 throughout (bounds in the module docstring)."""
    x = np.asarray(x, dtype=np.int64)
    if x.ndim == 0 or not 1 <= x.shape[-1] <= MAX_ROW:
        raise ValueError(f"softmax round_each: rows must hold 1..{MAX_ROW} elements, got shape {x.shape}")
    lo, hi = -(1 << (int(p["in_bits"]) - 1)), (1 << (int(p["in_bits"]) - 1)) - 1
    if x.size and (x.min() < lo or x.max() > hi):
        raise ValueError(f"softmax round_each: x must lie in [{lo}, {hi}]")
    table = np.asarray(p["exp_table"], dtype=np.int64)
    padded = np.append(table, 0)
    d = np.minimum(x.max(axis=-1, keepdims=True) - x, table.size)
    e = padded[d]
    s = e.sum(axis=-1, keepdims=True)
    r = (int(p["q_mult"]) * (1 << (R_SHIFT - Q_FRAC)) + s // 2) // s
    v = e * r
    q = v >> R_SHIFT
    rem2 = (v & ((1 << R_SHIFT) - 1)) << 1
    up = (rem2 > (1 << R_SHIFT)) | ((rem2 == (1 << R_SHIFT)) & ((q & 1) == 1))
    return np.clip(q + up, 0, (1 << int(p["out_bits"])) - 1).astype(np.int64)


def _reference(x, p: Params):
    """Row by row on Python ints and Fractions."""
    table = [int(t) for t in p["exp_table"]]
    top_out = 2 ** int(p["out_bits"]) - 1
    rows = np.asarray(x).reshape(-1, np.shape(x)[-1]).tolist()
    out = []
    for row in rows:
        m = max(row)
        e = [table[m - v] if m - v < len(table) else 0 for v in row]
        s = sum(e)
        r = (int(p["q_mult"]) * 2 ** (R_SHIFT - Q_FRAC) + s // 2) // s
        got = []
        for ei in e:
            v = Fraction(ei * r, 2**R_SHIFT)
            below = math.floor(v)
            frac = v - below
            rounded = below + (1 if frac > Fraction(1, 2) or (frac == Fraction(1, 2) and below % 2) else 0)
            got.append(min(max(rounded, 0), top_out))
        out.append(got)
    return np.array(out, dtype=np.int64).reshape(np.shape(x)).tolist()


def _out_scale(ctx: SoftmaxContext, p: Params) -> float:
    return float(Fraction(1 << Q_FRAC, int(p["q_mult"])))


VARIANTS = [
    Variant(
        "softmax",
        "round_each",
        "hwvit's exp table and row reciprocal, each probability rounded half to even on its own at the "
        "file's scale (as a QDQ model's runtime quantizes softmax)",
        "ONNX QuantizeLinear after Softmax (round half to even); hwvit docs/onnx.md",
        _prepare,
        _kernel,
        _reference,
        _out_scale,
    )
]
