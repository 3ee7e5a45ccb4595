"""isqrt: the serial integer square root inside LayerNorm, tested as a block of its own
(``rtl/isqrt.v``): root = floor(sqrt(radicand)), in_bits / 2 bits, two bits per step."""

from __future__ import annotations

from typing import Any

import numpy as np

from hwvit import ops
from hwvit.blocks._common import fill, int_option, unique
from hwvit.blocks.base import BlockKind
from hwvit.ops.reference import isqrt_ref
from hwvit.record import BlockRecord, Spec, make_record

# rtl/isqrt.v's IN_BITS: even, at most 62 (hwvit.ops.isqrt).
PARAMS = {"in_bits": (int, (4, 62))}


def _half_in_bits(params: dict[str, Any]) -> int:
    """The root's width: IN_BITS / 2 (the RTL's ROOT_BITS)."""
    return params["in_bits"] // 2


CONTRACT = {
    "radicand": Spec("input", ("n",), "in_bits", False),
    "root": Spec("output", ("n",), _half_in_bits, False),
}


def check_params(params: dict[str, Any]) -> str | None:
    if params["in_bits"] % 2:
        return f"isqrt in_bits={params['in_bits']} is odd (the root has in_bits/2 bits)"
    return None


def reference(x: list[int]) -> list[int]:
    """The slow twin over a list (ops.reference.isqrt_ref takes one radicand)."""
    return [isqrt_ref(int(v)) for v in x]


def edges(width: int) -> list[int]:
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
    return unique(fixed + around)


def random_set(rng: np.random.Generator, cases: int, opts: dict[str, Any]) -> BlockRecord:
    from hwvit import ops

    in_bits = int_option(opts, "in_bits", 4, 62)  # hwvit.ops.isqrt takes radicands < 2^62
    if in_bits % 2:
        raise ValueError(f"in_bits must be even (the root has in_bits / 2 bits), got {in_bits}")
    half = in_bits // 2
    found = edges(in_bits)
    # The four bin edges lead; the rest in a random order (the existing test shuffled them too).
    found = found[:4] + [found[4 + i] for i in rng.permutation(len(found) - 4)]

    def draw(k: int) -> np.ndarray:
        m = rng.integers(0, 1 << half, k)
        wide = rng.random(k) < 0.4  # roots with the top bit set
        m[wide] = rng.integers(1 << (half - 1), 1 << half, int(wide.sum()))
        pattern = rng.integers(0, 5, k)
        x = np.select(
            [pattern == 0, pattern == 1, pattern == 2, pattern == 3],
            [np.maximum(m * m - 1, 0), m * m, m * m + 1, m * m + 2 * m],
            rng.integers(0, (1 << in_bits) - 1, k, endpoint=True),
        )
        return x

    x = fill(np.array(found, dtype=np.int64), cases, draw)
    return make_record("isqrt", "random", {"in_bits": in_bits}, radicand=x, root=ops.isqrt(x))


def count_bins(params, inputs, outputs, limits) -> dict[str, int]:
    x = [int(v) for v in inputs["radicand"].reshape(-1)]  # Python ints: r^2 + 2r of a 31-bit r
    root = outputs.get("root")
    square = largest = 0
    if root is not None:
        roots = [int(v) for v in root.reshape(-1)]
        square = sum(1 for v, r in zip(x, roots) if r >= 1 and v == r * r)
        largest = sum(1 for v, r in zip(x, roots) if r >= 1 and v == r * r + 2 * r)
    return {
        "radicand_0": sum(v == 0 for v in x),
        "radicand_max": sum(v == (1 << int(params["in_bits"])) - 1 for v in x),
        "perfect_square": square,
        "max_remainder": largest,
    }


def operands(params: dict[str, Any], t: dict[str, np.ndarray], nd_index: list[int]) -> str:
    i = int(nd_index[0])
    return f"radicand[{i}] {int(t['radicand'][i])}"


KIND = BlockKind(
    name="isqrt",
    doc="root = floor(sqrt(radicand)), a serial two-bits-per-step square root",
    seed=7,
    kernel=ops.isqrt,
    reference=reference,
    params=PARAMS,
    contract=CONTRACT,
    random=random_set,
    defaults={"in_bits": 62},  # rtl/isqrt.v's default (LayerNorm's Ve)
    default_cases=400,  # the edges (about 230 at the default), random ones after
    bins=("radicand_0", "radicand_max", "perfect_square", "max_remainder", "out_stall"),
    count_bins=count_bins,
    reset_states=("idle", "run", "done"),
    rtl=("rtl/isqrt.v",),
    operands=operands,
    testbench="sim/test_isqrt.py",
    check_params=check_params,
    unit=True,
    mutate_first=("test_isqrt",),
)
