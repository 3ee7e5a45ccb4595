"""Unsigned division with remainder: the twin of ``rtl/divu.v`` (softmax's and LayerNorm's divider).

``divu(a, b) = (floor(a / b), a - floor(a / b) * b)`` for an ``n_bits``-wide dividend, a
``d_bits``-wide divisor and a quotient known to fit ``q_bits`` bits. These are the RTL unit's
parameters N_BITS, D_BITS, Q_BITS and its preconditions, which the RTL does not trap (a zero
divisor gives an all-ones quotient there, a too-wide quotient a wrong one); here they are
refused. Within them the RTL's restoring division is exact, so the fast path is numpy's exact
int64 ``divmod``; ``hwvit.ops.reference.divu_ref`` follows the RTL bit by bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hwvit.formats import unsigned
from hwvit.ops.checks import as_int_array, check_bits


def divu(
    dividend: Any, divisor: Any, n_bits: int = 40, d_bits: int = 24, q_bits: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Elementwise ``(quotient, remainder)`` of unsigned integers (broadcastable shapes), int64.

    Defaults are rtl/divu.v's (40-bit dividend, 24-bit divisor, ``q_bits = n_bits``). Needs
    ``divisor >= 1`` and ``dividend < divisor * 2^q_bits``; ``d_bits >= n_bits - q_bits``.
    """
    n_bits = check_bits(n_bits, "n_bits", 2, 63)  # int64 holds every dividend
    q_bits = n_bits if q_bits is None else check_bits(q_bits, "q_bits", 2, n_bits)
    d_bits = check_bits(d_bits, "d_bits", max(1, n_bits - q_bits), 63)
    a = as_int_array(dividend, "dividend", *unsigned(n_bits).range)
    b = as_int_array(divisor, "divisor", 1, unsigned(d_bits).hi)
    try:
        a, b = np.broadcast_arrays(a, b)
    except ValueError:
        raise ValueError(f"divu: shapes {np.shape(dividend)} and {np.shape(divisor)} do not broadcast") from None
    quotient, remainder = np.divmod(a, b)
    too_wide = np.flatnonzero(quotient >> q_bits)
    if too_wide.size:
        i = np.unravel_index(int(too_wide[0]), quotient.shape)
        raise ValueError(
            f"divu: quotient {int(quotient[i])} of {int(a[i])} / {int(b[i])} does not fit "
            f"{q_bits} bits (dividend must be < divisor * 2^{q_bits})"
        )
    return quotient, remainder
