"""residual_add_channels: the residual add with its constants per channel,
``y[t, c] = sat((a[t, c] * Ma[c] + b[t, c] * Mb[c] + 2^(s[c]-1)) >>> s[c])``.

The same arithmetic as ``residual_add`` (``hwvit.ops.residual_add`` takes per-channel constants
along the last axis), made when a residual stream is quantized per channel: under FQ-ViT's
power-of-two factor (``--variant layernorm=ptf``) the add that feeds a PTF LayerNorm writes
channel c at ``s * 2^alpha_c``, and the next add reads that stream as its input ``a``, so each
channel has its own (Ma, Mb, s) (hwvit.quant.layers.int_residual). A set holds tokens x channels.

Verilog: ``rtl/residual_add_channels.v``, rtl/residual_add.v's arithmetic with the constants in a
per-channel table (written through its ``prm_*`` port) and a channel counter; the generic stream
bench (sim/byotb.py) drives it, sim/test_residual_add_channels.py runs its sets.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hwvit import ops
from hwvit.blocks._common import int_option, rails
from hwvit.blocks.base import BlockKind
from hwvit.byo.kinds import Config, Field, Kind, bits_count, bits_fixed, bits_param, channel_table
from hwvit.formats import INT8, MULT_MAX, OUT_BITS, SHIFT_MAX
from hwvit.ops.reference import residual_add_ref
from hwvit.record import BlockRecord, Spec, make_record

NAME = "residual_add_channels"
PARAMS = {"rows": (int, (1, 1 << 24)), "c": (int, (1, 4096)), "out_bits": (int, OUT_BITS)}
CONTRACT = {
    "a": Spec("input", ("rows", "c"), INT8.bits, True),
    "b": Spec("input", ("rows", "c"), INT8.bits, True),
    "mult_a": Spec("parameter", ("c",), 32, False),
    "mult_b": Spec("parameter", ("c",), 32, False),
    "shift": Spec("parameter", ("c",), 7, False),
    "y": Spec("output", ("rows", "c"), "out_bits", True),
}


def kernel(a, b, mult_a, mult_b, shift, out_bits: int = 8) -> np.ndarray:
    """``hwvit.ops.residual_add`` with per-channel constants (the exact int64 kernel)."""
    return ops.residual_add(a, b, mult_a, mult_b, shift, out_bits)


def reference(a, b, mult_a, mult_b, shift, out_bits: int = 8) -> list[list[int]]:
    """Row by row through the slow Python-int twin."""
    ma, mb, s = (list(map(int, v)) for v in (mult_a, mult_b, shift))
    return [residual_add_ref(list(map(int, ra)), list(map(int, rb)), ma, mb, s, out_bits) for ra, rb in zip(a, b)]


def traced(path: str, a, b, y, res, scales: dict) -> BlockRecord:
    """The record of one per-channel residual add of the integer model (``res``: its IntResidual)."""
    c = int(np.shape(a)[-1])
    a2, b2, y2 = (np.asarray(v).reshape(-1, c) for v in (a, b, y))
    params = {"rows": a2.shape[0], "c": c, "out_bits": res.out_bits}
    consts = {k: np.asarray(getattr(res, k), dtype=np.int64).reshape(-1) for k in ("mult_a", "mult_b", "shift")}
    return make_record(NAME, path, params, scales, a=a2, b=b2, y=y2, **consts)


def random_set(rng: np.random.Generator, cases: int, opts: dict[str, Any]) -> BlockRecord:
    """``cases`` tokens of C channels: channel scales s_out * 2^alpha_c (alpha in 0..3), both rails
    and zero first."""
    from hwvit.quant.params import residual_params

    c = int_option(opts, "c", 1, 4096)
    out_bits = int_option(opts, "out_bits", 2, 16)
    alpha = rng.integers(0, 4, c)
    s_a, s_b = (float(v) for v in rng.uniform(0.3, 1.6, 2))
    trip = [residual_params(s_a * 2.0 ** int(alpha[j]), s_b, 2.0 ** int(alpha[j])) for j in range(c)]
    ma, mb, sh = (np.array([t[i] for t in trip], dtype=np.int64) for i in range(3))
    edges = [np.full(c, 127), np.full(c, -128), np.zeros(c, np.int64)]
    rows_a = [*edges, *(rng.integers(-128, 127, c, endpoint=True) for _ in range(max(0, cases - 3)))][:cases]
    rows_b = [*edges[::-1], *(rng.integers(-128, 127, c, endpoint=True) for _ in range(max(0, cases - 3)))][:cases]
    a, b = np.stack(rows_a), np.stack(rows_b)
    y = kernel(a, b, ma, mb, sh, out_bits)
    params = {"rows": cases, "c": c, "out_bits": out_bits}
    return make_record(NAME, "random", params, {"a": s_a, "b": s_b}, a=a, b=b, mult_a=ma, mult_b=mb, shift=sh, y=y)


def verify(vset) -> str | None:
    """`hwvit check`: y computed again from a, b and the per-channel constants."""
    ma, mb, sh = (np.asarray(vset[k], dtype=np.int64) for k in ("mult_a", "mult_b", "shift"))
    if ma.min(initial=0) < 0 or ma.max(initial=0) > MULT_MAX or mb.max(initial=0) > MULT_MAX or mb.min(initial=0) < 0:
        return f"{NAME}: a multiplier outside [0, 2^31 - 1]"
    if sh.min(initial=1) < 1 or sh.max(initial=1) > SHIFT_MAX:
        return f"{NAME}: a shift outside [1, {SHIFT_MAX}]"
    y = kernel(vset["a"], vset["b"], ma, mb, sh, int(vset.params["out_bits"]))
    bad = np.argwhere(y != np.asarray(vset["y"]))
    if bad.size:
        t, ch = (int(v) for v in bad[0])
        return f"{NAME}: y[{t}][{ch}] is {int(vset['y'][t, ch])}, the per-channel residual add gives {int(y[t, ch])}"
    return None


def count_bins(params, inputs, outputs, limits) -> dict[str, int]:
    high, low = rails(outputs.get("y"), int(params["out_bits"]))
    return {"sat_high": high, "sat_low": low}


def operands(params: dict[str, Any], t: dict[str, np.ndarray], nd_index: list[int]) -> str:
    i, ch = int(nd_index[0]), int(nd_index[1])
    return (
        f"a[{i}][{ch}] {int(t['a'][i, ch])}, b[{i}][{ch}] {int(t['b'][i, ch])}; channel {ch}: multipliers "
        f"{int(t['mult_a'][ch])}, {int(t['mult_b'][ch])}, shift {int(t['shift'][ch])}"
    )


PORTS = Kind(
    NAME,
    inputs={
        "a": Field("a", bits_fixed(8), True, "int8 operand a"),
        "b": Field("b", bits_fixed(8), True, "int8 operand b"),
    },
    output=("y", Field("y", bits_param("out_bits"), True, "sum at its channel's output scale, out_bits signed")),
    config={"c": Config(lambda p: int(p["c"]), bits_count("c"), "channels per token C")},
    table=channel_table(
        {
            "prm_mult_a": Field("mult_a", bits_fixed(31), False, "multiplier Ma of channel i"),
            "prm_mult_b": Field("mult_b", bits_fixed(31), False, "multiplier Mb of channel i"),
            "prm_shift": Field("shift", bits_fixed(6), False, "shift s of channel i (1..62)"),
        },
    ),
    row_len=lambda v: int(v.params["c"]),
    parameters={"OUT_BITS": "out_bits"},
    fixed={"IN_BITS": 8, "MAX_C": 4096},
    doc="y[t, c] = sat((a * Ma[c] + b * Mb[c] + 2^(s[c]-1)) >>> s[c]), channel after channel",
)

KIND = BlockKind(
    name=NAME,
    doc="residual add with per-channel constants (a stream under FQ-ViT's power-of-two factor)",
    seed=9,
    kernel=kernel,
    reference=reference,
    params=PARAMS,
    contract=CONTRACT,
    random=random_set,
    defaults={"c": 64, "out_bits": 8},
    bins=("sat_high", "sat_low"),
    count_bins=count_bins,
    reset_states=(),
    rtl=("rtl/residual_add_channels.v", "rtl/round_sat.v"),
    operands=operands,
    traced=traced,
    rows="rows",
    shared=("mult_a", "mult_b", "shift"),
    family="residual_add",
    variant="channels",
    verify=verify,
    ports=PORTS,
    reference_ports={
        "fields": {"a": "in_a_i", "b": "in_b_i"},
        "out": "out_data_o",
        "last": "out_last_o",
        "ports": {
            "c": "cfg_c_i",
            "tbl_we": "prm_we_i",
            "tbl_addr": "prm_addr_i",
            "prm_mult_a": "prm_mult_a_i",
            "prm_mult_b": "prm_mult_b_i",
            "prm_shift": "prm_shift_i",
        },
    },
    synth={"MAX_C": 64},
    mutate_parts=("round_sat.v",),
)
