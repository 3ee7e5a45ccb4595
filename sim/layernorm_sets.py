"""Vector sets for sim/test_layernorm.py: random sets plus hand-made rows, expected y from hwvit.ops.

Two parameter sets (two builds per simulator): OUT_BITS 8 with MAX_C 64, OUT_BITS 6 with MAX_C 16.
Together they hold 1 000+ rows. Besides ``hwvit.vectors.random_record`` (which already opens with
constant, alternating, outlier and one-LSB rows), each group has a hand-made set that pushes what
random gains cannot reach: eps_int = 0 (a constant row has V = 0 and Ve = 0), one-LSB spreads
at every offset, G = +-(2^14 - 1), B = +-(2^30 - 1), and requant shifts that saturate.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

# group -> list of (maker, options). The first set of each group is the small hand-made one
# (the reset, mismatch and throughput tests use it).
PARAM_SETS: dict[str, list[tuple[str, dict]]] = {
    "out8_c64": [
        ("special", {"c": 48, "out_bits": 8, "eps_int": 0, "seed": 101}),
        ("random", {"c": 64, "out_bits": 8, "cases": 280, "seed": 102}),
        ("random", {"c": 40, "out_bits": 8, "cases": 200, "seed": 103, "eps_int": 1}),
    ],
    "out6_c16": [
        ("special", {"c": 13, "out_bits": 6, "eps_int": 0, "seed": 201}),
        ("random", {"c": 16, "out_bits": 6, "cases": 300, "seed": 202}),
        ("random", {"c": 9, "out_bits": 6, "cases": 150, "seed": 203, "eps_int": (1 << 61)}),
        ("random", {"c": 1, "out_bits": 6, "cases": 20, "seed": 204}),  # V = 0 always
        ("random", {"c": 2, "out_bits": 6, "cases": 40, "seed": 205, "eps_int": 0}),
    ],
}


def special_rows(c: int, rng: np.random.Generator) -> np.ndarray:
    """Rows that stress the per-row arithmetic: (rows, c) int64 in [-128, 127]."""
    rows = []
    for v in (-128, -127, -1, 0, 1, 126, 127):  # constant: V = 0
        rows.append(np.full(c, v))
    for k in (-128, -65, -1, 0, 63, 126):  # one element one LSB up: V = C - 1, the smallest > 0
        r = np.full(c, k)
        r[rng.integers(c)] = k + 1
        rows.append(r)
        r = np.full(c, k + 1)  # ... or one LSB down
        r[rng.integers(c)] = k
        rows.append(r)
        rows.append(np.where(np.arange(c) < c // 2, k, k + 1))  # half and half
    for lo, hi in ((-128, 127), (127, -128)):  # one outlier: the largest |y| = sqrt(C-1) * 2^10
        r = np.full(c, lo)
        r[rng.integers(c)] = hi
        rows.append(r)
    rows.append(np.where(np.arange(c) % 2 == 0, 127, -128))  # the largest variance
    rows.append(np.round(np.linspace(-128, 127, c)).astype(np.int64))  # ramp
    for _ in range(12):
        rows.append(rng.integers(-128, 127, c, endpoint=True))
        rows.append(rng.integers(-2, 2, c, endpoint=True) + int(rng.integers(-126, 126)))
    return np.stack(rows).astype(np.int64)


def special_record(c: int, out_bits: int, eps_int: int, seed: int):
    """A hand-made set: special rows, extreme gamma/beta, a shift that saturates some outputs."""
    from hwvit import ops
    from hwvit.ops.layernorm import B_MAX, G_MAX
    from hwvit.record import BlockRecord, Tensor

    rng = np.random.default_rng(seed)
    x = special_rows(c, rng)
    g = rng.integers(-G_MAX, G_MAX, c, endpoint=True)
    g[:4] = [G_MAX, -G_MAX, 0, 1][: min(c, 4)]
    b = rng.integers(-(1 << 22), 1 << 22, c, endpoint=True)
    b[-2:] = [B_MAX, -B_MAX][-min(c, 2) :]
    # |y*G| reaches ~2^23 * sqrt(C-1): map ~2^23 to ~2^(out_bits-2) with M ~ 2^30.5, so larger
    # values and the extreme betas saturate.
    mult = int(rng.integers(1 << 30, (1 << 31) - 1))
    shift = 23 + 31 - (out_bits - 2)
    y = ops.layernorm(x, g, b, eps_int, mult, shift, out_bits)
    params = {
        "rows": int(x.shape[0]),
        "c": c,
        "out_bits": out_bits,
        "eps_int": eps_int,
        "multiplier": mult,
        "shift": shift,
    }
    return BlockRecord(
        "layernorm",
        "special",
        params,
        {
            "x": Tensor(x, 8, True, "input"),
            "gamma": Tensor(g, 15, True, "parameter"),
            "beta": Tensor(b, 31, True, "parameter"),
            "y": Tensor(y, out_bits, True, "output"),
        },
    )


def make_sets(root: Path) -> dict[str, list[Path]]:
    """Write every group's sets under ``root``; return group -> set directories."""
    from hwvit import vectors

    out: dict[str, list[Path]] = {}
    for group, sets in PARAM_SETS.items():
        out[group] = []
        for n, (maker, opts) in enumerate(sets):
            opts = dict(opts)
            seed = opts.pop("seed")
            if maker == "special":
                record = special_record(seed=seed, **opts)
            else:
                record = vectors.random_record("layernorm", seed=seed, **opts)
            out[group].append(vectors.write_set(record, root / f"{group}_{n}_{maker}", seed=seed))
    return out


