"""Block records and the per-kind contract: the integer tensors and parameters of one block.

A record is what the integer model's trace holds for each block it ran, and what a vector set
on disk holds (``hwvit.vectors`` writes and reads records). ``CONTRACT`` fixes, for every block
kind, the tensors a record holds (role, shape, format); ``make_record`` builds a record from
arrays and takes every width and role from it, so no caller types a width by hand.
``sim/test_<kind>.py`` reads these names, so they change only together with the testbenches.
Widths follow docs/arithmetic.md and ``hwvit.formats``. Nothing here computes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from hwvit.formats import ACC, BETA, EXP, GAMMA, INT8, MULT, MULT_MAX, OUT_BITS, SHIFT, SHIFT_MAX, IntFormat, Rounding

# The block kinds that have a Verilog twin in rtl/ (and a testbench in sim/). divu and isqrt are
# the serial units inside softmax and layernorm, tested as blocks of their own; traced models
# record only the first six. New kinds go at the end: random sets seed from a kind's index.
KINDS = ("requant", "gemm", "gelu", "softmax", "layernorm", "residual_add", "divu", "isqrt")
# Kinds a traced model never records on their own (they live inside softmax and layernorm).
UNIT_KINDS = ("divu", "isqrt")

ROLES = ("input", "output", "parameter")

Dim = str | int | Callable[[dict[str, Any]], int]


@dataclass(frozen=True)
class Tensor:
    """An integer tensor with its format: raw two's-complement values plus width and scale."""

    data: np.ndarray  # integer dtype; values fit `bits` / `signed`
    bits: int
    signed: bool
    role: str  # one of ROLES
    scale: float | None = None  # real value = data * scale (None: not a real-valued quantity)
    layout: str = "row-major"

    def __post_init__(self) -> None:
        assert self.role in ROLES, f"role {self.role!r} not in {ROLES}"
        assert np.issubdtype(self.data.dtype, np.integer), f"tensor dtype {self.data.dtype} is not integer"
        assert 1 <= self.bits <= 64, f"bits={self.bits}"

    @property
    def fmt(self) -> IntFormat:
        return IntFormat(int(self.bits), bool(self.signed))


