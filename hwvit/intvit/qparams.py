"""Value objects for a layer's quantization parameters, shared by the layers that need them.

``Requant`` is one narrowing step: an int32 accumulator times an integer multiplier, a rounded
right shift, saturation to ``out_bits`` (docs/arithmetic.md), giving a tensor at real scale
``s_out``. A linear layer (attention's projections, the MLP, the patch embedding, the head) has
one with a multiplier per output channel, a LayerNorm and the mean pool one each, attention two
more (Q.K^T to the softmax input, P.V to the context). The builders in hwvit.quant make them
from real multipliers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hwvit.ops import frozen


@dataclass(frozen=True, kw_only=True, eq=False)  # eq: per-channel arrays have no truth value
class Requant:
    """sat_out_bits(rshift_round(acc * mult, shift)): the result is at scale ``s_out``."""

    mult: int | np.ndarray  # M of M * 2^-shift ~= s_acc / s_out; per output channel: (N,) arrays
    shift: int | np.ndarray
    out_bits: int  # width of the result (signed)
    s_out: float
    rounding: str = "half_up"  # the requant variant (hwvit.variants, family requant)
    # zero point added after the rounding, before the saturation (an imported model's asymmetric
    # activations, hwvit.onnx): y = sat(round(acc * M / 2^s) + zero)
    zero: int = 0

    def __post_init__(self):
        assert 2 <= self.out_bits <= 32, f"requant: out_bits {self.out_bits} outside [2, 32]"
        assert np.shape(self.mult) == np.shape(self.shift), "requant: one shift per multiplier"
        for name in ("mult", "shift"):  # read-only: the kernels check them once (hwvit.ops.frozen)
            if isinstance(getattr(self, name), np.ndarray):
                object.__setattr__(self, name, frozen.read_only(getattr(self, name)))

    @property
    def is_default(self) -> bool:
        return self.rounding == "half_up" and self.zero == 0

    def apply(self, k, acc):
        """The requant of ``acc`` on provider ``k`` (hwvit.intvit.kernels): hwvit's own, or the variant's;
        with a zero point, rounded into ``out_bits + 1`` bits, the zero point added, then saturated, as
        rtl/gemm.v does (the same integers as one saturation after the add: a value clipped at
        ``out_bits + 1`` bits lies 2^(out_bits-1) past the output range, beyond a zero point's reach)."""
        if self.is_default:
            return k.requant(acc, self.mult, self.shift, self.out_bits)
        from hwvit import variants

        bits = self.out_bits + 1 if self.zero else self.out_bits
        params = {"multiplier": self.mult, "shift": self.shift, "out_bits": bits}
        y = k.variant(variants.resolve("requant", self.rounding), acc, params)
        if self.zero:
            from hwvit.formats import signed

            y = np.clip(np.asarray(y, dtype=np.int64) + self.zero, *signed(self.out_bits).range)
        return y

    def linear(self, k, a, w, bias, a_signed: bool = True):
        """requant(gemm(a, w) + bias): fused in the GEMM's tile for hwvit's own rounding."""
        if self.is_default:
            return k.linear(a, w, bias, self.mult, self.shift, self.out_bits, a_signed=a_signed)
        return self.apply(k, k.gemm(a, w, bias, a_signed=a_signed))


@dataclass(frozen=True, kw_only=True, eq=False)
class Arith:
    """A block's arithmetic variant (hwvit.variants) other than hwvit's own: its family and name,
    the integer parameters its ``prepare`` made for this layer, and the scale of its output."""

    family: str
    name: str
    params: dict
    s_out: float

    @property
    def impl(self):
        from hwvit import variants

        return variants.resolve(self.family, self.name)


_edits = 0  # attribute sets on Watched objects so far, in this process


class Watched:
    """A layer whose every attribute set (or deletion) counts as an edit (``edits``): what a forward
    keeps from its layers' fields between calls (``IntViT``'s stack of blocks) is made again after
    any edit. The layers' arrays are read-only and checked as such where they are used
    (``hwvit.ops.frozen``); this counts what that cannot see, a field set to another object."""

    __slots__ = ()

    def __setattr__(self, name, value):
        global _edits
        _edits += 1
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        global _edits
        _edits += 1
        object.__delattr__(self, name)


def edits() -> int:
    """How many times an attribute of a ``Watched`` layer has been set or deleted in this process."""
    return _edits


class RequantOut(Watched):
    """A layer whose output is its ``requant``'s: ``mult``, ``shift``, ``out_bits`` and ``s_out``
    read through to it (the names the layers' fields had)."""

    requant: Requant

    @property
    def mult(self):
        return self.requant.mult

    @property
    def shift(self):
        return self.requant.shift

    @property
    def out_bits(self) -> int:
        return self.requant.out_bits

    @property
    def s_out(self) -> float:
        return self.requant.s_out


__all__ = ["Arith", "Requant", "RequantOut", "Watched", "edits"]
