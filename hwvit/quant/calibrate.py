"""Activation ranges from sample inputs: the float model's record hook; min/max, percentile, MSE or entropy.

The ranges are the same on every machine for the same model, inputs and options, so the integers
made from them (scales, multipliers, tables) are too. Two things make them so:

- the calibration forward runs in float64 (``float64_forward``), whatever dtype the model keeps:
  a CPU's vector kernels (ATen's AVX2 or AVX-512 exp, MKL's and oneDNN's blocking) move a float64
  statistic by a few units in the last place (2^-52 relative each), where float32 moved it by 2^-23;
- every range is rounded up to ``RANGE_BITS`` significant bits (``on_grid``), so two machines'
  statistics land on the same grid point unless a grid point lies between them. With a relative
  difference ``d`` between two machines' statistics, that happens with probability at most
  ``2^RANGE_BITS * d`` per range (the grid's relative step is at least 2^-RANGE_BITS). Between
  ATen's default, AVX2 and AVX-512 kernels (MKL and oneDNN at SSE4.2, AVX2 and AVX-512 beside
  them) ``d`` is at most 5e-16 on the digits model and 1.9e-15 on ViT-B/16: at most 1.2e-10 per
  range, 2e-8 for ViT-B/16's 175 ranges. Rounding up widens a range by less than
  2^(1-RANGE_BITS) and never clips the calibrated maximum.

The grid is fine rather than coarse because a model's end-to-end error moves with any change of
its scales, not with their size alone: rounding every range up on a grid of 10 to 14 bits (by up to
0.2% to 0.012%) moved the digits model's logits SQNR anywhere between -1.1 and +0.6 dB; on 16 bits
it stays within 0.02 dB of the float64 ranges' own.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from hwvit.formats import Calibration
from hwvit.quant.clipsearch import entropy_clip, mse_clip

# Percentile calibration keeps at most this many |x| samples per tensor (random subset), so
# calibrating ViT-B/16 on a few images stays within a few hundred MB.
_SAMPLES_PER_TENSOR = 1 << 20

# Significant bits a calibrated range keeps (see the module docstring for the trade-off).
RANGE_BITS = 16


def on_grid(value, bits: int = RANGE_BITS):
    """``value`` (a float or an array of them, >= 0) rounded up to ``bits`` significant bits.

    Exact: ``value = f * 2^e`` with ``f`` in [0.5, 1); the result is ``ceil(f * 2^bits) * 2^(e - bits)``,
    every step a power-of-two scaling or a ceiling, none of which rounds. 0 stays 0.
    """
    if np.ndim(value) == 0:
        v = float(value)
        if not (math.isfinite(v) and v > 0):
            return v
        f, e = math.frexp(v)
        return math.ldexp(math.ceil(math.ldexp(f, bits)), e - bits)
    a = np.asarray(value, dtype=np.float64)
    f, e = np.frexp(a)
    return np.where(a > 0, np.ldexp(np.ceil(np.ldexp(f, bits)), e - bits), a)


def float64_forward(model: torch.nn.Module):
    """``model``'s forward with every floating parameter and buffer in float64, the model untouched
    (torch.func.functional_call on float64 copies): ``forward(x, **kwargs)``."""
    state = {
        name: t.detach().to(torch.float64) if t.is_floating_point() else t
        for name, t in [*model.named_parameters(), *model.named_buffers()]
    }

    def forward(x: torch.Tensor, **kwargs):
        return torch.func.functional_call(model, state, (x.to(torch.float64),), kwargs)

    return forward


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
    """Absolute range (max |x|, a percentile of |x|, or a clip search at ``bits``) of every recorded
    tensor, from a float64 forward, rounded up to the grid of ``on_grid``.

    percentile, mse and entropy work on a random sample of at most 2^20 |x| values per tensor.

    ``model`` must accept ``forward(x, record=callable)`` (hwvit.float.model.ViT does);
    ``hooks`` names extra points by module: the module's output is recorded under that path.
    ``channels``, if given, is filled with each point's max |x| per channel (its last axis), on the
    same grid: the per-channel ranges FQ-ViT's power-of-two factor is chosen from
    (hwvit.variants.layernorm_forms).
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
            v = a.double().numpy()
            if v.size > _SAMPLES_PER_TENSOR // 4:
                v = rng.choice(v, _SAMPLES_PER_TENSOR // 4, replace=False)
            samples.setdefault(path, []).append(v)

    handles = [
        module.register_forward_hook(lambda _m, _i, out, path=path: record(path, out))
        for path, module in (hooks or {}).items()
    ]
    model.eval()
    forward = float64_forward(model)
    try:
        with torch.no_grad():
            for start in range(0, len(inputs), batch_size):
                forward(inputs[start : start + batch_size], record=record)
    finally:
        for handle in handles:
            handle.remove()
    if channels is not None:
        for path in list(channels):
            channels[path] = on_grid(channels[path])
    if method is Calibration.MINMAX:
        return {path: on_grid(v) for path, v in absmax.items()}
    ranges = {}
    for path, parts in samples.items():
        v = np.concatenate(parts)
        if v.size > _SAMPLES_PER_TENSOR:
            v = rng.choice(v, _SAMPLES_PER_TENSOR, replace=False)
        if method is Calibration.PERCENTILE:
            r = float(np.percentile(v, percentile))
        elif method is Calibration.MSE:
            r = mse_clip(v, bits)
        else:
            r = entropy_clip(v, bits)
        if r <= 0.0:  # an all-zero tail: fall back to the max so the scale is > 0
            r = absmax[path]
        ranges[path] = on_grid(r)
    return ranges
