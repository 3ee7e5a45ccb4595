"""What an integer forward keeps: block records for vector sets, int tensors for comparison."""

from __future__ import annotations

from typing import Any

import numpy as np

from hwvit.record import BlockRecord


class Trace:
    """Collects, if asked, a BlockRecord per block run and the int value (with scale) per point.

    ``records``: keep BlockRecords (what `hwvit vectors` writes). ``values``: keep
    ``path -> (int array, scale)`` at the points the float model records too (what `compare` uses).
    With both off, the forward does no extra work. ``force(path, q, scale)``, if given, returns
    the value the forward goes on with in place of ``q`` (``values`` keeps the computed ``q``):
    hwvit.analysis.compare feeds each layer the float model's activations quantized at their
    scales, so the error it then measures at a point is the error that layer adds by itself.
    """

    def __init__(self, records: bool = False, values: bool = False, force: Any = None):
        self.keep_records = records
        self.keep_values = values
        self.force = force
        self.records: list[BlockRecord] = []
        self.values: dict[str, tuple[np.ndarray, float]] = {}
        self._seen: set[str] = set()

    @property
    def quiet(self) -> bool:
        """Nothing is kept or forced: a forward may fuse steps whose intermediates it would trace."""
        return not (self.keep_records or self.keep_values or self.force is not None)

    def value(self, path: str, q: np.ndarray, scale) -> np.ndarray:
        """Keep ``q`` (if asked); return what the forward continues with (``q`` unless forced).

        A point is traced once per forward (one Trace per forward): a second call would overwrite
        the kept value and force the point twice, once in a layout the float model never had."""
        if self.keep_values or self.force is not None:
            assert path not in self._seen, f"traced point {path} given twice in one forward (one Trace per forward)"
            self._seen.add(path)
        if self.keep_values:  # int64, whatever the forward's dtype (consumers do arithmetic on it)
            # a float, or per channel along the last axis (a residual stream under FQ-ViT's PTF)
            self.values[path] = (np.asarray(q, dtype=np.int64), float(scale) if np.ndim(scale) == 0 else scale)
        return q if self.force is None else self.force(path, q, scale)

    def keep(self, record: BlockRecord) -> None:
        """Keep one block's record (made by its kind's ``traced``, hwvit.blocks), if asked."""
        if self.keep_records:
            self.records.append(record)


NO_TRACE = Trace()
