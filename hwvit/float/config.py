"""ViTConfig: the one frozen description of every float ViT hwvit handles, and its YAML presets.

A config says what the weights cannot: how tokens are made (conv / SimpleViT / per-sample 1-D
embedding), how attention is scaled, the LayerNorm eps, how the sequence is pooled. The presets
in ``hwvit/presets/*.yaml`` are plain data; ``load_config`` reads the same format from any path.
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, fields
from importlib import resources
from pathlib import Path
from typing import Any

from hwvit.formats import NamedMode
from hwvit.textfiles import parse_yaml, read_yaml


# The string fields' values, one Enum each (members equal the strings presets and checkpoints
# hold, so a config keeps plain strings); the first member is the usual choice.
class Embed(NamedMode):
    CONV = "conv"  # Conv2d patch embedding (HF, timm)
    SIMPLE = "simple"  # LN -> Linear -> LN on (p1 p2 c) patches (SimpleViT)
    LINEAR1D = "linear1d"  # Linear -> LN -> GELU per sample group (ECG)


class Pool(NamedMode):
    CLS = "cls"  # token 0
    MEAN = "mean"  # mean over all tokens


class Pos(NamedMode):
    LEARNED = "learned"
    SINCOS2D = "sincos2d"
    NONE = "none"


class Qkv(NamedMode):
    FUSED = "fused"
    SEPARATE = "separate"


class AttnScale(NamedMode):
    STANDARD = "standard"
    POST_SOFTMAX_SQRT_DIM = "post_softmax_sqrt_dim"


class HeadPre(NamedMode):
    NONE = "none"
    NORM = "norm"
    LINEAR_NORM = "linear_norm"


CHOICES: dict[str, tuple[str, ...]] = {
    "embed": Embed.values(),
    "pool": Pool.values(),
    "pos": Pos.values(),
    "qkv": Qkv.values(),
    "attn_scale": AttnScale.values(),
    "head_pre": HeadPre.values(),
}


@dataclass(frozen=True, kw_only=True)
class ViTConfig:
    """Shape and arithmetic choices of a pre-norm ViT (see docs in the field comments)."""

    name: str
    image_size: int  # side of a square image; for ndim=1 the signal length (samples)
    patch_size: int  # side of a square patch; for ndim=1 samples per token (ECG: 1)
    in_chans: int
    num_classes: int  # 0: no head, forward returns the pooled features
    dim: int  # residual stream width D
    depth: int
    heads: int
    mlp_dim: int
    embed: str  # conv: Conv2d (HF/timm); simple: LN -> Linear -> LN (SimpleViT); linear1d: Linear -> LN -> GELU (ECG)
    pool: str  # cls: token 0; mean: mean over ALL tokens (incl. a cls token, as the ECG model does)
    pos: str  # learned (1, T, D) parameter; sincos2d fixed buffer (SimpleViT); none
    qkv: str  # fused: one Linear D -> 3*H*hd laid out (3, H, hd) (timm, SimpleViT); separate: q, k, v
    qkv_bias: bool
    proj_bias: bool
    mlp_bias: bool
    norm_eps: float  # 1e-12 HF, 1e-6 timm, 1e-5 torch default (SimpleViT, ECG)
    final_norm: bool  # LayerNorm after the last block, before pooling
    attn_scale: str  # standard: logits * hd^-0.5; post_softmax_sqrt_dim: probs / sqrt(D) (ECG, trained so)
    # Optional fields; the defaults are what every model but the exceptions named here does.
    ndim: int = 2  # 2: images (B, C, H, W); 1: signals (B, L, C) or (B, L) when in_chans == 1
    head_dim: int | None = None  # None: dim // heads (SimpleViT's dim_head may differ)
    cls_token: bool | None = None  # None: a cls token iff pool == "cls" (the ECG model has one AND mean-pools)
    pos_every_layer: bool = False  # ECG: the position embedding is added again before every block
    head_pre: str = "none"  # after pooling: norm (timm fc_norm, old SimpleViT head) or linear_norm (ECG)

    def __post_init__(self) -> None:
        if self.head_dim is None and isinstance(self.heads, int) and self.heads > 0:
            object.__setattr__(self, "head_dim", self.dim // self.heads)
        if self.cls_token is None:
            object.__setattr__(self, "cls_token", self.pool == Pool.CLS)
        self._validate()

    def _validate(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "name":
                ok = isinstance(value, str) and value != ""
            elif f.name == "norm_eps":
                ok = isinstance(value, float) and 0.0 < value < 1.0
            elif f.name in CHOICES:
                ok = value in CHOICES[f.name]
            elif f.name in ("qkv_bias", "proj_bias", "mlp_bias", "final_norm", "cls_token", "pos_every_layer"):
                ok = isinstance(value, bool)
            elif f.name == "num_classes":
                ok = type(value) is int and value >= 0
            else:
                ok = type(value) is int and value > 0
            if not ok:
                allowed = f" (one of {', '.join(CHOICES[f.name])})" if f.name in CHOICES else ""
                raise ValueError(f"config {self.name!r}: bad {f.name}={value!r}{allowed}")
        if self.ndim not in (1, 2):
            raise ValueError(f"config {self.name!r}: ndim must be 1 or 2, got {self.ndim}")
        if self.image_size % self.patch_size:
            raise ValueError(
                f"config {self.name!r}: image_size {self.image_size} is not a multiple of patch_size {self.patch_size}"
            )
        if (self.embed == Embed.LINEAR1D) != (self.ndim == 1):
            raise ValueError(f"config {self.name!r}: embed 'linear1d' goes with ndim 1 and only with it")
        if self.pool == Pool.CLS and not self.cls_token:
            raise ValueError(f"config {self.name!r}: pool 'cls' needs a cls token")
        if self.pos == Pos.SINCOS2D and (self.ndim != 2 or self.dim % 4):
            raise ValueError(f"config {self.name!r}: sincos2d needs images and dim % 4 == 0 (dim={self.dim})")
        if self.pos_every_layer and self.pos == Pos.NONE:
            raise ValueError(f"config {self.name!r}: pos_every_layer needs a position embedding")

    # Derived sizes ---------------------------------------------------------------------------
    @property
    def grid(self) -> int:
        """Patches along one side (ndim=2) or along the signal (ndim=1)."""
        return self.image_size // self.patch_size

    @property
    def num_patches(self) -> int:
        return self.grid**self.ndim

    @property
    def num_tokens(self) -> int:
        """Sequence length T, the cls slot included."""
        return self.num_patches + (1 if self.cls_token else 0)

    @property
    def patch_dim(self) -> int:
        """Inputs per token (the embedding's fan-in)."""
        return self.in_chans * self.patch_size**self.ndim

    @property
    def inner_dim(self) -> int:
        """Width of q, k, v and of the attention context: heads * head_dim."""
        return self.heads * self.head_dim

    @property
    def input_shape(self) -> tuple[int, ...]:
        """One sample's shape as the model takes it (batch dimension not included)."""
        if self.ndim == 1:
            return (self.image_size, self.in_chans)
        return (self.in_chans, self.image_size, self.image_size)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "config") -> ViTConfig:
        """Build from a mapping; unknown or missing fields give one ValueError naming them."""
        if not isinstance(data, dict):
            raise ValueError(f"{source}: expected a mapping of config fields, got {type(data).__name__}")
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(map(str, data)) - set(known))
        missing = sorted(n for n, f in known.items() if f.default is MISSING and n not in data)
        problems = []
        if unknown:
            problems.append(f"unknown fields {', '.join(unknown)}")
        if missing:
            problems.append(f"missing fields {', '.join(missing)}")
        if problems:
            raise ValueError(f"{source}: {'; '.join(problems)}")
        values = dict(data)
        eps = values.get("norm_eps")
        # YAML 1.1 reads "1e-12" (no dot) as a string and integers as int; accept both spellings.
        if isinstance(eps, (str, int)) and not isinstance(eps, bool):
            try:
                values["norm_eps"] = float(eps)
            except ValueError:
                raise ValueError(f"{source}: norm_eps {eps!r} is not a number") from None
        return cls(**values)

    def replace(self, **changes: Any) -> ViTConfig:
        data = self.to_dict()
        data.update(changes)
        return ViTConfig.from_dict(data, source=self.name)


