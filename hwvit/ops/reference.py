"""Slow, obvious twins of the integer kernels: plain Python ints over lists, one element at a time.

Used only by tests: the fast numpy/torch kernels in ``hwvit.ops`` must equal these on every
element. Written straight from docs/arithmetic.md with Python's unbounded ints and floor
division (``//`` by a power of two is the arithmetic right shift), sharing no code with the
fast path. Inputs are assumed valid; the fast kernels do the checking.
"""

from __future__ import annotations

import math


def _sat(v: int, bits: int) -> int:
    lo = -(2 ** (bits - 1))
    hi = 2 ** (bits - 1) - 1
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


def _round_shift(v: int, s: int) -> int:
    """Round half up: floor(v / 2^s + 1/2)."""
    if s == 0:
        return v
    return (v + 2 ** (s - 1)) // 2**s


def round_sat_ref(v: int, s: int, bits: int) -> int:
    """rtl/round_sat.v: round half up by ``s`` bits, then saturate to signed ``bits``."""
    return _sat(_round_shift(v, s), bits)


def _per_channel(param, j: int) -> int:
    return param[j] if isinstance(param, (list, tuple)) else param


def requant_ref(acc: list[int], multiplier, shift, out_bits: int = 8) -> list[int]:
    """One row: ``acc[j]`` uses ``multiplier[j]``/``shift[j]`` when those are lists."""
    out = []
    for j, a in enumerate(acc):
        m = _per_channel(multiplier, j)
        s = _per_channel(shift, j)
        out.append(_sat(_round_shift(a * m, s), out_bits))
    return out


def gemm_ref(a: list[list[int]], w: list[list[int]], bias: list[int] | None = None) -> list[list[int]]:
    """``acc[m][n] = bias[n] + sum_k a[m][k] * w[n][k]`` (a may be signed or unsigned)."""
    out = []
    for row in a:
        out_row = []
        for n, w_row in enumerate(w):
            total = 0 if bias is None else bias[n]
            for k in range(len(row)):
                total += row[k] * w_row[k]
            out_row.append(total)
        out.append(out_row)
    return out


def gemm_zero_ref(
    a: list[list[int]], w: list[list[int]], bias: list[int] | None = None, zero_a: int = 0, zero_w: int = 0
) -> list[list[int]]:
    """``acc[m][n] = bias[n] + sum_k (a[m][k] - zero_a) * (w[n][k] - zero_w)``."""
    return gemm_ref([[v - zero_a for v in row] for row in a], [[v - zero_w for v in row] for row in w], bias)


def residual_add_ref(a: list[int], b: list[int], mult_a, mult_b, shift, out_bits: int = 8) -> list[int]:
    out = []
    for j in range(len(a)):
        total = a[j] * _per_channel(mult_a, j) + b[j] * _per_channel(mult_b, j)
        out.append(_sat(_round_shift(total, _per_channel(shift, j)), out_bits))
    return out


def residual_add_zp_ref(
    a: list[int],
    b: list[int],
    mult_a,
    mult_b,
    shift,
    out_bits: int = 8,
    rounding: str = "half_up",
    zero_a: int = 0,
    zero_b: int = 0,
    zero_out: int = 0,
) -> list[int]:
    """``residual_add_zp`` element by element in exact rationals (``Fraction``)."""
    out = []
    for j in range(len(a)):
        total = (a[j] - zero_a) * _per_channel(mult_a, j) + (b[j] - zero_b) * _per_channel(mult_b, j)
        out.append(_sat(_round_exact(total, _per_channel(shift, j), rounding) + zero_out, out_bits))
    return out


def _round_exact(v: int, s: int, rounding: str) -> int:
    """``v / 2^s`` rounded by ``rounding`` (half_up, half_even, half_away, floor), in exact rationals."""
    from fractions import Fraction

    x = Fraction(v, 2**s)
    below = math.floor(x)
    frac = x - below
    if rounding == "half_up":
        return math.floor(x + Fraction(1, 2))
    if rounding == "half_even":
        return below + (1 if frac > Fraction(1, 2) or (frac == Fraction(1, 2) and below % 2) else 0)
    if rounding == "half_away":
        return int(math.copysign(math.floor(abs(x) + Fraction(1, 2)), x)) if x else 0
    return below


