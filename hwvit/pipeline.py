"""The shared front half of the commands: where the float model and its inputs come from.

`--model PRESET` gives the shipped digits model for `digits` and a randomly initialised model
(seeded) for the other presets; `--checkpoint PATH --family F` imports a trained checkpoint.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch


@dataclass
class Source:
    model: torch.nn.Module  # hwvit.float.model.ViT, eval mode
    name: str  # preset name or checkpoint path
    sha256: str | None  # of the checkpoint file (None for random weights)
    is_digits: bool


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_source(preset: str | None = None, checkpoint: str | None = None, family: str | None = None,
                config: str | None = None, seed: int = 0) -> Source:
    """Resolve --model / --checkpoint into a float model (ValueError with one line on bad input)."""
    from hwvit.float import config as fconfig
    from hwvit.float import digits
    from hwvit.float.model import ViT

    if checkpoint is None:
        name = preset or "digits"
        if name == "digits":
            model = digits.load_demo_model()
            return Source(model, "digits", file_sha256(digits.DEMO_CHECKPOINT), True)
        cfg = fconfig.load_preset(name)  # ValueError listing the presets
        torch.manual_seed(seed)
        model = ViT(cfg).eval()
        return Source(model, name, None, False)
    if family is None:
        raise ValueError("--checkpoint needs --family (hf, timm, simple_vit, ecg1d or hwvit)")
    from hwvit.float.importers import load_float

    cfg = config or preset
    model = load_float(checkpoint, family=family, config=cfg)
    return Source(model, str(checkpoint), file_sha256(checkpoint), False)


def input_shape(cfg) -> tuple[int, ...]:
    return tuple(cfg.input_shape)


def calibration_inputs(source: Source, n: int = 256, seed: int = 0) -> torch.Tensor:
    """Digits: the first ``n`` training images; otherwise ``n`` seeded standard-normal inputs."""
    if source.is_digits:
        from hwvit.float.digits import load_digits_split

        x_train, _, _, _ = load_digits_split()
        return x_train[:n]
    gen = torch.Generator().manual_seed(seed + 1)
    return torch.randn((n, *input_shape(source.model.cfg)), generator=gen)


def eval_inputs(source: Source, n: int | None = None, seed: int = 0) -> tuple[torch.Tensor, np.ndarray | None]:
    """Digits: the held-out test split (and its labels); otherwise ``n`` seeded random inputs."""
    if source.is_digits:
        from hwvit.float.digits import load_digits_split

        _, _, x_test, y_test = load_digits_split()
        if n is not None:
            x_test, y_test = x_test[:n], y_test[:n]
        return x_test, np.asarray(y_test)
    gen = torch.Generator().manual_seed(seed + 2)
    return torch.randn((n or 8, *input_shape(source.model.cfg)), generator=gen), None


def load_inputs(path: str | Path, cfg) -> torch.Tensor:
    """Inputs from a .npy file (float array shaped like the model's input, batch first)."""
    try:
        arr = np.load(path, allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - any parse failure is one user error
        raise ValueError(f"{path}: not a readable .npy array ({exc.__class__.__name__})") from None
    want = input_shape(cfg)
    if arr.ndim == len(want):
        arr = arr[None]
    if tuple(arr.shape[1:]) != want:
        raise ValueError(f"{path}: inputs of shape {tuple(arr.shape)}; the model takes (N, {', '.join(map(str, want))})")
    if not np.issubdtype(arr.dtype, np.floating) and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{path}: inputs must be numeric, got {arr.dtype}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{path}: inputs contain NaN or Inf")
    return torch.as_tensor(arr, dtype=torch.float32)
