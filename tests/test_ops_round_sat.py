"""round_sat (rshift_round + saturate), the twin of rtl/round_sat.v, and the rounding-mode names."""

from __future__ import annotations

import numpy as np
import pytest

from hwvit import ops
from hwvit.formats import Rounding
from hwvit.ops.reference import round_sat_ref


def test_rounding_mode_names():
    assert ops.Rounding is Rounding
    assert Rounding.from_string("half_up") is Rounding.HALF_UP
    assert Rounding.from_string("HALF_UP") is Rounding.HALF_UP
    with pytest.raises(ValueError, match="unknown rounding"):
        Rounding.from_string("half_even")
    with pytest.raises(ValueError, match="unknown rounding"):
        Rounding.from_string(None)


def test_rshift_round_ties_go_up():
    v = np.array([5, -5, 3, -3, 7, -(2**61), -(2**61) - 1, 2**62, 6])
    s = np.array([1, 1, 1, 1, 0, 62, 62, 62, 2])
    # 2.5 -> 3, -2.5 -> -2, 1.5 -> 2, -1.5 -> -1, 7, -0.5 -> 0, just below -0.5 -> -1, 1, 1.5 -> 2
    assert ops.rshift_round(v, s).tolist() == [3, -2, 2, -1, 7, 0, -1, 1, 2]
    with pytest.raises(ValueError):
        ops.rshift_round(1, 63)
    with pytest.raises(ValueError):
        ops.rshift_round(2**62 + 1, 1)


def test_saturate():
    v = np.array([-300, -129, -128, 0, 127, 128, 300])
    assert ops.saturate(v, 8).tolist() == [-128, -128, -128, 0, 127, 127, 127]
    assert ops.saturate(v, 8, signed=False).tolist() == [0, 0, 0, 0, 127, 128, 255]
    assert ops.saturate(v, 2).tolist() == [-2, -2, -2, 0, 1, 1, 1]


@pytest.mark.parametrize("bits", [2, 8, 16])
def test_round_sat_matches_reference(bits):
    rng = np.random.default_rng(bits)
    v = np.concatenate(
        [rng.integers(-(2**62), 2**62, 3000), rng.integers(-(2**20), 2**20, 3000), [-(2**62), 2**62, 0, 1, -1]]
    )
    s = rng.integers(0, 63, v.size)
    s[:200] = 1  # ties at every other value
    got = ops.round_sat(v, s, bits)
    assert got.tolist() == [round_sat_ref(int(a), int(b), bits) for a, b in zip(v, s)]
    assert got.min() >= -(2 ** (bits - 1)) and got.max() <= 2 ** (bits - 1) - 1