def inv_rounding_record(c: int, out_bits: int, rows: int, seed: int, eps_int: int = 0):
    """Rows near rounding boundaries of inv (sim/reciprocal_rows.py), wide spreads: the outputs
    change when inv moves by one, so the RTL's inv must be exactly round(2^43 / sig). With
    eps_int >= 2^60, sig >= 2^30 uses the top bit of the square root's 31."""
    import reciprocal_rows

    from hwvit import ops
    from hwvit.ops.layernorm import G_MAX
    from hwvit.record import BlockRecord, Tensor

    rng = np.random.default_rng(seed)
    g = rng.integers(-G_MAX, G_MAX, c, endpoint=True)
    b = rng.integers(-(1 << 20), 1 << 20, c, endpoint=True)
    mult = int(rng.integers(1 << 30, (1 << 31) - 1))
    shift = 24 + 31 - (out_bits - 1)  # |y*G| ~ 2^24 maps to about the output range
    x = reciprocal_rows.layernorm_flip_rows(c, rows, seed, g, b, eps_int, mult, shift, out_bits)
    y = ops.layernorm(x, g, b, eps_int, mult, shift, out_bits)
    params = {"rows": int(x.shape[0]), "c": c, "out_bits": out_bits, "eps_int": eps_int, "multiplier": mult}
    params["shift"] = shift
    return BlockRecord(
        "layernorm",
        "inv_rounding",
        params,
        {
            "x": Tensor(x, 8, True, "input"),
            "gamma": Tensor(g, 15, True, "parameter"),
            "beta": Tensor(b, 31, True, "parameter"),
            "y": Tensor(y, out_bits, True, "output"),
        },
    )


def variance_row(c: int, sum_sq: int, rng: np.random.Generator) -> np.ndarray:
    """A row of ``c`` (even) int8 values with sum 0 and sum of squares ``sum_sq`` (even), so its
    V = C * Sxx - Sx^2 is exactly c * sum_sq: pairs (a, -a), the first chosen near the mean square
    that is left, the last four by search (every integer is a sum of four squares; the remainder
    is kept below 4 * 127^2)."""
    import math

    pairs, left = c // 2, sum_sq // 2
    assert c % 2 == 0 and sum_sq % 2 == 0 and 0 <= left <= pairs * 127 * 127 and pairs >= 4
    a = []
    for i in range(pairs - 4):
        v = min(127, math.isqrt(left // (pairs - i)))
        a.append(v)
        left -= v * v
    squares = {v * v: v for v in range(128)}
    for p in range(min(127, math.isqrt(left)), -1, -1):
        for q in range(min(p, math.isqrt(left - p * p)), -1, -1):
            for r in range(min(q, math.isqrt(left - p * p - q * q)), -1, -1):
                s = left - p * p - q * q - r * r
                if s in squares and squares[s] <= r:
                    a += [p, q, r, squares[s]]
                    row = np.array([v for v in a for v in (v, -v)], dtype=np.int64)
                    return rng.permutation(row)
    raise ValueError(f"no row of {c} with sum of squares {sum_sq}")
