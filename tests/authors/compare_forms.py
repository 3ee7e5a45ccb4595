"""The released forms beside hwvit's corrected ones, on the authors' rows: how often and how far they
differ, and each one's error against float arithmetic (docs/variants/ivit.md, hwsoftmax.md).

    .venv/bin/python tests/authors/compare_forms.py

Rows: the inputs of tests/authors/*.npz at hwvit's int8 width (softmax also at the scores' usual
scales alone, 0.01..0.5, apart from the extremes of I_0) (8-bit scores as they are; I-ViT's
16-bit LayerNorm rows shifted right by 8, their scale times 256; FQ-ViT's 9-bit rows clipped),
each group's scales, 8-bit outputs. Float references: softmax of x s_in, GELU (erf) of x s_in,
LayerNorm (eps 1e-6) of x s 2^alpha with the group's gamma and beta; errors in output LSB.
Prints one markdown table.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from authors import load  # noqa: E402
from hwvit import variants  # noqa: E402
from hwvit.variants.base import GeluContext, SoftmaxContext  # noqa: E402
from hwvit.variants.layernorm_forms import PtfContext  # noqa: E402

ERF = np.vectorize(math.erf)


def _softmax(x, s):
    z = np.exp((x - x.max(axis=-1, keepdims=True)) * s)
    return z / z.sum(axis=-1, keepdims=True)


def _cases(family: str, data: str):
    """(x int8 rows, context, float reference in real units) per group."""
    for g in load(data)[1]:
        if family == "softmax":
            x = np.clip(g["x"].astype(np.int64), -128, 127)
            yield x, SoftmaxContext(g["s_in"], 8, 8), _softmax(x.astype(np.float64), g["s_in"])
        elif family == "gelu":
            x = g["x"].astype(np.int64)
            v = x * g["s_in"]
            yield x, GeluContext(g["s_in"], 8, g["s_out"], 8), 0.5 * v * (1 + ERF(v / math.sqrt(2)))
        else:
            if "alpha" in g:  # FQ-ViT's rows: channel c at s 2^alpha_c
                x, alpha, s = np.clip(g["x"].astype(np.int64), -128, 127), g["alpha"].astype(np.int64), g["s"]
            else:  # I-ViT's 16-bit rows, at 8 bits
                x, alpha, s = g["x"].astype(np.int64) >> 8, np.zeros(g["x"].shape[1], np.int64), g["s_in"] * 256
            x = x[(x != x[:, :1]).any(axis=1)]  # constant rows: no float LayerNorm to compare with
            if not x.size:
                continue
            v = x * s * np.exp2(alpha)
            mu, var = v.mean(axis=1, keepdims=True), v.var(axis=1, keepdims=True)
            want = (v - mu) / np.sqrt(var + 1e-6) * g["gamma"] + g["beta"]
            ctx = PtfContext(g["gamma"], np.asarray(g["beta"]), 1e-6, s, g["s_out"], 8, alpha=alpha)
            yield x, ctx, want


def measure(family: str, name: str, data: str, scales: tuple[float, float] = (0.0, math.inf)) -> str:
    exact, released = variants.get(family, f"{name}_exact"), variants.get(family, name)
    n = differ = worst = 0
    err = {"released": [], "exact": []}
    for x, ctx, want in _cases(family, data):
        if not scales[0] <= ctx.s_in <= scales[1]:
            continue
        outs = {}
        for label, v in (("released", released), ("exact", exact)):
            p = v.prepare(ctx)
            y = v.kernel(x, p)
            outs[label] = y
            scale = v.out_scale(ctx, p)
            ref = want / scale
            if family != "softmax":
                half = 1 << (ctx.out_bits - 1)
                ref = np.clip(ref, -half, half - 1)
            err[label].append(np.abs(y - ref).reshape(-1))
        d = outs["released"] != outs["exact"]
        n += x.size
        differ += int(d.sum())
        worst = max(worst, int(np.abs(outs["released"] - outs["exact"]).max()))
    e = {k: np.concatenate(v) for k, v in err.items()}
    where = "" if scales == (0.0, math.inf) else f" (s_in {scales[0]:g}..{scales[1]:g})"
    return (
        f"| `{family}={name}` vs `{name}_exact`{where} | {n} | {100 * differ / n:.1f}% | {worst} | "
        f"{e['released'].max():.1f} / {e['released'].mean():.2f} | {e['exact'].max():.1f} / {e['exact'].mean():.2f} |"
    )


def main() -> int:
    print("| pair | elements | differ | worst (LSB) | released vs float: max / mean LSB | exact vs float |")
    print("|---|---:|---:|---:|---|---|")
    for family, name, data in (
        ("softmax", "shiftmax", "ivit_softmax"),
        ("gelu", "shiftgelu", "ivit_gelu"),
        ("layernorm", "ivit", "ivit_layernorm"),
        ("layernorm", "ptf", "fqvit_layernorm"),
        ("softmax", "log2", "fqvit_log2"),
    ):
        print(measure(family, name, data))
        if family == "softmax":  # the scales a model's attention scores have; the rest are I_0's extremes
            print(measure(family, name, data, (0.01, 0.5)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
