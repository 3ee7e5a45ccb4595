"""I-BERT variants: bit-exact with transformers' ibert quant_modules (float64), kernel == reference,
int64 bounds at the extremes, float sanity, and the float32 finding (docs/variants/ibert.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hwvit import variants
from hwvit.variants import ibert as ib
from hwvit.variants.base import GeluContext, LayerNormContext, RequantContext, SoftmaxContext

torch = pytest.importorskip("torch")
qm = pytest.importorskip("transformers.models.ibert.quant_modules")

F64 = torch.float64


def _scale(rng, lo: float, hi: float) -> float:
    """A log-uniform scaling factor, float32-representable: then ``x = x_int * s`` is exact in float64
    for ``|x_int| < 2^29`` and transformers' ``x / s`` gives back ``x_int`` exactly."""
    return float(np.float32(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def _encode(xi: np.ndarray, s: float, dtype=np.float64) -> np.ndarray:
    x = xi.astype(dtype) * dtype(s)
    if dtype is np.float64:
        assert np.array_equal(x / s, xi), "x / s must give the integers back"
    return x


def _sf(s: float, dtype=F64):
    return torch.tensor([s], dtype=dtype)


# ---------------------------------------------------------------------------------------------- transformers runs


@torch.no_grad()
def _tf_gelu(xi, s, dtype=F64):
    mod = qm.IntGELU(quant_mode=True).eval()
    npd = np.float64 if dtype == F64 else np.float32
    y, sf = mod(torch.tensor(_encode(xi, s, npd)), _sf(s, dtype))
    return np.round(y.double().numpy() / sf.double().numpy()), float(sf)


@torch.no_grad()
def _tf_softmax(xi, s, bits, x_max, dtype=F64):
    mod = qm.IntSoftmax(bits, quant_mode=True).eval()
    if dtype == F64:
        mod = mod.double()
    mod.act.x_min = torch.zeros(1, dtype=dtype)
    mod.act.x_max = torch.tensor([x_max], dtype=dtype)
    npd = np.float64 if dtype == F64 else np.float32
    seen = []
    mod.act.register_forward_hook(lambda m, args, out: seen.append(out))
    y, _ = mod(torch.tensor(_encode(xi, s, npd)), _sf(s, dtype))
    exp, act = seen[0]
    exp_int = (exp.double() / act.double()).numpy().reshape(xi.shape)  # what IntSoftmax sums
    return np.round(y.double().numpy() * 2**bits).reshape(xi.shape), exp_int


@torch.no_grad()
def _tf_layernorm(xi, s, gamma, beta, shift, dtype=F64):
    c = xi.shape[-1]
    mod = qm.IntLayerNorm(c, 1e-5, quant_mode=True).eval()
    if dtype == F64:
        mod = mod.double()
    mod.weight.data = torch.tensor(gamma, dtype=dtype)
    mod.bias.data = torch.tensor(beta, dtype=dtype)
    mod.shift = torch.tensor([float(shift)], dtype=dtype)
    npd = np.float64 if dtype == F64 else np.float32
    y, sf = mod(torch.tensor(_encode(xi, s, npd)), _sf(s, dtype))
    return np.round(y.double().numpy() / sf.double().numpy()), sf.double().numpy()


@torch.no_grad()
def _tf_requant(z, s_pre, x_max, bits, dtype=F64):
    """QuantAct(bits) in eval mode, range buffers x_min = -x_max, x_max (so S_act = x_max / (2^(b-1)-1))."""
    mod = qm.QuantAct(bits, quant_mode=True).eval()
    if dtype == F64:
        mod = mod.double()
    mod.x_min = torch.tensor([-x_max], dtype=dtype)
    mod.x_max = torch.tensor([x_max], dtype=dtype)
    npd = np.float64 if dtype == F64 else np.float32
    x = z.astype(npd) * npd(s_pre)
    out, act = mod(torch.tensor(x), pre_act_scaling_factor=_sf(s_pre, dtype))
    return np.round(out.double().numpy().reshape(-1) / act.double().numpy()), float(act)


def _ibert_pair(s_pre: float, s_act: float) -> tuple[int, int]:
    return ib.frexp31(s_pre / float(np.float32(s_act)))


# ---------------------------------------------------------------------------------------------- case generators


def _gelu_cases(rng, count, per=48):
    for _ in range(count):
        s = _scale(rng, 1e-5, 0.1)
        reach = int(rng.choice([1, 4, 16]) / s) + 1
        yield s, rng.integers(-reach, reach + 1, per)


def _gelu_extremes():
    for s in (float(np.float32(1e-5)), float(np.float32(0.1)), 0.5, 1.0):
        b = ib.gelu_constants(s)["b_int"]
        edge = [0, 1, -1, -b, b, -b - 1, b + 1, -b + 1, b - 1, 2**28, -(2**28), 2**28 - 1]
        yield s, np.array(edge, dtype=np.int64)


def _softmax_cases(rng, count, rows=20):
    for _ in range(count):
        s = _scale(rng, 1e-3, 1.0)
        n = int(rng.choice([1, 2, 3, 7, 16, 64, 197]))
        bits = int(rng.choice([4, 8, 8, 16]))
        hi = int(rng.choice([8, 128, 2048]))
        yield s, bits, rng.integers(-hi, hi, (rows, n))


def _softmax_extremes():
    rows = [
        [0] * 8,
        [127] * 8,
        [127] + [-128] * 7,
        [-128] * 7 + [127],
        [127, 126, -128, -128],
        [-(2**15)] * 3 + [2**15],
    ]
    for s in (float(np.float32(1e-3)), float(np.float32(0.1)), 1.0, 1.5):
        for bits in (8, 16):
            for r in rows:
                yield s, bits, np.array([r], dtype=np.int64), None
    # an exp range for which the row maximum's e16 is 16384 = 2^14: one-hot rows give exactly 2^bits (1.0)
    for s in (float(np.float32(0.1)), 0.5):
        c = ib.softmax_constants(s, 8)["c_int"]
        yield s, 8, np.array([[127] + [-128] * 7], dtype=np.int64), c * 2**30 * 32767 / 16384


def _pow2_range(s: float) -> float:
    c = ib.softmax_constants(s, 8)["c_int"]
    return 32767.0 * 2.0 ** math.ceil(math.log2(c * 2**30 / 32767))


def _ln_cases(rng, count):
    for _ in range(count):
        c = int(rng.choice([2, 3, 8, 64, 197, 768]))
        s = _scale(rng, 1e-4, 1.0)
        hi = 2 ** int(rng.integers(2, 21))
        xi = rng.integers(-hi, hi, (2, 10, c))
        gamma = rng.uniform(0.05, 3.0, c) * rng.choice([-1.0, 1.0], c)
        beta = rng.normal(0.0, 1.0, c)
        var = int((((xi - xi.mean(-1, keepdims=True)) ** 2).sum(-1)).max())
        rule = max(0, math.ceil(math.log2(math.sqrt(var / 2**32)))) if var else 0  # I-BERT's set_shift
        yield s, xi, gamma, beta, int(rng.choice([rule, rule, rule + 1, rule + 3]))


def _std_zero(xi, shift):
    """Rows where I-BERT's std integer is 0 (transformers divides by 0 there: inf / NaN)."""
    n = xi.shape[-1]
    total = xi.sum(-1, keepdims=True)
    q, r = np.divmod(total, n)
    mean = q + ((2 * r > n) | ((2 * r == n) & (q % 2 == 1)))
    var = (((xi - mean) >> shift) ** 2).sum(-1)
    return var == 0


def _requant_cases(rng, count, per=64):
    for _ in range(count):
        bits = int(rng.choice([4, 8, 16]))
        s_pre = _scale(rng, 1e-9, 1e-2)
        x_max = _scale(rng, 0.01, 100.0)
        width = int(rng.choice([8, 16, 24, 31]))
        yield s_pre, x_max, bits, rng.integers(-(2 ** (width - 1)), 2 ** (width - 1), per)


# ---------------------------------------------------------------------------------------------- equality (float64)


def test_gelu_equals_transformers():
    rng = np.random.default_rng(101)
    cases = 0
    for s, xi in [*_gelu_cases(rng, 250), *_gelu_extremes()]:
        k = ib.gelu_constants(s)
        want, tf_scale = _tf_gelu(xi, s)
        assert tf_scale == k["scale"]
        got = ib.ibert_gelu_int(xi, k["b_int"], k["c_int"], k["one_int"])
        np.testing.assert_array_equal(got, want, err_msg=f"s={s}")
        assert [ib.ibert_gelu_int_ref(int(v), k["b_int"], k["c_int"], k["one_int"]) for v in xi] == got.tolist()
        cases += xi.size
    assert cases >= 10_000


def test_softmax_equals_transformers():
    rng = np.random.default_rng(102)
    rows = saturating = artefact_rows = artefact_diff = pow2_rows = pow2_inexact = 0
    # half the cases with QuantAct's range at the EMA limit c 2^30, half with a range whose scale
    # S_act = x_max / 32767 is a power of two (then exp / S_act is exact and so is every row)
    cases = [(s, b, x, None if i % 2 else _pow2_range(s)) for i, (s, b, x) in enumerate(_softmax_cases(rng, 500))]
    for s, bits, xi, x_max in [*cases, *_softmax_extremes()]:
        k = ib.softmax_constants(s, bits, act_x_max=x_max)
        want, exp_int = _tf_softmax(xi, s, bits, float(k["c_int"] * 2**30) if x_max is None else x_max)
        # the 16-bit QuantAct integers are equal everywhere
        np.testing.assert_array_equal(ib.ibert_softmax_e16(xi, k), np.round(exp_int))
        got = ib.ibert_softmax_int(xi, k)
        # transformers then divides QuantAct's real output by its scale again: exp_int is not always
        # the integer back (fl(fl(n * S) / S) != n); rows where it is not are float artefacts
        inexact = (exp_int != np.round(exp_int)).any(-1)
        differ = (got != want).any(-1)
        assert not (differ & ~inexact).any(), f"s={s} bits={bits}: a row differs with exact integer exp_int"
        rows += xi.shape[0]
        artefact_rows += int(inexact.sum())
        artefact_diff += int(differ.sum())
        saturating += int((got == 2**bits).sum())
        if x_max is not None and x_max == _pow2_range(s):
            pow2_rows += xi.shape[0]
            pow2_inexact += int(inexact.sum())
    print(f"softmax float64: {rows} rows, {artefact_rows} with a non-integer exp_int, {artefact_diff} differ")
    assert rows >= 10_000
    assert artefact_diff <= rows // 1000
    assert saturating >= 2  # I-BERT itself emits 2^bits (probability 1.0) on the one-hot extremes
    assert pow2_rows >= 5_000 and pow2_inexact == 0


def test_layernorm_equals_transformers():
    rng = np.random.default_rng(103)
    rows = nan_rows = 0
    for s, xi, gamma, beta, shift in _ln_cases(rng, 530):
        k = ib.layernorm_constants(gamma, beta, xi.shape[-1])
        want, tf_scale = _tf_layernorm(xi, s, gamma, beta, shift)
        np.testing.assert_array_equal(tf_scale, k["scale"])
        got = ib.ibert_layernorm_int(xi, k["bias_int"], shift)
        zero = _std_zero(xi, shift)
        assert not np.isfinite(want[zero]).all() or not zero.any()  # transformers: 0 * inf
        np.testing.assert_array_equal(got[~zero], want[~zero], err_msg=f"C={xi.shape[-1]} shift={shift}")
        rows += int((~zero).sum())
        nan_rows += int(zero.sum())
    print(f"layernorm float64: {rows} rows equal, {nan_rows} constant rows (std 0: transformers inf/NaN)")
    assert rows >= 10_000
    # extremes: the full int31 range, alternating signs, one outlier, with I-BERT's shift rule
    c = 768
    for row in ([2**30 - 1, -(2**30)] * (c // 2), [2**29] + [0] * (c - 1), list(range(-c // 2, c // 2))):
        xi = np.array([[row]], dtype=np.int64)
        var = int(((xi - xi.mean()) ** 2).sum())
        shift = max(0, math.ceil(math.log2(math.sqrt(var / 2**32))))
        gamma, beta = np.full(c, 0.5), np.full(c, -0.25)
        k = ib.layernorm_constants(gamma, beta, c)
        want, _ = _tf_layernorm(xi, 1.0 / 1024, gamma, beta, shift)
        np.testing.assert_array_equal(ib.ibert_layernorm_int(xi, k["bias_int"], shift), want)


def test_requant_equals_transformers():
    rng = np.random.default_rng(104)
    cases = 0
    extremes = [(2.0**-20, 1.0, 8, np.array([2**31 - 1, -(2**31), 0, 1, -1, 2**20, -(2**20)], dtype=np.int64))]
    for s_pre, x_max, bits, z in [*_requant_cases(rng, 200), *extremes]:
        want, s_act = _tf_requant(z, s_pre, x_max, bits)
        m, e = _ibert_pair(s_pre, s_act)
        got = ib.ibert_requant(z, m, e, bits)
        np.testing.assert_array_equal(got, want, err_msg=f"s_pre={s_pre} x_max={x_max}")
        assert [ib.ibert_requant_ref(int(v), m, e, bits) for v in z] == got.tolist()
        cases += z.size
    assert cases >= 10_000


def test_frexp31_rounds_half_away_and_can_reach_2_pow_31():
    assert ib.frexp31(0.5) == (2**30, 31)
    assert ib.frexp31(-0.75) == (-(3 * 2**29), 31)
    assert ib.frexp31(1 - 2.0**-40) == (2**31, 31)  # m * 2^31 rounds up to 2^31
    assert ib.frexp31(0.0) == (0, 31)
    assert ib.frexp31((2**31 - 0.5) * 2.0**-31)[0] == 2**31  # the tie goes away from zero
    assert ib.frexp31(-(2**31 - 0.5) * 2.0**-31)[0] == -(2**31)
    assert ib.ibert_requant_ref(5, 1, 1, 8) == 2 and ib.ibert_requant_ref(7, 1, 1, 8) == 4  # ties to even
    assert ib.ibert_requant_ref(-5, 1, 1, 8) == -2 and ib.ibert_requant_ref(-7, 1, 1, 8) == -4


def test_isqrt_is_algorithm_4_and_floor_sqrt():
    rng = np.random.default_rng(105)
    n = np.concatenate([np.arange(0, 5000), rng.integers(0, 2**34, 20000), [2**32 - 1, 2**32, 2**34 - 1]])
    got = ib.isqrt_ibert_np(n)
    want = np.array([math.isqrt(int(v)) for v in n])
    np.testing.assert_array_equal(got, want)
    assert [ib.isqrt_ibert(int(v)) for v in n[:6000]] == want[:6000].tolist()

    def ten_from_2_16(v):  # a fixed 10 Newton steps from 2^16 is not floor(sqrt) for small inputs
        x = 1 << 16
        for _ in range(10):
            x = (x + v // x) >> 1
        return x

    assert ten_from_2_16(1) == 64 != ib.isqrt_ibert(1)


# ---------------------------------------------------------------------------------------------- variants


def _variant_inputs(rng, shape, bits=8):
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    x = rng.integers(lo, hi + 1, shape)
    ext = np.stack([np.full(shape[1:], lo), np.full(shape[1:], hi), np.zeros(shape[1:], dtype=np.int64)])
    alt = np.where(np.indices(shape[1:]).sum(0) % 2 == 0, lo, hi)[None]
    return np.concatenate([x, ext, alt]).astype(np.int64)


def test_variants_registered():
    for family in ("gelu", "softmax", "layernorm", "requant"):
        v = variants.get(family, "ibert")
        assert v.family == family and v.name == "ibert" and "I-BERT" in v.cite


def test_gelu_variant_kernel_reference_and_float():
    v = variants.get("gelu", "ibert")
    rng = np.random.default_rng(201)
    for s_in, s_out, out_bits in ((0.05, 0.05, 8), (0.02, 0.01, 8), (2.0**-7, 2.0**-9, 16), (0.3, 0.1, 8)):
        ctx = GeluContext(s_in=s_in, in_bits=8, s_out=s_out, out_bits=out_bits)
        p = v.prepare(ctx)
        x = np.arange(-128, 128, dtype=np.int64)
        xs = _variant_inputs(rng, (6, 40))
        for arr in (x, xs):
            y = v.kernel(arr, p)
            assert y.dtype == np.int64 and y.tolist() == v.reference(arr, p)
        y = v.kernel(x, p)
        assert -(2 ** (out_bits - 1)) <= y.min() and y.max() < 2 ** (out_bits - 1)
        real = x * s_in
        gelu = 0.5 * real * (1 + np.vectorize(math.erf)(real / math.sqrt(2)))
        fit = np.abs(gelu) < (2 ** (out_bits - 1) - 1) * s_out
        err = np.abs(y * v.out_scale(ctx, p) - gelu)[fit]
        assert err.max() <= 0.03 * max(1.0, np.abs(real).max() / 4) + s_out, (s_in, err.max())


def test_softmax_variant_kernel_reference_saturation_and_float():
    v = variants.get("softmax", "ibert")
    rng = np.random.default_rng(202)
    for s_in, bits in ((0.05, 8), (0.1, 8), (2.0**-6, 16), (0.01, 4)):
        ctx = SoftmaxContext(s_in=s_in, in_bits=8, out_bits=bits)
        p = v.prepare(ctx)
        for n in (1, 5, 64):
            x = _variant_inputs(rng, (12, n))
            y = v.kernel(x, p)
            assert y.dtype == np.int64 and y.tolist() == v.reference(x, p)
            assert y.min() >= 0 and y.max() <= 2**bits - 1
            ref = np.exp(x * s_in - (x * s_in).max(-1, keepdims=True))
            ref /= ref.sum(-1, keepdims=True)
            assert np.abs(y * v.out_scale(ctx, p) - ref).max() <= 0.01 + 2.0 / 2**bits
    # I-BERT's 2^bits (1.0) saturates to 2^bits - 1 in hwvit's unsigned out_bits
    k = ib.softmax_constants(0.1, 8)
    p = {**ib.softmax_constants(0.1, 8, act_x_max=k["c_int"] * 2**30 * 32767 / 16384), "in_bits": 8}
    x = np.array([[127] + [-128] * 7])
    assert ib.ibert_softmax_int(x, p)[0, 0] == 256
    assert v.kernel(x, p)[0, 0] == 255 and v.reference(x, p)[0][0] == 255


def test_layernorm_variant_kernel_reference_and_float():
    v = variants.get("layernorm", "ibert")
    rng = np.random.default_rng(203)
    for c, s_in, s_out, bits in (
        (8, 0.05, 0.03, 8),
        (64, 0.02, 2.0**-5, 8),
        (197, 0.1, 2.0**-10, 16),
        (3, 0.5, 0.05, 8),
    ):
        gamma = rng.uniform(0.3, 2.0, c) * rng.choice([-1.0, 1.0], c)
        beta = rng.normal(0, 0.5, c)
        ctx = LayerNormContext(gamma=gamma, beta=beta, eps=1e-6, s_in=s_in, s_out=s_out, out_bits=bits)
        p = v.prepare(ctx)
        x = _variant_inputs(rng, (10, c))
        y = v.kernel(x, p)
        assert y.dtype == np.int64 and y.tolist() == v.reference(x, p)
        real = x * s_in
        mu = real.mean(-1, keepdims=True)
        ref = (real - mu) / np.sqrt(((real - mu) ** 2).mean(-1, keepdims=True) + 1e-6) * gamma + beta
        ok = (real.std(-1) > 0)[:, None] & (np.abs(ref) < (2 ** (bits - 1) - 1) * s_out)
        ok &= np.abs(real - mu) > 0  # a constant row: I-BERT gives beta exactly; the mean rounding elsewhere
        err = np.abs(y * v.out_scale(ctx, p) - ref)[ok]
        assert err.max() <= 2 * s_out + 0.06 * np.abs(gamma).max(), (c, err.max())
    ctx = LayerNormContext(gamma=np.ones(4), beta=np.full(4, 0.5), eps=1e-6, s_in=0.1, s_out=0.1, out_bits=8)
    p = v.prepare(ctx)
    assert v.kernel(np.full((1, 4), 7), p).tolist() == [[5] * 4]  # constant row: beta (std taken as 1)


def test_requant_variant_kernel_reference():
    v = variants.get("requant", "ibert")
    rng = np.random.default_rng(204)
    for scale, bits in ((2.0**-12, 8), (3.3e-5, 8), (0.7, 16), (1 - 2.0**-40, 8), (1e-9, 4)):
        p = v.prepare(RequantContext(scale=scale, out_bits=bits))
        acc = np.concatenate([rng.integers(-(2**31), 2**31, 500), [2**31 - 1, -(2**31), 0, 1, -1]])
        y = v.kernel(acc, p)
        assert y.tolist() == v.reference(acc, p)
        exact = np.array([round(float(a) * scale) for a in acc[:50]])
        assert np.abs(np.clip(exact, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1) - y[:50]).max() <= 1


# ---------------------------------------------------------------------------------------------- int64 bounds


def test_int64_bounds_at_extremes():
    # GELU: s = 2^-20, |x| < 2^31
    tr: dict = {}
    k = ib.gelu_constants(2.0**-20)
    for x in (2**31 - 1, -(2**31) + 1, 1, -1, -k["b_int"], k["b_int"]):
        ib.ibert_gelu_int_ref(x, k["b_int"], k["c_int"], k["one_int"], tr)
    assert abs(k["b_int"]) < 2**22 and abs(k["c_int"]) < 2**43 and abs(k["one_int"]) < 2**29
    assert tr["poly"] < 2**43 and tr["erf"] < 2**29 and tr["erf_plus_one"] < 2**30 and tr["y"] < 2**61
    x = np.array([2**31 - 1, -(2**31) + 1, -k["b_int"]])
    assert ib.ibert_gelu_int(x, k["b_int"], k["c_int"], k["one_int"]).tolist() == [
        ib.ibert_gelu_int_ref(int(v), k["b_int"], k["c_int"], k["one_int"]) for v in x
    ]
    # softmax: s = 2^-15, 16-bit inputs, N = 2^16
    tr = {}
    k = ib.softmax_constants(2.0**-15, 16)
    assert abs(k["x0_int"]) < 2**15 and k["c_int"] < 2**32
    row = [2**15 - 1] + [-(2**15)] * 3 + [2**15 - 2] * 4
    ib.ibert_softmax_int_ref(row, k, tr)
    ib.ibert_softmax_int_ref([0] * 2**16, ib.softmax_constants(2.0**-15, 1), tr)
    assert tr["exp"] < 2**62 and tr["poly"] < 2**32 and tr["e16"] < 2**15
    assert tr["sum"] < 2**31 and tr["factor"] <= 2**32 and tr["prod"] <= 2**32
    assert ib.ibert_softmax_int(np.array([row]), k).tolist() == [ib.ibert_softmax_int_ref(row, k)]
    # LayerNorm: |x| < 2^31, C = 2^16, I-BERT's shift
    tr = {}
    c = 2**16
    row = [2**31 - 1, -(2**31) + 1] * (c // 2)
    var = sum((v - 0) ** 2 for v in row)
    shift = max(0, math.ceil(math.log2(math.sqrt(var / 2**32))))
    bias = [0] * c
    ib.ibert_layernorm_int_ref(row, bias, shift, tr)
    ib.ibert_layernorm_int_ref([2**31 - 1] + [-(2**31) + 1] * (c - 1), bias, shift, tr)
    assert tr["var"] < 2**34 and tr["std"] < 2 ** (17 + shift) and tr["factor"] <= 2**31
    assert tr["prod"] < 3 * 2**31 and tr["out"] < 3 * 2**30 and tr["y"] < 2**32
    assert ib.ibert_layernorm_int(np.array([row]), np.zeros(c, np.int64), shift).tolist() == [
        ib.ibert_layernorm_int_ref(row, bias, shift)
    ]
    # requant: |acc * M| <= 2^62
    assert abs((-(2**31)) * 2**31) <= 2**62
    assert ib.ibert_requant(np.array([-(2**31)]), 2**31, 62, 8).tolist() == [
        ib.ibert_requant_ref(-(2**31), 2**31, 62, 8)
    ]


# ---------------------------------------------------------------------------------------------- float32 finding


def test_float32_transformers_is_not_exact():
    """transformers in float32 (its default) against the exact integers; the rates go to the doc."""
    rng = np.random.default_rng(301)
    bad = {"gelu": [0, 0], "softmax": [0, 0], "layernorm": [0, 0], "requant": [0, 0]}
    for s, xi in _gelu_cases(rng, 60):
        k = ib.gelu_constants(s)
        want, _ = _tf_gelu(xi, s, torch.float32)
        got = ib.ibert_gelu_int(xi, k["b_int"], k["c_int"], k["one_int"])
        bad["gelu"][0] += int((got != want).sum())
        bad["gelu"][1] += xi.size
    for s, bits, xi in _softmax_cases(rng, 60):
        k = ib.softmax_constants(s, bits)
        want, _ = _tf_softmax(xi, s, bits, float(k["c_int"] * 2**30), torch.float32)
        bad["softmax"][0] += int((ib.ibert_softmax_int(xi, k) != want).any(-1).sum())
        bad["softmax"][1] += xi.shape[0]
    for s, xi, gamma, beta, shift in _ln_cases(rng, 60):
        k = ib.layernorm_constants(gamma, beta, xi.shape[-1])
        want, _ = _tf_layernorm(xi, s, gamma, beta, shift, torch.float32)
        zero = _std_zero(xi, shift)
        got = ib.ibert_layernorm_int(xi, k["bias_int"], shift)
        bad["layernorm"][0] += int(((got != np.round(want)).any(-1) & ~zero).sum())
        bad["layernorm"][1] += int((~zero).sum())
    for s_pre, x_max, bits, z in _requant_cases(rng, 60):
        want, s_act = _tf_requant(z, s_pre, x_max, bits, torch.float32)
        got = ib.ibert_requant(z, *_ibert_pair(s_pre, s_act), bits)
        bad["requant"][0] += int((got != want).sum())
        bad["requant"][1] += z.size
    rates = {k: (b, n, b / n) for k, (b, n) in bad.items()}
    print("float32 mismatches (bad, cases, rate):", rates)
    assert rates["gelu"][0] > 0 and rates["layernorm"][0] > 0
