"""divu: the serial restoring divider inside softmax and LayerNorm, tested as a block of its own
(``rtl/divu.v``): quotient = floor(dividend / divisor) and the remainder, one bit per clock."""

from __future__ import annotations

from typing import Any

import numpy as np

from hwvit import ops
from hwvit.blocks._common import fill, int_option, unique
from hwvit.blocks.base import BlockKind
from hwvit.ops.reference import divu_ref
from hwvit.record import BlockRecord, Spec, make_record

# rtl/divu.v's N_BITS, D_BITS, Q_BITS; int64 storage bounds them at 63 (an unsigned 63-bit tensor
# is the widest a set holds).
PARAMS = {"n_bits": (int, (2, 63)), "d_bits": (int, (1, 63)), "q_bits": (int, (2, 63))}
# One division per element (divisor >= 1, dividend < divisor * 2^q_bits: the RTL's preconditions,
# hwvit.ops.divu's checks).
CONTRACT = {
    "dividend": Spec("input", ("n",), "n_bits", False),
    "divisor": Spec("input", ("n",), "d_bits", False),
    "quotient": Spec("output", ("n",), "q_bits", False),
    "remainder": Spec("output", ("n",), "d_bits", False),
}


def check_params(params: dict[str, Any]) -> str | None:
    """rtl/divu.v's parameter checks."""
    n_bits, d_bits, q_bits = params["n_bits"], params["d_bits"], params["q_bits"]
    if q_bits > n_bits:
        return f"divu q_bits={q_bits} > n_bits={n_bits}"
    if d_bits < n_bits - q_bits:
        return f"divu d_bits={d_bits} < n_bits - q_bits = {n_bits - q_bits}"
    return None


def edges(n_bits: int, d_bits: int, q_bits: int) -> list[tuple[int, int]]:
    """(dividend, divisor) pairs at the edges of rtl/divu.v's precondition, divisor 1 first.

    Divisors 1, 2, 3, all ones, all ones - 1, the top bit alone and below it; for each the
    dividends 0, 1, b - 1, b, b + 1 (quotients 0 and 1, exact), the largest one allowed
    ``min(2^n_bits - 1, b * 2^q_bits - 1)`` (quotient 2^q_bits - 1 where the dividend reaches
    it), one below it, half of it and ``(2^q_bits - 1) * b`` (the largest quotient, exact).
    """
    n_max, d_max, q_max = (1 << n_bits) - 1, (1 << d_bits) - 1, (1 << q_bits) - 1
    divisors = unique(
        b for b in (1, 2, 3, d_max, d_max - 1, 1 << (d_bits - 1), (1 << (d_bits - 1)) - 1) if 1 <= b <= d_max
    )
    pairs = []
    for b in divisors:
        top = min(n_max, b * (q_max + 1) - 1)
        pairs += [(a, b) for a in (0, 1, b - 1, b, b + 1, top, top - 1, top // 2, q_max * b) if 0 <= a <= top]
    return unique(pairs)


def random_set(rng: np.random.Generator, cases: int, opts: dict[str, Any]) -> BlockRecord:
    from hwvit import ops

    n_bits = int_option(opts, "n_bits", 2, 63)
    q_bits = n_bits if opts["q_bits"] is None else int_option(opts, "q_bits", 2, n_bits)
    d_bits = int_option(opts, "d_bits", max(1, n_bits - q_bits), 63)
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

    pairs = fill(np.array(edges(n_bits, d_bits, q_bits), dtype=np.int64), cases, draw)
    dividend, divisor = pairs[:, 0], pairs[:, 1]
    quotient, remainder = ops.divu(dividend, divisor, n_bits, d_bits, q_bits)
    params = {"n_bits": n_bits, "d_bits": d_bits, "q_bits": q_bits}
    return make_record(
        "divu", "random", params, dividend=dividend, divisor=divisor, quotient=quotient, remainder=remainder
    )


def count_bins(params, inputs, outputs, limits) -> dict[str, int]:
    divisor = inputs["divisor"].reshape(-1)
    q, r = outputs.get("quotient"), outputs.get("remainder")
    exact = quotient_0 = quotient_max = 0
    if q is not None:
        q = q.reshape(-1)
        quotient_0 = int(np.count_nonzero(q == 0))
        quotient_max = int(np.count_nonzero(q == (1 << int(params["q_bits"])) - 1))
        if r is not None:  # remainder 0 with a quotient: the dividend a multiple of the divisor
            exact = int(np.count_nonzero((r.reshape(-1) == 0) & (q >= 1)))
    return {
        "exact_division": exact,
        "quotient_0": quotient_0,
        "quotient_max": quotient_max,
        "divisor_1": int(np.count_nonzero(divisor == 1)),
        "divisor_max": int(np.count_nonzero(divisor == (1 << int(params["d_bits"])) - 1)),
    }


def operands(params: dict[str, Any], t: dict[str, np.ndarray], nd_index: list[int]) -> str:
    i = int(nd_index[0])
    return f"dividend[{i}] {int(t['dividend'][i])}, divisor[{i}] {int(t['divisor'][i])}"


KIND = BlockKind(
    name="divu",
    doc="quotient = floor(dividend / divisor) and the remainder, serial restoring division",
    seed=6,
    kernel=ops.divu,
    reference=divu_ref,
    params=PARAMS,
    contract=CONTRACT,
    random=random_set,
    defaults={"n_bits": 40, "d_bits": 24, "q_bits": None},  # rtl/divu.v's defaults (q_bits None: n_bits)
    default_cases=400,  # the edges (about 60 at the defaults), random ones after
    bins=("exact_division", "quotient_0", "quotient_max", "divisor_1", "divisor_max", "out_stall"),
    count_bins=count_bins,
    reset_states=("idle", "run", "done"),
    rtl=("rtl/divu.v",),
    operands=operands,
    testbench="sim/test_divu.py",
    check_params=check_params,
    unit=True,
)
