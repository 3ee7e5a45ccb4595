"""Quantization recipe: the model-wide knobs plus per-layer overrides by glob (hls4ml-style precision).

A recipe is a YAML file::

    default:                     # any QuantConfig field, plus weight_bits and weights
      act_bits: 8
      weight_bits: 8             # 2..8, stored int8: the GEMM and the RTL are unchanged
      weights: per_channel       # or per_tensor
      calibration: minmax        # minmax, percentile, mse, entropy
    layers:                      # glob over layer paths; later entries win
      "layers.*.mlp.fc1": {weight_bits: 4}
      "layers.3.mlp.gelu": {act_bits: 6}   # that layer's output activations: 6 bits in int8
      "layers.0.attn.softmax": {softmax_bits: 6, exp_entries: 128}
      "layers.2.*": {calibration: mse}
      "layers.*.attn.softmax": {softmax: ibert}   # a block's arithmetic (hwvit.variants)

Paths: weight keys match a linear layer's path (``embed.proj``, ``layers.0.attn.qkv`` or
``.q``/``.k``/``.v``, ``layers.0.attn.proj``, ``layers.0.mlp.fc1``, ``pre_head.fc``, ``head``);
``calibration``/``percentile`` match an activation point (``layers.0.attn.scores``, ``logits``,
...); ``softmax_bits``/``exp_entries`` match ``layers.<i>.attn.softmax``. A block family's key (``requant``,
``gelu``, ``softmax``, ``layernorm``) names its arithmetic (hwvit.variants; in ``default`` for every
such block): ``requant`` matches a linear layer's path and attention's ``layers.<i>.attn.scores``
and ``.context``, ``gelu`` ``layers.<i>.mlp.gelu``, ``layernorm`` ``layers.<i>.norm1``/``norm2``
and ``norm``. ``act_bits`` matches an
activation point and sets the width of the tensor the layer there produces (its requant saturates
to that width; the tensor stays int8 for its consumers); a linear layer's path names its output
too (``head`` = ``logits``; a fused ``qkv`` = its ``q``, ``k``, ``v``). docs/recipes.md states
every rule. Every glob must match something, so a typo is an error rather than a silent no-op.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from hwvit.formats import INT8, OUT_BITS, NamedMode
from hwvit.quant.config import QuantConfig
from hwvit.textfiles import read_yaml
from hwvit.variants.base import FAMILIES

WEIGHT_BITS = (2, INT8.bits)  # weights are stored int8: narrower widths use part of that range


class WeightScales(NamedMode):
    """How a linear layer's weights are scaled (a recipe's ``weights``)."""

    PER_CHANNEL = "per_channel"  # one scale per output channel: the int8 design of docs/arithmetic.md
    PER_TENSOR = "per_tensor"  # one scale for the whole matrix


WEIGHT_MODES = WeightScales.values()
ACT_BITS = (OUT_BITS[0], INT8.bits)  # the requant saturates to >= 2 bits; GEMM operands are int8
VARIANT_KEYS = FAMILIES  # a block family's arithmetic (hwvit.variants)
LAYER_KEYS = (
    "act_bits",
    "weight_bits",
    "weights",
    "calibration",
    "percentile",
    "softmax_bits",
    "exp_entries",
    *VARIANT_KEYS,
)
DEFAULT_KEYS = tuple(f.name for f in fields(QuantConfig)) + ("weight_bits", "weights")


@dataclass(frozen=True)
class Recipe:
    base: QuantConfig = field(default_factory=QuantConfig)
    weight_bits: int = 8
    weights: str = WeightScales.PER_CHANNEL.value  # kept as written: to_dict records it
    layers: tuple[tuple[str, dict], ...] = ()  # (glob, overrides) in file order
    source: str | None = None  # the file it came from

    def __post_init__(self) -> None:
        _check_weight(self.weight_bits, self.weights, "default")
        _check_act(self.base.act_bits, "default")
        for glob, over in self.layers:
            unknown = sorted(set(over) - set(LAYER_KEYS))
            if unknown:
                raise ValueError(f"layers.{glob!r}: unknown key {unknown[0]!r}; known: {', '.join(LAYER_KEYS)}")
            if "act_bits" in over:
                _check_act(over["act_bits"], f"layers.{glob!r}")
            _check_weight(
                over.get("weight_bits", self.weight_bits), over.get("weights", self.weights), f"layers.{glob!r}"
            )

    def _get(self, path: str, key: str, default: Any) -> Any:
        value = default
        for glob, over in self.layers:
            if key in over and fnmatch.fnmatchcase(path, glob):
                value = over[key]
        return value

    def matches(self, path: str, keys: tuple[str, ...]) -> set[str]:
        return {g for g, over in self.layers if set(over) & set(keys) and fnmatch.fnmatchcase(path, g)}

    def act(self, names: tuple[str, ...]) -> tuple[int, set[str]]:
        """Width of the activation known by ``names`` (a point and its layer's path): the last
        ``act_bits`` entry in file order whose glob matches any of them, else the default; and the
        globs that matched."""
        bits, used = self.base.act_bits, set()
        for glob, over in self.layers:
            if "act_bits" in over and any(fnmatch.fnmatchcase(n, glob) for n in names):
                bits = over["act_bits"]
                used.add(glob)
        return bits, used

    def weight(self, path: str) -> tuple[int, bool]:
        """(weight bits, per_tensor) of the linear layer at ``path``."""
        per_tensor = self._get(path, "weights", self.weights) == WeightScales.PER_TENSOR
        return self._get(path, "weight_bits", self.weight_bits), per_tensor

    def calibration(self, path: str) -> tuple[str, float]:
        return self._get(path, "calibration", self.base.calibration), self._get(
            path, "percentile", self.base.percentile
        )

    def variant(self, path: str, family: str) -> str:
        """The arithmetic of the ``family`` block at ``path`` (hwvit.variants): the last layers entry
        naming one whose glob matches, else the default's."""
        return self._get(path, family, getattr(self.base, family))

    def softmax(self, path: str) -> tuple[int, int]:
        return self._get(path, "softmax_bits", self.base.softmax_bits), self._get(
            path, "exp_entries", self.base.exp_entries
        )

    def to_dict(self) -> dict:
        """What reports and vector manifests record (plain YAML/JSON values)."""
        default = {**self.base.to_dict(), "weight_bits": self.weight_bits, "weights": self.weights}
        return {"default": default, "layers": {g: dict(o) for g, o in self.layers}, "source": self.source}

    def is_plain(self) -> bool:
        """True when the recipe is the plain int8 design with no overrides."""
        return not self.layers and self.weight_bits == 8 and self.weights == WeightScales.PER_CHANNEL


def _check_act(bits: Any, where: str) -> None:
    lo, hi = ACT_BITS
    if isinstance(bits, bool) or not isinstance(bits, int) or not lo <= bits <= hi:
        raise ValueError(
            f"{where}: act_bits {bits!r} unsupported; the RTL requant and GEMM take [{lo}, {hi}]-bit activations"
        )


def _check_weight(bits: Any, mode: Any, where: str) -> None:
    lo, hi = WEIGHT_BITS
    if isinstance(bits, bool) or not isinstance(bits, int) or not lo <= bits <= hi:
        raise ValueError(
            f"{where}: weight_bits {bits!r} unsupported; the RTL GEMM takes [{lo}, {hi}]-bit weights (stored int8)"
        )
    if mode not in WEIGHT_MODES:
        raise ValueError(f"{where}: weights {mode!r}; choose {' or '.join(WEIGHT_MODES)}")


def from_dict(doc: Any, source: str | None = None) -> Recipe:
    """A Recipe from parsed YAML; ValueError with one line on any fault."""
    if doc is None:
        doc = {}
    if not isinstance(doc, dict) or set(doc) - {"default", "layers"}:
        raise ValueError("a recipe is a mapping with 'default' and/or 'layers'")
    default = doc.get("default") or {}
    layers = doc.get("layers") or {}
    if not isinstance(default, dict) or not isinstance(layers, dict):
        raise ValueError("recipe: 'default' and 'layers' must be mappings")
    unknown = sorted(set(default) - set(DEFAULT_KEYS))
    if unknown:
        raise ValueError(f"default: unknown key {unknown[0]!r}; known: {', '.join(DEFAULT_KEYS)}")
    for glob, over in layers.items():
        if not isinstance(glob, str) or not isinstance(over, dict):
            raise ValueError(f"layers: {glob!r} must map a glob string to a mapping of settings")
    kw = {k: v for k, v in default.items() if k not in ("weight_bits", "weights")}
    for key in ("softmax_bits", "exp_entries"):
        for glob, over in layers.items():
            if key in over:
                lo, hi = (2, 8) if key == "softmax_bits" else (1, 256)
                if isinstance(over[key], bool) or not isinstance(over[key], int) or not lo <= over[key] <= hi:
                    raise ValueError(f"layers.{glob!r}: {key} {over[key]!r} unsupported; the RTL takes [{lo}, {hi}]")
    for glob, over in layers.items():
        if "calibration" in over:
            QuantConfig(calibration=over["calibration"])  # ValueError naming the methods
        for family in VARIANT_KEYS:
            if family in over:
                from hwvit import variants

                try:
                    variants.resolve(family, over[family])
                except ValueError as exc:
                    raise ValueError(f"layers.{glob!r}: {exc}") from None
    return Recipe(
        base=QuantConfig(**kw),
        weight_bits=default.get("weight_bits", 8),
        weights=default.get("weights", WeightScales.PER_CHANNEL.value),
        layers=tuple(layers.items()),
        source=source,
    )


def load(path: str | Path) -> Recipe:
    """Read a recipe YAML file (yaml.safe_load); ValueError naming the file on any fault."""
    doc = read_yaml(path, what="recipe")
    try:
        return from_dict(doc, str(path))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path}: {str(exc).splitlines()[0]}") from None


def dump(recipe: Recipe) -> str:
    d = recipe.to_dict()
    d.pop("source")
    return yaml.safe_dump(d, sort_keys=False)


def plain(qconfig: QuantConfig | None = None) -> Recipe:
    return Recipe(base=qconfig or QuantConfig())
