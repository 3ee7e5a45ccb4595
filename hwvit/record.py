"""Block records and the per-kind contract: the integer tensors and parameters of one block.

A record is what the integer model's trace holds for each block it ran, and what a vector set
on disk holds (``hwvit.vectors`` writes and reads records). ``CONTRACT`` fixes, for every block
kind, the tensors a record holds (role, shape, format), declared by the kind's module in
``hwvit.blocks``; ``make_record`` builds a record from arrays and takes every width and role from
it, so no caller types a width by hand.
``sim/test_<kind>.py`` reads these names, so they change only together with the testbenches.
Widths follow docs/arithmetic.md and ``hwvit.formats``. Nothing here computes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from hwvit.formats import IntFormat, Rounding

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

    kind: str  # a block kind of hwvit.blocks
    path: str  # e.g. "layers.3.softmax", or "random" for unit-test sets
    params: dict[str, Any] = field(default_factory=dict)  # ints, bools, strings only
    tensors: dict[str, Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from hwvit import blocks

        assert self.kind in blocks.kinds(), f"kind {self.kind!r} not in {blocks.names()}"


class Spec(NamedTuple):
    """One tensor of the contract. ``bits``/``signed`` are fixed, name a parameter, or f(params)."""

    role: str
    shape: tuple[Dim, ...]  # a parameter name, a free symbol ("n"), an int, or f(params)
    bits: int | str | Callable[[dict[str, Any]], int]  # fixed, a parameter name, or f(params)
    signed: bool | str | Callable[[dict[str, Any]], bool]

    def fmt(self, params: dict[str, Any]) -> IntFormat:
        if callable(self.bits):
            bits = self.bits(params)
        else:
            bits = params[self.bits] if isinstance(self.bits, str) else self.bits
        if callable(self.signed):
            signed = self.signed(params)
        else:
            signed = params[self.signed] if isinstance(self.signed, str) else self.signed
        return IntFormat(int(bits), bool(signed))


def __getattr__(name: str):
    """Views of the registry (hwvit.blocks), by kind: ``KINDS`` (names in seed order),
    ``UNIT_KINDS`` (kinds a traced model never records on their own), ``PARAMS`` (manifest
    parameters: type and inclusive range), ``CONTRACT`` (the tensors of a record) and
    ``LUT_TENSOR`` (the tensor whose `.hex` file is the block's loadable table)."""
    if name not in ("KINDS", "UNIT_KINDS", "PARAMS", "CONTRACT", "LUT_TENSOR"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from hwvit import blocks

    every = blocks.kinds()
    if name == "KINDS":
        return tuple(every)
    if name == "UNIT_KINDS":
        return tuple(k for k, v in every.items() if v.unit)
    if name == "PARAMS":
        return {k: v.params for k, v in every.items()}
    if name == "CONTRACT":
        return {k: v.contract for k, v in every.items()}
    return {k: v.lut for k, v in every.items() if v.lut}  # LUT_TENSOR


def make_record(
    kind: str, path: str, params: dict[str, Any], scales: dict[str, float | None] | None = None, **arrays: Any
) -> BlockRecord:
    """The record of one ``kind`` block: ``arrays`` named as in ``CONTRACT[kind]``, every one of them.

    Roles and formats come from the contract (widths named by a parameter are read from
    ``params``); ``scales`` gives the real scale of any tensor that has one. The rounding mode
    (``params["rounding"]``: a requant variant of hwvit.variants) is ``half_up`` unless given.
    """
    from hwvit import blocks

    contract = blocks.get(kind).contract
    assert set(arrays) == set(contract), f"{kind}: tensors {sorted(arrays)}, contract {sorted(contract)}"
    params = {**params, "rounding": params.get("rounding", Rounding.HALF_UP.value)}
    scales = scales or {}
    tensors = {}
    for name, spec in contract.items():
        fmt = spec.fmt(params)
        data = np.ascontiguousarray(arrays[name], dtype=np.int64)
        tensors[name] = Tensor(data, fmt.bits, fmt.signed, spec.role, scales.get(name))
    return BlockRecord(kind=kind, path=path, params=params, tensors=tensors)
