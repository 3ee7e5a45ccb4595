"""The block kinds: one module each, and the one registry everything else iterates.

Every module of this package that declares ``KIND = hwvit.blocks.BlockKind(...)`` is a block
kind (``hwvit/blocks/softmax.py``: the softmax); a module may declare several as ``KINDS = [...]``
(``hwvit/blocks/variant_kinds.py``: one per arithmetic variant of softmax and LayerNorm).
The CLI's choices, the vector-set contract, random
sets, coverage bins, bind files, `hwvit synth`, `hwvit mutate` and the simulator driver all read
``kinds()`` / ``get(name)``; none of them names a kind.

A kind kept outside hwvit (a team's own block) is a module named in ``HWVIT_BLOCKS``
(os.pathsep-separated ``.py`` paths or importable module names) or under the ``hwvit.blocks``
entry-point group of an installed package. docs/blocks.md walks through adding one.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from importlib import metadata
from pathlib import Path
from types import ModuleType

from hwvit import envmodules
from hwvit.blocks.base import BlockKind

ENV = "HWVIT_BLOCKS"
ENTRY_POINTS = "hwvit.blocks"

_KINDS: dict[str, BlockKind] | None = None
_LOADED_ENV: str | None = None


class BlockError(ValueError):
    """A block module that cannot be loaded or declares a kind badly (one line)."""


def _extra_modules() -> list[ModuleType]:
    # loaded afresh whenever the registry is (HWVIT_BLOCKS changed)
    modules = envmodules.load(ENV, "hwvit_block", "block module", BlockError)
    for ep in metadata.entry_points(group=ENTRY_POINTS):
        modules.append(importlib.import_module(ep.module))
    return modules


def _builtin_modules() -> list[ModuleType]:
    here = Path(__file__).parent
    names = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if not m.name.startswith("_") and m.name != "base")
    return [importlib.import_module(f"{__name__}.{name}") for name in names]


def _load() -> dict[str, BlockKind]:
    found: dict[str, BlockKind] = {}
    seeds: dict[int, str] = {}
    declared = []
    for module in _builtin_modules() + _extra_modules():
        one = getattr(module, "KIND", None)
        for kind in ([one] if one is not None else []) + list(getattr(module, "KINDS", [])):
            declared.append((module, kind))
    for module, kind in declared:
        if not isinstance(kind, BlockKind):
            raise BlockError(f"{module.__name__}: KIND is not a hwvit.blocks.BlockKind")
        if kind.name in found:
            raise BlockError(f"{module.__name__}: block kind {kind.name!r} is declared twice")
        if kind.seed in seeds:
            raise BlockError(f"{module.__name__}: seed {kind.seed} of {kind.name!r} is {seeds[kind.seed]!r}'s")
        if not kind.name.isidentifier():
            raise BlockError(f"{module.__name__}: block kind name {kind.name!r} is not an identifier")
        missing = [t for t in kind.bins if not t]
        if missing or set(kind.bins) & {f"reset_{s}" for s in kind.reset_states}:
            raise BlockError(f"{module.__name__}: {kind.name}: bad bin names")
        object.__setattr__(kind, "source", getattr(module, "__file__", "") or "")
        seeds[kind.seed] = kind.name
        found[kind.name] = kind
    return dict(sorted(found.items(), key=lambda item: item[1].seed))


def kinds() -> dict[str, BlockKind]:
    """Every block kind, by name, in seed order (the built-in eight first)."""
    global _KINDS, _LOADED_ENV
    # HWVIT_VARIANTS too: each of its softmax and LayerNorm variants is a kind (variant_kinds)
    env = os.environ.get(ENV, "") + "\0" + os.environ.get("HWVIT_VARIANTS", "")
    if _KINDS is None or env != _LOADED_ENV:
        _KINDS, _LOADED_ENV = _load(), env
    return _KINDS


def names() -> tuple[str, ...]:
    return tuple(kinds())


def get(name: str) -> BlockKind:
    """The kind called ``name``; ValueError naming the known ones otherwise."""
    found = kinds().get(name)
    if found is None:
        raise ValueError(f"unknown block kind {name!r}; choose from {', '.join(kinds())}")
    return found


__all__ = ["BlockError", "BlockKind", "ENV", "get", "kinds", "names"]
