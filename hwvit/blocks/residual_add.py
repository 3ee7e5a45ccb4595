"""residual_add: y = sat((a * Ma + b * Mb + 2^(s-1)) >>> s), two int8 operands at their own scales
brought to the output scale (``rtl/residual_add.v``, docs/arithmetic.md).

An imported model's sets (docs/onnx.md) may carry zero points and another rounding, recorded only
where they are not hwvit's own: ``zero_a``, ``zero_b`` subtracted from the operands, ``zero_out``
added after the rounding, ``rounding`` one of ROUNDINGS (hwvit.ops.residual_add_zp;
sim/test_residual_add.py builds rtl/residual_add.v with its ROUNDING). ``onnxruntime`` and
``onnxruntime_u8`` are onnxruntime's QLinearAdd on int8 or uint8 codes (binary32 arithmetic,
``hwvit.ops.residual_add.qlinear_add``), their multipliers binary32 ratios (``f32_ratios``). A random
set takes them as options (``--set zero_a=-3 --set rounding=half_even``).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from hwvit import ops
from hwvit.blocks._common import U31, fill, int_option, rails, spec, ties
from hwvit.blocks.base import BlockKind
from hwvit.byo.kinds import Config, Field, Kind, bits_fixed, bits_param
from hwvit.formats import INT8, MULT_MAX, OUT_BITS, SHIFT_MAX
from hwvit.ops.reference import residual_add_ref
from hwvit.ops.residual_add import f32_ratios
from hwvit.record import BlockRecord, Spec, make_record

PARAMS = {
    "out_bits": (int, OUT_BITS),
    "mult_a": (int, U31),
    "mult_b": (int, U31),
    "shift": (int, (1, SHIFT_MAX)),
}
CONTRACT = {
    "a": spec("input", ("n",), INT8),
    "b": spec("input", ("n",), INT8),
    "y": Spec("output", ("n",), "out_bits", True),
}


ZEROS = ("zero_a", "zero_b", "zero_out")
# the roundings rtl/residual_add.v takes (its ROUNDING parameter, rtl/round_sat.v's)
ROUNDINGS = {"half_up": 0, "half_away": 1, "half_even": 2, "floor": 3, "onnxruntime": 5, "onnxruntime_u8": 6}


def check_params(params: dict[str, Any]) -> str | None:
    """Zero points signed 8 (the output's within out_bits); a rounding the RTL has."""
    rounding = params.get("rounding", "half_up")
    if rounding not in ROUNDINGS:
        return f"residual_add param rounding={rounding!r}: rtl/residual_add.v rounds {', '.join(ROUNDINGS)}"
    out_lo, out_hi = -(1 << (int(params["out_bits"]) - 1)), (1 << (int(params["out_bits"]) - 1)) - 1
    for key, (lo, hi) in zip(ZEROS, (INT8.range, INT8.range, (out_lo, out_hi))):
        value = params.get(key, 0)
        if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
            return f"residual_add param {key}={value!r} outside [{lo}, {hi}]"
    return None


def verify(vset) -> str | None:
    """A set with zero points or another rounding: y computed again from a and b."""
    p = vset.params
    if p.get("rounding", "half_up") == "half_up" and not any(p.get(k, 0) for k in ZEROS):
        return None  # hwvit's own add: the RTL's to check
    y = ops.residual_add_zp(
        vset["a"], vset["b"], p["mult_a"], p["mult_b"], p["shift"], p["out_bits"], p.get("rounding", "half_up"),
        *(int(p.get(k, 0)) for k in ZEROS),
    )  # fmt: skip
    bad = np.flatnonzero(y != np.asarray(vset["y"]))
    if bad.size:
        i = int(bad[0])
        return f"residual_add: y[{i}] is {int(vset['y'][i])}, the add with its zero points gives {int(y[i])}"
    return None


def traced(
    path: str,
    a,
    b,
    y,
    mult_a: int,
    mult_b: int,
    shift: int,
    out_bits: int,
    scales: dict,
    rounding: str = "half_up",
    zeros: tuple[int, int, int] = (0, 0, 0),
) -> BlockRecord:
    """The record of one residual add of the integer model (flattened); an imported model's rounding
    and zero points (a, b, y) are recorded only where they are not hwvit's own (half_up, 0)."""
    params = {"out_bits": out_bits, "mult_a": mult_a, "mult_b": mult_b, "shift": shift}
    if rounding != "half_up":
        params["rounding"] = rounding
    for key, value in zip(("zero_a", "zero_b", "zero_out"), zeros):
        if value:
            params[key] = int(value)
    return make_record("residual_add", path, params, scales, a=a.reshape(-1), b=b.reshape(-1), y=y.reshape(-1))


def random_set(rng: np.random.Generator, cases: int, opts: dict[str, Any]) -> BlockRecord:
    from hwvit import ops
    from hwvit.quant.params import residual_params

    out_bits = int_option(opts, "out_bits", 2, 16)
    s_out = 1.0
    s_a, s_b = (float(v) for v in rng.uniform(0.3, 1.6, 2))  # ratios > 1 push sums into saturation
    ma, mb, s = residual_params(s_a, s_b, s_out)
    ma = ma if opts["mult_a"] is None else int_option(opts, "mult_a", 0, MULT_MAX)
    mb = mb if opts["mult_b"] is None else int_option(opts, "mult_b", 0, MULT_MAX)
    s = s if opts["shift"] is None else int_option(opts, "shift", 1, SHIFT_MAX)
    values = [-128, -127, -1, 0, 1, 126, 127]
    edges = np.array(list(itertools.product(values, values)), dtype=np.int64)
    rounding = opts.get("rounding") or "half_up"
    zeros = [int_option(opts, key, -(1 << 15), 1 << 15) for key in ZEROS]
    if rounding in ops.QLINEAR_ADD:  # binary32 ratios, and first the pairs where binary32 decides
        (s_a, s_b), (ma, mb, s, decided) = (1.0, 1.0), _qlinear_case(rng, opts, zeros, rounding)
        edges = np.concatenate([decided, edges])
    ab = fill(edges, cases, lambda c: rng.integers(-128, 127, (c, 2), endpoint=True))
    params = {"out_bits": out_bits, "mult_a": int(ma), "mult_b": int(mb), "shift": int(s)}
    if rounding != "half_up" or any(zeros):
        params.update({"rounding": rounding} if rounding != "half_up" else {})
        params.update({k: v for k, v in zip(ZEROS, zeros) if v})
        fault = check_params(params)
        if fault:
            raise ValueError(fault)
        y = ops.residual_add_zp(ab[:, 0], ab[:, 1], ma, mb, s, out_bits, rounding, *zeros)
    else:
        y = ops.residual_add(ab[:, 0], ab[:, 1], ma, mb, s, out_bits)
    return make_record("residual_add", "random", params, {"a": s_a, "b": s_b, "y": s_out}, a=ab[:, 0], b=ab[:, 1], y=y)


def _qlinear_case(rng: np.random.Generator, opts, zeros, rounding):
    """(Ma, Mb, s, pairs) of an onnxruntime QLinearAdd set: of up to 40 scale draws (or the given
    multipliers), the first on whose 65,536 code pairs binary32 gives another integer than the exact
    sum (half_even) at 16 or more (else the one with most), and up to 64 of those pairs."""
    pairs = np.array(list(itertools.product(range(-128, 128), repeat=2)), dtype=np.int64)
    best = None
    for _ in range(40):  # b's scale up to 2^11 times a's: its significand moved up 0 to 12 bits
        s_a, s_b = (float(v) for v in rng.uniform(0.3, 1.6, 2))
        ma, mb, s = f32_ratios(s_a, s_b * 2.0 ** int(rng.integers(0, 12)), 2.0 ** int(rng.integers(0, 4)))
        ma = ma if opts["mult_a"] is None else int_option(opts, "mult_a", 0, MULT_MAX)
        mb = mb if opts["mult_b"] is None else int_option(opts, "mult_b", 0, MULT_MAX)
        s = s if opts["shift"] is None else int_option(opts, "shift", 1, SHIFT_MAX)
        f32 = ops.residual_add_zp(pairs[:, 0], pairs[:, 1], ma, mb, s, 8, rounding, *zeros)
        exact = ops.residual_add_zp(pairs[:, 0], pairs[:, 1], ma, mb, s, 8, "half_even", *zeros)
        decided = pairs[f32 != exact]
        if best is None or len(decided) > len(best[3]):
            best = (ma, mb, s, decided)
        if len(decided) >= 16 or not (opts["mult_a"] is None and opts["mult_b"] is None and opts["shift"] is None):
            break
    ma, mb, s, decided = best  # the 32 of smallest |a| + |b| (the narrowest sums: ties at every bit), 32 at random
    small = np.argsort(np.abs(decided).sum(axis=1), kind="stable")
    rest = small[32:][rng.permutation(max(len(small) - 32, 0))]
    return ma, mb, s, decided[np.concatenate([small[:32], rest[:32]])]


def count_bins(params, inputs, outputs, limits) -> dict[str, int]:
    a, b = inputs["a"].reshape(-1), inputs["b"].reshape(-1)
    ma, mb, s = int(params["mult_a"]), int(params["mult_b"]), int(params["shift"])
    sums = [int(x) * ma + int(y) * mb for x, y in zip(a, b)]
    high, low = rails(outputs.get("y"), int(params["out_bits"]))
    return {"sat_high": high, "sat_low": low, "round_tie": ties(sums, [s] * len(sums))}


def operands(params: dict[str, Any], t: dict[str, np.ndarray], nd_index: list[int]) -> str:
    i = int(nd_index[0])
    return (
        f"a[{i}] {int(t['a'][i])}, b[{i}] {int(t['b'][i])}; requant multipliers {params['mult_a']}, "
        f"{params['mult_b']}, shift {params['shift']}"
    )


PORTS = Kind(
    "residual_add",
    inputs={
        "a": Field("a", bits_fixed(8), True, "int8 operand a"),
        "b": Field("b", bits_fixed(8), True, "int8 operand b"),
    },
    output=("y", Field("y", bits_param("out_bits"), True, "sum at the output scale, out_bits signed")),
    config={
        "mult_a": Config(lambda p: int(p["mult_a"]), bits_fixed(31), "multiplier of a"),
        "mult_b": Config(lambda p: int(p["mult_b"]), bits_fixed(31), "multiplier of b"),
        "shift": Config(lambda p: int(p["shift"]), bits_fixed(6), "common right shift"),
        # an imported model's zero points (two's complement on the port; 0 when the set has none)
        "zero_a": Config(lambda p: int(p.get("zero_a", 0)) & 0xFF, bits_fixed(8), "zero point of a"),
        "zero_b": Config(lambda p: int(p.get("zero_b", 0)) & 0xFF, bits_fixed(8), "zero point of b"),
        "zero_out": Config(
            lambda p: int(p.get("zero_out", 0)) & ((1 << int(p["out_bits"])) - 1),
            bits_param("out_bits"),
            "zero point of y, added after the rounding",
        ),
    },
    parameters={"OUT_BITS": "out_bits"},
    fixed={"IN_BITS": 8},
    doc="y = sat((a * Ma + b * Mb + 2^(s-1)) >>> s)",
)

KIND = BlockKind(
    name="residual_add",
    doc=PORTS.doc,
    seed=5,
    kernel=ops.residual_add,
    reference=residual_add_ref,
    params=PARAMS,
    contract=CONTRACT,
    random=random_set,
    defaults={
        "out_bits": 8,
        "mult_a": None,
        "mult_b": None,
        "shift": None,
        "rounding": "half_up",
        **dict.fromkeys(ZEROS, 0),
    },
    bins=("sat_high", "sat_low", "round_tie", "out_stall"),
    count_bins=count_bins,
    reset_states=("empty", "stage1", "output", "full"),
    rtl=("rtl/residual_add.v", "rtl/round_sat.v"),
    operands=operands,
    traced=traced,
    verify=verify,
    check_params=check_params,
    testbench="sim/test_residual_add.py",
    ports=PORTS,
    reference_ports={
        "fields": {"a": "in_a_i", "b": "in_b_i"},
        "out": "out_data_o",
        "ports": {
            "mult_a": "cfg_mult_a_i",
            "mult_b": "cfg_mult_b_i",
            "shift": "cfg_shift_i",
            "zero_a": "cfg_zero_a_i",
            "zero_b": "cfg_zero_b_i",
            "zero_out": "cfg_zero_out_i",
        },  # fmt: skip
    },
    synth={},
    mutate_parts=("round_sat.v",),
)
