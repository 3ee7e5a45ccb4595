"""Image preprocessing with HuggingFace image-processor semantics: resize, center crop, rescale, normalize.

The order and arithmetic follow transformers' ViTImageProcessor / BaseImageProcessor:

1. resize with PIL (``Image.resize((w, h), resample)``): to an exact ``(h, w)``, or the shortest
   edge to ``n`` with the long edge ``int(n * long / short)`` (aspect kept);
2. center crop to ``(h, w)``: top ``(H - h) // 2``, left ``(W - w) // 2``;
3. rescale: pixels (float64) times ``rescale`` (1/255 for 8-bit images), then float32;
4. normalize: ``(x - mean) / std`` per channel, in float32;
5. layout (C, H, W), channels in RGB order.

``from_hf`` reads a ``preprocessor_config.json``; ``from_flags`` builds the same from command-line
values. Images come to the model's channels as transformers' ``convert_to_rgb`` brings them to RGB:
a transparent image is composited onto white, then PIL converts it (greyscale, palette, CMYK, ...).
A one-channel model gets PIL's luma ("L") of a colour image. An image whose pixels are wider than 8
bits (16-bit or float greyscale) cannot be converted without clipping them: an error naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# PIL resampling filters by the integer HF stores (PIL.Image.Resampling values).
RESAMPLE_NAMES = {0: "nearest", 1: "lanczos", 2: "bilinear", 3: "bicubic", 4: "box", 5: "hamming"}
# PIL modes a one-channel model reads as they are: 8-bit greyscale and the wider ones (values as
# decoded, rescaled like any other: --rescale), which RGB cannot hold without clipping.
ONE_CHANNEL = ("L", "I", "I;16", "I;16B", "I;16L", "F")
WIDE = ("I", "I;16", "I;16B", "I;16L", "F")


@dataclass(frozen=True)
class Preprocess:
    """What happens to one decoded image before the model sees it."""

    size: tuple[int, int] | None = None  # exact (h, w) resize
    shortest_edge: int | None = None  # or: shortest edge to this, aspect kept
    crop: tuple[int, int] | None = None  # center crop (h, w)
    rescale: float | None = 1.0 / 255.0
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    resample: int = 2  # bilinear, HF's default
    origin: str = "defaults"  # where the settings came from, for the printed line

    def __post_init__(self) -> None:
        if self.size is not None and self.shortest_edge is not None:
            raise ValueError("resize to an exact size or by the shortest edge, not both")
        for name in ("size", "crop"):
            v = getattr(self, name)
            if v is not None and (len(v) != 2 or min(v) < 1):
                raise ValueError(f"preprocessing: bad {name} {v!r}")
        if self.resample not in RESAMPLE_NAMES:
            raise ValueError(f"preprocessing: unknown resample filter {self.resample!r}")
        if (self.mean is None) != (self.std is None):
            raise ValueError("preprocessing: give both mean and std, or neither")
        if self.std is not None and any(s <= 0 for s in self.std):
            raise ValueError(f"preprocessing: std must be > 0, got {list(self.std)}")

    def describe(self) -> str:
        """One line, e.g. 'resize 224x224 bilinear, rescale 1/255, mean 0.5,0.5,0.5 std 0.5,0.5,0.5'."""
        parts = []
        if self.size:
            parts.append(f"resize {self.size[0]}x{self.size[1]} {RESAMPLE_NAMES[self.resample]}")
        elif self.shortest_edge:
            parts.append(f"resize shortest edge {self.shortest_edge} {RESAMPLE_NAMES[self.resample]}")
        if self.crop:
            parts.append(f"center crop {self.crop[0]}x{self.crop[1]}")
        if self.rescale is not None:
            inv = 1.0 / self.rescale
            parts.append(f"rescale 1/{inv:g}" if abs(inv - round(inv)) < 1e-9 else f"rescale {self.rescale:g}")
        if self.mean is not None:
            parts.append(f"mean {','.join(f'{m:g}' for m in self.mean)} std {','.join(f'{s:g}' for s in self.std)}")
        return f"{', '.join(parts) or 'none'} ({self.origin})"

    def with_model_size(self, side: int) -> Preprocess:
        """Without a resize or crop of its own, resize to the model's ``side`` x ``side``."""
        if self.size or self.shortest_edge or self.crop:
            return self
        return Preprocess(
            size=(side, side),
            crop=None,
            rescale=self.rescale,
            mean=self.mean,
            std=self.std,
            resample=self.resample,
            origin=self.origin,
        )

    # Applying ------------------------------------------------------------------------------------
    def resized(self, w: int, h: int) -> tuple[int, int]:
        """(h, w) of a ``w`` x ``h`` image after the resize (before the crop)."""
        if self.size:
            return self.size
        if self.shortest_edge:
            short, long = (w, h) if w <= h else (h, w)
            new_short, new_long = self.shortest_edge, int(self.shortest_edge * long / short)
            return (new_long, new_short) if w <= h else (new_short, new_long)
        return h, w

    def image(self, img, in_chans: int, where: str) -> np.ndarray:
        """A PIL image -> float32 (C, H, W)."""
        img = to_channels(img, in_chans, where)
        new_h, new_w = self.resized(*img.size)
        if (new_w, new_h) != img.size:
            img = img.resize((new_w, new_h), resample=self.resample)
        arr = np.asarray(img)
        if arr.ndim == 2:
            arr = arr[:, :, None]
        return self.array(arr, where)

    def array(self, arr: np.ndarray, where: str) -> np.ndarray:
        """(H, W, C) pixels, already resized -> center crop, rescale, normalize -> float32 (C, H, W)."""
        if self.crop:
            ch, cw = self.crop
            h, w = arr.shape[:2]
            if ch > h or cw > w:
                raise ValueError(f"{where}: center crop {ch}x{cw} is larger than the {h}x{w} image")
            top, left = (h - ch) // 2, (w - cw) // 2
            arr = arr[top : top + ch, left : left + cw]
        x = arr.astype(np.float64) * self.rescale if self.rescale is not None else arr.astype(np.float64)
        x = x.astype(np.float32)
        if self.mean is not None:
            c = x.shape[-1]
            mean, std = _per_channel(self.mean, c, "mean", where), _per_channel(self.std, c, "std", where)
            x = (x - mean) / std
        return np.ascontiguousarray(x.transpose(2, 0, 1))


