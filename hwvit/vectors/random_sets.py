"""Random unit-test vector sets for one block kind, with the edges a testbench must see.

``random_record(kind, cases, seed, **params)`` draws inputs (numpy Generator(seed): the same
arguments give the same record), computes the outputs with ``hwvit.ops`` (the specification)
and returns a ``BlockRecord`` with path ``"random"``. Every set opens with fixed edge cases
(extreme values, saturation, ties, shifts 0 and 62, per-channel multipliers, degenerate rows)
followed by random ones; ``cases`` counts elements (requant, gelu, residual_add, divu, isqrt),
rows (softmax, layernorm) or output rows m (gemm). divu sets hold exact divisions (a step whose
partial remainder equals the divisor) and the precondition's edges; isqrt sets the radicands
around squares (``divu_edges``, ``isqrt_edges``: Python ints, any width). Floats appear only in choosing test inputs and
scales; every tensor is an integer array.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from hwvit.formats import ACC, INT8, MULT_MAX, SHIFT_MAX, UINT8, signed
from hwvit.record import KINDS, BlockRecord, make_record

M_LO = 1 << 30  # quantize_multiplier gives M in [2^30, 2^31-1]

# Options of each kind and their defaults (None: derived, see the kind's function).
DEFAULTS: dict[str, dict[str, Any]] = {
    "requant": {"out_bits": 8},
    "gemm": {"k": 64, "n": 16, "a_signed": True, "out_bits": 8},
    "gelu": {"in_bits": 8, "out_bits": 8, "table": None, "scale_in": None, "scale_out": None},
    "softmax": {"row_len": 64, "in_bits": 8, "out_bits": 8, "entries": None, "exp_table": None,
                "scale_in": None},
    "layernorm": {"c": 64, "out_bits": 8, "eps": 1e-6, "scale_in": 0.05, "scale_out": 0.05,
                  "eps_int": None, "multiplier": None, "shift": None},
    "residual_add": {"out_bits": 8, "mult_a": None, "mult_b": None, "shift": None},
    "divu": {"n_bits": 40, "d_bits": 24, "q_bits": None},  # rtl/divu.v's defaults (q_bits None: n_bits)
    "isqrt": {"in_bits": 62},  # rtl/isqrt.v's default (LayerNorm's Ve)
}
# Cases of a set when none are asked for (`hwvit vectors-random`): every kind's fixed edge cases
# fit its default, divu's and isqrt's (about 60 and 230 at the defaults) with random ones after.
DEFAULT_CASES = {"divu": 400, "isqrt": 400}


def default_cases(kind: str) -> int:
    return DEFAULT_CASES.get(kind, 64)


def _options(kind: str, given: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(given) - set(DEFAULTS[kind]))
    if unknown:
        raise ValueError(f"{kind}: unknown parameter {unknown[0]!r}; known: {', '.join(DEFAULTS[kind])}")
    return {**DEFAULTS[kind], **{k: v for k, v in given.items() if v is not None}}


def _int(opts: dict[str, Any], key: str, lo: int, hi: int) -> int:
    value = opts[key]
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
        raise ValueError(f"{key} must be an integer in [{lo}, {hi}], got {value!r}")
    return int(value)


def _fill(edges: np.ndarray, count: int, draw) -> np.ndarray:
    """The first ``count`` of ``edges`` (along axis 0), topped up with ``draw(k)`` random items."""
    if count <= len(edges):
        return edges[:count]
    return np.concatenate([edges, draw(count - len(edges))])


def _shift_for(mag: np.ndarray, mult: np.ndarray, out_bits: int, jitter: np.ndarray) -> np.ndarray:
    """Shift that brings ``mag * mult`` near the output range's top, moved by ``jitter`` bits."""
    prod = np.maximum(mag.astype(np.float64) * mult.astype(np.float64), 1.0)
    s = np.ceil(np.log2(prod)).astype(np.int64) - (out_bits - 1) + jitter
    return np.clip(s, 0, SHIFT_MAX)


