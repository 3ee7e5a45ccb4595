"""The released forms of I-ViT and FQ-ViT (hwvit.variants.ivit_released, fqvit_released) on their own:
each kernel equal to its slow reference (on rows of the authors' data and at the extremes), every
intermediate within its stated width at the extremes, the exact int64 steps that stand in for the
modules' float64 ones (the 53-bit division of log-int-softmax, the wide requant product) against
Python ints, and the released forms told apart from hwvit's corrected ones (``*_exact``).
tests/test_variants_authors.py holds the kernels to the released code itself.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from authors import load

from hwvit import variants
from hwvit.variants import fqvit_released as fq
from hwvit.variants import ibert
from hwvit.variants import ivit_released as iv
from hwvit.variants.base import GeluContext, LayerNormContext, SoftmaxContext
from hwvit.variants.layernorm_forms import PtfContext


def _same(name: str, family: str, x: np.ndarray, p) -> np.ndarray:
    v = variants.get(family, name)
    got = v.kernel(x, p)
    ref = np.array(v.reference(x, p), dtype=object)
    assert got.dtype == np.int64 and got.shape == x.shape
    assert all(int(a) == int(b) for a, b in zip(got.ravel(), ref.ravel())), name
    return got


def _rails(n: int, bits: int) -> np.ndarray:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return np.stack(
        [np.full(n, hi), np.full(n, lo), np.where(np.arange(n) % 2 == 0, lo, hi), np.zeros(n), -1 - np.arange(n) % -lo]
    ).astype(np.int64)


# ----------------------------------------------------------------------------- kernel == reference


def test_references_on_the_authors_rows():
    for g in load("ivit_softmax")[1][::3]:
        p = variants.get("softmax", "shiftmax").prepare(SoftmaxContext(g["s_in"], 8, g["out_bits"]))
        _same("shiftmax", "softmax", g["x"][:6].astype(np.int64), p)
    for g in load("ivit_gelu")[1]:
        p = variants.get("gelu", "shiftgelu").prepare(GeluContext(g["s_in"], 8, g["s_out"], 8))
        _same("shiftgelu", "gelu", g["x"][-5:].astype(np.int64), p)
    for g in load("ivit_layernorm")[1]:
        ctx = LayerNormContext(g["gamma"], g["beta"], 0.0, g["s_in"], g["s_out"], 8, 16)
        _same("ivit", "layernorm", g["x"][-3:].astype(np.int64), variants.get("layernorm", "ivit").prepare(ctx))
    for g in load("fqvit_layernorm")[1]:
        p = fq.ptf_params(g["gamma"], g["beta"], g["s"], g["alpha"].astype(np.int64), g["s_out"], g["in_bits"], 8)
        _same("ptf", "layernorm", g["x"][:3].astype(np.int64), p)
    for g in load("fqvit_log2")[1][::2]:
        p = variants.get("softmax", "log2").prepare(SoftmaxContext(g["s_in"], 8, 16))
        _same("log2", "softmax", g["x"][-4:].astype(np.int64), p)


# ----------------------------------------------------------------------------- widths at the extremes


@pytest.mark.parametrize("s_in", [2.0**-16, 1.0, 2.0**16])
def test_shiftmax_widths(s_in):
    """16-bit scores, rows of 4096: E <= I_0 2^15 <= 2^31, S <= 2^43 (clamped to 2^31 - 1), E factor <= 2^31."""
    p = variants.get("softmax", "shiftmax").prepare(SoftmaxContext(s_in, 16, 16))
    x = np.concatenate([_rails(4096, 16), np.arange(-2048, 2048)[None]])
    st = iv.softmax_stages(x, p)
    assert st["e"].max() <= p["i0"] << 15 <= 1 << 31
    assert st["sum"].max() <= 4096 << 31 and st["prod"].max() <= 1 << 31
    assert 0 <= st["out"].min() and st["out"].max() <= 1 << 15
    if s_in == 2.0**-16:
        assert st["sum"].max() == 4096 << 31  # a constant row: every E at I_0 2^15 = 2^31, past the clamp
    _same("shiftmax", "softmax", x[:, :64], p)


def test_shiftgelu_widths():
    """I_0 = 2^16 (the finest scale), 16-bit codes: e1 <= 2^39, the sigmoid up to 2^15 where the
    sum clamps, |t| < 2^31; rows below zero: e^-max saturates (capped below 2^50)."""
    s_in = 1 / (iv.GELU_K * 65535.5)  # I_0 = ceil(1 / (1.702 s)) = 2^16
    p = variants.get("gelu", "shiftgelu").prepare(GeluContext(s_in, 16, 2.0**-8, 16))
    assert p["i0"] == 1 << 16
    x = _rails(4096, 16)
    st = iv.gelu_stages(x, p)
    assert st["e1"].max() <= 1 << 39 and st["e2"].max() < 1 << 50
    assert st["sig"].max() <= 1 << 15 and np.abs(st["t"]).max() < 1 << 31
    _same("shiftgelu", "gelu", x[:, :40], p)


def test_shiftgelu_depends_on_the_row():
    """The same code in two rows of different maxima: two outputs (so no table holds it)."""
    p = variants.get("gelu", "shiftgelu").prepare(GeluContext(0.05, 8, 0.03, 8))
    y = variants.get("gelu", "shiftgelu").kernel(np.array([[16, 0], [16, 127]]), p)
    assert y[:, 0].tolist() == [20, 21]


def test_ivit_layernorm_widths():
    """16-bit rows of 4096: var <= 2^44, std in [64, 2^28), y < 2^41, z < 2^42 (the split product)."""
    rng = np.random.default_rng(3)
    c = 4096
    gamma = np.full(c, 2.0**-8)
    beta = rng.choice([-1.0, 1.0], c) * 100.0
    ctx = LayerNormContext(gamma, beta, 0.0, 1e-3, 2.0**-10, 16, 16)
    p = variants.get("layernorm", "ivit").prepare(ctx)
    x = np.concatenate([_rails(c, 16), rng.integers(-2, 3, (1, c))])  # and a row whose variance is tiny
    st = iv.layernorm_stages(x, p)
    assert st["var"].max() <= 1 << 44 and 64 <= st["std"].min() and st["std"].max() < 1 << 28
    assert np.abs(st["y"]).max() < 1 << 41 and np.abs(st["z"]).max() < 1 << 42
    assert int(np.abs(st["z"]).max()) * int(np.abs(p["multiplier"]).max()) >= 1 << 62  # past one int64 product
    _same("ivit", "layernorm", x[[2, 5]], p)


def test_ivit_layernorm_bounds_of_its_verilog():
    """The bounds that leave rtl/layernorm_ivit.v's top bits unused (sim/mutants_equivalent.yaml argues
    its surviving mutants with them), met and nearly reached at 16 bits and C = 4096: var < C 2^30
    (about the rounded mean), every Newton quotient and k below 2^26, |d| factor <= 2^31 - 1 (|d| <=
    floor(sqrt(var)) <= k after a step), so |y| <= 2^30; rows: the rails and alternating ones (var
    near C 2^30), one-hot rows (|d| near sqrt(var)), a row [a, -a, 0, ...] and small variances."""
    c, lo, hi = 4096, -(1 << 15), (1 << 15) - 1
    rows = [*_rails(c, 16), np.where(np.arange(c) == 0, hi, lo), np.where(np.arange(c) == 7, lo, hi)]
    rows += [np.where(np.arange(c) < 2, [hi, -hi] + [0] * (c - 2), 0), np.arange(c) % 3 - 1]
    x = np.stack(rows).astype(np.int64)
    p = {"bias": np.zeros(c, np.int64), "multiplier": np.ones(c, np.int64), "shift": np.ones(c, np.int64)}
    st = iv.layernorm_stages(x, {**p, "in_bits": 16, "out_bits": 16})
    var = st["var"][:, 0]
    assert var.max() < c << 30 and var.max() >= 1 << 41
    k, quotients = np.full(var.shape, iv.LN_START), []
    for _ in range(iv.LN_STEPS):
        quotients.append(var // k)
        k = (k + var // k) >> 1
        assert (k >= np.sqrt(var).astype(np.int64)).all() and k.max() < 1 << 26
    assert np.array_equal(k, st["std"][:, 0]) and max(q.max() for q in quotients) < 1 << 26
    df = np.abs(st["d"] * st["factor"])
    assert df.max() <= (1 << 31) - 1 and df.max() >= 1 << 30 and np.abs(st["y"]).max() <= 1 << 30


def test_ptf_widths():
    """12-bit codes at the widest factor, rows of 4096: C Sxx - Sx^2 < 2^53 (exact in binary64)."""
    c = 4096
    alpha = np.where(np.arange(c) % 2 == 0, 3, 0)
    p = fq.ptf_params(np.ones(c), np.zeros(c), 2.0**-6, alpha, 0.05, 12, 16)
    x = _rails(c, 12)
    st = fq.layernorm_ptf_stages(x, p)
    v = c * st["sxx"] - st["sx"] ** 2
    assert v.max() < 2.0**53 and np.abs(st["z"]).max() <= 1 << 14
    assert st["m"].max() <= 255 and 0 <= st["n"].min() and st["n"].max() <= 31
    _same("ptf", "layernorm", x[[0, 2]], p)


def test_ptf_constant_row_gives_beta():
    """FQ-ViT divides by a zero standard deviation on a constant row (NaN); hwvit gives beta / s_out."""
    beta = np.array([0.1, -0.2, 0.3])
    p = fq.ptf_params(np.ones(3), beta, 0.02, np.array([0, 1, 2]), 0.01, 8, 8)
    assert fq.layernorm_ptf_stages(np.array([[4, 2, 1]]), p)["out"].tolist() == [[10, -20, 30]]


def test_log2_widths():
    """The finest scale (2^-9), 16-bit scores, rows of 4096: E <= c 2^30 < 2^49.5, S < 2^62."""
    p = variants.get("softmax", "log2").prepare(SoftmaxContext(2.0**-9, 16, 16))
    x = _rails(4096, 16)
    st = fq.log2_stages(x, p)
    assert st["e"].max() <= p["c_int"] << 30 < 2**49.5 and st["sum"].max() < 1 << 62
    assert st["out"].max() <= 1 << 15
    _same("log2", "softmax", x[:, :50], p)
    with pytest.raises(ValueError, match="at least 2"):
        variants.get("softmax", "log2").prepare(SoftmaxContext(2.0**-10, 16, 16))


# ----------------------------------------------------------------------------- the float steps, exactly


def test_round_ratio_is_the_float64_division_rounded_to_even():
    """round(fl(S / E)) where the double lands on Q + 1/2 from either side, or exactly there."""
    rng = np.random.default_rng(5)
    s, e = [], []
    for t in range(0, 52):
        for _ in range(6):
            q = int(rng.integers(1 << t, 1 << (t + 1)))
            den = int(rng.integers(3, 1 << min(40, 61 - t)))
            for off in (-2, -1, 0, 1, 2):  # S / E within a few units of E below 2^-53 of Q + 1/2
                num = q * den + den // 2 + off
                if 1 <= den <= num < 1 << 62:
                    s.append(num)
                    e.append(den)
    s.extend(int(v) for v in rng.integers(1 << 20, 1 << 61, 3000))
    e.extend(int(v) for v in rng.integers(1, 1 << 20, 3000))
    got = fq.round_ratio(np.array(s, dtype=np.int64), np.array(e, dtype=np.int64))
    want = [fq.round_ratio_ref(a, b) for a, b in zip(s, e)]
    bad = [(a, b) for a, b, g, w in zip(s, e, got.tolist(), want) if g != w and (a // b) < 1 << 51]
    assert not bad, bad[:5]
    assert any(round(Fraction(a, b)) != w for a, b, w in zip(s, e, want))  # the double's rounding shows


def test_wide_requant_product_is_exact():
    """ibert_requant's split product (|z| < 2^46, |M| <= 2^31, E in [17, 78]) against Python ints."""
    rng = np.random.default_rng(6)
    z = np.concatenate([rng.integers(-(1 << 46) + 1, 1 << 46, 4000), [(1 << 46) - 1, -(1 << 46) + 1, 0, 1, -1]])
    m = rng.choice([1 << 31, -(1 << 31), (1 << 31) - 1, 1 << 30, 12345], z.size)
    for e in (17, 18, 40, 62, 63, 78):
        got = ibert.ibert_requant(z[None, :], m, np.full(z.size, e), 16)[0]
        want = [ibert.ibert_requant_ref(int(a), int(b), e, 16) for a, b in zip(z, m)]
        assert got.tolist() == want, e
    ties = np.array([3 << 40, -(3 << 40), 5 << 40, -(5 << 40)])  # z m / 2^E exactly at a half
    got = ibert.ibert_requant(ties[None, :], np.full(4, 1 << 30), np.full(4, 71), 16)[0]
    assert got.tolist() == [ibert.ibert_requant_ref(int(v), 1 << 30, 71, 16) for v in ties] == [2, -2, 2, -2]


