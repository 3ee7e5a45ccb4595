"""The parameters of hwvit's compiled kernels (the row kernels of ``hwvit.ops._jit``, the GEMM calls of
``hwvit.ops.native``) as named records: what crosses from Python into compiled code goes by name,
not by position in a long tuple. numba takes a NamedTuple as one argument and reads its fields by
name in compiled code; this module imports no numba, so the kernels' callers name their parameters
without compiling anything.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class NormRows(NamedTuple):
    """A LayerNorm of rows (``layernorm_rows``): integer G and B ((C,) vectors), eps, the requant's
    multiplier and shift, the output range and the fixed-point widths T, K and F of
    docs/arithmetic.md."""

    gamma: Any
    beta: Any
    eps: int
    mult: int
    shift: int
    lo: int
    hi: int
    t_bits: int
    k_bits: int
    f_bits: int


class AddRows(NamedTuple):
    """A residual add of rows (``residual_rows``): per-column int64 multipliers of a and of b and
    shifts ((C,) vectors), and the output range."""

    mult_a: Any
    mult_b: Any
    shift: Any
    lo: int
    hi: int


class SoftmaxRows(NamedTuple):
    """A softmax of rows (``softmax_rows``): the exp table with one 0 after it, q = 2^out_bits - 1,
    the reciprocal's shift, and I-ViT's shift-and-add exp where ``use_shift`` (its multiplier and
    fractional widths)."""

    table: Any
    q: int
    recip_shift: int
    use_shift: bool
    shift_mult: int
    exp_frac: int
    shift_frac: int


class Strided(NamedTuple):
    """An int8 operand by address, with its strides in bytes (one byte an element): from one entry of a
    batch to the next, from one row to the next, and along the product's K."""

    addr: int
    entry: int
    row: int
    k: int


class Dims(NamedTuple):
    """The shape of one ``_linear_parallel`` call: M x K x N, the entries of a batch (0: one product),
    the output range, the bytes an output (1: int8, 2: int16) and the threads."""

    m: int
    k: int
    n: int
    entries: int
    lo: int
    hi: int
    out_bytes: int
    threads: int


class Packing(NamedTuple):
    """How ``_linear_parallel`` packs: ``flip`` 0x80 for an int8 A, 0 for a uint8 one (its bytes are
    the operand: the tile runs raw, with no offset correction); the padded rows of one packed A; the
    int32 words of one packed A and W (``sa``, ``sw``); whether each job packs its entry's W
    (``pack_w``); the int64 words from one entry's bias row to the next (``bias_step``: N; 0, one row
    that every entry shares); ``lut``: 0, or the address of a 256-entry int8 table each job's int8
    outputs are looked up in as soon as it has stored them."""

    flip: int
    padded: int
    sa: int
    sw: int
    pack_w: int
    bias_step: int
    lut: int


class Scratch(NamedTuple):
    """The addresses one ``_linear_parallel`` call works on: the packed-A scratch (a ``_scratch``
    buffer: three job counters on lines of their own, then packed A), packed W (or its scratch, where
    each job packs it), the int64 bias, multipliers and shifts, and the output."""

    packed_a: int
    packed_w: int
    bias: int
    mult: int
    shift: int
    y: int


class Product(NamedTuple):
    """An M x K x N product's shape."""

    m: int
    k: int
    n: int


__all__ = ["AddRows", "Dims", "NormRows", "Packing", "Product", "Scratch", "SoftmaxRows", "Strided"]