def _requant(rng: np.random.Generator, cases: int, opts: dict[str, Any]) -> BlockRecord:
    from hwvit import ops

    out_bits = _int(opts, "out_bits", 2, 16)
    accs, mults, shifts = [ACC.lo, MULT_MAX, 0, 1, -1], [MULT_MAX, M_LO, 0], [0, 1, 31, SHIFT_MAX]
    grid = np.array(list(itertools.product(accs, mults, shifts)), dtype=np.int64)
    # Ties: acc * 2^30 >> 31 is acc / 2, so odd acc lands exactly on .5 (rounds toward +inf).
    ties = np.array([(a, M_LO, 31) for a in (1, -1, 3, -3, 255, -255, -257, 257)], dtype=np.int64)
    edges = np.concatenate([ties, grid])

    def draw(k: int) -> np.ndarray:
        acc = rng.integers(ACC.lo, ACC.hi + 1, k)
        small = rng.random(k) < 0.3  # small accumulators too: most real ones are
        acc[small] = rng.integers(-(1 << 16), 1 << 16, int(small.sum()))
        mult = rng.integers(M_LO, MULT_MAX, k, endpoint=True)
        shift = _shift_for(np.abs(acc), mult, out_bits, rng.integers(-2, 3, k))
        wild = rng.random(k) < 0.2  # any shift: full saturation or zero
        shift[wild] = rng.integers(0, SHIFT_MAX, int(wild.sum()), endpoint=True)
        return np.stack([acc, mult, shift], axis=1)

    cols = _fill(edges, cases, draw)
    acc, mult, shift = cols[:, 0], cols[:, 1], cols[:, 2]
    y = ops.requant(acc, mult, shift, out_bits)
    return make_record("requant", "random", {"out_bits": out_bits}, acc=acc, multiplier=mult, shift=shift, y=y)


def _gemm(rng: np.random.Generator, cases: int, opts: dict[str, Any]) -> BlockRecord:
    from hwvit import ops

    k, n = _int(opts, "k", 1, 65535), _int(opts, "n", 1, 1 << 16)
    out_bits = _int(opts, "out_bits", 2, 16)
    a_signed = opts["a_signed"]
    if not isinstance(a_signed, (bool, np.bool_)):
        raise ValueError(f"a_signed must be a bool, got {a_signed!r}")
    a_signed = bool(a_signed)
    lo, hi = (INT8 if a_signed else UINT8).range
    # Rows: all max, all min, alternating min/max, then random.
    alt = np.where(np.arange(k) % 2 == 0, lo, hi)
    a = _fill(np.array([np.full(k, hi), np.full(k, lo), alt]), cases,
              lambda c: rng.integers(lo, hi, (c, k), endpoint=True))
    # Channels: all -128 (with an all-min row: the largest |acc|), all 127, alternating, random.
    w = _fill(np.array([np.full(k, -128), np.full(k, 127), np.where(np.arange(k) % 2 == 0, 127, -128)]), n,
              lambda c: rng.integers(-128, 127, (c, k), endpoint=True))
    bias_max = min(1 << 30, ACC.hi - k * 255 * 128)  # ops.gemm's int32 bound
    # Most biases of the size of a typical dot product (so rows differ after requant), two extreme.
    typical = min(bias_max, int(math.sqrt(k) * (1 << 14)))
    bias = rng.integers(-typical, typical, n, endpoint=True)
    bias[: min(n, 2)] = [bias_max, -bias_max][: min(n, 2)]
    acc = ops.gemm(a, w, bias, a_signed)
    mult = rng.integers(M_LO, MULT_MAX, n, endpoint=True)  # per-channel multipliers
    mult[: min(n, 2)] = [MULT_MAX, M_LO][: min(n, 2)]
    shift = _shift_for(np.abs(acc).max(axis=0), mult, out_bits, rng.integers(-2, 2, n))
    if n > 3:
        shift[3] = 0  # saturates every output of the channel
    if n > 4:
        shift[4] = SHIFT_MAX  # rounds every output of the channel to 0 (or 1 at the +max)
    y = ops.requant(acc, mult, shift, out_bits)
    params = {"m": int(cases), "k": k, "n": n, "a_signed": a_signed, "out_bits": out_bits}
    return make_record("gemm", "random", params, a=a, w=w, bias=bias, multiplier=mult, shift=shift, acc=acc, y=y)


