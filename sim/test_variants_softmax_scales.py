"""The softmax variants' Verilog twins (rtl/softmax_ibert.v, rtl/softmax_shiftmax*.v, rtl/softmax_log2*.v,
rtl/softmax_round_each.v)
at input scales beyond sim/test_variants.py's default (16 / 2^in_bits, so every real score difference
stays below 16):

- a wide range (in_bits 12 at s_in = 0.5: differences up to 2047): the paths where the exponential
  reaches 0 or saturates (I-BERT's clamp at 30 x0, ShiftExp's q >= 32, log2's z >= 64) and the
  long shifts;
- each variant's extreme scales (the smallest and largest s_in its constants support);
- a difference sweep at a wide scale (every max - x in 0..255 once at s_in = 0.5, rows [max,
  max - a]): each exponential from 1 down through the clamps beside the max alone, where random
  rows put only a few elements between the clamps.

- softmax_log2_exact at its thresholds: rows whose sum sits exactly at a log2 code's boundary;
- softmax_log2 where its float64 division rounds to a half: ties and near-ties of S / E;
- softmax_ibert with constants inside its ports' contract but from no scale (opt-in, marker
  ``variants``): there the last unit of its z reaches the output; its rows waiting for their own R;
- (opt-in) every softmax variant built with MAX_N = 40, not a power of two.

Icarus only (short rows, few rows): the same random sets as sim/test_variants.py otherwise.
"""

from __future__ import annotations

import numpy as np
import pytest

from hwvit import blocks, toolchain, vectors

# kind -> (options beyond the kind's defaults) per set
SCALES = {
    "softmax_ibert": [
        {"in_bits": 12, "scale_in": 0.5},
        {"in_bits": 16, "scale_in": 2.0**-15, "out_bits": 16},
        {"in_bits": 6, "scale_in": 1.66, "out_bits": 3},
    ],
    # I-ViT's own model: 16-bit probabilities; 0.5: the exponent's clamp at 15 and the sum's at 2^31 - 1
    "softmax_shiftmax": [
        {"in_bits": 12, "scale_in": 0.5},
        {"in_bits": 16, "scale_in": 2.0**-16, "out_bits": 16},
        {"in_bits": 4, "scale_in": 2.0**16, "out_bits": 2},
        # I_0 = 4096: the exponent's clamp at 15 I_0 within reach of 16-bit differences, where 16-bit
        # outputs still show the clamped E (p = 1)
        {"in_bits": 16, "scale_in": 2.0**-12, "out_bits": 16},
        # I_0 = 1: every difference past 10 clamped (E = 1), a few units of S that 16-bit outputs show
        {"in_bits": 8, "scale_in": 1.0, "out_bits": 16},
    ],
    # 12 bits: differences past the 256-entry table (E = 0 from the zero-padded table port)
    "softmax_round_each": [
        {"in_bits": 12, "scale_in": 0.5},
        {"in_bits": 4, "scale_in": 4.0, "out_bits": 2},
    ],
    "softmax_shiftmax_exact": [
        {"in_bits": 12, "scale_in": 0.5},
        {"in_bits": 16, "scale_in": 2.0**-16, "out_bits": 16},
        {"in_bits": 4, "scale_in": 1.0, "out_bits": 2},
    ],
    # FQ-ViT's released form: s_in from 2^-9 (E < 2^50, S < 2^62 at 4096) to 1.66 (X = 1, every rem 0);
    # 0.5: the clamp at 30 X within reach
    "softmax_log2": [
        {"in_bits": 12, "scale_in": 0.5},
        {"in_bits": 16, "scale_in": 2.0**-9, "out_bits": 16},
        {"in_bits": 6, "scale_in": 1.66, "out_bits": 3},
    ],
    "softmax_log2_exact": [
        {"in_bits": 12, "scale_in": 0.5},
        {"in_bits": 16, "scale_in": 2.0**-24, "out_bits": 16},
        {"in_bits": 16, "scale_in": 2.0**16, "out_bits": 3},
        # q_b = floor(1.353 / s) just above 2^24 (2^24 + 2^15): q_b - rem crosses 2^24 within a row
        # of 16-bit scores, where a 24-bit slice of it would go wrong for half the elements only
        {"in_bits": 16, "scale_in": 1.353 / (2**24 + 2**15), "out_bits": 16},
    ],
}


@pytest.mark.parametrize("kind", sorted(SCALES))
def test_softmax_variant_scales_bit_exact(kind, tmp_path, run_set):
    toolchain.require("icarus")
    spec = blocks.get(kind)
    for i, opts in enumerate(SCALES[kind]):
        options = {**spec.defaults, "row_len": 40, **opts}
        rec = spec.random(np.random.default_rng([21 + i, spec.seed]), 10, options)
        out = tmp_path / f"set{i}"
        set_dir = vectors.write_set(rec, out, seed=21 + i)
        res = run_set(set_dir, "icarus")
        assert res.elements == 10 * 40, res.line()