def _per_channel(values: tuple[float, ...], c: int, name: str, where: str) -> np.ndarray:
    if len(values) == 1:
        values = values * c
    if len(values) != c:
        raise ValueError(f"{where}: {name} has {len(values)} values for {c} channels")
    return np.asarray(values, dtype=np.float32)


def _transparent(img) -> bool:
    return "A" in img.getbands() or img.info.get("transparency") is not None


def conversion(img, in_chans: int, where: str) -> str | None:
    """What bringing ``img`` to ``in_chans`` channels does to it, in a word for the one line that
    says so ("greyscale", "palette", "transparent", "colour", "mode CMYK"); None: nothing, it is
    in the model's mode already. ValueError naming the image when it cannot be brought there."""
    mode = img.mode
    if in_chans not in (1, 3):
        raise ValueError(f"{where}: the model takes {in_chans} channels; images give 1 or 3")
    if in_chans == 1 and mode in ONE_CHANNEL:
        return None
    if in_chans == 3 and mode == "RGB" and not _transparent(img):
        return None
    if mode in WIDE:
        raise ValueError(
            f"{where}: {mode} greyscale pixels are wider than 8 bits; converting them to RGB would clip "
            "them (convert the image to 8 bits yourself)"
        )
    if _transparent(img):
        return "transparent"
    if in_chans == 1:
        return "colour" if mode != "1" else "black-and-white"
    return {"1": "black-and-white", "L": "greyscale", "P": "palette"}.get(mode, f"mode {mode}")


def to_channels(img, in_chans: int, where: str):
    """``img`` in the model's mode (L or RGB; a wider greyscale as it is for one channel), converted
    as ``conversion`` says: transparency composited onto white first, as transformers does."""
    change = conversion(img, in_chans, where)
    if change is None:
        return img
    if change == "transparent":
        from PIL import Image

        rgba = img.convert("RGBA")
        img = Image.alpha_composite(Image.new("RGBA", img.size, (255, 255, 255, 255)), rgba)
    return img.convert("L" if in_chans == 1 else "RGB")


# Constructors ------------------------------------------------------------------------------------
def _hw(value: Any, where: str) -> tuple[int, int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, value)
    if isinstance(value, dict) and "height" in value and "width" in value:
        return (int(value["height"]), int(value["width"]))
    raise ValueError(f"{where}: size {value!r} is not an int or {{height, width}}")


def from_hf(data: dict, where: str = "preprocessor_config.json") -> Preprocess:
    """A Preprocess from a HF image processor's JSON (ViTImageProcessor, DeiT, ConvNext, CLIP, ...)."""
    size = shortest = crop = None
    if data.get("do_resize", True) and "size" in data:
        value = data["size"]
        if isinstance(value, dict) and "shortest_edge" in value:
            if value.get("longest_edge") is not None:
                raise ValueError(f"{where}: size with longest_edge is not supported")
            shortest = int(value["shortest_edge"])
        else:
            size = _hw(value, where)
    if data.get("do_center_crop", False) and data.get("crop_size") is not None:
        crop = _hw(data["crop_size"], where)
    rescale = float(data.get("rescale_factor", 1 / 255)) if data.get("do_rescale", True) else None
    mean = std = None
    if data.get("do_normalize", True) and data.get("image_mean") is not None:
        mean, std = data["image_mean"], data.get("image_std")
        mean = tuple(float(v) for v in (mean if isinstance(mean, (list, tuple)) else [mean]))
        std = tuple(float(v) for v in (std if isinstance(std, (list, tuple)) else [std]))
    resample = data.get("resample", 2)
    return Preprocess(
        size=size,
        shortest_edge=shortest,
        crop=crop,
        rescale=rescale,
        mean=mean,
        std=std,
        resample=int(resample) if resample is not None else 2,
        origin=where,
    )


