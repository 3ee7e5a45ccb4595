"""requant: y = sat((acc * M + 2^(s-1)) >>> s), multiplier and shift with every element (``rtl/requant.v``).

The requantizer after every GEMM: an int32 accumulator, a 31-bit multiplier and a 6-bit shift in,
a signed ``out_bits`` value out (round half up, then saturate; docs/arithmetic.md).

A set may name another requant variant (hwvit.variants, docs/variants/requant.md) as its
``rounding`` parameter (absent or ``half_up``: hwvit's own): its y is that variant's kernel, `hwvit
check` computes it again (``verify``) and ``hdl_parameters`` builds rtl/requant.v with the matching
ROUNDING / WRAP (``rtl_rounding``). gemmlowp's shift is signed (negative: a left shift), so a
gemmlowp set declares its shift tensor signed 6-bit; every other set keeps unsigned 6-bit.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import numpy as np

from hwvit import ops
from hwvit.blocks._common import M_LO, fill, int_option, rails, shift_for, spec, ties
from hwvit.blocks.base import BlockKind
from hwvit.byo.kinds import Field, Kind, bits_fixed, bits_param
from hwvit.formats import ACC, MULT, MULT_MAX, OUT_BITS, SHIFT, SHIFT_MAX
from hwvit.ops.reference import requant_ref
from hwvit.record import BlockRecord, Spec, make_record

PARAMS = {"out_bits": (int, OUT_BITS)}

HALF_UP = "half_up"
# rtl/requant.v's ROUNDING of each rounding (its header); a "_wrap" suffix sets WRAP = 1.
RTL_ROUNDING = {"half_up": 0, "half_away": 1, "half_even": 2, "floor": 3, "gemmlowp": 4, "onnxruntime": 5}
# Variants that are one of those: I-BERT's FixedPointMul rounds half to even and clamps.
RTL_ALIAS = {"ibert": "half_even"}
GEMMLOWP_SHIFT = (-30, 31)  # hwvit.variants.rounding: a right shift, negative = left shift


def rtl_rounding(rounding: str | None) -> dict[str, int]:
    """The ROUNDING / WRAP parameters of rtl/requant.v (and gemm.v) for requant variant ``rounding``;
    {} for hwvit's own half_up (the defaults: the build of a plain set is unchanged). ValueError for
    a variant without a Verilog twin (a team's function)."""
    rounding = rounding or HALF_UP
    if rounding == HALF_UP:
        return {}
    base = RTL_ALIAS.get(rounding, rounding)
    wrap = base.endswith("_wrap")
    base = base[: -len("_wrap")] if wrap else base
    if base not in RTL_ROUNDING:
        raise ValueError(f"requant variant {rounding!r} has no Verilog twin in rtl/requant.v")
    return {"ROUNDING": RTL_ROUNDING[base], "WRAP": int(wrap)}


def _gemmlowp(params: dict[str, Any]) -> bool:
    """A gemmlowp set: its shift is signed (a negative one is a left shift)."""
    return str(params.get("rounding", HALF_UP)).startswith("gemmlowp")


# Multipliers are declared 32-bit unsigned (values in [0, MULT_MAX]); shifts 6-bit, unsigned
# (signed for gemmlowp).
CONTRACT = {
    "acc": spec("input", ("n",), ACC),
    "multiplier": spec("input", ("n",), MULT),
    "shift": Spec("input", ("n",), SHIFT.bits, _gemmlowp),
    "y": Spec("output", ("n",), "out_bits", True),
}


def traced(path: str, acc, multiplier, shift, y, out_bits: int, scale_out: float) -> BlockRecord:
    """The record of one requant of the integer model (every array flat, one element each)."""
    return make_record(
        "requant", path, {"out_bits": out_bits}, {"y": scale_out}, acc=acc, multiplier=multiplier, shift=shift, y=y
    )


def random_set(rng: np.random.Generator, cases: int, opts: dict[str, Any]) -> BlockRecord:
    from hwvit import ops

    out_bits = int_option(opts, "out_bits", 2, 16)
    rounding = opts.get("rounding") or HALF_UP
    if rounding != HALF_UP:
        return _variant_set(rng, cases, out_bits, str(rounding))
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
        shift = shift_for(np.abs(acc), mult, out_bits, rng.integers(-2, 3, k))
        wild = rng.random(k) < 0.2  # any shift: full saturation or zero
        shift[wild] = rng.integers(0, SHIFT_MAX, int(wild.sum()), endpoint=True)
        return np.stack([acc, mult, shift], axis=1)

    cols = fill(edges, cases, draw)
    acc, mult, shift = cols[:, 0], cols[:, 1], cols[:, 2]
    y = ops.requant(acc, mult, shift, out_bits)
    return make_record("requant", "random", {"out_bits": out_bits}, acc=acc, multiplier=mult, shift=shift, y=y)


def _tie_edges(shifts: range) -> list[tuple[int, int, int]]:
    """(acc, M, s) whose acc * M / 2^s is exactly k + 1/2, for every s in ``shifts``, with k even and
    odd in both signs: acc * M = odd * 2^(s-1), M = 2^j (j <= 30) taking what acc cannot hold."""
    out = []
    for s in shifts:
        t = s - 1
        j = min(30, max(0, t - 29))
        for odd in (1, -1, 3, -3):
            acc = odd << (t - j) if t >= j else None
            if acc is not None and ACC.lo <= acc <= ACC.hi:
                out.append((acc, 1 << j, s))
    return out


F32_M = (1 << 23, (1 << 24) - 1)  # onnxruntime: M is a binary32 significand


def _near_halves(rng: np.random.Generator, accs) -> list[tuple[int, int, int]]:
    """onnxruntime (acc, M, s): for each acc, the M in F32_M and s whose ``acc * M / 2^s`` lies nearest
    a half k + 1/2 (k in 0..3, both signs): within about 2^-24 of it, where the binary32 roundings of
    ``f32(acc)`` (above 2^24) and of the product decide which side the result lands on."""
    out = []
    for acc in accs:
        k = int(rng.integers(0, 4))
        target = Fraction(2 * k + 1, 2)
        for s in range(SHIFT_MAX + 1):
            m = round(target * 2**s / abs(acc))
            if F32_M[0] <= m <= F32_M[1]:
                out.append((int(acc), int(m), s))
                break
    return out


def _f32_edges(rng: np.random.Generator) -> list[tuple[int, int, int]]:
    """onnxruntime's edge cases: binary32 ties of f32(acc) (acc = 2^24 + 1 rounds to even below, 2^24 + 3
    above, 2^31 - 1 to 2^31) and accumulators of every bit length, each near a half of the result; a
    product that is a binary32 tie: 3 * 9786709 = 7 * 2^22 - 1 has 25 bits, its last one half of the
    kept part's, which is odd, so binary32 rounds it up to 7 * 2^22, at s = 23 the half 3.5, even 4
    (the exact value rounds to 3)."""
    ties = [2**24 + 1, 2**24 + 3, 2**25 + 2, 2**25 + 6, 2**25 + 1, 2**25 + 3, 2**31 - 1, 2**30 + 2**6]
    lengths = [int(rng.integers(1 << (b - 1), 1 << b)) for b in range(2, 32)]
    accs = [a * sign for a in ties + lengths for sign in (1, -1)] + [ACC.lo]
    product_ties = [(3, 9786709, 23), (-3, 9786709, 23)]  # 3 M = 29360127, 25 bits, last bit a tie
    return _near_halves(rng, accs) + product_ties


def _variant_set(rng: np.random.Generator, cases: int, out_bits: int, rounding: str) -> BlockRecord:
    """A random set of requant variant ``rounding``: ties at every shift, both rails, the int32
    extremes, then random cases; y from the variant's kernel (hwvit.variants)."""
    from hwvit import variants

    v = variants.get("requant", rounding)  # KeyError names the known ones
    gemmlowp, f32 = rounding.startswith("gemmlowp"), rounding == "onnxruntime"
    lo_s, hi_s = GEMMLOWP_SHIFT if gemmlowp else (0, SHIFT_MAX + (rounding == "ibert"))  # ibert: E up to 63
    m_lo, m_hi = F32_M if f32 else (M_LO, MULT_MAX)
    accs, mults = [ACC.lo, ACC.hi, 0, 1, -1, 3, -3], [m_hi, m_lo, m_lo + 1, 0]
    shifts = [lo_s, -1, 0, 1, 30, 31] if gemmlowp else [0, 1, 2, 31, 32, SHIFT_MAX, hi_s]
    grid = [(a, m, s) for a in accs for m in mults for s in dict.fromkeys(shifts)]
    if gemmlowp:
        # SRDHM ties (x M = odd 2^30) at s = 0; RoundingDivideByPOT ties at every right shift r:
        # M = 2^30 halves x exactly when x is even, so h = acc / 2 = odd 2^(r-1) for acc = odd 2^r.
        ties_ = [(a, M_LO, 0) for a in (1, -1, 3, -3, 5, -5)]
        ties_ += [(odd << r, M_LO, r) for r in range(1, 32) for odd in (1, -1, 3, -3) if ACC.lo <= odd << r <= ACC.hi]
        ties_ += [(odd, M_LO, -left) for left in (1, 29, 30) for odd in (1, -1, 3, -3)]  # left shifts: exact
    else:
        ties_ = _tie_edges(range(1, hi_s + 1))
        if f32:  # M = 2^j exceeds a binary32 significand below 2^23: 2^23 takes the tie's power of two
            moved = [(a * m // F32_M[0], F32_M[0], s) for a, m, s in ties_ if a * m % F32_M[0] == 0]
            ties_ = [t for t in moved if ACC.lo <= t[0] <= ACC.hi] + _f32_edges(rng)
    edges = np.array(grid + ties_, dtype=np.int64)

    def draw(k: int) -> np.ndarray:
        acc = rng.integers(ACC.lo, ACC.hi + 1, k)
        small = rng.random(k) < 0.3
        acc[small] = rng.integers(-(1 << 16), 1 << 16, int(small.sum()))
        mult = rng.integers(m_lo, m_hi, k, endpoint=True)
        jitter = rng.integers(-2, 3, k)
        if gemmlowp:  # y ~ acc * M / 2^(31 + shift)
            prod = np.maximum(np.abs(acc).astype(np.float64) * mult, 1.0)
            shift = np.ceil(np.log2(prod)).astype(np.int64) - (out_bits - 1) - 31 + jitter
        else:
            shift = shift_for(np.abs(acc), mult, out_bits, jitter)
        shift = np.clip(shift, lo_s, hi_s)
        wild = rng.random(k) < 0.2
        shift[wild] = rng.integers(lo_s, hi_s, int(wild.sum()), endpoint=True)
        if f32:  # half of them near a half of the result, where binary32 decides
            near = np.array(_near_halves(rng, acc[: k // 2][acc[: k // 2] != 0]), dtype=np.int64).reshape(-1, 3)
            acc, mult, shift = (
                np.concatenate([near[:, i], col[len(near) :]]) for i, col in enumerate((acc, mult, shift))
            )
        return np.stack([acc, mult, shift], axis=1)

    cols = fill(edges, cases, draw)
    acc, mult, shift = cols[:, 0], cols[:, 1], cols[:, 2]
    y = v.kernel(acc, {"multiplier": mult, "shift": shift, "out_bits": out_bits})
    params = {"out_bits": out_bits, "rounding": rounding}
    return make_record("requant", "random", params, acc=acc, multiplier=mult, shift=shift, y=y)


def verify(vset) -> str | None:
    """A set of another requant variant (``rounding``): y computed again from acc, multiplier and
    shift with that variant's kernel; hwvit's own half_up is the RTL's (and ops') to check."""
    rounding = vset.params.get("rounding", HALF_UP)
    if rounding == HALF_UP or ":" in rounding:  # a team's function is checked where it runs
        return None
    from hwvit import variants

    p = {"multiplier": np.asarray(vset["multiplier"]), "shift": np.asarray(vset["shift"])}
    p["out_bits"] = int(vset.params["out_bits"])
    y = variants.get("requant", rounding).kernel(np.asarray(vset["acc"], dtype=np.int64), p)
    got, want = np.asarray(y).reshape(-1), np.asarray(vset["y"]).reshape(-1)
    bad = np.flatnonzero(got != want)
    if bad.size:
        i = int(bad[0])
        return f"requant: y[{i}] is {int(want[i])}, requant {rounding} of acc gives {int(got[i])}"
    return None


def hdl_parameters(vset) -> dict[str, int]:
    """rtl/requant.v's parameters for a set: the output width (the accumulator is always 32 bits)
    and the rounding's ROUNDING / WRAP (none for half_up)."""
    return {"ACC_BITS": 32, "OUT_BITS": int(vset.params["out_bits"]), **rtl_rounding(vset.params.get("rounding"))}


def count_bins(params, inputs, outputs, limits) -> dict[str, int]:
    acc = [int(v) for v in inputs["acc"].reshape(-1)]
    mult = np.broadcast_to(inputs["multiplier"], inputs["acc"].shape).reshape(-1)
    shift = np.broadcast_to(inputs["shift"], inputs["acc"].shape).reshape(-1)
    high, low = rails(outputs.get("y"), int(params["out_bits"]))
    return {
        "sat_high": high,
        "sat_low": low,
        "round_tie": ties([a * int(m) for a, m in zip(acc, mult)], [int(s) for s in shift]),
        "shift_0": int(np.count_nonzero(shift == 0)),
        "shift_62": int(np.count_nonzero(shift == SHIFT_MAX)),
    }


def operands(params: dict[str, Any], t: dict[str, np.ndarray], nd_index: list[int]) -> str:
    i = int(nd_index[0])
    return (
        f"acc[{i}] {int(t['acc'][i])}, requant multiplier[{i}] {int(t['multiplier'][i])}, "
        f"shift[{i}] {int(t['shift'][i])}"
    )


PORTS = Kind(
    "requant",
    inputs={
        "acc": Field("acc", bits_fixed(32), True, "int32 accumulator"),
        "mult": Field("multiplier", bits_fixed(31), False, "multiplier M, 0..2^31-1"),
        "shift": Field("shift", bits_fixed(6), False, "right shift s, 0..62"),
    },
    output=("y", Field("y", bits_param("out_bits"), True, "requantized value, out_bits signed")),
    parameters={"OUT_BITS": "out_bits"},
    fixed={"ACC_BITS": 32},
    doc="y = sat((acc * M + 2^(s-1)) >>> s); multiplier and shift travel with every beat",
)

KIND = BlockKind(
    name="requant",
    family="requant",
    doc=PORTS.doc,
    seed=0,
    kernel=ops.requant,
    reference=requant_ref,
    params=PARAMS,
    contract=CONTRACT,
    random=random_set,
    defaults={"out_bits": 8, "rounding": HALF_UP},
    bins=("sat_high", "sat_low", "round_tie", "shift_0", "shift_62", "out_stall"),
    count_bins=count_bins,
    reset_states=("empty", "stage1", "output", "full"),
    rtl=("rtl/requant.v", "rtl/round_sat.v"),
    hdl_parameters=hdl_parameters,
    verify=verify,
    operands=operands,
    traced=traced,
    testbench="sim/test_requant.py",
    ports=PORTS,
    reference_ports={"fields": {"acc": "in_acc_i", "mult": "in_mult_i", "shift": "in_shift_i"}, "out": "out_data_o"},
    synth={},
    mutate_parts=("round_sat.v",),
)