# round_each's probability scale 1 / (2^bits - 1) has no 16-bit form (Qm < 2^24: at most 8 bits)
@pytest.mark.parametrize("kind", sorted(k for k in SCALES if k != "softmax_round_each"))
def test_softmax_variant_wide_difference_sweep(kind, tmp_path, run_set):
    """Rows [max, max - a] for a = 0..255 at s_in = 0.5 (differences up to 127.5: I-BERT's z, ShiftExp's
    q and log2's z all cross their clamps), 16-bit outputs (small exponentials still get a nonzero
    probability): the campaign found log2's restoring division cut to five steps alive, which only
    an exponential with z in 32..63 shows, and its E halved for every element alike."""
    toolchain.require("icarus")
    spec = blocks.get(kind)
    options = {**spec.defaults, "in_bits": 8, "scale_in": 0.5, "out_bits": 16, "row_len": 2, "sweep": 1}
    rec = spec.random(np.random.default_rng([23, spec.seed]), 1, options)
    set_dir = vectors.write_set(rec, tmp_path / "sweep", seed=23)
    res = run_set(set_dir, "icarus")
    assert res.elements == 512, res.line()


def _log2_threshold_rows(p: dict, n: int) -> tuple[np.ndarray, list[str]]:
    """Rows of 16-bit scores whose sum S sits exactly at a log2 threshold of one element, built from
    the exponentials E(max - x) this scale can form (hwvit.variants.hwsoftmax.log2_iexp), each
    row padded to n with elements past the clamp (z >= 64: E = 0):

    - ``at``: S = T, the least S with S^2 >= 2 E0^2 (the max's code 1, its p 2^(M-1)); S one less
      gives code 0: a row sum started at -1 instead of 0 shows;
    - ``below``: S = T - 1 and one element past the clamp: E = 1 there instead of 0 shows;
    - ``tie``: an element with E = 8 and floor(S^2 / 2^31) = 64 = E^2 exactly (16-bit outputs: the
      16th comparison): its code 16 by S^2 >= E^2 2^31, p 0; a strict compare gives code 15, p 1.
    """
    import bisect
    import math

    from hwvit.variants.hwsoftmax import log2_iexp

    hi = (1 << 15) - 1
    first: dict[int, int] = {}  # E -> the least difference giving it
    for diff in range(1 << 16):
        first.setdefault(log2_iexp(diff, p), diff)
    far = 64 * int(p["q_ln2"])  # a >= 64 q_ln2: the clamp (k = 0 at this scale)
    assert int(p["in_shift"]) == 0 and far < (1 << 16) and log2_iexp(far, p) == 0
    values = sorted(e for e in first if e > 0)

    def diffs_summing_to(rest: int) -> list[int]:  # greedy, largest E first: ends exact (E = 1 exists)
        out = []
        while rest > 0:
            e = values[bisect.bisect_right(values, rest) - 1]
            out.append(first[e])
            rest -= e
        return out

    e0 = log2_iexp(0, p)
    t = math.isqrt(2 * e0 * e0 - 1) + 1
    tie_s = math.isqrt(64 << 31) + 1  # floor(S^2 / 2^31) = 64 from here on
    assert (tie_s * tie_s) >> 31 == 64 and ((tie_s + 99) ** 2) >> 31 == 64
    rows = {
        "at": diffs_summing_to(t - e0),
        "below": [*diffs_summing_to(t - 1 - e0), far],
        "tie": [first[8], *diffs_summing_to(tie_s + 99 - e0 - 8)],
    }
    out = []
    for name, diffs in rows.items():
        row = [0, *diffs] + [far] * (n - 1 - len(diffs))
        assert len(row) == n, name
        total = sum(log2_iexp(d, p) for d in row)
        assert total == {"at": t, "below": t - 1, "tie": tie_s + 99}[name], name
        out.append([hi - d for d in row])
    return np.array(out, dtype=np.int64), list(rows)


def test_softmax_log2_exact_threshold_rows(tmp_path, run_set):
    """log2's codes right at their thresholds (in_bits 16, s_in 2^-10, 16-bit outputs): the row sum
    exactly at the max's first threshold and one below it, and an element whose E^2 equals
    floor(S^2 / 2^31) (see _log2_threshold_rows). The campaign found three mutants of
    rtl/softmax_log2_exact.v that random rows and sweeps never told apart: the row sum started at all ones,
    E = 1 past the clamp, and the code compare > for >=."""
    from hwvit import variants
    from hwvit.variants.base import SoftmaxContext

    toolchain.require("icarus")
    spec = blocks.get("softmax_log2_exact")
    ctx = SoftmaxContext(s_in=2.0**-10, in_bits=16, out_bits=16)
    v = variants.get("softmax", "log2_exact")
    p = v.prepare(ctx)
    x, names = _log2_threshold_rows(p, 16)
    y = v.kernel(x, p)
    # the max's p at S = T and T - 1; the E = 8 element's p in the tie row
    assert [int(y[0, 0]), int(y[1, 0]), int(y[2, 1])] == [1 << 14, 1 << 15, 0], (names, y[:, :2])
    rec = spec.traced("directed", x, y, p, 16, 16, {"x": ctx.s_in, "y": v.out_scale(ctx, p)})
    set_dir = vectors.write_set(rec, tmp_path / "rows", seed=29)
    res = run_set(set_dir, "icarus")
    assert res.elements == x.size, res.line()