@dataclass
class BlockRecord:
    """One block instance: its kind (an RTL block), its path in the model and its integer I/O."""

    kind: str  # one of KINDS
    path: str  # e.g. "layers.3.softmax", or "random" for unit-test sets
    params: dict[str, Any] = field(default_factory=dict)  # ints, bools, strings only
    tensors: dict[str, Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        assert self.kind in KINDS, f"kind {self.kind!r} not in {KINDS}"


class Spec(NamedTuple):
    """One tensor of the contract. ``bits``/``signed`` are fixed or name a parameter."""

    role: str
    shape: tuple[Dim, ...]  # a parameter name, a free symbol ("n"), an int, or f(params)
    bits: int | str | Callable[[dict[str, Any]], int]  # fixed, a parameter name, or f(params)
    signed: bool | str

    def fmt(self, params: dict[str, Any]) -> IntFormat:
        if callable(self.bits):
            bits = self.bits(params)
        else:
            bits = params[self.bits] if isinstance(self.bits, str) else self.bits
        signed = params[self.signed] if isinstance(self.signed, str) else self.signed
        return IntFormat(int(bits), bool(signed))


def _spec(role: str, shape: tuple[Dim, ...], fmt: IntFormat) -> Spec:
    return Spec(role, shape, fmt.bits, fmt.signed)


def _pow2_in_bits(params: dict[str, Any]) -> int:
    return 1 << params["in_bits"]


def _half_in_bits(params: dict[str, Any]) -> int:
    """isqrt's root width: IN_BITS / 2 (the RTL's ROOT_BITS)."""
    return params["in_bits"] // 2


# Parameter ranges (inclusive); output widths 2..16 as the requantizer saturates to them.
_SIZE = (1, 1 << 24)
_U31 = (0, MULT_MAX)  # integer multipliers
PARAMS: dict[str, dict[str, tuple[type, tuple[int, int] | None]]] = {
    "requant": {"out_bits": (int, OUT_BITS)},
    "gemm": {
        "m": (int, _SIZE),
        "k": (int, (1, 65535)),
        "n": (int, _SIZE),
        "a_signed": (bool, None),
        "out_bits": (int, OUT_BITS),
    },
    "gelu": {"in_bits": (int, (2, 16)), "out_bits": (int, OUT_BITS)},
    "softmax": {
        "in_bits": (int, (2, 16)),
        "out_bits": (int, OUT_BITS),
        "entries": (int, (1, 1 << 16)),
        "rows": (int, _SIZE),
        "row_len": (int, (1, 4096)),
    },
    "layernorm": {
        "rows": (int, _SIZE),
        "c": (int, (1, 4096)),
        "out_bits": (int, OUT_BITS),
        "eps_int": (int, (0, 1 << 61)),
        "multiplier": (int, _U31),
        "shift": (int, (0, SHIFT_MAX)),
    },
    "residual_add": {
        "out_bits": (int, OUT_BITS),
        "mult_a": (int, _U31),
        "mult_b": (int, _U31),
        "shift": (int, (1, SHIFT_MAX)),
    },
    # rtl/divu.v's N_BITS, D_BITS, Q_BITS; int64 storage bounds them at 63 (an unsigned 63-bit
    # tensor is the widest a set holds). Cross-checks (q_bits <= n_bits, d_bits >= n_bits - q_bits)
    # are in hwvit.vectors.schema.check_params.
    "divu": {"n_bits": (int, (2, 63)), "d_bits": (int, (1, 63)), "q_bits": (int, (2, 63))},
    # rtl/isqrt.v's IN_BITS: even (checked in schema.check_params), at most 62 (hwvit.ops.isqrt).
    "isqrt": {"in_bits": (int, (4, 62))},
}

# Requant multipliers are declared 32-bit unsigned (values in [0, MULT_MAX]); shifts 6-bit.
CONTRACT: dict[str, dict[str, Spec]] = {
    "requant": {
        "acc": _spec("input", ("n",), ACC),
        "multiplier": _spec("input", ("n",), MULT),
        "shift": _spec("input", ("n",), SHIFT),
        "y": Spec("output", ("n",), "out_bits", True),
    },
    "gemm": {
        "a": Spec("input", ("m", "k"), INT8.bits, "a_signed"),
        "w": _spec("parameter", ("n", "k"), INT8),
        "bias": _spec("parameter", ("n",), ACC),
        "multiplier": _spec("parameter", ("n",), MULT),
        "shift": _spec("parameter", ("n",), SHIFT),
        "acc": _spec("output", ("m", "n"), ACC),
        "y": Spec("output", ("m", "n"), "out_bits", True),
    },
    "gelu": {
        "x": Spec("input", ("n",), "in_bits", True),
        "table": Spec("parameter", (_pow2_in_bits,), "out_bits", True),
        "y": Spec("output", ("n",), "out_bits", True),
    },
    "softmax": {
        "x": Spec("input", ("rows", "row_len"), "in_bits", True),
        "exp_table": _spec("parameter", ("entries",), EXP),  # T[0] = 2^23 (docs/arithmetic.md)
        "p": Spec("output", ("rows", "row_len"), "out_bits", False),
    },
    "layernorm": {
        "x": _spec("input", ("rows", "c"), INT8),
        "gamma": _spec("parameter", ("c",), GAMMA),
        "beta": _spec("parameter", ("c",), BETA),
        "y": Spec("output", ("rows", "c"), "out_bits", True),
    },
    "residual_add": {
        "a": _spec("input", ("n",), INT8),
        "b": _spec("input", ("n",), INT8),
        "y": Spec("output", ("n",), "out_bits", True),
    },
    # One division per element: quotient = floor(dividend / divisor), remainder = the rest
    # (divisor >= 1, dividend < divisor * 2^q_bits: the RTL's preconditions, hwvit.ops.divu's checks).
    "divu": {
        "dividend": Spec("input", ("n",), "n_bits", False),
        "divisor": Spec("input", ("n",), "d_bits", False),
        "quotient": Spec("output", ("n",), "q_bits", False),
        "remainder": Spec("output", ("n",), "d_bits", False),
    },
    # One root per element: root = floor(sqrt(radicand)), in_bits / 2 bits.
    "isqrt": {
        "radicand": Spec("input", ("n",), "in_bits", False),
        "root": Spec("output", ("n",), _half_in_bits, False),
    },
}
# The tensor whose `.hex` file is the block's loadable LUT (recorded as `lut_file`).
LUT_TENSOR = {"gelu": "table", "softmax": "exp_table"}


def make_record(
    kind: str, path: str, params: dict[str, Any], scales: dict[str, float | None] | None = None, **arrays: Any
) -> BlockRecord:
    """The record of one ``kind`` block: ``arrays`` named as in ``CONTRACT[kind]``, every one of them.

    Roles and formats come from the contract (widths named by a parameter are read from
    ``params``); ``scales`` gives the real scale of any tensor that has one. The rounding mode is
    added to the parameters (there is one: ``Rounding.HALF_UP``).
    """
    contract = CONTRACT[kind]
    assert set(arrays) == set(contract), f"{kind}: tensors {sorted(arrays)}, contract {sorted(contract)}"
    params = {**params, "rounding": Rounding.HALF_UP.value}
    scales = scales or {}
    tensors = {}
    for name, spec in contract.items():
        fmt = spec.fmt(params)
        data = np.ascontiguousarray(arrays[name], dtype=np.int64)
        tensors[name] = Tensor(data, fmt.bits, fmt.signed, spec.role, scales.get(name))
    return BlockRecord(kind=kind, path=path, params=params, tensors=tensors)
