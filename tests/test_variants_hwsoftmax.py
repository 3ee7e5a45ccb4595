"""Hardware softmax variants (softermax, ita, log2) and the tanh-form GELU table (tanh_lut).

Kernel == reference element for element on random rows of lengths 1, 7, 64, 197, 1024 at
realistic scales and on the extremes; every intermediate within its stated width at the extremes
(in_bits 16, N 4096, the largest and smallest scales); every probability fits unsigned out_bits;
a float sanity check (the only place with tolerances); each variant found by the registry.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from hwvit import variants
from hwvit.quant.params import gelu_table
from hwvit.variants import gelu_tables, hwsoftmax
from hwvit.variants.base import GeluContext, SoftmaxContext

SOFTMAX = ("softermax", "ita", "log2_exact")
LENGTHS = {1: 150, 7: 60, 64: 24, 197: 10, 1024: 3}  # rows per length (per scale)
SCALES = (0.02, 0.05, 0.1, 0.2)  # attention-score scales: logits up to +-2.5 .. +-25
ITA_SCALE = hwsoftmax.ITA_SCALE  # ITA's own: s_in * log2(e) = 1
ITA_SCALE_2023 = hwsoftmax.ITA_SCALE_2023  # ITA's before: s_in * log2(e) = 2^-5
ROW_REF = {"softermax": hwsoftmax.softermax_row_ref, "ita": hwsoftmax.ita_row_ref, "log2_exact": hwsoftmax.log2_row_ref}


def _kind_rows(rng, kind: int, rows: int, n: int, s_in: float, bits: int = 8) -> np.ndarray:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if kind == 0:  # uniform over the whole range
        return rng.integers(lo, hi + 1, (rows, n))
    # attention-like: real logits N(mu, sigma), quantized at s_in
    sigma = rng.uniform(0.3, 4.0, (rows, 1))
    mu = rng.uniform(-2.0, 2.0, (rows, 1))
    return np.clip(np.round(rng.normal(mu, sigma, (rows, n)) / s_in), lo, hi).astype(np.int64)


def _extremes(n: int, bits: int = 8) -> list[np.ndarray]:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    one_hot = np.full(n, lo)
    one_hot[n // 2] = hi
    spread = np.where(np.arange(n) % 2 == 0, lo, hi)
    ramp_up = np.linspace(lo, hi, n).round().astype(np.int64)  # the max grows at every step
    last_hot = np.full(n, lo)
    last_hot[-1] = hi  # the max arrives last: every partial sum is shifted away
    return [
        np.full(n, 0),
        np.full(n, 37 % (hi + 1)),
        one_hot,
        np.full(n, lo),
        np.full(n, hi),
        spread,
        ramp_up,
        ramp_up[::-1].copy(),
        last_hot,
    ]


def _check(name: str, x: np.ndarray, ctx: SoftmaxContext) -> np.ndarray:
    v = variants.get("softmax", name)
    p = v.prepare(ctx)
    y = v.kernel(x, p)
    ref = np.array(v.reference(x.tolist(), p), dtype=object)
    assert y.dtype == np.int64 and y.shape == x.shape
    assert np.array_equal(y, ref.astype(np.int64)) and all(int(a) == int(b) for a, b in zip(y.ravel(), ref.ravel()))
    assert y.min() >= 0 and y.max() <= (1 << ctx.out_bits) - 1, (name, y.min(), y.max())
    return y


# ---------------------------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------------------------


def test_registry_finds_every_variant():
    for name in SOFTMAX:
        v = variants.get("softmax", name)
        assert v.key == f"softmax={name}" and name in variants.names("softmax")
        assert v in hwsoftmax.VARIANTS and v.cite
    g = variants.get("gelu", "tanh_lut")
    assert g.key == "gelu=tanh_lut" and g in gelu_tables.VARIANTS and "tanh_lut" in variants.names("gelu")


# ---------------------------------------------------------------------------------------------
# kernel == reference
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SOFTMAX)
def test_kernel_matches_reference_random(name):
    rng = np.random.default_rng(sum(map(ord, name)))
    elements = 0
    scales = (*SCALES, ITA_SCALE, ITA_SCALE_2023)
    for i, (n, rows) in enumerate(LENGTHS.items()):
        for j, s_in in enumerate(scales):
            x = _kind_rows(rng, (i + j) % 2, rows, n, s_in)
            _check(name, x, SoftmaxContext(s_in, 8, 8))
            elements += x.size
    assert elements >= 10_000, elements


@pytest.mark.parametrize("name", SOFTMAX)
@pytest.mark.parametrize("out_bits", [1, 4, 8, 16])
def test_kernel_matches_reference_out_bits_and_leading_axes(name, out_bits):
    rng = np.random.default_rng(out_bits)
    x = _kind_rows(rng, 1, 24, 50, 0.05).reshape(2, 3, 4, 50)  # any leading shape
    _check(name, x, SoftmaxContext(0.05, 8, out_bits))
    x = rng.integers(-(1 << 11), 1 << 11, (5, 33))  # 12-bit scores
    _check(name, x, SoftmaxContext(0.005, 12, out_bits))


@pytest.mark.parametrize("name", SOFTMAX)
@pytest.mark.parametrize("n", [1, 7, 64, 197, 1024])
def test_kernel_matches_reference_extremes(name, n):
    x = np.stack(_extremes(n))
    for s_in in (0.02, 0.2, ITA_SCALE, ITA_SCALE_2023):
        y = _check(name, x, SoftmaxContext(s_in, 8, 8))
        # all equal: every element gets the same probability
        for r in (0, 1, 3, 4):
            assert len(set(y[r].tolist())) == 1


@pytest.mark.parametrize("name", SOFTMAX)
@pytest.mark.parametrize("in_bits", [2, 4, 8, 12, 16])
def test_kernel_matches_reference_every_width_at_the_block_default_scale(name, in_bits):
    """s_in = 16 / 2^in_bits (the variant block kinds' default): coarse (4.0 at 2 bits: log2
    pre-shifts the scores) to fine (2^-12 at 16 bits)."""
    rng = np.random.default_rng(in_bits)
    x = np.concatenate(
        [rng.integers(-(1 << (in_bits - 1)), 1 << (in_bits - 1), (12, 40)), np.stack(_extremes(40, in_bits))]
    )
    _check(name, x, SoftmaxContext(16.0 / (1 << in_bits), in_bits, 8))


@pytest.mark.parametrize("name", SOFTMAX)
def test_one_hot_is_certain(name):
    """A one-hot row of int8 scores at s_in = 0.2 (a 51-unit logit gap): the hot element takes
    the largest code, every other 0."""
    x = np.full((1, 197), -128)
    x[0, 5] = 127
    v = variants.get("softmax", name)
    p = v.prepare(SoftmaxContext(0.2, 8, 8))
    y = v.kernel(x, p)[0]
    assert y[5] == {"softermax": 255, "ita": 255, "log2_exact": 128}[name]
    assert (np.delete(y, 5) == 0).all()


# ---------------------------------------------------------------------------------------------
# int64 bounds at the extremes: the references record every intermediate on Python ints
# ---------------------------------------------------------------------------------------------


def _extreme_scales(name: str) -> tuple[float, ...]:
    if name == "log2_exact":
        return (2.0**16, 2.0**-24, 0.125)  # the largest pre-shift k; the finest scale; q_ln2 = 5
    big = hwsoftmax.K_MAX / (hwsoftmax.LOG2E * (1 << hwsoftmax.K_FRAC)) * 0.99999  # K just below 2^31
    return (big, 2.0**-16)


@pytest.mark.parametrize("name", SOFTMAX)
def test_intermediate_widths_at_the_extremes(name):
    bits, n = 16, hwsoftmax.MAX_ROW
    rows = np.stack(_extremes(n, bits))
    seen: dict[str, int] = {}
    for s_in in _extreme_scales(name):
        for out_bits in (1, 16):
            ctx = SoftmaxContext(s_in, bits, out_bits)
            p = variants.get("softmax", name).prepare(ctx)
            if name != "log2_exact":
                assert p["mult"] <= hwsoftmax.K_MAX
            for row in rows:
                ROW_REF[name](row.tolist(), p, seen)
            _check(name, rows[[0, 2, 5, 6, 8]], ctx)  # the kernel agrees where int64 is tightest
    widths = hwsoftmax.WIDTHS[name]
    assert set(seen) == set(widths), set(seen) ^ set(widths)
    for key, value in seen.items():
        assert value < 1 << widths[key], (name, key, value.bit_length(), widths[key])
        assert widths[key] <= 62
    # the stated bounds are reached within one bit: they are the real widths, not loose guesses
    assert all(seen[key].bit_length() >= widths[key] - 1 for key in widths), seen


def test_softermax_long_rising_row_stays_within_width():
    """N = 4096, each element one base-2 unit above the last: the running sum is shifted every step."""
    s_in = 1.0 / hwsoftmax.LOG2E  # K = 2^16: x one code = one octave
    x = np.arange(-2048, 2048)[None, :]
    y = _check("softermax", x, SoftmaxContext(s_in, 16, 8))
    assert y[0, -1] == 128 and y[0, -2] == 64  # 1/2, 1/4 of 2^8 (geometric row sums to 1)


# ---------------------------------------------------------------------------------------------
# float sanity (tolerances only here)
# ---------------------------------------------------------------------------------------------


def _float_softmax(x: np.ndarray, s_in: float) -> np.ndarray:
    z = x * s_in
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _sanity_rows(seed: int, s_in: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate([_kind_rows(rng, 1, 40, 197, s_in), _kind_rows(rng, 0, 10, 197, s_in)])


@pytest.mark.parametrize("s_in", SCALES)
def test_softermax_close_to_float_softmax(s_in):
    x = _sanity_rows(1, s_in)
    v = variants.get("softmax", "softermax")
    ctx = SoftmaxContext(s_in, 8, 8)
    p = v.prepare(ctx)
    err = np.abs(v.kernel(x, p) * v.out_scale(ctx, p) - _float_softmax(x, s_in))
    assert err.max() <= 1.0 / 256, err.max()  # within 1 LSB (LPW and rounding: ~0.5 LSB seen)


def _ita_float_twin(x: np.ndarray, s_in: float) -> np.ndarray:
    """ITA's algorithm in float: the same rounded base-2 exponents, chunks and max updates, with
    no floor anywhere (2^-shift, the rescaled sum and the inverse exact)."""

    def r(d):
        return np.floor(d * s_in * hwsoftmax.LOG2E + 0.5)

    out = []
    for row in x:
        top, sigma = -128, 0.0
        for i in range(0, len(row), hwsoftmax.ITA_CHUNK):
            chunk = row[i : i + hwsoftmax.ITA_CHUNK]
            if chunk.max() > top:
                sigma *= 2.0 ** -r(chunk.max() - top)
                top = chunk.max()
            sigma += (2.0 ** -r(top - chunk)).sum()
        out.append(2.0 ** -r(top - row) / sigma)
    return np.array(out)


@pytest.mark.parametrize("s_in", [ITA_SCALE_2023, 0.05, 0.1])
def test_ita_close_to_its_float_twin(s_in):
    """ITA rounds the base-2 exponent to an integer and rescales the partial sum by a rounded
    shift: compare with the float twin of that algorithm (a few LSB: the floors of 2^8 >> shift,
    of the shifted sum, of the inverse and of the output; 3.2 LSB seen), and loosely with the
    exact softmax (0.07 seen)."""
    x = _sanity_rows(2, s_in)
    v = variants.get("softmax", "ita")
    ctx = SoftmaxContext(s_in, 8, 8)
    p = v.prepare(ctx)
    y = v.kernel(x, p) * v.out_scale(ctx, p)
    assert np.abs(y - _ita_float_twin(x, s_in)).max() <= 4.0 / 255
    assert np.abs(y - _float_softmax(x, s_in)).max() <= 0.1


@pytest.mark.parametrize("s_in", [0.01, 0.02, 0.05])
def test_log2_codes_close_to_float(s_in):
    """y = 2^(M - code): code within 1/2 (+ I-BERT's exp error) of -log2 p where p >= 2^-(M + 1/2);
    y = 0 only where p is small."""
    x = _sanity_rows(3, s_in)
    v = variants.get("softmax", "log2_exact")
    ctx = SoftmaxContext(s_in, 8, 8)
    p = v.prepare(ctx)
    y = v.kernel(x, p)
    prob = _float_softmax(x, s_in)
    assert np.array_equal(y & (y - 1), np.zeros_like(y))  # powers of two or 0
    big_m = 7
    nl = -np.log2(prob)
    # I-BERT's q_ln2 = floor(ln2 / s) stretches the exponent by delta; over the live codes (<= M + 1)
    # that moves -log2 p by up to delta (M + 1), plus the polynomial's error (0.05)
    delta = math.log(2.0) / s_in / p["q_ln2"] - 1.0
    tol = 0.5 + delta * (big_m + 1) + 0.05
    live = y > 0
    code = big_m - np.log2(np.where(live, y, 1))
    assert np.abs(code - nl)[live].max() <= tol
    assert (nl[~live] >= big_m + 0.5 - (tol - 0.5)).all()
    assert live.sum() > 1000


def test_log2_rounding_is_exact_against_python_ints():
    """round(log2(S/E)) at the integer thresholds: spot values either side of 2^(k + 1/2)."""
    p = hwsoftmax.log2_row_ref
    params = variants.get("softmax", "log2_exact").prepare(SoftmaxContext(0.05, 8, 8))
    # two equal elements: p = 1/2, -log2 p = 1 exactly: code 1, y = 64
    assert p([10, 10], params) == [64, 64]
    # one element: p = 1, code 0, y = 128
    assert p([3], params) == [128]


# ---------------------------------------------------------------------------------------------
# prepare refuses what the arithmetic cannot hold
# ---------------------------------------------------------------------------------------------


def test_prepare_and_kernel_refusals():
    for s_in in (2.0**-25, 2.0**17):
        with pytest.raises(ValueError, match="2\\^-24"):
            variants.get("softmax", "log2_exact").prepare(SoftmaxContext(s_in, 8, 8))
    for name in ("softermax", "ita"):
        v = variants.get("softmax", name)
        with pytest.raises(ValueError, match="2\\^31"):
            v.prepare(SoftmaxContext(1e-7, 8, 8))
        p = v.prepare(SoftmaxContext(0.05, 8, 8))
        with pytest.raises(ValueError):
            v.kernel(np.array([[200, 0]]), p)
        with pytest.raises(ValueError):
            v.kernel(np.zeros((1, hwsoftmax.MAX_ROW + 1), dtype=np.int64), p)


# ---------------------------------------------------------------------------------------------
# gelu=tanh_lut
# ---------------------------------------------------------------------------------------------

GELU_CTX = [
    GeluContext(0.05, 8, 0.03, 8),
    GeluContext(0.02, 8, 0.01, 8),
    GeluContext(0.1, 8, 0.1, 8),
    GeluContext(0.004, 10, 0.002, 12),
]


@pytest.mark.parametrize("ctx", GELU_CTX, ids=str)
def test_tanh_lut_kernel_matches_reference(ctx):
    v = variants.get("gelu", "tanh_lut")
    p = v.prepare(ctx)
    half = 1 << (ctx.in_bits - 1)
    rng = np.random.default_rng(ctx.in_bits)
    every = np.arange(-half, half)
    x = np.concatenate([every, rng.integers(-half, half, 10_000 - every.size % 10_000)]).reshape(-1, 16)
    y = v.kernel(x, p)
    assert y.dtype == np.int64 and np.array_equal(y, np.array(v.reference(x.tolist(), p)))
    lo, hi = -(1 << (ctx.out_bits - 1)), (1 << (ctx.out_bits - 1)) - 1
    assert y.min() >= lo and y.max() <= hi
    with pytest.raises(ValueError):
        v.kernel(np.array([half]), p)
    with pytest.raises(ValueError):
        v.reference([half], p)


@pytest.mark.parametrize("ctx", GELU_CTX, ids=str)
def test_tanh_lut_rounds_like_hwvit_and_is_close_to_float(ctx):
    v = variants.get("gelu", "tanh_lut")
    table = v.prepare(ctx)["table"]
    half = 1 << (ctx.in_bits - 1)
    q = np.arange(-half, half)
    real = q * ctx.s_in
    tanh_form = 0.5 * real * (1 + np.tanh(math.sqrt(2 / math.pi) * (real + 0.044715 * real**3)))
    lo, hi = -(1 << (ctx.out_bits - 1)), (1 << (ctx.out_bits - 1)) - 1
    exact = tanh_form / ctx.s_out
    inside = (exact > lo) & (exact < hi)
    assert np.abs(table - exact)[inside].max() <= 0.5 + 1e-9  # correctly rounded
    assert (table[exact >= hi] == hi).all() and (table[exact <= lo] == lo).all()  # saturated
    # half away from zero at exact ties, as hwvit's gelu_table (the entries at q = 0: GELU(0) = 0)
    assert table[half] == 0
    # tanh and erf GELU differ by < 3.3e-4 in real terms: the tables by at most 1 code
    erf = gelu_table(ctx.s_in, ctx.s_out, ctx.in_bits, ctx.out_bits)
    assert np.abs(table - erf).max() <= 1
    # negative inputs keep their precision (v * sigmoid(2z) form): tiny negative outputs are 0 or -1
    assert gelu_tables.gelu_tanh(-10.0) < 0 and abs(gelu_tables.gelu_tanh(-10.0)) < 1e-20