# softmax_log2's constants within its ports' contract but from no scale, X = 511 for both:
# - "ties": b = 1539, c = 524791: poly(510) = c - 510 (b - 510) = 1, so d = (30 - i) X + 510 gives
#   E = 2^i for every i in 1..30; the max's E = c 2^30 > 2^49 is where float64's 53 bits reach the
#   integer result;
# - "at": b = 1765, c = 2^19: poly(378) = 2 (E = 2^(31 - q) at d = q X + 378), the max's E = 2^49 has
#   its low 46 bits zero, so |2R - E| 2^46 can equal E: a tie at 53 bits.
LOG2_CONTRACT = {
    "ties": {"x0_int": -511, "b_int": 1539, "c_int": 524791},
    "at": {"x0_int": -511, "b_int": 1765, "c_int": 1 << 19},
}


def _log2_tie_row(q_odd: int, below: int) -> list[int]:
    """Differences of a row whose S is (q_odd + 1/2) E0 - below at LOG2_CONTRACT["ties"] (E0 = c 2^30,
    the max's E): q_odd elements at the max, then c 2^(30 - q) for q = 2..30 and the powers of two of
    c - below, which sum to c 2^29 - below; with below = 0 one element at d = X (c 2^29) instead."""
    c = LOG2_CONTRACT["ties"]["c_int"]
    if below == 0:
        return [0] * q_odd + [511]
    powers = [(30 - i) * 511 + 510 for i in range(1, 31) if (c - below) >> i & 1]
    return [0] * q_odd + [q * 511 for q in range(2, 31)] + powers


def _log2_at_row() -> list[int]:
    """S = 95.5 E0 - 4 at LOG2_CONTRACT["at"] (E0 = 2^49): 95 elements at the max, 2^2..2^31 from
    poly(378) = 2 and 2^32..2^47 from c 2^(30 - q), q = 17..2: |2R - E| = 8 = E / 2^46."""
    return [0] * 95 + [q * 511 + 378 for q in range(30)] + [q * 511 for q in range(2, 18)]


@pytest.mark.parametrize(
    "consts, diffs, ratio, code",
    [
        # S / E0 = 5.5 exactly: half to even, 6 (code 3; 5 would give 2)
        ("ties", _log2_tie_row(5, 0), (11, 2, 0), 3),
        # 23.5 - 2^-49.0014: the double is 23.5 (|2R - E| 2^48 < E), then 24: code 5 (23: 4)
        ("ties", _log2_tie_row(23, 1), (47, 2, 1), 5),
        # 11.5 - 2^-49.0014: here |2R - E| 2^49 > E, the double stays below 11.5: 11, code 3 (12: 4)
        ("ties", _log2_tie_row(11, 1), (23, 2, 1), 3),
        # 383.5 - 2^-49.0014: t = 8 (|2R - E| 2^44 < E), the double is 383.5, then 384: code 9 (383: 8)
        ("ties", _log2_tie_row(383, 1), (767, 2, 1), 9),
        # 2 - 2^-30: R = E0 - c >= 2^49, the top bit of R decides 2R > E: v = 2, code 1 (1: 0)
        ("ties", [0] + [q * 511 for q in range(1, 31)], (2, 1, LOG2_CONTRACT["ties"]["c_int"]), 1),
        # 95.5 - 2^-47: |2R - E| 2^46 = E, halfway at 53 bits, to the even 95.5, then 96: code 7 (95: 6)
        ("at", _log2_at_row(), (191, 2, 4), 7),
        # 11 + 2^-47: E0's low 49 bits are zero but |2R - E| is far from E / 2^49: no tie, 11 (code 3; 12: 4)
        ("at", [0] * 11 + [29 * 511 + 378], (11, 1, -4), 3),
    ],
    ids=["exact", "near", "apart", "near_t8", "high", "at", "at_apart"],
)
def test_softmax_log2_float64_ties(consts, diffs, ratio, code, tmp_path, run_set):
    """FQ-ViT's round(S / E) where S / E sits at or within one float64 rounding of a half: the max's
    code decided by the 53-bit rule (rtl/softmax_log2.v's below, at and the half-to-even of Q)."""
    from fractions import Fraction

    from hwvit.variants import fqvit_released as fq

    toolchain.require("icarus")
    k = LOG2_CONTRACT[consts]
    p = {**k, "in_bits": 16, "out_bits": 16}
    e0 = k["c_int"] << 30
    total = sum(fq.ibert_exp_ref(-d, k["x0_int"], k["b_int"], k["c_int"]) for d in diffs)
    num, den, below = ratio
    assert Fraction(total, e0) == Fraction(num, den) - Fraction(below, e0)
    x = np.array([[(1 << 15) - 1 - d for d in diffs]], dtype=np.int64)
    st = fq.log2_stages(x, p)
    assert int(st["code"][0, 0]) == code and int(st["v"][0, 0]) == fq.round_ratio_ref(total, e0)
    rec = blocks.get("softmax_log2").traced("directed", x, st["out"], p, 16, 16, {"x": 1.0, "y": 2.0**-15})
    set_dir = vectors.write_set(rec, tmp_path / consts, seed=37)
    res = run_set(set_dir, "icarus")
    assert res.elements == x.size, res.line()


