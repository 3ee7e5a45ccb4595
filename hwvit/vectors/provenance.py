"""What made a traced vector set, recorded in its manifest as ``provenance``.

Two sets made from the same hwvit version, float weights, images and options are byte-identical
on every machine (calibration is made machine-independent in hwvit.quant.calibrate). When two
sets differ, these fields say which of those inputs differed (``hwvit check --against``):

- ``weights_sha256``: the float model's weights as loaded (``weights_sha256``): a checkpoint, or
  the seeded random weights of a preset, which torch draws differently on some CPUs;
- ``calibration_sha256`` and ``inputs_sha256``: the calibration inputs and the traced inputs as
  the model takes them, after decoding and preprocessing (``array_sha256``);
- ``options``: what the command was asked (model config, quantization knobs, recipe, data, seed).

The hashes cover dtype, shape and bytes in C order, so the same values give the same digest
whatever the memory layout.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

KEYS = ("weights_sha256", "calibration_sha256", "inputs_sha256", "options")


def _numpy(x: Any) -> np.ndarray:
    if type(x).__module__.split(".")[0] == "torch":
        x = x.detach().cpu().contiguous().numpy()
    return np.ascontiguousarray(x)


def _update(h, name: str, x: Any) -> None:
    a = _numpy(x)
    h.update(f"{name} {a.dtype.str} {list(a.shape)}\n".encode())
    h.update(a.tobytes())


def array_sha256(x: Any) -> str:
    """sha256 of one array (numpy or torch): its dtype, shape and values in C order."""
    h = hashlib.sha256()
    _update(h, "array", x)
    return h.hexdigest()


def weights_sha256(model: Any) -> str:
    """sha256 of a torch module's state dict: every entry's name, dtype, shape and values, by name."""
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        _update(h, name, tensor)
    return h.hexdigest()


def provenance(model: Any = None, calibration: Any = None, inputs: Any = None, options: Any = None) -> dict:
    """The ``provenance`` mapping of a manifest; an argument not given is recorded as null."""
    return {
        "weights_sha256": None if model is None else weights_sha256(model),
        "calibration_sha256": None if calibration is None else array_sha256(calibration),
        "inputs_sha256": None if inputs is None else array_sha256(inputs),
        "options": options,
    }
