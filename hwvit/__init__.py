"""hwvit: a bit-accurate fixed-point Vision Transformer and RTL test-vector generator."""

from __future__ import annotations

__version__ = "0.1.0"


def load_float(source, family: str | None = None, **kwargs):
    """Load a float ViT (eval mode) from a checkpoint file, model directory or state dict; the family
    is read from the key names unless given. See hwvit.float.importers."""
    from hwvit.float.importers import load_float as _load

    return _load(source, family=family, **kwargs)


__all__ = ["__version__", "load_float"]
