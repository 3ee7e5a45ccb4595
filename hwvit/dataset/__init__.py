"""The user's data: image folders, single images and arrays, their labels, and HF-style preprocessing.

- ``sources``: ``open_images(path)`` -> ImageSet (decoded lazily, batch by batch);
- ``preprocess``: ``Preprocess`` (resize, center crop, rescale, normalize) from a
  ``preprocessor_config.json`` (``from_hf``) or command-line values (``from_flags``);
- ``labels``: raw labels -> class indices of the model's head.
"""

from __future__ import annotations

from hwvit.dataset.labels import label_indices
from hwvit.dataset.preprocess import Preprocess, from_flags, from_hf
from hwvit.dataset.sources import IMAGE_SUFFIXES, ImageSet, open_images

__all__ = ["IMAGE_SUFFIXES", "ImageSet", "Preprocess", "from_flags", "from_hf", "label_indices", "open_images"]
