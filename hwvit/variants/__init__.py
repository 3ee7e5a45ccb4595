"""Arithmetic variants of the blocks: every published integer arithmetic as an exact kernel.

Each module of this package lists its variants in ``VARIANTS`` (``hwvit.variants.base.Variant``);
``get(family, name)`` finds one, ``names(family)`` lists a family's, ``DEFAULT`` names hwvit's own
(hwvit.variants.hwvit). docs/arithmetic.md gives each variant's formula, source and bounds.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from hwvit.variants.base import FAMILIES, Variant
from hwvit.variants.custom import custom

DEFAULT = {"requant": "half_up", "gelu": "lut", "softmax": "hwvit", "layernorm": "hwvit"}

_ALL: dict[tuple[str, str], Variant] | None = None


def _load() -> dict[tuple[str, str], Variant]:
    found: dict[tuple[str, str], Variant] = {}
    here = Path(__file__).parent
    for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda m: m.name):
        if info.name == "base" or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for variant in getattr(module, "VARIANTS", []):
            key = (variant.family, variant.name)
            assert key not in found, f"variant {variant.key} declared twice ({module.__name__})"
            found[key] = variant
    return found


def every() -> dict[tuple[str, str], Variant]:
    global _ALL
    if _ALL is None:
        _ALL = _load()
    return _ALL


def names(family: str) -> tuple[str, ...]:
    """A family's variants, hwvit's own first."""
    if family not in FAMILIES:
        raise ValueError(f"unknown block {family!r} for a variant; choose from {', '.join(FAMILIES)}")
    rest = sorted(n for f, n in every() if f == family and n != DEFAULT[family])
    return (DEFAULT[family], *rest)


def get(family: str, name: str) -> Variant:
    """The variant ``name`` of ``family``; ValueError (one line, naming the known ones) otherwise."""
    known = names(family)
    if name not in known:
        raise ValueError(f"unknown {family} variant {name!r}; known: {', '.join(known)}")
    return every()[(family, name)]


def resolve(family: str, name: str) -> Variant:
    """A built-in variant by name, or a team's function ``package.module:function`` wrapped as one
    (``custom``); ValueError with one line otherwise."""
    if not isinstance(name, str):
        raise ValueError(f"{family} variant must be a name, got {name!r}")
    if ":" in name:
        return custom(family, name)
    return get(family, name)


def is_default(family: str, name: str) -> bool:
    return name == DEFAULT[family]


__all__ = ["DEFAULT", "FAMILIES", "Variant", "custom", "every", "get", "is_default", "names", "resolve"]
