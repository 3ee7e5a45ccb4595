"""hwvit.variants.rounding: every requant rounding variant's kernel equals its Python-int reference,
hand-worked ties per mode, gemmlowp's saturation, left shift and agreement with exact arithmetic."""

from __future__ import annotations

import math
import zlib
from fractions import Fraction

import numpy as np
import pytest

from hwvit import variants
from hwvit.variants import rounding
from hwvit.variants.base import RequantContext

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
SHIFT_MODES = ("half_up_wrap", "half_away", "half_away_wrap", "half_even", "half_even_wrap", "floor", "floor_wrap")
GEMMLOWP_MODES = ("gemmlowp", "gemmlowp_wrap")
ALL = SHIFT_MODES + GEMMLOWP_MODES


def _params(m, s, bits):
    return {"multiplier": m, "shift": s, "out_bits": bits}


def _check(name, acc, m, s, bits) -> int:
    """Kernel == reference on one batch; returns the number of elements checked."""
    v = variants.get("requant", name)
    acc = np.asarray(acc, dtype=np.int64)
    p = _params(m, s, bits)
    got = v.kernel(acc, p)
    assert got.dtype == np.int64 and got.shape == acc.shape
    want = v.reference(acc.tolist(), p)
    if got.tolist() != want:
        bad = np.argwhere(got != np.array(want, dtype=np.int64))[0]
        j = bad[-1]
        mj = m[j] if np.ndim(m) else m
        sj = s[j] if np.ndim(s) else s
        pytest.fail(f"{name}: acc={acc[tuple(bad)]} M={mj} s={sj} bits={bits}: {got[tuple(bad)]} != ref")
    return acc.size


def _accs(rng, shape):
    """Half over the whole int32 range, a quarter small, a quarter at a random bit length."""
    full = rng.integers(I32_MIN, I32_MAX, size=shape, endpoint=True)
    small = rng.integers(-1000, 1000, size=shape, endpoint=True)
    bits = rng.integers(0, 31, size=shape)
    sized = rng.integers(-(2**30), 2**30, size=shape, endpoint=True) >> (30 - bits)
    pick = rng.integers(0, 4, size=shape)
    return np.where(pick < 2, full, np.where(pick == 2, small, sized))


def _bitlen(x):
    return np.array([int(abs(int(v))).bit_length() for v in np.ravel(x)]).reshape(np.shape(x))


def _shift_batches(rng):
    """(acc, M, s, bits) batches for the shift modes: M in [0, 2^31-1], s in [0, 62]."""
    out = []
    for bits in (2, 8, 16):
        # per channel, multipliers and shifts uniform over their whole ranges
        n = 400
        out.append(
            (
                _accs(rng, (3, n)),
                rng.integers(0, 2**31 - 1, n, endpoint=True),
                rng.integers(0, 62, n, endpoint=True),
                bits,
            )
        )
        # per channel, shifts aimed at the output range (many results neither 0 nor saturated)
        acc = _accs(rng, (3, n))
        m = rng.integers(2**30, 2**31 - 1, n, endpoint=True)
        top = _bitlen(np.abs(acc).max(axis=0) * m)
        s = np.clip(top - bits + rng.integers(-2, 4, n), 0, 62)
        out.append((acc, m, s, bits))
        # exact ties: acc = odd * 2^a, M = odd * 2^b, s = a + b + 1 -> (acc * M) / 2^s = odd / 2
        a = rng.integers(0, 20, n)
        b = rng.integers(0, 20, n)
        acc = rng.integers(-200, 200, (3, n), endpoint=True) * 2 + 1
        acc = acc << a
        m = (rng.integers(0, 50, n) * 2 + 1) << b
        out.append((acc, m, a + b + 1, bits))
        # per tensor: scalar multiplier and shift
        for _ in range(15):
            acc = _accs(rng, (2, 20))
            m = int(rng.integers(0, 2**31 - 1, endpoint=True))
            s = int(rng.integers(0, 62, endpoint=True))
            out.append((acc, m, s, bits))
    return out


def _extremes(m_values, s_values):
    combos = [(m, s) for m in m_values for s in s_values]
    acc = np.array([[a] * len(combos) for a in (I32_MIN, I32_MAX, 0, 1, -1)], dtype=np.int64)
    m = np.array([c[0] for c in combos], dtype=np.int64)
    s = np.array([c[1] for c in combos], dtype=np.int64)
    return acc, m, s


