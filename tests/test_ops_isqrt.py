"""isqrt: exact floor square root on [0, 2^62), at and around every kind of perfect square."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hwvit import ops
from hwvit.ops.reference import isqrt_ref


def _around_squares(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """n = m^2 - 1, m^2, m^2 + 1 for roots 1 <= m < 2^31, and floor(sqrt(n)) by construction."""
    m = m.astype(np.int64)
    assert m.min() >= 1 and m.max() < 2**31
    sq = m * m  # < 2^62
    n = np.concatenate([sq - 1, sq, sq + 1])
    want = np.concatenate([m - 1, m, m])
    keep = n < 2**62
    return n[keep], want[keep]


def test_isqrt_small_range_exhaustive():
    n = np.arange(0, 1 << 20)
    r = ops.isqrt(n)
    assert np.all(r * r <= n) and np.all((r + 1) * (r + 1) > n)


def test_isqrt_around_squares_up_to_2_31():
    rng = np.random.default_rng(40)
    m = np.concatenate(
        [
            np.arange(1, 70_000),  # every square up to 2^32 and a bit beyond
            rng.integers(2**16, 2**31, 200_000),  # random roots up to 2^31
            np.arange(2**31 - 5_000, 2**31),  # the top: m^2 + 1 < 2^62 for m < 2^31
            2 ** np.arange(1, 31),
            2 ** np.arange(1, 31) - 1,
            2 ** np.arange(1, 31) + 1,
        ]
    )
    n, want = _around_squares(m)
    assert len(n) > 800_000
    got = ops.isqrt(n)
    assert np.array_equal(got, want)


def test_isqrt_random_matches_math_isqrt():
    rng = np.random.default_rng(41)
    bits = rng.integers(0, 63, 20_000)
    n = rng.integers(0, 2**62, 20_000) >> (62 - bits)  # log-uniform magnitudes
    got = ops.isqrt(n)
    assert got.tolist() == [isqrt_ref(int(v)) for v in n]
    assert int(ops.isqrt(2**62 - 1)) == math.isqrt(2**62 - 1) == 2**31 - 1
    assert ops.isqrt(np.array([[0, 1], [2, 3]])).tolist() == [[0, 1], [1, 1]]


@pytest.mark.parametrize("bad", [np.array([-1]), np.array([2**62]), np.array([4.0])])
def test_isqrt_rejects_out_of_domain(bad):
    with pytest.raises(ValueError):
        ops.isqrt(bad)