def test_softmax_log2_port_contract_holds_at_every_scale():
    """rtl/softmax_log2.v's ports take X < 2^9, b < 2^11, c < 2^20 with poly(rem) = c - rem (b - rem)
    >= 1 for every rem < X (so no E is 0): the variant's constants over its scales 2^-9..1.67 (4000
    points, geometric; the least poly found is 1)."""
    from hwvit import variants
    from hwvit.variants.base import SoftmaxContext

    v = variants.get("softmax", "log2")
    least = None
    for s in np.geomspace(2.0**-9, 1.6699, 4000):
        p = v.prepare(SoftmaxContext(float(s), 8, 8))
        x0, b, c = -p["x0_int"], p["b_int"], p["c_int"]
        rem = np.arange(x0)
        low = int((c - rem * (b - rem)).min())
        assert x0 < 1 << 9 and b < 1 << 11 and c < 1 << 20 and low >= 1, (s, x0, b, c)
        least = low if least is None else min(least, low)
    assert least == 1


# softmax_ibert's constants chosen within its ports' contract (|x0| >= 1, b > |x0|, poly in [1, c],
# P odd < 2^53, K <= 114, M <= 2^31, E >= 1; rtl/softmax_ibert.v's header) but from no input scale,
# so that the last unit of z = round(exp 2^K / P) reaches e: at a real scale z is about 2^45 e, and
# its rounding correction (zf + [2 rho > P] + [2 rho > 3 P]) moves e only where z M / 2^E lies
# within 2^-45 of a rounding tie, which no row finds (the campaign found 30 mutants of the correction
# and of n = poly 2^t mod 2^54 alive). Rows [max, max - a] (in_bits 14, 16-bit outputs: S < 2^16,
# so each unit of e moves p).
IBERT_POLY = {"x0_int": -200, "b_int": 300, "c_int": 30000, "in_bits": 14, "out_bits": 16}  # poly in [7500, 30000]
IBERT_CONTRACT = {
    # K = 0, P = 2^30 + 1, M / 2^E = 1: e = min(z, 2^15 - 1) with z = round(poly 2^(30 - q) / P) <= 30000;
    # n = poly 2^(30 - q) < 2^45 and rho in [0, 2P) take every value the correction reads
    "exact": {"exp_num": (1 << 30) + 1, "exp_den_log2": 0, "act_multiplier": 2, "act_shift": 1},
    # K = 23, P = 1, M = 1, E = 54: z = n = poly 2^(53 - q) exactly and e = round_half_even(poly /
    # 2^(q + 1)), a tie wherever poly mod 2^(q + 1) = 2^q, which is where zf's bit 53 (poly's bit q)
    # is set: the top bit of the 54 that rho is formed from
    "ties": {"exp_num": 1, "exp_den_log2": 23, "act_multiplier": 1, "act_shift": 54},
    # K = 0, P = 1, M = 1, E = 10: e = round(poly 2^(20 - q)), saturated for q < 20 (the max too) and
    # 7 to 117 at q = 28..30: where the clamp of a at 30 |x0| decides q
    "clamp": {"exp_num": 1, "exp_den_log2": 0, "act_multiplier": 1, "act_shift": 10},
    # as "exact" with c = 2^14 (b = 250 keeps poly >= 759): the max's e is 2^14 exactly and rows whose
    # other element is past the clamp (e = 0) have S = 2^14, f = 2^18, e f = 2^32: p = 2^16, which
    # the 16-bit output saturates to 2^16 - 1
    # c = 2^32 - 1, P = 3, K = 63: R = floor(2^126 / 3) ~ 2^124.4, so poly R reaches 2^156 (the top bit
    # of the 157 that zf is cut from) with zf ~ 2^123.4 still below 2^124; M = 1, E = 109: e(max) ~ 2^14.4
    "wide": {"c_int": (1 << 32) - 1, "exp_num": 3, "exp_den_log2": 63, "act_multiplier": 1, "act_shift": 109},
    "pow2": {
        "b_int": 250,
        "c_int": 1 << 14,
        "exp_num": (1 << 30) + 1,
        "exp_den_log2": 0,
        "act_multiplier": 2,
        "act_shift": 1,
    },
}