@pytest.mark.parametrize("name", SHIFT_MODES)
def test_shift_mode_kernel_equals_reference(name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    batches = _shift_batches(rng)
    total = sum(_check(name, acc, m, s, bits) for acc, m, s, bits in batches)
    # the cases reach what matters: exact ties, and results strictly inside the output range
    ties = inside = 0
    for acc, m, s, bits in batches:
        v = acc * np.asarray(m)
        s = np.broadcast_to(s, v.shape)
        ties += int(np.sum((s > 0) & ((v & ((1 << s) - 1)) == (1 << np.maximum(s - 1, 0)))))
        q = v >> s
        inside += int(np.sum((q > -(2 ** (bits - 1))) & (q < 2 ** (bits - 1) - 1) & (q != 0)))
    assert ties >= 2000 and inside >= 3000, (ties, inside)
    acc, m, s = _extremes((0, 1, 2**30, 2**31 - 1), (0, 1, 31, 62))
    for bits in (2, 8, 16):
        total += _check(name, acc, m, s, bits)
    assert total >= 10_000


def _gemmlowp_batches(rng):
    """(acc, M, shift, bits) batches: M any int32 or TFLite's [2^30, 2^31), shift in [-30, 31]."""
    out = []
    for bits in (2, 8, 16):
        n = 400
        # whole ranges
        out.append(
            (
                _accs(rng, (3, n)),
                rng.integers(I32_MIN, I32_MAX, n, endpoint=True),
                rng.integers(-30, 31, n, endpoint=True),
                bits,
            )
        )
        # TFLite multipliers, right shifts aimed at the output range
        acc = _accs(rng, (3, n))
        m = rng.integers(2**30, 2**31 - 1, n, endpoint=True)
        top = _bitlen(np.abs(acc).max(axis=0))
        s = np.clip(top - bits + rng.integers(-3, 4, n), -30, 31)
        out.append((acc, m, s, bits))
        # left shifts that do not overflow int32 (small accumulators)
        acc = rng.integers(-64, 64, (3, n), endpoint=True)
        out.append((acc, m, -rng.integers(0, 24, n, endpoint=True), bits))
        # ties: M = 2^30 halves exactly (an SRDHM tie for odd acc); acc = odd * 2^k, shift k makes
        # RoundingDivideByPOT see odd * 2^(k-1) / 2^k = odd / 2
        k = rng.integers(0, 20, n)
        acc = (rng.integers(-200, 200, (3, n), endpoint=True) * 2 + 1) << k
        out.append((acc, np.full(n, 2**30), k, bits))
        # SRDHM ties with other multipliers: acc = odd * 2^c, M = odd * 2^b, b + c = 30
        b = rng.integers(10, 24, n, endpoint=True)
        acc = (rng.integers(-200, 200, (3, n), endpoint=True) * 2 + 1) << (30 - b)
        m = (rng.integers(0, 50, n) * 2 + 1) << b
        out.append((acc, m, rng.integers(0, 10, n, endpoint=True), bits))
        for _ in range(15):
            acc = _accs(rng, (2, 20))
            out.append(
                (
                    acc,
                    int(rng.integers(I32_MIN, I32_MAX, endpoint=True)),
                    int(rng.integers(-30, 31, endpoint=True)),
                    bits,
                )
            )
    return out


@pytest.mark.parametrize("name", GEMMLOWP_MODES)
def test_gemmlowp_kernel_equals_reference(name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    batches = _gemmlowp_batches(rng)
    total = sum(_check(name, acc, m, s, bits) for acc, m, s, bits in batches)
    # exact SRDHM ties (a * M = odd * 2^30), divide ties, and results strictly inside the range
    srdhm_ties = pot_ties = inside = 0
    for acc, m, s, bits in batches:
        s = np.broadcast_to(s, acc.shape)
        a = rounding._wrap(acc << np.maximum(-s, 0), 32)
        ab = a * np.asarray(m)
        srdhm_ties += int(np.sum((ab & (2**31 - 1)) == 2**30))
        h = rounding.saturating_rounding_doubling_high_mul(a, m)
        r = np.maximum(s, 0)
        pot_ties += int(np.sum((r > 0) & ((h & ((1 << r) - 1)) == (1 << np.maximum(r - 1, 0)))))
        y = rounding.rounding_divide_by_pot(h, r)
        inside += int(np.sum((y > -(2 ** (bits - 1))) & (y < 2 ** (bits - 1) - 1) & (y != 0)))
    assert srdhm_ties >= 1000 and pot_ties >= 1000 and inside >= 3000, (srdhm_ties, pot_ties, inside)
    acc, m, s = _extremes((I32_MIN, -1, 0, 1, 2**30, 2**31 - 1), (-30, -1, 0, 1, 31))
    for bits in (2, 8, 16):
        total += _check(name, acc, m, s, bits)
    assert total >= 10_000


# ---------------------------------------------------------------- hand-worked values

# (acc, M, s) -> expected per mode; worked by hand:
#   5 * 1 / 2 = 2.5; -5 / 2 = -2.5; 3 / 2 = 1.5; -3 / 2 = -1.5; 7 / 4 = 1.75; -7 / 4 = -1.75;
#   1 * 3 / 4 = 0.75; -3 * 3 / 8 = -1.125; 9 / 2 = 4.5; 13 * 3 / 2^3 = 4.875
HAND = [
    # (acc, M, s), half_up, half_away, half_even, floor
    ((5, 1, 1), 3, 3, 2, 2),
    ((-5, 1, 1), -2, -3, -2, -3),
    ((3, 1, 1), 2, 2, 2, 1),
    ((-3, 1, 1), -1, -2, -2, -2),
    ((7, 1, 2), 2, 2, 2, 1),
    ((-7, 1, 2), -2, -2, -2, -2),
    ((1, 3, 2), 1, 1, 1, 0),
    ((-3, 3, 3), -1, -1, -1, -2),
    ((9, 1, 1), 5, 5, 4, 4),
    ((13, 3, 3), 5, 5, 5, 4),
    ((6, 1, 0), 6, 6, 6, 6),
]


@pytest.mark.parametrize("case", HAND)
def test_hand_ties(case):
    (acc, m, s), *expected = case
    for mode, want in zip(("half_up", "half_away", "half_even", "floor"), expected, strict=True):
        for name in (mode, f"{mode}_wrap"):
            v = variants.get("requant", name)
            p = _params(m, s, 8)
            assert v.kernel(np.array([acc]), p).tolist() == [want], (name, case)
            assert v.reference([acc], p) == [want], (name, case)


def test_hand_overflow_saturate_vs_wrap():
    # 8 bits: 200 -> 127 / -56; 128 -> 127 / -128; -129 -> -128 / 127; 255 / 2 = 127.5
    acc = np.array([200, 128, -129, 255, -257])
    p = _params(1, 0, 8)
    assert variants.get("requant", "floor").kernel(acc, p).tolist() == [127, 127, -128, 127, -128]
    assert variants.get("requant", "floor_wrap").kernel(acc, p).tolist() == [-56, -128, 127, -1, -1]
    p = _params(1, 1, 8)  # 100, 64, -64.5, 127.5, -128.5
    assert variants.get("requant", "half_up_wrap").kernel(acc, p).tolist() == [100, 64, -64, -128, -128]
    assert variants.get("requant", "half_away_wrap").kernel(acc, p).tolist() == [100, 64, -65, -128, 127]
    assert variants.get("requant", "half_even_wrap").kernel(acc, p).tolist() == [100, 64, -64, -128, -128]
    assert variants.get("requant", "half_away").kernel(acc, p).tolist() == [100, 64, -65, 127, -128]


def test_gemmlowp_hand():
    g = variants.get("requant", "gemmlowp")
    # scale 0.5 = 0.5 * 2^0: M = 2^30, shift 0; SRDHM rounds its ties toward +inf:
    # 5 * 2^30 / 2^31 = 2.5 -> 3, -2.5 -> -2
    p = g.prepare(RequantContext(0.5, 8))
    assert p == _params(2**30, 0, 8)
    assert g.kernel(np.array([5, -5, 4, -4]), p).tolist() == [3, -2, 2, -2]
    # scale 0.25: M = 2^30, right shift 1. acc 5: SRDHM 2.5 -> 3, then 3/2 = 1.5 -> 2 (double
    # rounding: exact 1.25 -> 1); -5: -2.5 -> -2 -> -1; 10: 5 -> 2.5 -> 3 (away); -10: -5 -> -3
    p = g.prepare(RequantContext(0.25, 8))
    assert p == _params(2**30, 1, 8)
    assert g.kernel(np.array([5, -5, 10, -10]), p).tolist() == [2, -1, 3, -3]
    assert g.reference([5, -5, 10, -10], p) == [2, -1, 3, -3]


def test_gemmlowp_left_shift():
    g = variants.get("requant", "gemmlowp")
    # 3.0 = 0.75 * 2^2: M = 0.75 * 2^31 = 3 * 2^29, exponent 2 -> shift -2 (a left shift by 2)
    p = g.prepare(RequantContext(3.0, 8))
    assert p == _params(3 * 2**29, -2, 8)
    # 5 -> 20 -> 20 * 3 * 2^29 / 2^31 = 15; -7 -> -28 -> -21; 50 -> 150 -> 127 (clamped)
    assert g.kernel(np.array([5, -7, 50]), p).tolist() == [15, -21, 127]
    # 1.5 = 0.75 * 2^1: -7 -> -14 -> -10.5 -> SRDHM tie toward +inf -> -10 (exact: -11, 1 LSB off)
    p = g.prepare(RequantContext(1.5, 8))
    assert p == _params(3 * 2**29, -1, 8)
    assert g.kernel(np.array([-7, 7]), p).tolist() == [-10, 11]
    assert g.reference([-7, 7], p) == [-10, 11]
    # 1.0: frexp gives 0.5 * 2^1 -> M = 2^30, shift -1; the identity
    p = g.prepare(RequantContext(1.0, 16))
    assert p == _params(2**30, -1, 16)
    acc = np.arange(-40000, 40000, 37)
    assert g.kernel(acc, p).tolist() == np.clip(acc, -32768, 32767).tolist()
    # the left shift wraps in int32 as C's int32 product does: 2^30 << 1 = -2^31 -> -2^31 * 2^30 / 2^31
    assert g.kernel(np.array([2**30]), p).tolist() == [-32768]


def test_srdhm_saturation():
    f = rounding.saturating_rounding_doubling_high_mul
    assert int(f(I32_MIN, I32_MIN)) == I32_MAX  # (-2^31)^2 * 2 / 2^32 = 2^31: saturates
    assert int(f(I32_MIN, I32_MAX)) == I32_MIN + 1  # -2^31 + 1/2 -> ties up
    assert int(f(2**30, 2**30)) == 2**29
    assert int(f(-3, 2**30)) == -1  # -1.5 -> -1 (nudge 1 - 2^30, truncating division)
    assert int(f(3, 2**30)) == 2  # 1.5 -> 2
    assert int(f(-5, 2**29)) == -1  # -1.25 -> -1
    assert int(f(-7, 2**29)) == -2  # -1.75 -> -2
    # through the variants: 2^31 - 1 clamps to 32767 and wraps to -1 (2^31 would wrap to 0)
    p = _params(np.array([I32_MIN]), np.array([0]), 16)
    acc = np.array([I32_MIN])
    assert variants.get("requant", "gemmlowp").kernel(acc, p).tolist() == [32767]
    assert variants.get("requant", "gemmlowp_wrap").kernel(acc, p).tolist() == [-1]
    assert variants.get("requant", "gemmlowp_wrap").reference([I32_MIN], p) == [-1]


def test_rounding_divide_by_pot():
    f = rounding.rounding_divide_by_pot
    x = np.array([5, -5, 3, -3, 6, -6, 7, -7, I32_MAX, I32_MIN])
    assert f(x, 1).tolist() == [3, -3, 2, -2, 3, -3, 4, -4, 2**30, -(2**30)]
    assert f(x, 0).tolist() == x.tolist()
    assert f(np.array([I32_MAX, I32_MIN, 2**30, -(2**30), 2**30 - 1]), 31).tolist() == [1, -1, 1, -1, 0]


def _rha(x: Fraction) -> int:
    n = math.floor(abs(x) + Fraction(1, 2))
    return -n if x < 0 else n


def test_gemmlowp_within_one_lsb_of_exact():
    """Against round_half_away(acc * real) in exact rationals: the Q31 multiplier's rounding and
    the double rounding (SRDHM, then the divide) may cost 1 LSB, never more."""
    rng = np.random.default_rng(7)
    g = variants.get("requant", "gemmlowp")
    checked = off_by_one = 0
    for bits in (8, 16):
        reals = 2.0 ** rng.uniform(-40, 29, 300)
        p = g.prepare(RequantContext(reals, bits))
        assert np.all((p["multiplier"] == 0) | ((p["multiplier"] >= 2**30) & (p["multiplier"] < 2**31)))
        lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        # accumulators landing near the output range, and anywhere, kept so the left shift fits int32
        cap = np.minimum(2 ** (31 - np.maximum(-p["shift"], 0)) - 1, I32_MAX)
        near = np.round(rng.uniform(-1.2, 1.2, (20, 300)) * 2 ** (bits - 1) / reals)
        anywhere = rng.integers(I32_MIN, I32_MAX, (20, 300), endpoint=True)
        acc = np.clip(np.concatenate([near, anywhere]), -cap, cap).astype(np.int64)
        got = g.kernel(acc, p)
        for row_acc, row_got in zip(acc.tolist(), got.tolist(), strict=True):
            for j, (a, y) in enumerate(zip(row_acc, row_got, strict=True)):
                exact = min(max(_rha(Fraction(a) * Fraction(float(reals[j]))), lo), hi)
                assert abs(y - exact) <= 1, (a, reals[j], y, exact)
                checked += 1
                off_by_one += y != exact
    assert checked >= 10_000
    assert off_by_one < checked // 10  # mostly exact: the 1 LSB is the exception


def test_tflite_quantize_multiplier():
    q = rounding.tflite_quantize_multiplier
    assert q(0.0) == (0, 0)
    assert q(1.0) == (2**30, -1)
    assert q(0.5) == (2**30, 0)
    assert q(0.75) == (3 * 2**29, 0)
    assert q(1.0 - 2**-40) == (2**30, -1)  # mantissa rounds to 2^31: carried into the exponent
    assert q(2.0**-31) == (2**30, 30)
    assert q(2.0**-32) == (2**30, 31)
    assert q(2.0**-33) == (0, 0)  # exponent -32 < -31: flushed to zero
    assert q(2.0**29) == (2**30, -30)
    with pytest.raises(ValueError):
        q(2.0**30)
    with pytest.raises(ValueError):
        q(-1.0)
    for real in 2.0 ** np.random.default_rng(3).uniform(-31, 29, 200):
        m, s = q(float(real))
        assert 2**30 <= m < 2**31
        assert abs(Fraction(m, 2**31) * Fraction(2) ** -s / Fraction(float(real)) - 1) <= Fraction(1, 2**31)


def test_prepare_shift_modes_and_out_scale():
    for name in SHIFT_MODES:
        v = variants.get("requant", name)
        p = v.prepare(RequantContext(0.01, 8))
        assert p["out_bits"] == 8 and 2**30 <= p["multiplier"] < 2**31 and 0 <= p["shift"] <= 62
        assert math.isnan(v.out_scale(RequantContext(0.01, 8), p))
        pc = v.prepare(RequantContext(np.array([0.01, 0.5]), 8))
        assert pc["multiplier"].dtype == np.int64 and pc["multiplier"].shape == (2,)
    assert math.isnan(variants.get("requant", "gemmlowp").out_scale(RequantContext(0.01, 8), {}))


def test_saturating_and_wrapping_agree_in_range():
    rng = np.random.default_rng(11)
    acc = rng.integers(-(2**20), 2**20, (8, 64), endpoint=True)
    m = rng.integers(2**30, 2**31 - 1, 64, endpoint=True)
    s = rng.integers(36, 46, 64, endpoint=True)
    for mode in ("half_up", "half_away", "half_even", "floor", "gemmlowp"):
        shift = s - 31 if mode == "gemmlowp" else s
        p = _params(m, shift, 16)
        sat = variants.get("requant", mode).kernel(acc, p)
        wrap = variants.get("requant", f"{mode}_wrap").kernel(acc, p)
        inside = (sat > -32768) & (sat < 32767)
        assert inside.mean() > 0.9
        assert np.array_equal(sat[inside], wrap[inside])


def test_parameter_checks():
    with pytest.raises(ValueError):
        variants.get("requant", "floor").kernel(np.array([1]), _params(1, 63, 8))
    with pytest.raises(ValueError):
        variants.get("requant", "half_even").kernel(np.array([1]), _params(2**31, 0, 8))
    with pytest.raises(ValueError):
        variants.get("requant", "half_away").kernel(np.array([2**31]), _params(1, 0, 8))
    with pytest.raises(ValueError):
        variants.get("requant", "gemmlowp").kernel(np.array([1]), _params(1, -31, 8))
    with pytest.raises(ValueError):
        variants.get("requant", "gemmlowp").kernel(np.array([1]), _params(1, 32, 8))
    with pytest.raises(ValueError):
        variants.get("requant", "gemmlowp").prepare(RequantContext(2.0**31, 8))


def test_registry():
    listed = variants.names("requant")
    assert listed[0] == "half_up"
    for name in ALL:
        assert name in listed
        v = variants.get("requant", name)
        assert v.family == "requant" and v.name == name and v.key == f"requant={name}"
        assert v in rounding.VARIANTS
    assert len(rounding.VARIANTS) == len(ALL) + 1  # and onnxruntime: tests/test_variants_onnxruntime.py
