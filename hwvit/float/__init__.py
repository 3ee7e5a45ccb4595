"""The float reference ViT (torch), its config presets and the checkpoint importers.

- ``config``: ViTConfig (frozen), presets in hwvit/presets/*.yaml, load_config for any YAML;
- ``model``: ViT, the one pre-norm model every family maps onto, with a record hook;
- ``importers`` + ``keymaps``: load_float(source, family, config) for hf, timm, simple_vit,
  ecg1d, hwvit checkpoints, and ``attention_blocks`` for the attention-only seeds;
- ``digits``: the demo model trained on scikit-learn's bundled 8x8 digits.
"""

from __future__ import annotations

from hwvit.float.config import ViTConfig, list_presets, load_config, load_preset
from hwvit.float.importers import FAMILIES, load_float, save_float
from hwvit.float.model import ViT

__all__ = ["FAMILIES", "ViT", "ViTConfig", "list_presets", "load_config", "load_float", "load_preset", "save_float"]
