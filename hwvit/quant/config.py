"""The architect's quantization knobs (``hwvit compare``/``sweep`` vary them)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from hwvit.formats import ExpMode
from hwvit.quant.calibrate import Calibration


@dataclass(frozen=True)
class QuantConfig:
    """The architect's knobs. Defaults are the int8 design of docs/arithmetic.md."""

    act_bits: int = 8  # activations, per tensor, symmetric
    softmax_bits: int = 8  # probability width; scale 1/(2^bits - 1)
    exp: str = ExpMode.TABLE.value  # softmax exp (hwvit.formats.ExpMode): "table" (RTL) or "shift" (shift-and-add)
    exp_entries: int = 256  # exp table entries (<= 2^act_bits); larger differences give exp = 0
    calibration: str = "minmax"  # or "percentile", "mse", "entropy" (hwvit.quant.calibrate)
    percentile: float = 99.99

    def __post_init__(self) -> None:
        if not 2 <= self.act_bits <= 8:
            raise ValueError(f"act_bits must be in [2, 8], got {self.act_bits}")
        if not 2 <= self.softmax_bits <= 8:
            raise ValueError(f"softmax_bits must be in [2, 8], got {self.softmax_bits}")
        if self.exp not in ExpMode.values():  # exactly as written: configs and reports keep the string
            raise ValueError(f"exp must be one of {', '.join(map(repr, ExpMode.values()))}, got {self.exp!r}")
        if not 1 <= self.exp_entries <= 256:
            raise ValueError(f"exp_entries must be in [1, 256], got {self.exp_entries}")
        Calibration.from_string(self.calibration)  # ValueError naming the known methods

    def to_dict(self) -> dict:
        return asdict(self)
