"""Value objects for a layer's quantization parameters, shared by the layers that need them.

``Requant`` is one narrowing step: an int32 accumulator times an integer multiplier, a rounded
right shift, saturation to ``out_bits`` (docs/arithmetic.md), giving a tensor at real scale
``s_out``. Attention has two (Q.K^T to the softmax input, P.V to the context); the builders in
hwvit.quant make them from real multipliers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Requant:
    """sat_out_bits(rshift_round(acc * mult, shift)): the result is at scale ``s_out``."""

    mult: int  # M of M * 2^-shift, the real multiplier s_acc / s_out
    shift: int
    out_bits: int  # width of the result (signed)
    s_out: float

    def __post_init__(self):
        assert self.out_bits >= 2 and self.shift >= 0, f"requant: out_bits {self.out_bits}, shift {self.shift}"


__all__ = ["Requant"]
