"""Integer formats: the one place that says what a width means.

An ``IntFormat`` is a two's-complement (signed) or unsigned integer of ``bits`` bits. Its range,
its ``.npy`` storage dtype and its ``.hex`` digit count follow from those two fields, so the
kernels' range checks, the block records and the vector-set contract all derive from it
(docs/arithmetic.md states the widths). The fixed-point shape is apytypes': an integer array
carries its format; ``hwvit.ops.requant`` is the one place that narrows, with the one rounding
mode named here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import cached_property

import numpy as np


class NamedMode(enum.StrEnum):
    """A mode that YAML files, manifests and options name by its lower-case value. Members equal
    their values (``ExpMode.SHIFT == "shift"``), so a config, a manifest or a click choice keeps
    the plain string; code compares against the member, never a literal."""

    @classmethod
    def from_string(cls, name: object):
        """The member ``name`` names (case-insensitive); ValueError listing the known ones."""
        for mode in cls:
            if isinstance(name, str) and mode.value == name.lower():
                return mode
        raise ValueError(f"unknown {cls._noun()} {name!r}; choose from {', '.join(cls.values())}")

    @classmethod
    def values(cls) -> tuple[str, ...]:
        """The plain string of every member, in declaration order (click choices, messages)."""
        return tuple(mode.value for mode in cls)

    @classmethod
    def _noun(cls) -> str:
        return cls.__name__.lower()


class Rounding(NamedMode):
    """Rounding modes of hwvit; there is one, matching the RTL's add-then-shift (rtl/round_sat.v)."""

    HALF_UP = "half_up"  # (v + 2^(s-1)) >> s: ties toward +inf

    @classmethod
    def _noun(cls) -> str:
        return "rounding mode"


class Calibration(NamedMode):
    """How an activation's range is estimated (hwvit.quant.calibrate); here, torch-free, so the
    command line takes its choices from it without importing the models."""

    MINMAX = "minmax"
    PERCENTILE = "percentile"
    MSE = "mse"  # MSE-optimal clip search (hwvit.quant.clipsearch)
    ENTROPY = "entropy"  # KL-optimal clip (TensorRT's entropy calibration)


class ExpMode(NamedMode):
    """How the integer softmax computes exp(x - max) (docs/arithmetic.md, "Softmax")."""

    TABLE = "table"  # a LUT of 2^23 * exp(-d * s): the form rtl/softmax.v implements
    SHIFT = "shift"  # I-ViT shift-and-add: no table, no Verilog twin

    @classmethod
    def _noun(cls) -> str:
        return "exp mode"


@dataclass(frozen=True)
class IntFormat:
    """``bits``-wide integer, two's complement when ``signed``; 1..64 bits (63 when unsigned)."""

    bits: int
    signed: bool = True

    def __post_init__(self) -> None:
        top = 64 if self.signed else 63  # every value must fit int64, hwvit's compute type
        if isinstance(self.bits, bool) or not isinstance(self.bits, int) or not 1 <= self.bits <= top:
            raise ValueError(f"bits must be an integer in [1, {top}], got {self.bits!r}")
        if not isinstance(self.signed, bool):
            raise ValueError(f"signed must be a bool, got {self.signed!r}")

    @cached_property
    def lo(self) -> int:
        return -(1 << (self.bits - 1)) if self.signed else 0

    @cached_property
    def hi(self) -> int:
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1

    @property
    def range(self) -> tuple[int, int]:
        """Inclusive ``(lo, hi)``."""
        return self.lo, self.hi

    @cached_property
    def dtype(self) -> np.dtype:
        """Narrowest numpy dtype that holds the format: what a `.npy` file stores."""
        size = next(s for s in (8, 16, 32, 64) if self.bits <= s)
        return np.dtype(f"{'int' if self.signed else 'uint'}{size}")

    @property
    def hex_digits(self) -> int:
        """Digits per `.hex` line (`$readmemh`): ``ceil(bits / 4)``."""
        return (self.bits + 3) // 4

    def __str__(self) -> str:
        return f"{self.bits}-bit {'signed' if self.signed else 'unsigned'}"


_FORMATS: dict[tuple[int, bool], IntFormat] = {}  # one IntFormat per width and sign: the kernels ask per call


def _format(bits: int, is_signed: bool) -> IntFormat:
    """The (immutable) IntFormat, made once per int width; anything else is made, and checked, anew."""
    if type(bits) is not int:  # a bool, a float, a list: IntFormat says what is wrong
        return IntFormat(bits, is_signed)
    fmt = _FORMATS.get((bits, is_signed))
    if fmt is None:
        fmt = _FORMATS[bits, is_signed] = IntFormat(bits, is_signed)
    return fmt


def signed(bits: int) -> IntFormat:
    return _format(bits, True)


def unsigned(bits: int) -> IntFormat:
    return _format(bits, False)


# The fixed widths of docs/arithmetic.md.
INT8 = signed(8)  # activations and weights (GEMM operands)
UINT8 = unsigned(8)  # softmax probabilities as a GEMM operand
ACC = signed(32)  # accumulators and biases
MULT = unsigned(32)  # requant multipliers: declared 32 bit, values in [0, MULT_MAX]
SHIFT = unsigned(6)  # requant shifts: values in [0, SHIFT_MAX]
GAMMA = signed(15)  # LayerNorm gamma, fixed point
BETA = signed(31)  # LayerNorm beta, fixed point
EXP = unsigned(24)  # softmax exp table, T[0] = 2^23
MULT_MAX = (1 << 31) - 1  # a multiplier is M in [2^30, 2^31 - 1] (or 0): M * acc32 < 2^62
SHIFT_MAX = 62  # the rounding term 2^(s-1) <= 2^61 keeps v + 2^(s-1) inside int64
OUT_BITS = (2, 16)  # widths the requantizer saturates to
