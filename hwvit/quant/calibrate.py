"""Activation ranges from sample inputs: the float model's record hook; min/max, percentile, MSE or entropy."""

from __future__ import annotations

import numpy as np
import torch

from hwvit.formats import Calibration
from hwvit.quant.clipsearch import entropy_clip, mse_clip

# Percentile calibration keeps at most this many |x| samples per tensor (random subset), so
# calibrating ViT-B/16 on a few images stays within a few hundred MB.
_SAMPLES_PER_TENSOR = 1 << 20


def calibrate(
    model: torch.nn.Module,
    inputs: torch.Tensor,
    method: str | Calibration = "minmax",
    percentile: float = 99.99,
    batch_size: int = 64,
    seed: int = 0,
    hooks: dict[str, torch.nn.Module] | None = None,
    bits: int = 8,
    channels: dict[str, np.ndarray] | None = None,
) -> dict[str, float]:
    """Absolute range (max |x|, a percentile of |x|, or a clip search at ``bits``) of every recorded tensor.

    percentile, mse and entropy work on a random sample of at most 2^20 |x| values per tensor.

    ``model`` must accept ``forward(x, record=callable)`` (hwvit.float.model.ViT does);
    ``hooks`` names extra points by module: the module's output is recorded under that path.
    ``channels``, if given, is filled with each point's max |x| per channel (its last axis): the
    per-channel ranges FQ-ViT's power-of-two factor is chosen from (hwvit.variants.layernorm_forms).
    """
    method = Calibration.from_string(method) if isinstance(method, str) else method
    if inputs is None or len(inputs) == 0:
        raise ValueError("calibration data is empty: give at least one input")
    inputs = torch.as_tensor(inputs, dtype=torch.float32)
    if not torch.isfinite(inputs).all():
        raise ValueError("calibration data contains NaN or Inf")
    if not 0.0 < percentile <= 100.0:
        raise ValueError(f"percentile must be in (0, 100], got {percentile}")
    rng = np.random.default_rng(seed)
    absmax: dict[str, float] = {}
    samples: dict[str, list[np.ndarray]] = {}

    def record(path: str, tensor: torch.Tensor) -> None:
        a = tensor.detach().abs().reshape(-1)
        absmax[path] = max(absmax.get(path, 0.0), float(a.max()) if a.numel() else 0.0)
        if channels is not None and tensor.dim() >= 1 and a.numel():
            per = tensor.detach().abs().reshape(-1, tensor.shape[-1]).amax(dim=0).double().numpy()
            channels[path] = per if path not in channels else np.maximum(channels[path], per)
        if method is not Calibration.MINMAX:
            v = a.numpy()
            if v.size > _SAMPLES_PER_TENSOR // 4:
                v = rng.choice(v, _SAMPLES_PER_TENSOR // 4, replace=False)
            samples.setdefault(path, []).append(v)

    handles = [
        module.register_forward_hook(lambda _m, _i, out, path=path: record(path, out))
        for path, module in (hooks or {}).items()
    ]
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(inputs), batch_size):
                model(inputs[start : start + batch_size], record=record)
    finally:
        for handle in handles:
            handle.remove()
    if method is Calibration.MINMAX:
        return absmax
    ranges = {}
    for path, parts in samples.items():
        v = np.concatenate(parts)
        if v.size > _SAMPLES_PER_TENSOR:
            v = rng.choice(v, _SAMPLES_PER_TENSOR, replace=False)
        if method is Calibration.PERCENTILE:
            ranges[path] = float(np.percentile(v, percentile))
        elif method is Calibration.MSE:
            ranges[path] = mse_clip(v, bits)
        else:
            ranges[path] = entropy_clip(v, bits)
        if ranges[path] <= 0.0:  # an all-zero tail: fall back to the max so the scale is > 0
            ranges[path] = absmax[path]
    return ranges
