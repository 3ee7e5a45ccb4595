"""Functional coverage bins: the arithmetic corners a block's testbench run drove it through.

Plain counters (a dict of bin name -> count), computed in the cocotb testbench from what it drove
into the block (the set's inputs and parameters), what came out of the block (the outputs it
received, never the expected ones) and what it saw of the handshakes (``seen``: output stalls).
Every bin of a kind is always present, so a count of 0 is a bin never hit.

Rows of length 1 and of the maximum compare with the built block's limit (``limits``: softmax
MAX_N, layernorm MAX_C, gemm ROWS/COLS).

Bins of what the testbench did rather than what the set holds come from ``seen`` (the
testbench's counters, sim/tbutil.SEEN): ``out_stall`` (an output offered and refused),
``reset_<state>`` (a reset sampled while the block was in that state: the block's reset test,
which `hwvit sim --stress` runs) and gemm's ``back_to_back`` (a job started in the cycle the
previous one ended: the stress variant of that name). A plain `hwvit sim` run leaves them at 0,
and the report says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SHIFT_MAX = 62  # hwvit.formats.SHIFT_MAX; the bins read it as a fact of the contract
K_MAX = 65535  # the largest K of the contract: K * 255 * 128 still fits the int32 accumulator

# Bin names per kind, in report order (the unit tests and the CLI list them from here).
NAMES: dict[str, tuple[str, ...]] = {
    "requant": ("sat_high", "sat_low", "round_tie", "shift_0", "shift_62", "out_stall"),
    "residual_add": ("sat_high", "sat_low", "round_tie", "out_stall"),
    # GELU(x) >= -0.17: its table never reaches the bottom rail, so no sat_low bin.
    "gelu": ("sat_high", "x_min", "x_max", "out_stall"),
    "softmax": ("all_equal", "one_hot", "p_full", "row_len_1", "row_len_max", "out_stall"),
    "layernorm": ("var_zero", "var_max", "sat_high", "sat_low", "row_len_1", "row_len_max", "out_stall"),
    "gemm": (
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
    "divu": ("exact_division", "quotient_0", "quotient_max", "divisor_1", "divisor_max", "out_stall"),
    "isqrt": ("radicand_0", "radicand_max", "perfect_square", "max_remainder", "out_stall"),
}

# The states each block's reset test resets in (sim/test_<kind>.py RESET_STATES, same order): a
# bin reset_<state> each. Stream blocks: which pipeline stages hold a beat; the others: FSM states
# (with "a row filling" where loading overlaps them).
RESET_STATES: dict[str, tuple[str, ...]] = {
    "requant": ("empty", "stage1", "output", "full"),
    "residual_add": ("empty", "stage1", "output", "full"),
    "gelu": ("empty", "output", "stalled"),
    "softmax": ("load", "sum", "div", "out", "out_load"),
    "layernorm": ("fill", "mul1", "mul2", "sqrt", "div", "out", "out_fill"),
    "gemm": ("idle", "issue", "issue_drain", "drain", "drain_stall", "done"),
    "divu": ("idle", "run", "done"),
    "isqrt": ("idle", "run", "done"),
}
# Bins counted only from ``seen``, beyond out_stall and the reset states.
SEEN_BINS: dict[str, tuple[str, ...]] = {"gemm": ("back_to_back",)}


def names(kind: str) -> tuple[str, ...]:
    """Every bin of ``kind`` in report order: the data bins, then the reset states and the
    testbench-only bins."""
    resets = tuple(f"reset_{state}" for state in RESET_STATES.get(kind, ()))
    return NAMES[kind] + resets + SEEN_BINS.get(kind, ())


def _rails(y: np.ndarray | None, out_bits: int) -> tuple[int, int]:
    """Outputs at the top and at the bottom of the signed out_bits range (saturated or exactly there)."""
    if y is None:
        return 0, 0
    hi = (1 << (out_bits - 1)) - 1
    return int(np.count_nonzero(y == hi)), int(np.count_nonzero(y == -hi - 1))


def _ties(values: list[int], shifts: list[int]) -> int:
    """Values whose right shift by s (s >= 1) drops exactly one half: the rounding's tie case."""
    return sum(1 for v, s in zip(values, shifts) if s >= 1 and (v & ((1 << s) - 1)) == 1 << (s - 1))


def requant(params, inputs, outputs) -> dict[str, int]:
    acc = [int(v) for v in inputs["acc"].reshape(-1)]
    mult = np.broadcast_to(inputs["multiplier"], inputs["acc"].shape).reshape(-1)
    shift = np.broadcast_to(inputs["shift"], inputs["acc"].shape).reshape(-1)
    high, low = _rails(outputs.get("y"), int(params["out_bits"]))
    return {
        "sat_high": high,
        "sat_low": low,
        "round_tie": _ties([a * int(m) for a, m in zip(acc, mult)], [int(s) for s in shift]),
        "shift_0": int(np.count_nonzero(shift == 0)),
        "shift_62": int(np.count_nonzero(shift == SHIFT_MAX)),
    }