@pytest.mark.variants  # 1571 rows of 2, each waiting ~125 clocks for R: 15 s of Icarus a set (make test-variants)
@pytest.mark.parametrize("name", sorted(IBERT_CONTRACT))
def test_softmax_ibert_contract_constants(name, tmp_path, run_set):
    from hwvit import variants

    toolchain.require("icarus")
    spec = blocks.get("softmax_ibert")
    v = variants.get("softmax", "ibert")
    p = {**IBERT_POLY, **IBERT_CONTRACT[name]}
    hi = (1 << 13) - 1
    # every a below 2 |x0| (q = 0, 1: each rem), every 7th up to the clamp at 30 |x0|, and past it
    a = np.concatenate([np.arange(400), np.arange(400, 5800, 7), np.arange(5800, 6200)])
    x = np.stack([np.full(a.size, hi), hi - a], 1)
    y = v.kernel(x, p)
    e16 = variants.ibert.ibert_softmax_e16(x, p)
    assert e16.sum(axis=1).max() < 1 << 16 and ((e16 < (1 << 15) - 1).all() or name == "clamp")
    if name == "pow2":
        assert (y == (1 << 16) - 1).any()  # the saturated 2^16
    rec = spec.traced("contract", x, y, p, 14, 16, {"x": 1.0, "y": 2.0**-16})
    set_dir = vectors.write_set(rec, tmp_path / name, seed=31)
    res = run_set(set_dir, "icarus")
    assert res.elements == x.size, res.line()


def test_softmax_ibert_row_waits_for_its_own_reciprocal(tmp_path, run_set):
    """rtl/softmax_ibert.v's header: R = floor(2^(K+63) / P) is divided afresh from each row's first
    input (the constants are sampled there), 125 clocks, and a row shorter than that waits for it in
    REC, then f = floor(2^32 / S) takes 34 more. Unstalled rows of one element, one row at a time,
    therefore take at least 159 clocks each; a divider started early (before the row, from the
    constants then on the ports) lets them pass in about 126 (the campaign found `in_take || first`
    alive, R being equal while the constants stay the same)."""
    toolchain.require("icarus")
    spec = blocks.get("softmax_ibert")
    rec = spec.random(np.random.default_rng([25, spec.seed]), 8, {**spec.defaults, "row_len": 1})
    set_dir = vectors.write_set(rec, tmp_path / "one", seed=25)
    res = run_set(set_dir, "icarus", extra_env={"HWVIT_STALL": "0"})
    assert res.elements == 8 and res.cycles >= 8 * (125 + 34), res.line()


@pytest.mark.variants
@pytest.mark.parametrize(
    "kind", sorted(k for k, spec in blocks.kinds().items() if spec.family == "softmax" and spec.variant and spec.rtl)
)
def test_softmax_variant_max_n_not_a_power_of_two(kind, tmp_path, run_set):
    """MAX_N = 40: the element counters get as many bits as the buffer addresses (clog2(41) =
    clog2(40)), unlike every power-of-two build, so a buffer index one bit wider runs past the
    counter (the campaign found softmax_ibert's e-buffer indices [AW:0] alive at MAX_N = 4096). Full
    rows of 40, exact."""
    toolchain.require("icarus")
    spec = blocks.get(kind)
    rec = spec.random(np.random.default_rng([27, spec.seed]), 6, {**spec.defaults, "row_len": 40})
    set_dir = vectors.write_set(rec, tmp_path / "n40", seed=27)
    res = run_set(set_dir, "icarus", hdl_overrides={"MAX_N": 40})
    assert res.elements == 6 * 40, res.line()


