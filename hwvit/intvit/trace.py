"""What an integer forward keeps: block records for vector sets, int tensors for comparison."""

from __future__ import annotations

from typing import Any

import numpy as np

from hwvit.record import BlockRecord, make_record


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

    def record(
        self, kind: str, path: str, params: dict[str, Any], scales: dict[str, float] | None = None, **arrays: Any
    ) -> None:
        """Keep the record of one block (``hwvit.record.make_record``: formats from the contract)."""
        if self.keep_records:
            self.records.append(make_record(kind, path, params, scales, **arrays))


NO_TRACE = Trace()
