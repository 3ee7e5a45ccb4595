"""The seeded one-layer ViT the RTL core's tests compile (tests/test_core_digits.py,
tests/test_core_rounding.py): 5 tokens of 16 channels, attention 2 heads x 16 (the preset's
head_dim), so q, k, v and the context are 32 wide, twice the tokens' width, as SimpleViT's
dim_head allows."""

from __future__ import annotations

TINY = {"patch_size": 4, "dim": 16, "depth": 1, "heads": 2, "mlp_dim": 32}


def tiny_source(biases: bool):
    """(Source, Data) of TINY with 64 calibration images. ``biases``: every Linear's bias drawn
    (seeded, both signs) before calibration; the preset's random init leaves them 0, so no GEMM
    would add a bias."""
    import torch

    from hwvit.cli.loading import load_data

    source, data = load_data({"preset": "digits", "config_path": dict(TINY)}, 0, 64)
    if biases:
        gen = torch.Generator().manual_seed(5)
        with torch.no_grad():
            for layer in source.model.modules():
                if isinstance(layer, torch.nn.Linear) and layer.bias is not None:
                    layer.bias.copy_(0.5 * torch.randn(layer.bias.shape, generator=gen))
    return source, data