def _round_each_rows(table: list[int], case: str) -> tuple[int, list[int]]:
    """(Qm, a row's differences max - x) for softmax_round_each where the max's p = round(R / 2^17)
    (E = T[0] = 2^23) sits at a rounding point of R = floor((Qm 2^24 + floor(S/2)) / S):

    - ``below``: Qm 2^24 + floor(S/2) + 1 is a multiple of S and R = (4j + 3) 2^16 - 1: p = 2j + 1,
      where a dividend one larger (its rounding constant off by one) gives the tie 2j + 1.5 -> 2j + 2;
    - ``tie_up``: R = (4j + 3) 2^16 exactly: the tie 2j + 1.5 rounds to the even 2j + 2; and
      Qm 2^24 + floor(S/4) < R S, so a rounding constant of S/4 (not S/2) gives R - 1 and 2j + 1;
    - ``tie_down``: R = (4j + 1) 2^16 exactly: the tie 2j + 0.5 rounds to the even 2j.

    S = 2^23 + k 2^17 - 1 (odd), the rest of the row the largest table values that sum to S - 2^23."""
    import bisect

    first: dict[int, int] = {}
    for d in range(1, len(table)):
        if table[d] > 0:
            first.setdefault(table[d], d)
    values = sorted(first)
    for k in range(1, 400):
        s = (1 << 23) + (k << 17) - 1
        half = s // 2
        if case == "below":  # (4j + 3) 2^16 s = Qm 2^24 + half + 1: solve mod 2^24 for j
            m = ((half + 1) >> 16) * pow(s, -1, 256) % 256
            qm = ((m << 16) * s - half - 1) >> 24 if m % 4 == 3 else 0
        else:
            r = ((3 if case == "tie_up" else 1) + 4 * (k % 32)) << 16
            qm = -((half - r * s) >> 24)  # ceil((r s - half) / 2^24)
            qm = qm if (qm << 24) + half < (r + 1) * s else 0
            qm = qm if case == "tie_down" or (qm << 24) + s // 4 < r * s else 0
        if not 1 <= qm < 1 << 24:
            continue
        diffs, rest = [0], s - (1 << 23)
        while rest > 0:
            e = values[bisect.bisect_right(values, rest) - 1]
            diffs.append(first[e])
            rest -= e
        if len(diffs) <= 16:
            return qm, diffs
    raise AssertionError(f"no {case} row")


