"""Block records: the integer tensors and parameters of one block instance.

A record is what the integer model's trace holds for each block it ran, and what a vector set
on disk holds (``hwvit.vectors`` writes and reads records). Nothing here computes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# The block kinds that have a Verilog twin in rtl/ (and a testbench in sim/).
KINDS = ("requant", "gemm", "gelu", "softmax", "layernorm", "residual_add")

ROLES = ("input", "output", "parameter")


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
    def lo(self) -> int:
        return -(1 << (self.bits - 1)) if self.signed else 0

    @property
    def hi(self) -> int:
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1


@dataclass
class BlockRecord:
    """One block instance: its kind (an RTL block), its path in the model and its integer I/O."""

    kind: str  # one of KINDS
    path: str  # e.g. "layers.3.softmax", or "random" for unit-test sets
    params: dict[str, Any] = field(default_factory=dict)  # ints, bools, strings only
    tensors: dict[str, Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        assert self.kind in KINDS, f"kind {self.kind!r} not in {KINDS}"
