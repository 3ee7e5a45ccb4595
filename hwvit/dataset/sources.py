"""Image sets: a folder of PNG/JPEG files, one image, or an .npy/.npz array, read lazily in batches.

- folder: ImageFolder layout (``root/<class>/<image>``: the label is the sub-folder name), or
  images directly under ``root``, unlabeled unless a ``labels.csv`` (``file,label`` rows,
  paths relative to the folder, optional header) lies beside them or is given;
- one ``.png/.jpg/.jpeg`` file (unlabeled);
- ``.npy``: an array of inputs; ``.npz``: ``images`` (or ``x``/``inputs``) and ``labels`` (or
  ``y``/``targets``). uint8/uint16 arrays are pixels (N, H, W[, C]) and go through the
  preprocessing; float arrays are model inputs (N, C, H, W), used as they are.

Only the file list and the labels are held in memory; pixels are decoded batch by batch
(``batches``), so a folder of any size runs in bounded memory. ``screen`` decodes each image once
before that: what cannot be read, converted to the model's channels or preprocessed to its size is
named and left out (or, strict, stops the run), and what was converted is counted for one line.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from hwvit.dataset.preprocess import Preprocess, conversion
from hwvit.textfiles import count

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
ARRAY_KEYS = ("images", "x", "inputs")
LABEL_KEYS = ("labels", "y", "targets")


@dataclass
class ImageSet:
    """Images (paths, or rows of an array) and their labels as given (names or ints), not yet decoded."""

    origin: str  # the path given
    paths: list[Path] = field(default_factory=list)
    array: np.ndarray | None = None  # for .npy/.npz (memory-mapped for .npy)
    rows: np.ndarray | None = None  # indices into ``array``
    labels: list[str] | None = None  # raw labels: folder names, CSV values or array ints as text

    def __len__(self) -> int:
        return len(self.rows) if self.array is not None else len(self.paths)

    @property
    def kind(self) -> str:
        return "array" if self.array is not None else "images"

    def subset(self, index) -> ImageSet:
        index = np.asarray(index, dtype=np.int64)
        labels = [self.labels[i] for i in index] if self.labels is not None else None
        if self.array is not None:
            return replace(self, rows=self.rows[index], labels=labels)
        return replace(self, paths=[self.paths[i] for i in index], labels=labels)

    def describe(self) -> str:
        n = len(self)
        what = (
            f"{n} image{'s' if n != 1 else ''}"
            if self.array is None or self.array.dtype.kind == "u"
            else f"{n} input{'s' if n != 1 else ''}"
        )
        if self.labels is not None:
            what += f" in {len(set(self.labels))} classes"
        return f"{self.origin}: {what}"

    # Decoding ----------------------------------------------------------------------------------
    def item(self, i: int, pre: Preprocess, input_shape: tuple[int, ...]) -> np.ndarray:
        """Sample ``i`` as the model takes it (float32, ``input_shape``)."""
        if self.array is not None:
            return _array_item(self.array[self.rows[i]], pre, input_shape, f"{self.origin}[{int(self.rows[i])}]")
        return _image_item(_open(self.paths[i]), pre, input_shape, self.paths[i])

    def batches(self, pre: Preprocess, input_shape: tuple[int, ...], batch_size: int = 64) -> Iterator[torch.Tensor]:
        """Float32 tensors of at most ``batch_size`` samples, in order."""
        for start in range(0, len(self), batch_size):
            stop = min(start + batch_size, len(self))
            yield torch.from_numpy(np.stack([self.item(i, pre, input_shape) for i in range(start, stop)]))

    def tensor(self, pre: Preprocess, input_shape: tuple[int, ...]) -> torch.Tensor:
        """All samples in one tensor (for calibration sets, which are small)."""
        return torch.cat(list(self.batches(pre, input_shape)))

    def screen(self, pre: Preprocess, input_shape: tuple[int, ...], strict: bool = False) -> Screened:
        """Decode and preprocess each image once, as ``item`` does: one that fails is left out
        with a line naming it and why (``strict``: ValueError instead); what was converted to
        the model's channels is counted. An array is all one shape and dtype: its first sample
        is tried. ValueError when nothing is left."""
        if self.array is not None:
            if len(self):
                self.item(0, pre, input_shape)
            return Screened(self)
        kept, skipped, changes = [], [], Counter()
        for i, path in enumerate(self.paths):
            try:
                img = _open(path)
                _image_item(img, pre, input_shape, path)
                change = conversion(img, input_shape[0], str(path))
            except ValueError as exc:
                if strict:
                    raise
                skipped.append(str(exc))
                continue
            kept.append(i)
            if change is not None:
                changes[change] += 1
        if not kept:
            raise ValueError(
                f"{self.origin}: none of its {count(len(self), 'image')} can be used; the first: {skipped[0]}"
            )
        return Screened(self if len(kept) == len(self) else self.subset(kept), skipped, changes)


@dataclass
class Screened:
    """What ``ImageSet.screen`` found: the images that reach the model, the reasons the others do
    not (one line each, naming the file), and how many of each kind were converted."""

    images: ImageSet
    skipped: list[str] = field(default_factory=list)
    changes: Counter = field(default_factory=Counter)


def screen_notes(origin: str, found: list[Screened], channels: int) -> list[str]:
    """The lines that say, once for the images of ``origin`` (screened in one or more parts: the
    calibration and evaluation images of one folder), which were left out and why, and what was
    converted to the model's channels."""
    skipped = [line for s in found for line in s.skipped]
    total = sum(len(s.images) + len(s.skipped) for s in found)
    changes = sum((s.changes for s in found), Counter())
    lines = [f"skipped {line}" for line in skipped]
    if skipped:
        lines.append(
            f"{origin}: left out {len(skipped)} of {count(total, 'image')} (--strict stops at the first instead)"
        )
    if changes:
        what = ", ".join(f"{v} {k}" for k, v in sorted(changes.items(), key=lambda kv: (-kv[1], kv[0])))
        target = "RGB" if channels == 3 else "greyscale"
        lines.append(
            f"{origin}: converted {count(sum(changes.values()), 'image')} to {target} ({what}), as Hugging "
            "Face's image processors do"
        )
    return lines


