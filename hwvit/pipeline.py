"""The shared front half of the commands: where the float model and its inputs come from.

`--model PRESET` gives the shipped digits model for `digits` and a randomly initialised model
(seeded) for the other presets; `--checkpoint PATH` imports a trained checkpoint (a file or a
model directory; the family is read from the key names unless given).

Data (``plan_data``): evaluation images from ``--images`` (folder, image, .npy/.npz), calibration
images from ``--calib``; evaluation data without calibration data is split, a disjoint part
calibrating; without any data, digits uses its own split and other models random inputs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch


@dataclass
class Source:
    model: torch.nn.Module  # hwvit.float.model.ViT, eval mode
    name: str  # preset name or checkpoint path
    sha256: str | None  # of the checkpoint file (None for random weights)
    is_digits: bool
    random_weights: bool = False  # a preset other than digits: seeded random initialisation
    preprocess: object | None = None  # hwvit.dataset.Preprocess from the checkpoint's preprocessor_config.json
    class_names: list[str] | None = None  # the head's class names (HF id2label), when known
    imported: object | None = None  # hwvit.onnx.build.Imported: a quantized ONNX file's own integer model


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def files_sha256(paths: list[Path]) -> str:
    """sha256 of one file, or of the files' sha256 values (name and digest per line) for several."""
    if len(paths) == 1:
        return file_sha256(paths[0])
    lines = "".join(f"{Path(p).name} {file_sha256(p)}\n" for p in sorted(paths))
    return hashlib.sha256(lines.encode()).hexdigest()


def load_source(
    preset: str | None = None,
    checkpoint: str | None = None,
    family: str | None = None,
    config=None,
    seed: int = 0,
    heads: int | None = None,
) -> Source:
    """Resolve --model / --checkpoint into a float model (ValueError with one line on bad input)."""
    from hwvit.float import config as fconfig
    from hwvit.float import digits
    from hwvit.float.model import ViT

    if checkpoint is None:
        name = preset or "digits"
        if name == "digits" and config is None and heads is None:
            model = digits.load_demo_model()
            return Source(model, "digits", file_sha256(digits.DEMO_CHECKPOINT), True)
        cfg = fconfig.load_preset(name)  # ValueError listing the presets
        if config is not None or heads is not None:
            from hwvit.float.loading import hint_fields

            changes = hint_fields(config)
            if heads is not None:
                changes.update(heads=heads, head_dim=None)
            cfg = cfg.replace(**changes)
        torch.manual_seed(seed)
        model = ViT(cfg).eval()
        return Source(model, name, None, False, random_weights=True)
    from hwvit.onnx import is_onnx

    if is_onnx(checkpoint):
        if family is not None or config is not None or heads is not None or preset is not None:
            raise ValueError("an ONNX file says its own shape: --family, --config, --heads and --model do not apply")
        imported = load_quantized(checkpoint, seed)
        cfg = imported.model.cfg
        # a model of the digits shape is scored on the digits split, as the demo model is
        digits_shape = tuple(cfg.input_shape) == (1, 8, 8) and cfg.num_classes == 10
        return Source(imported.model, str(checkpoint), file_sha256(checkpoint), digits_shape, imported=imported)
    from hwvit.dataset.preprocess import from_hf, from_timm
    from hwvit.float.importers import load_checkpoint

    loaded = load_checkpoint(checkpoint, family=family, config=config if config is not None else preset, heads=heads)
    ckpt = loaded.checkpoint
    pre = None
    if ckpt.preprocessor is not None:
        pre = from_hf(ckpt.preprocessor, str(ckpt.path / "preprocessor_config.json"))
    elif ckpt.config is not None and isinstance(ckpt.config.get("pretrained_cfg"), dict):
        pre = from_timm(ckpt.config["pretrained_cfg"], str(ckpt.path / "config.json"))
    return Source(
        loaded.model, str(checkpoint), files_sha256(ckpt.files), False, preprocess=pre, class_names=loaded.class_names
    )


def input_shape(cfg) -> tuple[int, ...]:
    return tuple(cfg.input_shape)