def _preset_dir():
    return resources.files("hwvit").joinpath("presets")


def list_presets() -> list[str]:
    """Names of the shipped presets (hwvit/presets/*.yaml), sorted."""
    return sorted(p.name[: -len(".yaml")] for p in _preset_dir().iterdir() if p.name.endswith(".yaml"))


def load_preset(name: str) -> ViTConfig:
    """A shipped preset by name; an unknown name gives a ValueError listing the presets."""
    names = list_presets()
    if name not in names:
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(names)}")
    text = _preset_dir().joinpath(f"{name}.yaml").read_text()  # a package resource, maybe not a file
    return ViTConfig.from_dict(parse_yaml(text, f"preset {name}"), source=f"preset {name}")


def load_config(path: str | Path) -> ViTConfig:
    """A config YAML file (same fields as the presets); ValueError naming the file on any fault."""
    return ViTConfig.from_dict(read_yaml(path, what="config"), source=str(path))


def sincos2d_table(grid: int, dim: int, temperature: float = 10000.0):
    """SimpleViT's fixed 2-D position table (grid*grid, dim): [sin x, cos x, sin y, cos y], float32.

    Frequencies are temperature^-(j / (dim/4 - 1)), j = 0 .. dim/4 - 1, with x the column and
    y the row of the patch (row-major patch order), as lucidrains' posemb_sincos_2d.

    Every entry is the exact value rounded to the nearest float32, so the table (recomputed from
    the config, never saved) is the same on every machine; torch's float32 sin and cos are not
    (ATen's default and AVX2 kernels differ in the last bit). The values are computed in float64,
    with an error below (grid + 1) * 2^-50 (the angle's, at most grid * 4 ulps, and the sine's);
    those within (grid + 1) * 2^-44 of a float32 rounding boundary again with mpmath.
    """
    import numpy as np
    import torch

    quarter = dim // 4
    assert dim % 4 == 0, f"sincos2d needs dim % 4 == 0, got {dim}"
    # quarter == 1 would divide by zero in the original; a single frequency of 1 is the limit.
    steps = max(quarter - 1, 1)
    omega = float(temperature) ** -(np.arange(quarter) / steps)  # (quarter,)
    row, col = np.divmod(np.arange(grid * grid), grid)  # row-major patches: y the row, x the column
    parts = [(col, np.sin), (col, np.cos), (row, np.sin), (row, np.cos)]
    table = np.concatenate([fn(pos[:, None] * omega[None, :]) for pos, fn in parts], axis=1)
    near = _near_float32_boundary(table, (grid + 1) * 2.0**-44)
    at_zero = np.concatenate([np.repeat((pos == 0)[:, None], quarter, axis=1) for pos, _ in parts], axis=1)
    near = near[~at_zero.flat[near]]  # sin 0 = 0 and cos 0 = 1 are exact
    if near.size:
        import mpmath

        for i in near:
            p, c = divmod(int(i), dim)
            pos, fn = parts[c // quarter]
            with mpmath.workprec(256):
                angle = int(pos[p]) * mpmath.power(float(temperature), -mpmath.mpf(c % quarter) / steps)
                exact = (mpmath.sin if fn is np.sin else mpmath.cos)(angle)
            with mpmath.workprec(24):  # float32's significand, rounded to nearest
                table.flat[i] = float(+exact)
    return torch.from_numpy(table.astype(np.float32))


def _near_float32_boundary(values, tol: float):
    """Flat indices of the float64 ``values`` within ``tol`` of a point halfway between two float32s."""
    import numpy as np

    v32 = values.astype(np.float32)
    up = np.nextafter(v32, np.float32(np.inf)).astype(np.float64)
    down = np.nextafter(v32, np.float32(-np.inf)).astype(np.float64)
    mid = v32.astype(np.float64)
    dist = np.minimum(np.abs(values - (mid + up) / 2), np.abs(values - (mid + down) / 2))
    return np.flatnonzero(dist < tol)


__all__ = ["CHOICES", "ViTConfig", "list_presets", "load_config", "load_preset", "sincos2d_table"]