def _image_item(img, pre: Preprocess, shape: tuple[int, ...], path: Path) -> np.ndarray:
    """A decoded image file as the model takes it (float32, ``shape``)."""
    if len(shape) != 3:
        raise ValueError(f"{path}: the model takes 1-D signals {shape}; give them as an .npy array")
    x = pre.image(img, shape[0], str(path))
    if x.shape != shape:
        raise ValueError(
            f"{path}: {x.shape[1]}x{x.shape[2]} after preprocessing ({pre.describe()}); the model "
            f"takes {shape[1]}x{shape[2]} (use --resize/--crop)"
        )
    return x


def _open(path: Path):
    from PIL import Image, UnidentifiedImageError

    try:
        img = Image.open(path)
        img.load()
    except (OSError, UnidentifiedImageError, Image.DecompressionBombError, SyntaxError, ValueError) as exc:
        text = str(exc).strip().splitlines()
        raise ValueError(f"{path}: cannot read image ({text[0] if text else type(exc).__name__})") from None
    return img


def _array_item(a: np.ndarray, pre: Preprocess, shape: tuple[int, ...], where: str) -> np.ndarray:
    if a.dtype.kind == "u":  # pixels: (H, W) or (H, W, C)
        from PIL import Image

        if len(shape) != 3:
            raise ValueError(f"{where}: integer pixels, but the model takes 1-D signals {shape}")
        if a.ndim == 3 and a.shape[-1] == 1:
            a = a[..., 0]
        if a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[-1] not in (3, 4)):
            raise ValueError(f"{where}: pixel array of shape {a.shape}; expected (H, W) or (H, W, 3)")
        if a.dtype != np.uint8 and a.ndim == 3:
            raise ValueError(f"{where}: colour pixels must be uint8, got {a.dtype}")
        img = Image.fromarray(np.ascontiguousarray(a))  # L, I;16, RGB or RGBA by shape and dtype
        x = pre.image(img, shape[0], where)
        if x.shape != shape:
            raise ValueError(
                f"{where}: {x.shape[1]}x{x.shape[2]} after preprocessing; the model takes {shape[1]}x{shape[2]}"
            )
        return x
    if a.dtype.kind not in "fi":
        raise ValueError(f"{where}: inputs must be numeric, got {a.dtype}")
    x = np.asarray(a, dtype=np.float32)
    if len(shape) == 2 and x.ndim == 1 and shape[1] == 1:
        x = x[:, None]  # a (L,) signal for a one-channel 1-D model
    if x.shape != shape:
        if len(shape) == 3 and x.ndim == 3 and x.shape[1:] == shape[1:]:
            raise ValueError(f"{where}: {x.shape[0]} channels; the model takes {shape[0]}")
        raise ValueError(f"{where}: input of shape {x.shape}; the model takes {shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"{where}: inputs contain NaN or Inf")
    return x


# Opening -----------------------------------------------------------------------------------------
def open_images(path: str | Path, labels_csv: str | Path | None = None) -> ImageSet:
    """An ImageSet from a folder, an image file or an .npy/.npz array (ValueError with one line otherwise)."""
    path = Path(path)
    if path.is_dir():
        images = _folder(path)
    elif not path.is_file():
        raise ValueError(f"{path}: no such file or folder")
    elif path.suffix.lower() in IMAGE_SUFFIXES:
        images = ImageSet(str(path), paths=[path])
    elif path.suffix.lower() in (".npy", ".npz"):
        images = _arrays(path)
    else:
        raise ValueError(f"{path}: not a folder, a PNG/JPEG image or an .npy/.npz array")
    if labels_csv is not None:
        if images.array is not None:
            raise ValueError(f"{labels_csv}: a labels CSV goes with image files, not with an array")
        images.labels = _csv_labels(Path(labels_csv), images.paths, path if path.is_dir() else path.parent)
    return images


def _folder(root: Path) -> ImageSet:
    def is_image(p: Path) -> bool:
        return p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES and not p.name.startswith(".")

    top = sorted(p for p in root.iterdir() if is_image(p))
    classes = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if classes and not top:
        paths, labels = [], []
        for d in classes:
            files = sorted(p for p in d.rglob("*") if is_image(p))
            if not files:
                raise ValueError(f"{d}: class folder holds no PNG or JPEG images")
            paths += files
            labels += [d.name] * len(files)
        return ImageSet(str(root), paths=paths, labels=labels)
    if not top:
        raise ValueError(f"{root}: no PNG or JPEG images (in it or in class sub-folders)")
    images = ImageSet(str(root), paths=top)
    if (root / "labels.csv").is_file():
        images.labels = _csv_labels(root / "labels.csv", top, root)
    return images


def _csv_labels(csv_path: Path, paths: list[Path], root: Path) -> list[str]:
    try:
        with open(csv_path, newline="") as fh:
            rows = [r for r in csv.reader(fh) if r and any(c.strip() for c in r)]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"{csv_path}: cannot read labels CSV ({type(exc).__name__})") from None
    if rows and [c.strip().lower() for c in rows[0][:2]] in (
        ["file", "label"],
        ["filename", "label"],
        ["path", "label"],
        ["image", "label"],
    ):
        rows = rows[1:]
    table: dict[str, str] = {}
    for n, row in enumerate(rows, 1):
        if len(row) < 2:
            raise ValueError(f"{csv_path}: row {n} {row!r}: expected file,label")
        table[Path(row[0].strip()).as_posix()] = row[1].strip()
    labels, missing = [], []
    for p in paths:
        key = p.relative_to(root).as_posix() if p.is_relative_to(root) else p.name
        label = table.get(key, table.get(p.name))
        if label is None:
            missing.append(key)
        labels.append(label)
    if missing:
        raise ValueError(f"{csv_path}: no label for {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''}")
    return labels


