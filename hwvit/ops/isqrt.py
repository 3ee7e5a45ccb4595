"""Exact floor square root of int64 values in [0, 2^62), vectorized.

A float64 estimate is within 1 of the answer (``n`` rounds to 53 bits, so ``sqrt`` is off by
less than ``2^31 * 2^-52``); integer correction steps make it exact: ``r^2 <= n < (r+1)^2``.
The RTL computes the same value with a bit-serial restoring square root (``rtl/isqrt.v``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hwvit.ops.checks import as_int_array

ISQRT_MAX = (1 << 62) - 1


def isqrt(n: Any) -> np.ndarray:
    """Elementwise ``floor(sqrt(n))`` for integers ``0 <= n < 2^62``; int64 result (< 2^31)."""
    n = as_int_array(n, "n", 0, ISQRT_MAX)
    r = np.floor(np.sqrt(n.astype(np.float64))).astype(np.int64)
    # r <= 2^31, so r*r and (r+1)^2 stay below 2^63. Two rounds suffice; the third proves it.
    for _ in range(3):
        r = r - (r * r > n)
        r = r + ((r + 1) * (r + 1) <= n)
    assert np.all(r * r <= n) and np.all((r + 1) * (r + 1) > n), "isqrt correction did not converge"
    return r