def parse_size(text: str | None, name: str) -> tuple[int, int] | int | None:
    """'N' -> N, 'HxW' -> (H, W); ValueError naming the option otherwise."""
    if text is None:
        return None
    try:
        parts = [int(p) for p in str(text).lower().split("x")]
    except ValueError:
        raise ValueError(f"{name} {text!r}: expected N or HxW") from None
    if len(parts) not in (1, 2) or min(parts) < 1:
        raise ValueError(f"{name} {text!r}: expected N or HxW")
    return parts[0] if len(parts) == 1 else (parts[0], parts[1])


def parse_floats(text: str | None, name: str) -> tuple[float, ...] | None:
    if text is None:
        return None
    try:
        return tuple(float(v) for v in str(text).split(",") if v.strip())
    except ValueError:
        raise ValueError(f"{name} {text!r}: expected comma-separated numbers") from None


def from_flags(
    resize: str | None = None,
    crop: str | None = None,
    mean: str | None = None,
    std: str | None = None,
    rescale: float | None = None,
    base: Preprocess | None = None,
) -> Preprocess:
    """Command-line values over ``base`` (a model's preprocessor_config.json) or the defaults.

    ``resize``: 'N' (shortest edge to N) or 'HxW' (exact); ``crop``: 'N' or 'HxW'; ``mean``/``std``:
    one value or one per channel; ``rescale``: factor applied to raw pixel values.
    """
    base = base or Preprocess()
    given = any(v is not None for v in (resize, crop, mean, std, rescale))
    if not given:
        return base
    r = parse_size(resize, "--resize")
    c = parse_size(crop, "--crop")
    m, s = parse_floats(mean, "--mean"), parse_floats(std, "--std")
    if (m is None) != (s is None) and base.mean is None:
        m = m if m is not None else (0.0,)
        s = s if s is not None else (1.0,)
    size, shortest = base.size, base.shortest_edge
    if r is not None:
        size, shortest = (r, None) if isinstance(r, tuple) else (None, r)
    crop_hw = base.crop if c is None else (c if isinstance(c, tuple) else (c, c))
    return Preprocess(
        size=size,
        shortest_edge=shortest,
        crop=crop_hw,
        rescale=base.rescale if rescale is None else float(rescale),
        mean=base.mean if m is None else m,
        std=base.std if s is None else s,
        resample=base.resample,
        origin="flags" if base.origin == "defaults" else f"{base.origin} + flags",
    )


__all__ = [
    "Preprocess",
    "RESAMPLE_NAMES",
    "conversion",
    "from_flags",
    "from_hf",
    "parse_floats",
    "parse_size",
    "to_channels",
]


# timm's pretrained_cfg interpolation names -> PIL filters.
TIMM_INTERPOLATION = {"nearest": 0, "lanczos": 1, "bilinear": 2, "bicubic": 3, "box": 4, "hamming": 5}


def from_timm(cfg: dict, where: str = "config.json pretrained_cfg") -> Preprocess:
    """timm's eval transform from a hub config's ``pretrained_cfg``: resize the shortest edge to
    floor(size / crop_pct), center crop size x size, rescale 1/255, mean/std (crop_mode 'center')."""
    size = cfg.get("input_size") or cfg.get("test_input_size")
    if not isinstance(size, (list, tuple)) or len(size) != 3:
        raise ValueError(f"{where}: input_size {size!r} is not [C, H, W]")
    h, w = int(size[1]), int(size[2])
    if cfg.get("crop_mode", "center") != "center":
        raise ValueError(f"{where}: crop_mode {cfg.get('crop_mode')!r} is not supported (only 'center')")
    crop_pct = float(cfg.get("crop_pct") or 0.875)
    mean, std = cfg.get("mean"), cfg.get("std")
    return Preprocess(
        shortest_edge=int(h / crop_pct) if h == w else None,
        size=None if h == w else (int(h / crop_pct), int(w / crop_pct)),
        crop=(h, w),
        mean=tuple(map(float, mean)) if mean else None,
        std=tuple(map(float, std)) if std else None,
        resample=TIMM_INTERPOLATION.get(str(cfg.get("interpolation", "bicubic")), 3),
        origin=where,
    )


__all__ += ["from_timm"]