def _gelu(rng: np.random.Generator, cases: int, opts: dict[str, Any]) -> BlockRecord:
    from hwvit import ops
    from hwvit.quant.params import gelu_table

    in_bits, out_bits = _int(opts, "in_bits", 2, 16), _int(opts, "out_bits", 2, 16)
    half = 1 << (in_bits - 1)
    s_in = opts["scale_in"] or 6.0 / half  # inputs cover [-6, 6)
    s_out = opts["scale_out"] or 5.0 / ((1 << (out_bits - 1)) - 1)  # GELU(x > 5) saturates
    if opts["table"] is not None:
        table = np.asarray(opts["table"], dtype=np.int64).reshape(-1)
        s_in, s_out = opts["scale_in"], opts["scale_out"]
    else:
        table = gelu_table(s_in, s_out, in_bits, out_bits)
    # Every table entry once (in order, then the sweep shuffled), then random inputs.
    sweep = np.arange(-half, half)
    x = _fill(np.concatenate([sweep[[0, -1, half, half - 1]], rng.permutation(sweep)]), cases,
              lambda c: rng.integers(-half, half, c))
    y = ops.gelu(x, table, in_bits)
    return make_record("gelu", "random", {"in_bits": in_bits, "out_bits": out_bits},
                       {"x": s_in, "table": s_out, "y": s_out}, x=x, table=table, y=y)