def load_quantized(path, seed: int = 0, softmax: str = "hwvit", layernorm: str = "hwvit", requant: str | None = None):
    """A quantized ONNX file's Imported (hwvit.onnx.build.load) with ``softmax`` and ``layernorm``
    where it computes in float, its GEMMs rounding as ``requant`` (None: the file's meaning), its
    float points calibrated on ``_calibration_inputs``."""
    from hwvit.onnx.build import ROUNDING, load

    calib = lambda m: _calibration_inputs(m, path, seed)  # noqa: E731
    return load(path, softmax=softmax, layernorm=layernorm, calib=calib, requant=requant or ROUNDING)


def _calibration_inputs(model, path, seed: int, n: int = 256) -> np.ndarray:
    """The calibration inputs for the points a file ``model`` leaves float (a QONNX file, or a QDQ file
    quantized at its GEMMs' inputs alone), as ``calibration_inputs`` chooses them: the digits
    training images for a model of the digits shape, else seeded standard-normal inputs."""
    dims = model.graph.input[0].type.tensor_type.shape.dim
    shape = tuple(d.dim_value for d in dims[1:])
    if shape == (1, 8, 8):
        from hwvit.float.digits import load_digits_split

        return load_digits_split()[0][:n].numpy()
    if not shape or not all(shape):
        raise ValueError(f"{path}: its input shape {shape} is not fixed: hwvit cannot calibrate its float points")
    gen = torch.Generator().manual_seed(seed + 1)
    return torch.randn((n, *shape), generator=gen).numpy()


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


# The user's data ---------------------------------------------------------------------------------
def preprocessing(
    source: Source,
    resize: str | None = None,
    crop: str | None = None,
    mean: str | None = None,
    std: str | None = None,
    rescale: float | None = None,
):
    """The Preprocess for ``source``: its preprocessor_config.json, then the flags, then the model's size."""
    from hwvit.dataset import from_flags

    pre = from_flags(resize, crop, mean, std, rescale, base=source.preprocess)
    cfg = source.model.cfg
    return pre.with_model_size(cfg.image_size) if cfg.ndim == 2 else pre


# What one sample costs while hwvit.analysis.compare keeps the float record and the integer trace of
# every point: ~24 bytes per recorded value (float64 record, int64 trace, dequantized copy). Per
# block: q, k, v, context, proj, norms and adds ~8*T*D, scores and probs 2*H*T^2, fc1 and gelu 2*T*M.
# ViT-B/16: 12 * (1.21M + 0.93M + 1.21M) * 24 B = 0.97 GB per image; digits: 1.1 MB.
BYTES_PER_VALUE = 24
BATCH_BUDGET = 1 << 30  # bytes of traces per batch