def requant_zero_ref(acc: list[int], multiplier, shift, out_bits: int = 8, rounding: str = "half_up", zero: int = 0):
    """``requant_zero`` element by element: ``sat(round(acc * M / 2^s) + zero)`` (the one saturation
    after the add)."""
    return [
        _sat(_round_exact(v * _per_channel(multiplier, j), _per_channel(shift, j), rounding) + zero, out_bits)
        for j, v in enumerate(acc)
    ]


def gelu_ref(x: list[int], table: list[int], in_bits: int = 8) -> list[int]:
    return [table[v + 2 ** (in_bits - 1)] for v in x]


def softmax_ref(
    row: list[int],
    exp_table: list[int] | None,
    out_bits: int = 8,
    exp: str = "table",
    exp_mult: int | None = None,
) -> list[int]:
    """One row, cumulative rounding: ``p_i = P_i - P_(i-1)``, ``P_i = round(C_i * R / 2^40)``."""
    top = max(row)
    exps = []
    for v in row:
        d = top - v
        if exp == "table":
            e = exp_table[d] if d < len(exp_table) else 0
        else:  # shift-and-add: 2^23 * 2^-(q + f) ~= 2^23 * (1 - f/2) / 2^q
            t = d * exp_mult
            q = t // 2**16
            r = t % 2**16
            e = 0 if q >= 24 else (2**23 - r * 64) // 2**q
        exps.append(e)
    total = sum(exps)
    big_q = 2**out_bits - 1
    recip = (big_q * 2**40 + total // 2) // total
    out = []
    running = 0
    prev = 0
    for e in exps:
        running += e
        cum = (running * recip + 2**39) // 2**40
        out.append(cum - prev)
        prev = cum
    return out


def isqrt_ref(n: int) -> int:
    return math.isqrt(n)


def layernorm_ref(
    row: list[int], gamma: list[int], beta: list[int], eps_int: int, multiplier: int, shift: int, out_bits: int = 8
) -> list[int]:
    """One row, constants T = 11, K = 43, F = 10."""
    c = len(row)
    sx = sum(row)
    sxx = sum(v * v for v in row)
    var_c2 = c * sxx - sx * sx
    sig = math.isqrt(var_c2 * 2**22 + eps_int)
    inv = (2**43 + sig // 2) // sig if sig > 0 else 0
    out = []
    for i, v in enumerate(row):
        y = ((c * v - sx) * inv + 2**21) // 2**22
        acc = y * gamma[i] + beta[i]
        out.append(_sat(_round_shift(acc * multiplier, shift), out_bits))
    return out


def mean_pool_ref(tokens: list[list[int]], multiplier, shift, out_bits: int = 8) -> list[int]:
    """``tokens[t][j]``: sum over t for each channel j, then requant."""
    sums = [sum(tok[j] for tok in tokens) for j in range(len(tokens[0]))]
    return requant_ref(sums, multiplier, shift, out_bits)


def divu_ref(
    dividend: int, divisor: int, n_bits: int = 40, d_bits: int = 24, q_bits: int | None = None
) -> tuple[int, int]:
    """rtl/divu.v step by step: the top ``n_bits - q_bits`` dividend bits seed the remainder, then
    ``q_bits`` restoring steps each bring down one bit and subtract the divisor if it fits."""
    q_bits = n_bits if q_bits is None else q_bits
    rem = dividend >> q_bits  # < divisor by the precondition
    low = dividend % 2**q_bits  # dividend bits still to bring down, most significant first
    quotient = 0
    for step in range(q_bits):
        bit = (low >> (q_bits - 1 - step)) & 1
        trial = 2 * rem + bit  # D_BITS + 1 bits
        fits = trial >= divisor
        rem = (trial - divisor if fits else trial) % 2**d_bits
        quotient = 2 * quotient + int(fits)
    return quotient, rem