def _softmax(rng: np.random.Generator, cases: int, opts: dict[str, Any]) -> BlockRecord:
    from hwvit import ops
    from hwvit.ops.softmax import EXP_ONE
    from hwvit.quant.params import exp_table

    in_bits, out_bits = _int(opts, "in_bits", 2, 16), _int(opts, "out_bits", 2, 16)
    row_len = _int(opts, "row_len", 1, 4096)
    lo, hi = signed(in_bits).range
    if opts["exp_table"] is not None:
        table = np.asarray(opts["exp_table"], dtype=np.int64).reshape(-1)
        s_in = opts["scale_in"]
    else:
        entries = opts["entries"] if opts["entries"] is not None else min(1 << in_bits, 256)
        entries = _int({"entries": entries}, "entries", 1, 1 << in_bits)
        s_in = opts["scale_in"] or 16.0 / (1 << in_bits)  # exp(-d s_in) reaches 0 within 8 bits
        table = exp_table(s_in, entries)
    entries = len(table)

    def row(i: int) -> np.ndarray:
        pattern = i % 10
        if pattern == 0:  # uniform over the whole range
            return rng.integers(lo, hi, row_len, endpoint=True)
        if pattern == 1:  # all equal: p = Q / N everywhere
            return np.full(row_len, rng.integers(lo, hi, endpoint=True))
        if pattern == 2:  # one hot: a max among minima, d = 2^in_bits - 1 (beyond a short table)
            r = np.full(row_len, lo)
            r[rng.integers(row_len)] = hi
            return r
        if pattern == 3:
            return np.full(row_len, hi)
        if pattern == 4:  # narrow spread: every d near 0
            return np.clip(hi - 3 - rng.integers(0, 8, row_len), lo, hi)
        if pattern == 5:  # two levels: ties at the max
            return np.where(rng.random(row_len) < 0.5, hi, hi - 1)
        if pattern == 6:  # d around the table end L (E drops to 0 beyond it)
            d = np.clip(entries - 2 + rng.integers(0, 4, row_len), 0, hi - lo)
            d[0] = 0
            return hi - d
        if pattern == 7:  # attention-like: a few large scores over a bell
            r = np.clip(np.round(rng.normal(0, (hi - lo) / 8, row_len)), lo, hi).astype(np.int64)
            r[rng.integers(row_len, size=max(1, row_len // 16))] = hi - rng.integers(0, 4)
            return r
        if pattern == 8:  # d sweeps the table: every entry used
            return hi - (np.arange(row_len) % min(entries + 1, hi - lo + 1))
        return rng.integers(lo, lo + 16, row_len, endpoint=True)  # low values only

    x = np.stack([row(i) for i in range(cases)])
    p = ops.softmax(x, table, out_bits, in_bits)
    params = {"in_bits": in_bits, "out_bits": out_bits, "entries": entries, "rows": int(cases),
              "row_len": row_len}
    return make_record("softmax", "random", params, {"x": s_in, "exp_table": 1.0 / EXP_ONE,
                                                     "p": 1.0 / ((1 << out_bits) - 1)}, x=x, exp_table=table, p=p)


def _layernorm(rng: np.random.Generator, cases: int, opts: dict[str, Any]) -> BlockRecord:
    from hwvit import ops
    from hwvit.quant.params import layernorm_params

    c, out_bits = _int(opts, "c", 1, 4096), _int(opts, "out_bits", 2, 16)
    s_x, s_out = float(opts["scale_in"]), float(opts["scale_out"])
    gamma = rng.normal(1.0, 0.4, c)
    beta = rng.normal(0.0, 0.5, c)
    gamma[: min(c, 2)] = [2.5, -1.0][: min(c, 2)]  # a large and a negative gain: saturation, sign
    lp = layernorm_params(gamma, beta, float(opts["eps"]), c, s_x, s_out, out_bits)
    eps_int = lp["eps_int"] if opts["eps_int"] is None else _int(opts, "eps_int", 0, 1 << 61)
    mult = int(lp["multiplier"]) if opts["multiplier"] is None else _int(opts, "multiplier", 0, MULT_MAX)
    shift = int(lp["shift"]) if opts["shift"] is None else _int(opts, "shift", 0, SHIFT_MAX)

    def row(i: int) -> np.ndarray:
        pattern = i % 9
        if pattern == 0:
            return rng.integers(-128, 127, c, endpoint=True)
        if pattern == 1:  # constant: variance 0, only eps keeps the divisor off 0
            return np.full(c, rng.integers(-128, 127, endpoint=True))
        if pattern == 2:  # alternating extremes: the largest variance
            return np.where(np.arange(c) % 2 == 0, 127, -128)
        if pattern == 3:  # one outlier in a flat row
            r = np.zeros(c, np.int64)
            r[rng.integers(c)] = 127
            return r
        if pattern == 4:  # spread of one LSB
            return rng.integers(0, 1, c, endpoint=True)
        if pattern == 5:
            return np.full(c, -128)
        if pattern == 6:  # all max but one min
            r = np.full(c, 127)
            r[rng.integers(c)] = -128
            return r
        if pattern == 7:  # activation-like bell
            return np.clip(np.round(rng.normal(0, 20, c)), -128, 127).astype(np.int64)
        return rng.integers(-4, 4, c, endpoint=True)

    x = np.stack([row(i) for i in range(cases)])
    y = ops.layernorm(x, lp["gamma"], lp["beta"], eps_int, mult, shift, out_bits)
    params = {"rows": int(cases), "c": c, "out_bits": out_bits, "eps_int": int(eps_int), "multiplier": mult,
              "shift": shift}
    return make_record("layernorm", "random", params, {"x": s_x, "y": s_out}, x=x, gamma=lp["gamma"],
                       beta=lp["beta"], y=y)


def _residual_add(rng: np.random.Generator, cases: int, opts: dict[str, Any]) -> BlockRecord:
    from hwvit import ops
    from hwvit.quant.params import residual_params

    out_bits = _int(opts, "out_bits", 2, 16)
    s_out = 1.0
    s_a, s_b = (float(v) for v in rng.uniform(0.3, 1.6, 2))  # ratios > 1 push sums into saturation
    ma, mb, s = residual_params(s_a, s_b, s_out)
    ma = ma if opts["mult_a"] is None else _int(opts, "mult_a", 0, MULT_MAX)
    mb = mb if opts["mult_b"] is None else _int(opts, "mult_b", 0, MULT_MAX)
    s = s if opts["shift"] is None else _int(opts, "shift", 1, SHIFT_MAX)
    values = [-128, -127, -1, 0, 1, 126, 127]
    edges = np.array(list(itertools.product(values, values)), dtype=np.int64)
    ab = _fill(edges, cases, lambda c: rng.integers(-128, 127, (c, 2), endpoint=True))
    y = ops.residual_add(ab[:, 0], ab[:, 1], ma, mb, s, out_bits)
    params = {"out_bits": out_bits, "mult_a": int(ma), "mult_b": int(mb), "shift": int(s)}
    return make_record("residual_add", "random", params, {"a": s_a, "b": s_b, "y": s_out}, a=ab[:, 0], b=ab[:, 1],
                       y=y)


def _unique(values: list) -> list:
    return list(dict.fromkeys(values))


def divu_edges(n_bits: int, d_bits: int, q_bits: int) -> list[tuple[int, int]]:
    """(dividend, divisor) pairs at the edges of rtl/divu.v's precondition, divisor 1 first.

    Divisors 1, 2, 3, all ones, all ones - 1, the top bit alone and below it; for each the
    dividends 0, 1, b - 1, b, b + 1 (quotients 0 and 1, exact), the largest one allowed
    ``min(2^n_bits - 1, b * 2^q_bits - 1)`` (quotient 2^q_bits - 1 where the dividend reaches
    it), one below it, half of it and ``(2^q_bits - 1) * b`` (the largest quotient, exact).
    """
    n_max, d_max, q_max = (1 << n_bits) - 1, (1 << d_bits) - 1, (1 << q_bits) - 1
    divisors = _unique(b for b in (1, 2, 3, d_max, d_max - 1, 1 << (d_bits - 1), (1 << (d_bits - 1)) - 1)
                       if 1 <= b <= d_max)
    pairs = []
    for b in divisors:
        top = min(n_max, b * (q_max + 1) - 1)
        pairs += [(a, b) for a in (0, 1, b - 1, b, b + 1, top, top - 1, top // 2, q_max * b) if 0 <= a <= top]
    return _unique(pairs)


def _divu(rng: np.random.Generator, cases: int, opts: dict[str, Any]) -> BlockRecord:
    from hwvit import ops

    n_bits = _int(opts, "n_bits", 2, 63)
    q_bits = n_bits if opts["q_bits"] is None else _int(opts, "q_bits", 2, n_bits)
    d_bits = _int(opts, "d_bits", max(1, n_bits - q_bits), 63)
    n_max, d_max = (1 << n_bits) - 1, (1 << d_bits) - 1
    wide = 1 << (n_bits - q_bits)  # divisors from here on allow every n_bits dividend

    def bound(b: np.ndarray) -> np.ndarray:  # the largest dividend allowed with divisor b
        return np.where(b >= wide, n_max, (np.minimum(b, wide - 1) << q_bits) - 1)

    def draw(k: int) -> np.ndarray:
        # Divisors uniform over the width or over a random power of two (small ones are common).
        b = rng.integers(1, d_max, k, endpoint=True)
        small = rng.random(k) < 0.5
        top_bit = rng.integers(0, d_bits, k)
        b[small] = rng.integers(1, (1 << top_bit[small]), endpoint=True)
        top = bound(b)
        a = rng.integers(0, top, endpoint=True)
        near = rng.random(k) < 0.3  # near the largest dividend: quotients at the top
        a[near] = np.maximum(top[near] - rng.integers(0, b[near], endpoint=True), 0)
        # A quarter exact, a = q * b: the last restoring step sees a partial remainder == divisor.
        exact = rng.random(k) < 0.25
        q = rng.integers(1, np.maximum(top[exact] // b[exact], 1), endpoint=True)
        a[exact] = q * b[exact]
        return np.stack([a, b], axis=1)

    pairs = _fill(np.array(divu_edges(n_bits, d_bits, q_bits), dtype=np.int64), cases, draw)
    dividend, divisor = pairs[:, 0], pairs[:, 1]
    quotient, remainder = ops.divu(dividend, divisor, n_bits, d_bits, q_bits)
    params = {"n_bits": n_bits, "d_bits": d_bits, "q_bits": q_bits}
    return make_record("divu", "random", params, dividend=dividend, divisor=divisor, quotient=quotient,
                       remainder=remainder)


def isqrt_edges(width: int) -> list[int]:
    """Radicands of a ``width``-bit square root at its edges, the four that hit every bin first.

    0, 2^width - 1 (the largest root's largest remainder), 1 and 3 (root 1, remainders 0 and 2),
    then 2^width - 2, 2^(width-1) and 2^(width-1) - 1, then m^2 - 1, m^2, m^2 + 1 and m^2 + 2m
    (the largest remainder root m leaves, ROOT_BITS + 1 bits) for small m, powers of two +-1 and
    the largest roots of the width.
    """
    half, top = width // 2, (1 << width) - 1
    fixed = [0, top, 1, 3, top - 1, 1 << (width - 1), (1 << (width - 1)) - 1]
    ms = [0, 1, 2, 3, 4, 5, 15, 16, 255, 256, 4095, 4096, 65535, 65536, (1 << half) - 1, (1 << half) - 2]
    ms += [(1 << k) + d for k in range(17, half) for d in (-1, 0, 1)]
    around = [v for m in ms for v in (m * m - 1, m * m, m * m + 1, m * m + 2 * m) if 0 <= v <= top]
    return _unique(fixed + around)


def _isqrt(rng: np.random.Generator, cases: int, opts: dict[str, Any]) -> BlockRecord:
    from hwvit import ops

    in_bits = _int(opts, "in_bits", 4, 62)  # hwvit.ops.isqrt takes radicands < 2^62
    if in_bits % 2:
        raise ValueError(f"in_bits must be even (the root has in_bits / 2 bits), got {in_bits}")
    half = in_bits // 2
    edges = isqrt_edges(in_bits)
    # The four bin edges lead; the rest in a random order (the existing test shuffled them too).
    edges = edges[:4] + [edges[4 + i] for i in rng.permutation(len(edges) - 4)]

    def draw(k: int) -> np.ndarray:
        m = rng.integers(0, 1 << half, k)
        wide = rng.random(k) < 0.4  # roots with the top bit set
        m[wide] = rng.integers(1 << (half - 1), 1 << half, int(wide.sum()))
        pattern = rng.integers(0, 5, k)
        x = np.select([pattern == 0, pattern == 1, pattern == 2, pattern == 3],
                      [np.maximum(m * m - 1, 0), m * m, m * m + 1, m * m + 2 * m],
                      rng.integers(0, (1 << in_bits) - 1, k, endpoint=True))
        return x

    x = _fill(np.array(edges, dtype=np.int64), cases, draw)
    return make_record("isqrt", "random", {"in_bits": in_bits}, radicand=x, root=ops.isqrt(x))


_MAKERS = {"requant": _requant, "gemm": _gemm, "gelu": _gelu, "softmax": _softmax, "layernorm": _layernorm,
           "residual_add": _residual_add, "divu": _divu, "isqrt": _isqrt}


def random_record(kind: str, cases: int, seed: int, **params: Any) -> BlockRecord:
    """``cases`` random unit-test cases of ``kind`` (edge cases first); outputs from hwvit.ops.

    ``params`` override ``DEFAULTS[kind]`` (row_len, c, k, n, in_bits, out_bits, entries,
    a_signed, table / exp_table, scales, n_bits / d_bits / q_bits, ...). ValueError on an unknown kind or parameter.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown block kind {kind!r}; choose from {', '.join(KINDS)}")
    if isinstance(cases, bool) or not isinstance(cases, (int, np.integer)) or not 1 <= cases <= 1 << 24:
        raise ValueError(f"cases must be an integer in [1, 2^24], got {cases!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    opts = _options(kind, params)
    rng = np.random.default_rng([int(seed), KINDS.index(kind)])
    record = _MAKERS[kind](rng, int(cases), opts)
    assert math.prod(next(iter(record.tensors.values())).data.shape) > 0, "empty random record"
    return record
