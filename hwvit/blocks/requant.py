"""requant: y = sat((acc * M + 2^(s-1)) >>> s), multiplier and shift with every element (``rtl/requant.v``).

The requantizer after every GEMM: an int32 accumulator, a 31-bit multiplier and a 6-bit shift in,
a signed ``out_bits`` value out (round half up, then saturate; docs/arithmetic.md).
"""

from __future__ import annotations

import itertools
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
# Multipliers are declared 32-bit unsigned (values in [0, MULT_MAX]); shifts 6-bit.
CONTRACT = {
    "acc": spec("input", ("n",), ACC),
    "multiplier": spec("input", ("n",), MULT),
    "shift": spec("input", ("n",), SHIFT),
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
    defaults={"out_bits": 8},
    bins=("sat_high", "sat_low", "round_tie", "shift_0", "shift_62", "out_stall"),
    count_bins=count_bins,
    reset_states=("empty", "stage1", "output", "full"),
    rtl=("rtl/requant.v", "rtl/round_sat.v"),
    operands=operands,
    traced=traced,
    testbench="sim/test_requant.py",
    ports=PORTS,
    reference_ports={"fields": {"acc": "in_acc_i", "mult": "in_mult_i", "shift": "in_shift_i"}, "out": "out_data_o"},
    synth={},
    mutate_parts=("round_sat.v",),
)
