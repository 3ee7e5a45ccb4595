"""hwvit.quant: float -> integer conversion.

``quantize_model`` (convert.py) calibrates a float ViT (calibrate.py) and builds its IntViT from
the layer builders (layers.py), which turn scales into integer parameters (params.py).
"""

from __future__ import annotations

import importlib

# Each name from its module on first use (PEP 562): importing hwvit.quant.params (the simulator
# processes do, for a set's derived parameters) must not import torch through calibrate.py: inside
# Icarus and Verilator that import costs seconds on every run.
_HOME = {
    "QuantConfig": "hwvit.quant.config",
    "quantize_model": "hwvit.quant.convert",
    **{
        name: "hwvit.quant.params"
        for name in (
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
        )
    },
}


def __getattr__(name: str):
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOME])


__all__ = sorted(_HOME)