def _arrays(path: Path) -> ImageSet:
    try:
        if path.suffix.lower() == ".npy":
            arr, labels = np.load(path, mmap_mode="r", allow_pickle=False), None
        else:
            with np.load(path, allow_pickle=False) as z:
                key = next((k for k in ARRAY_KEYS if k in z.files), None)
                if key is None:
                    raise ValueError(f"{path}: no array named {', '.join(ARRAY_KEYS)} (found {', '.join(z.files)})")
                arr = z[key]
                lkey = next((k for k in LABEL_KEYS if k in z.files), None)
                labels = z[lkey] if lkey else None
    except ValueError as exc:
        if str(exc).startswith(str(path)):
            raise
        raise ValueError(f"{path}: not a readable numpy array ({type(exc).__name__})") from None
    except OSError as exc:
        raise ValueError(f"{path}: not a readable numpy array ({type(exc).__name__})") from None
    if arr.ndim < 2 or len(arr) == 0:
        raise ValueError(f"{path}: expected a batch of inputs (N, ...), got shape {arr.shape}")
    if labels is not None:
        labels = np.asarray(labels)
        if labels.shape != (len(arr),) or labels.dtype.kind not in "iu":
            raise ValueError(f"{path}: labels must be {len(arr)} integers, got {labels.dtype} {labels.shape}")
        labels = [str(int(v)) for v in labels]
    return ImageSet(str(path), array=arr, rows=np.arange(len(arr)), labels=labels)


__all__ = ["IMAGE_SUFFIXES", "ImageSet", "Screened", "open_images", "screen_notes"]
