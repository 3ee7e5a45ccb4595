"""divu, the twin of rtl/divu.v: numpy's divmod vs the RTL's restoring steps, at the preconditions' edges."""

from __future__ import annotations

import numpy as np
import pytest

from hwvit import ops
from hwvit.ops.reference import divu_ref

# (N_BITS, D_BITS, Q_BITS): rtl/divu.v's defaults, the softmax reciprocal's narrow quotient, tiny.
WIDTHS = [(40, 24, 40), (40, 24, 25), (8, 4, 8), (8, 4, 4), (63, 40, 63)]


def _cases(n_bits: int, d_bits: int, q_bits: int, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(dividend, divisor) with divisor >= 1 and dividend < divisor * 2^q_bits: edges, then random."""
    rng = np.random.default_rng(seed)
    n_max, d_max = (1 << n_bits) - 1, (1 << d_bits) - 1
    pairs = []
    for b in {1, 2, 3, d_max, d_max - 1 or 1, 1 << (d_bits - 1)}:
        top = min(n_max, b * (1 << q_bits) - 1)
        pairs += [(a, b) for a in {0, 1, b - 1, b, b + 1, top, top - 1, top // 2} if 0 <= a <= top]
    while len(pairs) < count:
        b = int(rng.integers(1, d_max, endpoint=True)) >> int(rng.integers(0, d_bits))
        b = max(b, 1)
        top = min(n_max, b * (1 << q_bits) - 1)
        pairs.append((int(rng.integers(0, top, endpoint=True)), b))
    a, b = np.array(pairs, dtype=np.int64).T
    return a, b


@pytest.mark.parametrize("n_bits,d_bits,q_bits", WIDTHS)
def test_divu_matches_rtl_steps_and_divmod(n_bits, d_bits, q_bits):
    a, b = _cases(n_bits, d_bits, q_bits, 1500, seed=n_bits + q_bits)
    quo, rem = ops.divu(a, b, n_bits, d_bits, q_bits)
    ref = [divu_ref(int(x), int(y), n_bits, d_bits, q_bits) for x, y in zip(a, b)]
    assert list(zip(quo.tolist(), rem.tolist())) == ref
    assert ref == [divmod(int(x), int(y)) for x, y in zip(a, b)]  # the RTL's steps are exact division
    assert quo.max() < 1 << q_bits and np.all(rem < b)


def test_divu_defaults_are_the_rtl_parameters():
    quo, rem = ops.divu(np.array([(1 << 40) - 1, 12345]), np.array([1, 100]))
    assert quo.tolist() == [(1 << 40) - 1, 123] and rem.tolist() == [0, 45]


@pytest.mark.parametrize(
    "args,match",
    [
        ((np.array([5]), np.array([0])), "divisor"),  # the RTL's untrapped zero divisor
        ((np.array([-1]), np.array([3])), "dividend"),
        ((np.array([1 << 40]), np.array([3])), "dividend"),
        ((np.array([5]), np.array([1 << 24])), "divisor"),
        ((np.array([1 << 30]), np.array([1]), 40, 24, 25), "does not fit 25 bits"),  # quotient too wide
        ((np.array([1.5]), np.array([1])), "integer"),
        ((np.array([1, 2]), np.array([1, 2, 3])), "broadcast"),
        ((np.array([1]), np.array([1]), 40, 10, 25), "d_bits"),  # D_BITS < N_BITS - Q_BITS
    ],
)
def test_divu_refuses_what_the_rtl_does_not_trap(args, match):
    with pytest.raises(ValueError, match=match):
        ops.divu(*args)