# ----------------------------------------------------------------------------- released vs corrected


@pytest.mark.parametrize(
    "family, name, data",
    [
        ("softmax", "shiftmax", "ivit_softmax"),
        ("gelu", "shiftgelu", "ivit_gelu"),
        ("layernorm", "ivit", "ivit_layernorm"),
        ("layernorm", "ptf", "fqvit_layernorm"),
        ("softmax", "log2", "fqvit_log2"),
    ],
)
def test_released_and_corrected_forms_differ(family, name, data):
    """The paper's name is the released code, the ``_exact`` name hwvit's correction: on the authors'
    int8 rows the two disagree somewhere (docs/variants: how much)."""
    exact = variants.get(family, f"{name}_exact")
    released = variants.get(family, name)
    differ = 0
    for g in load(data)[1]:
        x = np.clip(g["x"].astype(np.int64), -128, 127)
        if family == "softmax":
            ctx = SoftmaxContext(g["s_in"], 8, 8)
        elif family == "gelu":
            ctx = GeluContext(g["s_in"], 8, g["s_out"], 8)
        else:
            s = g.get("s", g.get("s_in"))
            alpha = g.get("alpha")
            ctx = PtfContext(g["gamma"], np.asarray(g["beta"]), 0.0, s, g["s_out"], 8, alpha=alpha)
        got, want = released.kernel(x, released.prepare(ctx)), exact.kernel(x, exact.prepare(ctx))
        differ += int(np.count_nonzero(got != want))
    assert differ > 0