def batch_size_for(cfg, budget: int = BATCH_BUDGET, most: int = 64) -> int:
    """Samples per batch whose compare traces fit ``budget`` bytes (at least 1, at most ``most``)."""
    t, d, m, h = cfg.num_tokens, cfg.dim, cfg.mlp_dim, cfg.heads
    per_sample = cfg.depth * (8 * t * d + 2 * h * t * t + 2 * t * m) * BYTES_PER_VALUE
    return max(1, min(most, budget // max(per_sample, 1)))


class Stream:
    """Re-iterable batches of an ImageSet (decoded anew on each pass; memory: one batch)."""

    def __init__(
        self,
        images,
        pre,
        input_shape: tuple[int, ...],
        batch_size: int = 32,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.images, self.pre, self.shape, self.batch_size = images, pre, tuple(input_shape), batch_size
        self.progress = progress

    def __len__(self) -> int:
        return len(self.images)

    def __iter__(self) -> Iterator[torch.Tensor]:
        for batch in self.images.batches(self.pre, self.shape, self.batch_size):
            yield batch
            if self.progress is not None:
                self.progress(len(batch))


@dataclass
class Data:
    """Where calibration and evaluation inputs come from, and what to tell the user about it."""

    calib: torch.Tensor
    inputs: object  # torch.Tensor or Stream
    labels: np.ndarray | None
    notes: list[str] = field(default_factory=list)
    random_inputs: bool = False
    pre: object | None = None  # the Preprocess used on images (None: built-in or random inputs)

    def first(self, n: int) -> torch.Tensor:
        """The first ``n`` evaluation inputs as one tensor (vectors traces a few)."""
        if isinstance(self.inputs, torch.Tensor):
            return self.inputs[:n]
        s = self.inputs
        return torch.cat(list(Stream(s.images.subset(range(min(n, len(s)))), s.pre, s.shape, s.batch_size)))


def plan_data(
    source: Source,
    images: str | None = None,
    calib: str | None = None,
    labels_csv: str | None = None,
    calib_images: int = 256,
    limit: int | None = None,
    seed: int = 0,
    pre=None,
    batch_size: int | None = None,
    strict: bool = False,
) -> Data:
    """Calibration and evaluation data for ``source`` from the user's paths (see the module docstring).

    ``calib_images``: at most this many calibration samples (a seeded random choice when there are
    more); ``limit``: at most this many evaluation samples (the first ones). An image that cannot
    be read, converted or preprocessed is left out with a note naming it (ImageSet.screen), or,
    ``strict``, raises ValueError.
    """
    from hwvit.dataset import label_indices, open_images
    from hwvit.dataset.sources import screen_notes

    cfg = source.model.cfg
    shape = tuple(cfg.input_shape)
    batch_size = batch_size or batch_size_for(cfg)
    pre = pre if pre is not None else preprocessing(source)
    notes: list[str] = []
    rng = np.random.default_rng(seed)
    eval_set = open_images(images, labels_csv) if images else None
    calib_set = open_images(calib) if calib else None
    if eval_set is not None and calib_set is None:
        n = len(eval_set)
        if n < 2:
            raise ValueError(
                f"{images}: one image cannot be split into calibration and evaluation data; "
                f"give calibration images with --calib"
            )
        k = min(calib_images, max(1, n // 4))
        chosen = np.sort(rng.permutation(n)[:k])
        rest = np.setdiff1d(np.arange(n), chosen)
        calib_set, eval_set = eval_set.subset(chosen), eval_set.subset(rest)
        notes.append(f"calibrated on {k} of the {n} samples of {images}, evaluated on the other {n - k}")
    elif calib_set is not None and len(calib_set) > calib_images:
        calib_set = calib_set.subset(np.sort(rng.permutation(len(calib_set))[:calib_images]))
    if eval_set is not None and limit is not None and len(eval_set) > limit:
        eval_set = eval_set.subset(np.arange(limit))
    # the images chosen, each decoded once: those that cannot reach the model left out, or strict: an error
    screened: dict[str, list] = {}
    if calib_set is not None:
        found = calib_set.screen(pre, shape, strict)
        calib_set = found.images
        screened.setdefault(calib_set.origin, []).append(found)
    if eval_set is not None:
        found = eval_set.screen(pre, shape, strict)
        eval_set = found.images
        screened.setdefault(eval_set.origin, []).append(found)
    for origin, parts in screened.items():
        notes += screen_notes(origin, parts, shape[0])
    labels = None
    if eval_set is not None and eval_set.labels is not None:
        if cfg.num_classes == 0:
            notes.append("labels not used: the model has no classification head")
        else:
            labels = label_indices(eval_set.labels, cfg.num_classes, source.class_names, str(images))
    if calib_set is not None:
        calib_x = calib_set.tensor(pre, shape)
        if calib is not None:
            notes.append(f"calibrated on {len(calib_set)} sample{'s' if len(calib_set) != 1 else ''} of {calib}")
    else:
        calib_x = calibration_inputs(source, calib_images, seed)
    if eval_set is not None:
        inputs: object = Stream(eval_set, pre, shape, batch_size)
    else:
        inputs, labels = eval_inputs(source, limit, seed)
    random_inputs = not source.is_digits and eval_set is None
    calib_random = not source.is_digits and calib_set is None
    if calib_random and not random_inputs:
        notes.append("calibrated on random inputs")
    return Data(
        calib_x,
        inputs,
        labels,
        notes,
        random_inputs=random_inputs,
        pre=pre if (eval_set is not None or calib is not None) else None,
    )


def random_note(source: Source, data: Data) -> str | None:
    """'random weights/inputs', 'random weights' or 'random inputs' when the result measures noise."""
    parts = [what for what, flag in (("weights", source.random_weights), ("inputs", data.random_inputs)) if flag]
    return f"random {'/'.join(parts)}" if parts else None
