"""What an integer forward keeps: block records for vector sets, int tensors for comparison."""

from __future__ import annotations

import numpy as np

from hwvit.record import BlockRecord, Tensor


class Trace:
    """Collects, if asked, a BlockRecord per block run and the int value (with scale) per point.

    ``records``: keep BlockRecords (what `hwvit vectors` writes). ``values``: keep
    ``path -> (int array, scale)`` at the points the float model records too (what `compare` uses).
    With both off, the forward does no extra work.
    """

    def __init__(self, records: bool = False, values: bool = False):
        self.keep_records = records
        self.keep_values = values
        self.records: list[BlockRecord] = []
        self.values: dict[str, tuple[np.ndarray, float]] = {}

    def value(self, path: str, q: np.ndarray, scale: float) -> None:
        if self.keep_values:
            self.values[path] = (q, float(scale))

    def add(self, kind: str, path: str, params: dict, **tensors: Tensor) -> None:
        if self.keep_records:
            self.records.append(BlockRecord(kind=kind, path=path, params=dict(params), tensors=dict(tensors)))


NO_TRACE = Trace()


def t_in(data, bits: int, signed: bool = True, scale: float | None = None) -> Tensor:
    return Tensor(np.ascontiguousarray(data, dtype=np.int64), bits, signed, "input", scale)


def t_out(data, bits: int, signed: bool = True, scale: float | None = None) -> Tensor:
    return Tensor(np.ascontiguousarray(data, dtype=np.int64), bits, signed, "output", scale)


def t_par(data, bits: int, signed: bool = True, scale: float | None = None) -> Tensor:
    return Tensor(np.ascontiguousarray(data, dtype=np.int64), bits, signed, "parameter", scale)
