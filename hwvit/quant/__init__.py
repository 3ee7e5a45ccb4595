"""hwvit.quant: float -> integer conversion (parameter builders; calibration in calibrate.py)."""

from __future__ import annotations

from hwvit.quant.params import (
    bias_int,
    exp_shift_mult,
    exp_table,
    gelu_table,
    layernorm_params,
    quantize_multiplier,
    quantize_multipliers,
    quantize_weights,
    residual_params,
    weight_scales,
)

__all__ = [
    "bias_int",
    "exp_shift_mult",
    "exp_table",
    "gelu_table",
    "layernorm_params",
    "quantize_multiplier",
    "quantize_multipliers",
    "quantize_weights",
    "residual_params",
    "weight_scales",
]
