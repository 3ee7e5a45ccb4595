"""The files the docs and the `--help` examples name as the user's own, made for the tests that run them.

- ``vit.safetensors``: a small randomly initialised Hugging Face ViTForImageClassification (32x32
  RGB, patch 8, width 64, 2 layers, 4 heads, 10 classes);
- ``vit.yaml``: its hwvit config (what `--config` tells about a checkpoint: 4 heads cannot be read
  from width 64);
- ``vit/``: the same model as ``save_pretrained`` writes it, with a preprocessor_config.json;
- ``photos/``: scikit-image's sample photographs in two class folders, as a user's photographs
  come: colour ones and a greyscale one (camera).
"""

from __future__ import annotations

from pathlib import Path

USER_FILES = ("vit.safetensors", "vit.yaml", "vit/", "photos/")
PHOTOS = (("0", "astronaut"), ("0", "chelsea"), ("1", "coffee"), ("1", "rocket"), ("1", "camera"))


def names_user_files(words: list[str]) -> bool:
    """Whether a command's words name one of the user's files (``vit/``, ``photos/``, ...)."""
    return any(w == f.rstrip("/") or w.startswith(f) for w in words for f in USER_FILES)


def user_files(root: Path) -> None:
    import torch
    import yaml
    from safetensors.torch import save_file
    from transformers import ViTConfig, ViTForImageClassification

    from hwvit.float.importers import load_float

    torch.manual_seed(0)
    cfg = ViTConfig(
        image_size=32,
        patch_size=8,
        num_channels=3,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        num_labels=10,
    )
    model = ViTForImageClassification(cfg).eval()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, root / "vit.safetensors")
    hwvit_cfg = load_float(root / "vit.safetensors", family="hf", heads=4).cfg
    (root / "vit.yaml").write_text(yaml.safe_dump(hwvit_cfg.to_dict()))
    model.save_pretrained(root / "vit")
    (root / "vit" / "preprocessor_config.json").write_text(
        '{"size": {"height": 32, "width": 32}, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}'
    )
    import skimage.data
    from PIL import Image

    for cls, name in PHOTOS:
        (root / "photos" / cls).mkdir(parents=True, exist_ok=True)
        Image.fromarray(getattr(skimage.data, name)()).save(root / "photos" / cls / f"{name}.png")