def residual_add(params, inputs, outputs) -> dict[str, int]:
    a, b = inputs["a"].reshape(-1), inputs["b"].reshape(-1)
    ma, mb, s = int(params["mult_a"]), int(params["mult_b"]), int(params["shift"])
    sums = [int(x) * ma + int(y) * mb for x, y in zip(a, b)]
    high, low = _rails(outputs.get("y"), int(params["out_bits"]))
    return {"sat_high": high, "sat_low": low, "round_tie": _ties(sums, [s] * len(sums))}


def gelu(params, inputs, outputs) -> dict[str, int]:
    x = inputs["x"].reshape(-1)
    half = 1 << (int(params["in_bits"]) - 1)
    high, _ = _rails(outputs.get("y"), int(params["out_bits"]))
    return {
        "sat_high": high,
        "x_min": int(np.count_nonzero(x == -half)),  # the table's first and last entries
        "x_max": int(np.count_nonzero(x == half - 1)),
    }


def softmax(params, inputs, outputs, limits) -> dict[str, int]:
    x = inputs["x"]
    rows, n = x.shape
    top = x.max(axis=1)
    equal = np.all(x == x[:, :1], axis=1)
    # One hot: a single element at the row's max, every other element equal (and below it).
    single = np.count_nonzero(x == top[:, None], axis=1) == 1
    rest = np.where(x == top[:, None], x.min(axis=1)[:, None], x)
    flat_rest = np.all(rest == rest.min(axis=1)[:, None], axis=1)
    p = outputs.get("p")
    full = (1 << int(params["out_bits"])) - 1
    return {
        "all_equal": int(np.count_nonzero(equal)),
        "one_hot": int(np.count_nonzero(single & flat_rest & (n > 1))),
        "p_full": 0 if p is None else int(np.count_nonzero(p == full)),
        "row_len_1": rows if n == 1 else 0,
        "row_len_max": rows if n == int(limits.get("MAX_N", -1)) else 0,
    }


def largest_variance(c: int) -> int:
    """The largest V = C*Sxx - Sx^2 an int8 row of C values can have (k values at -128, the rest 127)."""
    return max(c * (k * 128 * 128 + (c - k) * 127 * 127) - (127 * (c - k) - 128 * k) ** 2 for k in range(c + 1))


def layernorm(params, inputs, outputs, limits) -> dict[str, int]:
    x = inputs["x"].astype(object)  # Python ints: C * Sxx reaches 2^39
    rows, c = x.shape
    var = [c * int((r * r).sum()) - int(r.sum()) ** 2 for r in x]
    high, low = _rails(outputs.get("y"), int(params["out_bits"]))
    return {
        "var_zero": sum(v == 0 for v in var),
        "var_max": sum(v == largest_variance(c) for v in var),
        "sat_high": high,
        "sat_low": low,
        "row_len_1": rows if c == 1 else 0,
        "row_len_max": rows if c == int(limits.get("MAX_C", -1)) else 0,
    }


def gemm(params, inputs, outputs, limits) -> dict[str, int]:
    m, k, n = int(params["m"]), int(params["k"]), int(params["n"])
    rows, cols = int(limits.get("ROWS", 0)), int(limits.get("COLS", 0))
    shift = inputs["shift"].reshape(-1)
    high, low = _rails(outputs.get("y"), int(params["out_bits"]))
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


def divu(params, inputs, outputs) -> dict[str, int]:
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


def isqrt(params, inputs, outputs) -> dict[str, int]:
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


def count(
    kind: str,
    params: dict[str, Any],
    inputs: dict[str, np.ndarray],
    outputs: dict[str, np.ndarray | None],
    limits: dict[str, int] | None = None,
    seen: dict[str, int] | None = None,
) -> dict[str, int]:
    """Every bin of ``kind`` with its count for one run (0: never hit). ``outputs`` hold the
    block's outputs as received (None where the run did not complete them)."""
    limits, seen = limits or {}, seen or {}
    if kind in ("softmax", "layernorm", "gemm"):
        counts = globals()[kind](params, inputs, outputs, limits)
    else:
        counts = globals()[kind](params, inputs, outputs)
    every = names(kind)
    for name in every:
        if name == "out_stall" or name.startswith("reset_") or name in SEEN_BINS.get(kind, ()):
            counts[name] = int(seen.get(name, 0))
    assert set(counts) == set(every), sorted(set(counts) ^ set(every))
    return {name: int(counts[name]) for name in every}
