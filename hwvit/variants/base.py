"""What an arithmetic variant of a block is: ``Variant``, and the context each block family gives it.

A variant is one published integer arithmetic for a block (I-BERT's i-exp softmax, gemmlowp's
requant, ...). It is three functions and its facts:

- ``prepare(ctx) -> params``: the integer constants of one layer (tables, polynomial
  coefficients, multipliers), computed once from the float context ``ctx`` (scales, bit widths,
  LayerNorm's gamma/beta/eps). Floats are allowed here only; every value it returns is an int or an
  integer numpy array (int64).
- ``kernel(x, params) -> y``: the exact integer kernel: numpy int64 in, numpy int64 out, every
  intermediate an integer (int64 with its bound stated in the docstring, or Python ints).
- ``reference(x, params) -> y``: a slow, obviously correct twin on Python ints over nested lists
  (tests hold ``kernel`` to it element for element).
- ``out_scale(ctx, params) -> float``: the real value of one LSB of ``y`` (a softmax variant's
  probability scale is its own: 1/2^bits for I-BERT, 1/(2^bits - 1) for hwvit's).

Inputs and outputs per block family (``x`` any leading shape):

- ``gelu``: ``x`` signed ``ctx.in_bits`` codes at ``ctx.s_in`` -> ``y`` signed ``ctx.out_bits``
  codes at ``ctx.s_out`` (``out_scale`` returns ``ctx.s_out``); elementwise, so a table of its
  value at every code, unless the variant declares ``row`` (its result depends on the whole last
  axis, as I-ViT's released ShiftGELU on the row's maximum);
- ``softmax``: ``x`` (..., N) signed ``ctx.in_bits`` scores at ``ctx.s_in``, softmax over the last
  axis -> ``y`` unsigned ``ctx.out_bits`` probabilities at ``out_scale``;
- ``layernorm``: ``x`` (..., C) signed int8 at ``ctx.s_in`` (LayerNorm over the last axis, float
  ``ctx.gamma``/``ctx.beta``/``ctx.eps``) -> ``y`` signed ``ctx.out_bits`` at ``ctx.s_out``;
- ``requant``: ``x`` int32 accumulators with ``params`` holding ``multiplier`` and ``shift``
  (``ctx.scale`` = the real multiplier M * 2^-s) -> ``y`` signed ``ctx.out_bits``.

``params`` is a flat dict of names to ints or int64 arrays: what a vector set's manifest and
tensors record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

FAMILIES = ("requant", "gelu", "softmax", "layernorm")


@dataclass(frozen=True)
class GeluContext:
    s_in: float
    in_bits: int
    s_out: float
    out_bits: int


@dataclass(frozen=True)
class SoftmaxContext:
    s_in: float
    in_bits: int
    out_bits: int
    entries: int = 256  # hwvit's exp table length (other variants ignore it)
    # the probability scale a variant must write at (an imported model's quantizer), where it can
    # take one (softmax=round_each); None: the variant's own
    s_out: float | None = None


@dataclass(frozen=True)
class LayerNormContext:
    gamma: np.ndarray  # (C,) float
    beta: np.ndarray  # (C,) float
    eps: float
    s_in: float
    s_out: float
    out_bits: int
    in_bits: int = 8


@dataclass(frozen=True)
class RequantContext:
    scale: float  # the real multiplier the (multiplier, shift) pair stands for
    out_bits: int


Params = dict[str, Any]


def by_rows(x: Any, row_fn: Callable[[list[int]], list[int]]) -> list:
    """A slow reference over rows: ``row_fn`` on each row of ``x``'s last axis (a list of Python
    ints), the results in ``x``'s shape as nested lists."""
    arr = np.asarray(x)
    out = [row_fn([int(v) for v in row]) for row in arr.reshape(-1, arr.shape[-1]).tolist()]
    return np.array(out, dtype=np.int64).reshape(arr.shape).tolist()


def signed_rows(x: Any, bits: int, what: str, max_n: int = 4096) -> np.ndarray:
    """``x`` as int64 signed ``bits``-bit codes in rows along the last axis of 1..``max_n`` elements
    (a kernel's input check); ValueError in one line otherwise."""
    from hwvit.ops.checks import as_int_array

    arr = as_int_array(x, "x", -(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if arr.ndim == 0 or not 1 <= arr.shape[-1] <= max_n:
        raise ValueError(f"{what}: rows must hold 1..{max_n} elements, got shape {arr.shape}")
    return arr


@dataclass(frozen=True)
class Variant:
    family: str  # one of FAMILIES
    name: str  # lower-case identifier, e.g. "ibert"
    doc: str  # one line: what it computes
    cite: str  # the paper (or library) and where in it the formula is
    prepare: Callable[[Any], Params]
    kernel: Callable[[np.ndarray, Params], np.ndarray]
    reference: Callable[[Any, Params], Any]
    out_scale: Callable[[Any, Params], float]
    # a GELU whose result depends on its row (the last axis), not on each code alone: not a table
    row: bool = False

    def __post_init__(self) -> None:
        assert self.family in FAMILIES, self.family
        custom = ":" in self.name  # a team's function, package.module:function
        assert custom or (self.name.isidentifier() and self.name == self.name.lower()), self.name

    @property
    def key(self) -> str:
        return f"{self.family}={self.name}"
