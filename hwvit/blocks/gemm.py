"""gemm: y = requant(a @ w^T + bias) per output channel, the systolic GEMM engine (``rtl/gemm.v``).

int8 (or uint8) A rows against int8 W channels, int32 accumulators, a multiplier and shift per
channel; the record holds the accumulators too (docs/arithmetic.md). A random set may take another
requant variant (``--set rounding=NAME``): y from its kernel, gemmlowp's shifts moved down by 31,
channels 5 and 6 made tie channels (acc / 2 of opposite signs); sim/test_gemm.py builds the engine
with that rounding's ROUNDING / WRAP (hwvit/blocks/requant.py ``rtl_rounding``). An imported
model's sets (docs/onnx.md) may carry zero points, recorded only where they are not 0: ``zero_a``,
``zero_w`` subtracted from the operands, ``zero_out`` added after the requant's rounding
(hwvit.ops.gemm_zero, hwvit.ops.requant_zero); sim/test_gemm.py builds the engine with
ZERO_POINTS = 1 for them. A random set takes them as options (``--set zero_out=-3``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hwvit import ops
from hwvit.blocks._common import K_MAX, M_LO, SIZE, fill, int_option, rails, row_text, shift_for, spec
from hwvit.blocks.base import BlockKind
from hwvit.formats import ACC, INT8, MULT, MULT_MAX, OUT_BITS, SHIFT, SHIFT_MAX, UINT8
from hwvit.ops.reference import gemm_ref
from hwvit.record import BlockRecord, Spec, make_record

PARAMS = {
    "m": (int, SIZE),
    "k": (int, (1, 65535)),
    "n": (int, SIZE),
    "a_signed": (bool, None),
    "out_bits": (int, OUT_BITS),
}
CONTRACT = {
    "a": Spec("input", ("m", "k"), INT8.bits, "a_signed"),
    "w": spec("parameter", ("n", "k"), INT8),
    "bias": spec("parameter", ("n",), ACC),
    "multiplier": spec("parameter", ("n",), MULT),
    "shift": spec("parameter", ("n",), SHIFT),
    "acc": spec("output", ("m", "n"), ACC),
    "y": Spec("output", ("m", "n"), "out_bits", True),
}


def traced(
    path: str,
    a,
    w,
    bias,
    mult,
    shift,
    acc,
    y,
    out_bits: int,
    a_signed: bool,
    scales: tuple[float, float],
    rounding: str = "half_up",
    zero_out: int = 0,
    zero_a: int = 0,
    zero_w: int = 0,
) -> BlockRecord:
    """The record of one GEMM-engine pass of the integer model (2-D a, w, acc, y; bias None: zeros;
    a scalar multiplier or shift is every channel's; ``rounding``: the requant variant, recorded
    as the set's ``rounding`` parameter; zero points of an imported model, recorded only where they
    are not 0: ``zero_out`` added after the requant's rounding, ``zero_a`` / ``zero_w`` subtracted
    from the operands of an activation x activation product)."""
    n = w.shape[0]
    params = {"m": a.shape[0], "k": a.shape[1], "n": n, "a_signed": bool(a_signed), "out_bits": out_bits}
    if rounding != "half_up":
        params["rounding"] = rounding
    for key, value in (("zero_out", zero_out), ("zero_a", zero_a), ("zero_w", zero_w)):
        if value:
            params[key] = int(value)
    return make_record(
        "gemm",
        path,
        params,
        {"a": scales[0], "y": scales[1]},
        a=a,
        w=w,
        bias=np.zeros(n, dtype=np.int64) if bias is None else bias,
        multiplier=np.broadcast_to(mult, (n,)),
        shift=np.broadcast_to(shift, (n,)),
        acc=acc,
        y=y,
    )


ZEROS = ("zero_a", "zero_w", "zero_out")


def check_params(params: dict[str, Any]) -> str | None:
    """Zero points: signed 8-bit operands' (a uint8 a too: the RTL's 10-bit a - za holds -127..383),
    the output's within out_bits, which it leaves one bit of the requant's 16 (rtl/gemm.v)."""
    for key in ZEROS:
        value = params.get(key, 0)
        if not isinstance(value, int) or isinstance(value, bool):
            return f"gemm param {key}={value!r} is not an int"
    lo, hi = (-(1 << (int(params["out_bits"]) - 1)), (1 << (int(params["out_bits"]) - 1)) - 1)
    for key, (a, b) in (("zero_a", INT8.range), ("zero_w", INT8.range), ("zero_out", (lo, hi))):
        if not a <= params.get(key, 0) <= b:
            return f"gemm param {key}={params[key]} outside [{a}, {b}]"
    if params.get("zero_out", 0) and int(params["out_bits"]) > OUT_BITS[1] - 1:
        return f"gemm param zero_out needs out_bits <= {OUT_BITS[1] - 1}"
    from hwvit.ops.round_sat import ZERO_POINT_ROUNDINGS

    if params.get("zero_out", 0) and params.get("rounding", "half_up") not in ZERO_POINT_ROUNDINGS:
        return f"gemm param zero_out goes with a saturating rounding: {', '.join(ZERO_POINT_ROUNDINGS)}"
    return None


def verify(vset) -> str | None:
    """A set of another requant variant (``rounding``) or with an output zero point: its y computed
    again from acc, multiplier and shift with that variant's kernel (hwvit.variants) and the zero
    point; hwvit's own rounding without one is the RTL's to check."""
    rounding = vset.params.get("rounding", "half_up")
    zero = int(vset.params.get("zero_out", 0))
    if (rounding == "half_up" and not zero) or ":" in rounding:  # a team's function is checked where it runs
        return None
    acc = np.asarray(vset["acc"], dtype=np.int64)
    mult, shift, out_bits = np.asarray(vset["multiplier"]), np.asarray(vset["shift"]), int(vset.params["out_bits"])
    if zero:
        y = ops.requant_zero(acc, mult, shift, out_bits, rounding, zero)
    else:
        from hwvit import variants

        y = variants.get("requant", rounding).kernel(acc, {"multiplier": mult, "shift": shift, "out_bits": out_bits})
    bad = np.argwhere(y != np.asarray(vset["y"]))
    if bad.size:
        i, j = (int(t) for t in bad[0])
        with_zero = f" plus zero point {zero}" if zero else ""
        return f"gemm: y[{i}][{j}] is {int(vset['y'][i, j])}, requant {rounding} of acc{with_zero} gives {int(y[i, j])}"
    return None


def operands(params: dict[str, Any], t: dict[str, np.ndarray], nd_index: list[int]) -> str:
    i, j = int(nd_index[0]), int(nd_index[1])
    return (
        f"A row {i} {row_text(t['a'][i])} . W column {j} (w[{j}] {row_text(t['w'][j])}) + bias[{j}] "
        f"{int(t['bias'][j])}; requant multiplier[{j}] {int(t['multiplier'][j])}, shift[{j}] {int(t['shift'][j])}"
    )


def random_set(rng: np.random.Generator, cases: int, opts: dict[str, Any]) -> BlockRecord:
    from hwvit import ops

    k, n = int_option(opts, "k", 1, 65535), int_option(opts, "n", 1, 1 << 16)
    out_bits = int_option(opts, "out_bits", 2, 16)
    a_signed = opts["a_signed"]
    if not isinstance(a_signed, (bool, np.bool_)):
        raise ValueError(f"a_signed must be a bool, got {a_signed!r}")
    a_signed = bool(a_signed)
    lo, hi = (INT8 if a_signed else UINT8).range
    # Rows: all max, all min, alternating min/max, then random.
    alt = np.where(np.arange(k) % 2 == 0, lo, hi)
    a = fill(
        np.array([np.full(k, hi), np.full(k, lo), alt]), cases, lambda c: rng.integers(lo, hi, (c, k), endpoint=True)
    )
    # Channels: all -128 (with an all-min row: the largest |acc|), all 127, alternating, random.
    w = fill(
        np.array([np.full(k, -128), np.full(k, 127), np.where(np.arange(k) % 2 == 0, 127, -128)]),
        n,
        lambda c: rng.integers(-128, 127, (c, k), endpoint=True),
    )
    za, zw, zy = (int_option(opts, key, -(1 << 15), 1 << 15) for key in ZEROS)
    bias_max = min(1 << 30, ACC.hi - k * 383 * 255)  # ops.gemm_zero's int32 bound (ops.gemm's with no zero point)
    if not (za or zw):
        bias_max = min(1 << 30, ACC.hi - k * 255 * 128)
    # Most biases of the size of a typical dot product (so rows differ after requant), two extreme.
    typical = min(bias_max, int(math.sqrt(k) * (1 << 14)))
    bias = rng.integers(-typical, typical, n, endpoint=True)
    bias[: min(n, 2)] = [bias_max, -bias_max][: min(n, 2)]
    acc = ops.gemm_zero(a, w, bias, a_signed, za, zw)
    mult = rng.integers(M_LO, MULT_MAX, n, endpoint=True)  # per-channel multipliers
    mult[: min(n, 2)] = [MULT_MAX, M_LO][: min(n, 2)]
    shift = shift_for(np.abs(acc).max(axis=0), mult, out_bits, rng.integers(-2, 2, n))
    if n > 3:
        shift[3] = 0  # saturates every output of the channel
    if n > 4:
        shift[4] = SHIFT_MAX  # rounds every output of the channel to 0 (or 1 at the +max)
    params = {"m": int(cases), "k": k, "n": n, "a_signed": a_signed, "out_bits": out_bits}
    rounding = opts.get("rounding") or "half_up"
    for key, value in zip(ZEROS, (za, zw, zy)):
        if value:
            params[key] = value
    fault = check_params(params)
    if fault:
        raise ValueError(fault)
    if rounding == "onnxruntime":  # M a binary32 significand: the same multipliers, 7 bits fewer
        mult, shift = mult >> 7, np.maximum(shift - 7, 0)
    if zy:  # an output zero point: y from the rounding's kernel, then the zero point
        y = ops.requant_zero(acc, mult, shift, out_bits, rounding, zy)
        if rounding != "half_up":
            params["rounding"] = rounding
    elif rounding == "half_up":
        y = ops.requant(acc, mult, shift, out_bits)
    else:  # another requant variant (hwvit.variants): y from its kernel, recorded as `rounding`
        from hwvit import variants

        gemmlowp = rounding.startswith("gemmlowp")
        if gemmlowp:  # y ~ acc * M / 2^(31 + shift), shift in [0, 31] here
            shift = np.clip(shift - 31, 0, 31)
            if n > 4:
                shift[4] = 31
        if n > 6:  # tie channels: acc * 2^30 / 2^31 = acc / 2 (gemmlowp: h = round(acc / 2), then / 2),
            # channel 6 the negation of channel 5 (a tie of each sign for every odd acc)
            w[6], bias[6] = np.minimum(-w[5], 127), -bias[5]  # -(-128) is not int8: 127 there
            acc = ops.gemm_zero(a, w, bias, a_signed, za, zw)
            mult[5:7], shift[5:7] = M_LO, 1 if gemmlowp else 31
            if rounding == "onnxruntime":
                mult[5:7], shift[5:7] = M_LO >> 7, 24
        y = variants.get("requant", rounding).kernel(acc, {"multiplier": mult, "shift": shift, "out_bits": out_bits})
        params["rounding"] = rounding
    return make_record("gemm", "random", params, a=a, w=w, bias=bias, multiplier=mult, shift=shift, acc=acc, y=y)


def count_bins(params, inputs, outputs, limits) -> dict[str, int]:
    m, k, n = int(params["m"]), int(params["k"]), int(params["n"])
    rows, cols = int(limits.get("ROWS", 0)), int(limits.get("COLS", 0))
    shift = inputs["shift"].reshape(-1)
    high, low = rails(outputs.get("y"), int(params["out_bits"]))
    return {
        "sat_high": high,
        "sat_low": low,
        "shift_0": int(np.count_nonzero(shift == 0)),
        "shift_62": int(np.count_nonzero(shift == SHIFT_MAX)),
        "k_1": int(k == 1),
        "k_max": int(k == K_MAX),
        "partial_tile_rows": int(rows > 0 and m % rows != 0),
        "partial_tile_cols": int(cols > 0 and n % cols != 0),
    }


KIND = BlockKind(
    name="gemm",
    doc="y = requant(a @ w^T + bias), a systolic array of int8 MACs with int32 accumulators",
    seed=1,
    kernel=ops.gemm,
    reference=gemm_ref,
    params=PARAMS,
    contract=CONTRACT,
    random=random_set,
    defaults={"k": 64, "n": 16, "a_signed": True, "out_bits": 8, "rounding": "half_up", **dict.fromkeys(ZEROS, 0)},
    bins=(
        "sat_high",
        "sat_low",
        "shift_0",
        "shift_62",
        "k_1",
        "k_max",
        "partial_tile_rows",
        "partial_tile_cols",
        "out_stall",
    ),
    count_bins=count_bins,
    reset_states=("idle", "issue", "issue_drain", "drain", "drain_stall", "done"),
    seen_bins=("back_to_back",),
    rtl=("rtl/gemm.v", "rtl/gemm_array.v", "rtl/gemm_out.v", "rtl/gemm_pe.v", "rtl/requant.v", "rtl/round_sat.v"),
    operands=operands,
    traced=traced,
    testbench="sim/test_gemm.py",
    rows="m",
    verify=verify,
    check_params=check_params,
    shared=("w", "bias", "multiplier", "shift"),
    synth={"ROWS": 4, "COLS": 4, "MAX_M": 64, "MAX_K": 256, "MAX_N": 256},
    mutate_parts=("gemm_array.v", "gemm_out.v", "gemm_pe.v"),
    # The cheapest tests that push data through every lane; on Icarus the half_up rounding set
    # (6 x 8 x 10) goes first, cheaper than the reset test, and kills the datapath and tiling mutants.
    mutate_first=(
        "test_gemm_rounding_variant[icarus-half_up]",
        "test_gemm_reset_midrun",
        "test_gemm_back_to_back",
        "test_gemm_small_shapes",
    ),
)
