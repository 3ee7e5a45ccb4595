"""hwvit.quant: float -> integer conversion.

``quantize_model`` (convert.py) calibrates a float ViT (calibrate.py) and builds its IntViT from
the layer builders (layers.py), which turn scales into integer parameters (params.py).
"""

from __future__ import annotations

from hwvit.quant.config import QuantConfig
from hwvit.quant.convert import quantize_model
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
    "QuantConfig",
    "bias_int",
    "exp_shift_mult",
    "exp_table",
    "gelu_table",
    "layernorm_params",
    "quantize_multiplier",
    "quantize_model",
    "quantize_multipliers",
    "quantize_weights",
    "residual_params",
    "weight_scales",
]