@pytest.mark.variants  # directed rows: make test-variants and the mutation campaign
@pytest.mark.parametrize("case", ["below", "tie_up", "tie_down"])
def test_softmax_round_each_rounding_points(case, tmp_path, run_set):
    """rtl/softmax_round_each.v where R's rounding constant and p's rounding decide the max's p
    (random rows meet neither: E R lands within 2^-17 of a tie about once in 2^17 elements)."""
    from hwvit import variants
    from hwvit.variants.base import SoftmaxContext

    toolchain.require("icarus")
    spec = blocks.get("softmax_round_each")
    v = variants.get("softmax", "round_each")
    ctx = SoftmaxContext(s_in=1 / 16, in_bits=8, out_bits=8)
    p = v.prepare(ctx)
    qm, diffs = _round_each_rows([int(t) for t in p["exp_table"]], case)
    p = {**p, "q_mult": qm}
    x = np.array([[127 - d for d in diffs]], dtype=np.int64)
    y = v.kernel(x, p)
    s = sum(int(p["exp_table"][d]) for d in diffs)
    r = (qm * (1 << 24) + s // 2) // s
    if case == "below":  # the max's p rounded down from 2j + 1.5 - 2^-17; one more in the dividend: R + 1
        assert r % (1 << 18) == (3 << 16) - 1 and int(y[0, 0]) == r >> 17
        assert (qm * (1 << 24) + s // 2 + 1) // s == r + 1
    else:  # the tie 2j + 1.5 up, 2j + 0.5 down
        assert r % (1 << 18) == (3 << 16 if case == "tie_up" else 1 << 16)
        assert int(y[0, 0]) == (r >> 17) + (case == "tie_up")
        assert case == "tie_down" or (qm * (1 << 24) + s // 4) // s == r - 1
    rec = spec.traced("directed", x, y, p, 8, 8, {"x": ctx.s_in, "y": v.out_scale(ctx, p)})
    set_dir = vectors.write_set(rec, tmp_path / case, seed=37)
    res = run_set(set_dir, "icarus")
    assert res.elements == x.size, res.line()


@pytest.mark.variants  # directed rows: make test-variants and the mutation campaign
def test_softmax_round_each_full_sum(tmp_path, run_set):
    """A row of MAX_N equal maxima (built with MAX_N = 16): S = 16 T[0] = 2^27 sets S's top bit, the
    only row that does (every entry is at most T[0]); Qm = 8 R - 4 with R = 7 2^16 puts the max's
    p = R / 2^17 at the tie 3.5 (-> 4), which R - 1 (floor(S/2) without its top bit) would take to 3."""
    from hwvit import variants
    from hwvit.variants.base import SoftmaxContext

    toolchain.require("icarus")
    spec = blocks.get("softmax_round_each")
    v = variants.get("softmax", "round_each")
    ctx = SoftmaxContext(s_in=1 / 16, in_bits=8, out_bits=8)
    r = 7 << 16
    p = {**v.prepare(ctx), "q_mult": 8 * r - 4}
    x = np.full((2, 16), 5, dtype=np.int64)
    y = v.kernel(x, p)
    assert (p["q_mult"] * (1 << 24) + (1 << 26)) >> 27 == r and (y == 4).all(), y
    rec = spec.traced("full", x, y, p, 8, 8, {"x": ctx.s_in, "y": v.out_scale(ctx, p)})
    set_dir = vectors.write_set(rec, tmp_path / "full", seed=41)
    res = run_set(set_dir, "icarus", hdl_overrides={"MAX_N": 16})
    assert res.elements == x.size, res.line()


@pytest.mark.variants  # directed rows: make test-variants and the mutation campaign
def test_softmax_round_each_wide_output(tmp_path, run_set):
    """16-bit outputs at s_p = 2^-7 (Qm = 2^23): p <= 128 leaves the output's top bits zero, which
    the default scale 1 / (2^bits - 1) (at most 8 bits: Qm < 2^24) never builds."""
    from hwvit import variants
    from hwvit.variants.base import SoftmaxContext

    toolchain.require("icarus")
    spec = blocks.get("softmax_round_each")
    v = variants.get("softmax", "round_each")
    ctx = SoftmaxContext(s_in=1 / 16, in_bits=8, out_bits=16, s_out=2.0**-7)
    p = v.prepare(ctx)
    assert p["q_mult"] == 1 << 23
    x = np.random.default_rng(43).integers(-128, 128, (6, 24))
    x[0] = 7  # equal scores: p = 128 / 24 each
    y = v.kernel(x, p)
    assert y.max() <= 128 and (y[0] == 5).all()
    rec = spec.traced("wide", x, y, p, 8, 16, {"x": ctx.s_in, "y": v.out_scale(ctx, p)})
    set_dir = vectors.write_set(rec, tmp_path / "wide", seed=43)
    res = run_set(set_dir, "icarus")
    assert res.elements == x.size, res.line()


@pytest.mark.variants  # directed rows: make test-variants and the mutation campaign
def test_softmax_round_each_sticky_bit(tmp_path, run_set):
    """An element whose E R is q 2^40 + 2^39 + 1 (q even): above the tie by its last bit alone, so it
    rounds up to q + 1 (a sticky bit that missed bit 0 would round the tie down to the even q). E = 24579
    and R = 22366891 (their product is 2^39 + 1) through a table made for it: T = [2^23, E, 1, 0, ...],
    the row [M, M - 1, M - 2, ...] with enough entries of 1 that Qm exists for R."""
    from hwvit import variants

    toolchain.require("icarus")
    spec = blocks.get("softmax_round_each")
    v = variants.get("softmax", "round_each")
    e, r = 24579, 22366891
    assert e * r == (1 << 39) + 1
    table = np.zeros(256, dtype=np.int64)
    table[:3] = [1 << 23, e, 1]
    for n2 in range(62):
        s = (1 << 23) + e + n2
        qm = -((s // 2 - r * s) >> 24)  # the least Qm with floor((Qm 2^24 + floor(S/2)) / S) >= R
        if (qm << 24) + s // 2 < (r + 1) * s and 1 <= qm < 1 << 24:
            break
    else:
        raise AssertionError("no Qm")
    p = {"exp_table": table, "q_mult": qm, "in_bits": 8, "out_bits": 8}
    x = np.array([[100, 99] + [98] * n2], dtype=np.int64)
    y = v.kernel(x, p)
    assert (qm * (1 << 24) + s // 2) // s == r and int(y[0, 1]) == 1, y
    rec = spec.traced("sticky", x, y, p, 8, 8, {"x": 1 / 16, "y": 2.0**16 / qm})
    set_dir = vectors.write_set(rec, tmp_path / "sticky", seed=47)
    res = run_set(set_dir, "icarus")
    assert res.elements == x.size, res.line()


def test_softmax_ita_sigma_dividing_the_dividend_plus_one(tmp_path, run_set):
    """rtl/softmax_ita.v divides (2^OUT_BITS - 1) 2^8 by sigma; a dividend one above it changes the
    quotient only where sigma divides that odd number, which random rows miss (the campaign found the
    dividend's low byte 8'd1 alive). At K = 2^16 (sh(d) = d) the row [0, 0, -1, -3, -8] has sigma =
    256 + 256 + 128 + 32 + 1 = 673, and 255 * 2^8 + 1 = 97 * 673: inv is 96, one off would be 97.
    The row at several offsets, reversed too."""
    from hwvit import variants
    from hwvit.variants.hwsoftmax import ITA_SCALE

    toolchain.require("icarus")
    spec = blocks.get("softmax_ita")
    p = {"mult": 1 << 16, "in_bits": 8, "out_bits": 8}
    base = np.array([0, 0, -1, -3, -8])
    x = np.stack([base + k for k in (0, 120, -120, 7)] + [base[::-1] + k for k in (0, 127, -120)])
    y = variants.get("softmax", "ita").kernel(x, p)
    assert (255 * 256 + 1) % 673 == 0 and (y.max(axis=1) == 255 * 256 // 673).all()
    rec = spec.traced("sigma673", x, y, p, 8, 8, {"x": ITA_SCALE, "y": 1.0 / 255})
    set_dir = vectors.write_set(rec, tmp_path / "s673", seed=33)
    res = run_set(set_dir, "icarus")
    assert res.elements == x.size, res.line()


def test_softmax_ibert_reciprocal_ready_at_the_rows_calc(tmp_path, run_set):
    """Output ready held low for 300 clocks after the first row's 4th output: the next row fills
    meanwhile and its R (125 clocks from its first input) is ready when its first CALC begins, which
    then lasts one clock, and its pass of 8 elements ends 14 clocks later, before a 34-clock division
    started in that CALC could finish. The division of f = floor(2^32 / S) must start only after the
    pass (the campaign found in_valid = enter or passed alive: a division of S = 0 started in the
    first CALC, still running when the pass ended, handed the row all ones for f)."""
    import json

    toolchain.require("icarus")
    spec = blocks.get("softmax_ibert")
    rec = spec.random(np.random.default_rng([43, spec.seed]), 3, {**spec.defaults, "row_len": 8})
    set_dir = vectors.write_set(rec, tmp_path / "held", seed=43)
    env = {"HWVIT_STALL": "0", "HWVIT_SINK_HOLD": json.dumps([4, 300])}
    res = run_set(set_dir, "icarus", extra_env=env)
    assert res.elements == 24 and res.cycles > 300, res.line()


def test_softmax_softermax_output_held_past_the_next_rows_pass(tmp_path, run_set):
    """rtl/softmax_softermax.v's rec and ex follow d on every clock, and stage 3's element reads them on
    its move to the output register, so the next row's recurrence must not step before that move.
    Output ready held low for 120 clocks after the first row's N - 2 outputs: its last element sits in
    stage 3 while the next row fills, and the next row's pass waits (for stage 3 to empty; a pass let
    in at stage 2's emptying, GO_AFTER = 2, still steps only as stage 3 moves on). At K = 2^16 an
    element at its row's max has e = C[0] = 2^15 in every row, so that element would come out as the
    next row's max does (255, a lone dominant score), not as its own, if it took the next row's rec
    and ex."""
    import json

    toolchain.require("icarus")
    spec = blocks.get("softmax_softermax")
    x = np.array(
        [[0, -1, -2, -3, -1, 0, -2, 0], [100, -128, -128, -128, -128, -128, -128, -128], [5, 9, -3, 0, 9, 2, 1, 7]]
    )
    opts = {**spec.defaults, "row_len": 8, "in_bits": 8, "out_bits": 8, "scale_in": float(np.log(2.0)), "x": x}
    rec = spec.random(np.random.default_rng([35, spec.seed]), 3, opts)
    assert int(rec.params["mult"]) == 1 << 16
    y = rec.tensors["y"].data
    assert y[0, 7] == y[0].max() and y[1, 0] == 255 and y[0, 7] != y[1, 0]
    set_dir = vectors.write_set(rec, tmp_path / "held", seed=35)
    env = {"HWVIT_STALL": "0", "HWVIT_SINK_HOLD": json.dumps([8 - 2, 120])}
    res = run_set(set_dir, "icarus", extra_env=env)
    assert res.elements == 24 and res.cycles > 120, res.line()


# Input scales of the sets reconfig_jobs streams one after another: the default's (16 / 2^8) and two
# others, so that each constant port and table entry the scale sets changes between sets, by factors
# of 3 and 10 (softmax_ibert's reciprocal R of the scale's constants by 10 and 100).
RECONFIG_SCALES = (16 / 256, 0.2, 0.02)


@pytest.mark.parametrize("kind", sorted([*SCALES, "softmax_ita", "softmax_softermax"]))
def test_softmax_variant_reconfigured_between_sets(kind, tmp_path, run_set):
    """Three sets of one build at three input scales in one simulation, no reset between them: the
    block idle after each set's last output, its constants (and table) set to the next set's, every
    output compared (sim/byotb.py reconfig_jobs). An accelerator changes them between layers; a set
    holds one scale, so this alone shows a block that takes a constant before its row's first input
    (the campaign found softmax_ibert's reciprocal division started while idle, in_valid = fill or
    first, alive)."""
    import os

    toolchain.require("icarus")
    spec = blocks.get(kind)
    dirs = []
    for i, s in enumerate(RECONFIG_SCALES):
        # scores within 31 of 127: at every scale most exponentials stay well above 0
        x = np.random.default_rng([39 + i, spec.seed]).integers(96, 127, (4, 8), endpoint=True)
        rec = spec.random(np.random.default_rng(39 + i), 4, {**spec.defaults, "row_len": 8, "scale_in": s, "x": x})
        dirs.append(vectors.write_set(rec, tmp_path / f"s{i}", seed=39 + i))
    env = {"HWVIT_BYO_JOBS": os.pathsep.join(str(d) for d in dirs[1:])}
    res = run_set(dirs[0], "icarus", testcase="reconfig_jobs", extra_env=env)
    assert res.elements == 3 * 4 * 8 and res.extra.get("jobs") == 3, res.line()
