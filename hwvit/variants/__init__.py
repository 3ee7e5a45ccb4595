"""Arithmetic variants of the blocks: every published integer arithmetic as an exact kernel.

Each module of this package lists its variants in ``VARIANTS`` (``hwvit.variants.base.Variant``);
``get(family, name)`` finds one, ``names(family)`` lists a family's, ``DEFAULT`` names hwvit's own
(hwvit.variants.hwvit). docs/arithmetic.md gives each variant's formula, source and bounds.

An arithmetic kept outside hwvit is a module named in ``HWVIT_VARIANTS`` (os.pathsep-separated
``.py`` paths or importable module names) that lists its ``VARIANTS`` the same way; it may declare
the Verilog twin of each softmax or LayerNorm variant's kind in ``RTL_FIELDS`` (kind -> the fields a
module of hwvit/blocks/variant_rtl/ declares as ``FIELDS``). docs/blocks.md walks through one.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from pathlib import Path
from typing import Any

from hwvit import envmodules
from hwvit.variants.base import FAMILIES, Variant
from hwvit.variants.custom import custom

DEFAULT = {"requant": "half_up", "gelu": "lut", "softmax": "hwvit", "layernorm": "hwvit"}

ENV = "HWVIT_VARIANTS"

_ALL: dict[tuple[str, str], Variant] | None = None
_RTL: dict[str, dict[str, Any]] = {}
_LOADED_ENV: str | None = None


def _load() -> tuple[dict[tuple[str, str], Variant], dict[str, dict[str, Any]]]:
    found: dict[tuple[str, str], Variant] = {}
    rtl: dict[str, dict[str, Any]] = {}
    here = Path(__file__).parent
    modules = [
        importlib.import_module(f"{__name__}.{info.name}")
        for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda m: m.name)
        if info.name != "base" and not info.name.startswith("_")
    ]
    for module in modules + envmodules.load(ENV, "hwvit_variant", "variant module"):
        for variant in getattr(module, "VARIANTS", []):
            key = (variant.family, variant.name)
            if key in found:
                raise ValueError(f"variant {variant.key} declared twice ({module.__name__})")
            found[key] = variant
        rtl.update(getattr(module, "RTL_FIELDS", {}))
    return found, rtl


def every() -> dict[tuple[str, str], Variant]:
    """Every variant, hwvit's and those of the modules HWVIT_VARIANTS names (read again when it changes)."""
    global _ALL, _RTL, _LOADED_ENV
    env = os.environ.get(ENV, "")
    if _ALL is None or env != _LOADED_ENV:
        _ALL, _RTL = _load()
        _LOADED_ENV = env
    return _ALL


def rtl_fields(kind: str) -> dict[str, Any]:
    """The Verilog twin a HWVIT_VARIANTS module declares for variant kind ``kind`` ({} if none)."""
    every()
    return dict(_RTL.get(kind, {}))


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


__all__ = [
    "DEFAULT",
    "ENV",
    "FAMILIES",
    "Variant",
    "custom",
    "every",
    "get",
    "is_default",
    "names",
    "resolve",
    "rtl_fields",
]
