"""Validate a vector set or a whole tree of them (``hwvit check``)."""

from __future__ import annotations

import os
from pathlib import Path

from hwvit.vectors.format import MANIFEST, VectorSetError
from hwvit.vectors.read import read


def find_sets(root: str | Path) -> list[Path]:
    """Every directory at or under ``root`` holding a manifest.yaml, sorted; hidden (temporary)
    directories such as ``.out.tmp-*`` are skipped, and the walk does not enter a set."""
    root = Path(root)
    if (root / MANIFEST).is_file():
        return [root]
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if MANIFEST in filenames and Path(dirpath) != root:
            found.append(Path(dirpath))
            dirnames[:] = []
    return sorted(found)


def verify(vset) -> str | None:
    """What the set's block kind checks beyond the format (``verify``): an arithmetic variant's
    outputs computed again from its inputs and recorded parameters. None when all is well."""
    from hwvit import blocks

    spec = blocks.get(vset.kind)
    return spec.verify(vset) if spec.verify is not None else None


def check(root: str | Path) -> list[tuple[Path, str | None]]:
    """``(set_dir, error or None)`` for every set under ``root``; ValueError if there is none."""
    root = Path(root)
    if not root.is_dir():
        raise VectorSetError(f"{root}: not a directory")
    sets = find_sets(root)
    if not sets:
        raise VectorSetError(f"{root}: no vector set ({MANIFEST}) found")
    results: list[tuple[Path, str | None]] = []
    for set_dir in sets:
        try:
            results.append((set_dir, verify(read(set_dir))))
        except VectorSetError as exc:
            results.append((set_dir, str(exc)))
    return results
