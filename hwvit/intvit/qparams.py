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


def read_only(layer, *names: str) -> None:
    """Set each named field of the frozen dataclass ``layer`` that holds an array (or a list) to a
    read-only array (``hwvit.ops.frozen.read_only``: itself where it is one already); scalars and None
    stay as they are. A layer is immutable once built: its fields cannot be set, its arrays not written."""
    for name in names:
        value = getattr(layer, name)
        if isinstance(value, (np.ndarray, list, tuple)):
            object.__setattr__(layer, name, frozen.read_only(value))


class Layer:
    """A part of the integer model: a frozen dataclass whose arrays are read-only (``read_only``). Its
    copies are too: numpy makes the arrays of a copy (deepcopy, pickle: a Dask worker's model)
    writable, and nothing is kept from a writable array (``hwvit.ops.frozen``, ``hwvit.engine``)."""

    def __setstate__(self, state: dict) -> None:
        for value in state.values():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False
        self.__dict__.update(state)


@dataclass(frozen=True, kw_only=True, eq=False)  # eq: per-channel arrays have no truth value
class Requant(Layer):
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
        read_only(self, "mult", "shift")  # the kernels check them once (hwvit.ops.frozen)

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

            y = k.int_input(np.clip(np.asarray(k.host(y), dtype=np.int64) + self.zero, *signed(self.out_bits).range))
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


class RequantOut(Layer):
    """A layer whose output is its ``requant``'s: ``mult``, ``shift``, ``out_bits`` and ``s_out``
    read through to it."""

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


__all__ = ["Arith", "Layer", "Requant", "RequantOut", "read_only"]
