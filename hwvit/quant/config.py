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
    # The arithmetic of each block family (hwvit.variants): hwvit's own unless a variant is named
    # (e.g. softmax="ibert"), or a team's function "package.module:function".
    requant: str = "half_up"
    gelu: str = "lut"
    softmax: str = "hwvit"
    layernorm: str = "hwvit"

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
        from hwvit import variants

        for family in variants.FAMILIES:
            variants.resolve(family, getattr(self, family))  # ValueError naming the known ones

    def to_dict(self) -> dict:
        """The knobs as plain values; a block family's arithmetic only where it is not hwvit's own
        (what every report and vector manifest made before the variants existed stays as it was)."""
        return plain_dict(self)

    def variants(self) -> dict[str, str]:
        """The arithmetic of each block family, hwvit's own included."""
        from hwvit import variants

        return {family: getattr(self, family) for family in variants.FAMILIES}


def plain_dict(qc: QuantConfig) -> dict:
    from hwvit import variants

    d = asdict(qc)
    for family, name in variants.DEFAULT.items():
        if d.get(family) == name:
            del d[family]
    return d
