"""Compare vector sets with another copy of them (``hwvit check DIR --against OTHER``).

Sets are paired by their path under each root (or the two roots are one set each). For a pair
that differs, ``SetDiff`` names the first manifest field that differs (in the order the manifest
is written; the tensors' checksums are left out, their values are compared instead), the first
tensor whose values differ and its first differing element, and what made each set (its hwvit
version, checkpoint, ``provenance``: weights, images, options), with the inputs that differ
between the two. Both sides are read with ``hwvit.vectors.read``, so both are validated first.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hwvit.vectors.check import find_sets
from hwvit.vectors.format import VectorSetError
from hwvit.vectors.read import VectorSet, read

_MISSING = "<absent>"


@dataclass
class SetDiff:
    """How the set ``name`` (its path under the first root) compares with its counterpart."""

    name: str
    problem: str | None = None  # the set is missing or invalid on one side (then nothing else is filled in)
    field: tuple[str, Any, Any] | None = None  # (dotted field, this value, other value)
    element: tuple[str, str, Any, Any] | None = None  # (tensor, index or "shape", this, other)
    made: tuple[dict[str, Any], dict[str, Any]] = dataclasses.field(default_factory=lambda: ({}, {}))
    made_apart: list[str] = dataclasses.field(default_factory=list)  # what-made-it fields that differ

    @property
    def differs(self) -> bool:
        return self.problem is not None or self.field is not None or self.element is not None

    def line(self) -> str:
        """One line: the set and its first field and element that differ."""
        if self.problem is not None:
            return f"{self.name}: {self.problem}"
        parts = []
        if self.field is not None:
            parts.append(f"field {self.field[0]} ({_short(self.field[1])} vs {_short(self.field[2])})")
        if self.element is not None:
            tensor, index, a, b = self.element
            where = f"{tensor} shape" if index == "shape" else f"{tensor}{index}"
            parts.append(f"tensor {where} ({_short(a)} vs {_short(b)})")
        return f"{self.name}: " + "; ".join(parts)

    def made_lines(self) -> list[str]:
        """What made each side, and which of those inputs differ (or that none does)."""
        this, other = self.made
        lines = [f"  made by: {_describe(this)}", f"  against: {_describe(other)}"]
        if self.made_apart:
            lines.append(f"  made differently: {', '.join(self.made_apart)}")
        elif this.get("provenance", _MISSING) is None or other.get("provenance", _MISSING) is None:
            lines.append("  made alike as far as recorded (no provenance: weights, images and options unknown)")
        else:
            lines.append(
                "  made alike (same hwvit, checkpoint, weights, images and options): "
                "the difference comes from the machines that ran them"
            )
        return lines


def _short(value: Any, width: int = 60) -> str:
    text = str(value)
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:12] + "..."
    return text if len(text) <= width else text[: width - 3] + "..."


def _made(manifest: dict[str, Any]) -> dict[str, Any]:
    """The fields of a manifest that say what made the set (flat, dotted keys)."""
    made = {"hwvit_version": manifest.get("hwvit_version"), "source_sha256": manifest.get("source_sha256")}
    prov = manifest.get("provenance")
    if prov is None:
        made["provenance"] = None
    else:
        for key, value in prov.items():
            if isinstance(value, dict):
                made.update(_flatten(value, f"provenance.{key}"))
            else:
                made[f"provenance.{key}"] = value
    made["seed"] = manifest.get("seed")
    return made


def _describe(made: dict[str, Any]) -> str:
    if not made:
        return "(unknown)"
    names = {
        "hwvit_version": "hwvit",
        "source_sha256": "checkpoint",
        "provenance.weights_sha256": "weights",
        "provenance.calibration_sha256": "calibration inputs",
        "provenance.inputs_sha256": "traced inputs",
        "seed": "seed",
    }
    parts = [f"{label} {_short(made.get(key))}" for key, label in names.items() if key in made]
    if made.get("provenance", _MISSING) is None:
        parts.append("no provenance recorded")
    options = sum(1 for k in made if k.startswith("provenance.options."))
    if options:
        parts.append(f"{options} options")
    return ", ".join(parts)


def _flatten(value: Any, prefix: str) -> dict[str, Any]:
    """A nested mapping as ``{dotted.key: leaf}`` in its own order (lists are leaves)."""
    if not isinstance(value, dict):
        return {prefix: value}
    out: dict[str, Any] = {}
    for key, sub in value.items():
        out.update(_flatten(sub, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _fields(manifest: dict[str, Any]) -> dict[str, Any]:
    """Every manifest field as a dotted key, in the manifest's order; a tensor entry's fields under
    ``tensors.NAME``, without its checksums (the values are compared instead)."""
    out: dict[str, Any] = {}
    for key, value in manifest.items():
        if key == "tensors":
            for entry in value:
                rest = {k: v for k, v in entry.items() if k not in ("name", "sha256")}
                out.update(_flatten(rest, f"tensors.{entry['name']}"))
        else:
            out.update(_flatten(value, key))
    return out


def _first_field(a: dict[str, Any], b: dict[str, Any]) -> tuple[str, Any, Any] | None:
    fa, fb = _fields(a), _fields(b)
    for key in [*fa, *(k for k in fb if k not in fa)]:
        va, vb = fa.get(key, _MISSING), fb.get(key, _MISSING)
        if va != vb:
            return key, va, vb
    return None


def _first_element(a: VectorSet, b: VectorSet) -> tuple[str, str, Any, Any] | None:
    for name in [*a.tensors, *(n for n in b.tensors if n not in a.tensors)]:
        if name not in a.tensors or name not in b.tensors:
            return (
                name,
                "shape",
                list(a[name].shape) if name in a.tensors else "absent",
                (list(b[name].shape) if name in b.tensors else "absent"),
            )
        x, y = a[name], b[name]
        if x.shape != y.shape:
            return name, "shape", list(x.shape), list(y.shape)
        diff = np.flatnonzero(x.reshape(-1) != y.reshape(-1))
        if diff.size:
            i = int(diff[0])
            index = list(np.unravel_index(i, x.shape))
            return name, str([int(k) for k in index]), int(x.reshape(-1)[i]), int(y.reshape(-1)[i])
    return None


def compare_sets(a: VectorSet, b: VectorSet, name: str) -> SetDiff:
    """How two read sets differ (``SetDiff.differs`` is False when every field and value agrees)."""
    made_a, made_b = _made(a.manifest), _made(b.manifest)
    keys = [*made_a, *(k for k in made_b if k not in made_a)]
    apart = [k for k in keys if made_a.get(k, _MISSING) != made_b.get(k, _MISSING)]
    return SetDiff(
        name=name,
        field=_first_field(a.manifest, b.manifest),
        element=_first_element(a, b),
        made=(made_a, made_b),
        made_apart=apart,
    )


def _sets_by_name(root: Path) -> dict[str, Path]:
    sets = find_sets(root)
    if not sets:
        raise VectorSetError(f"{root}: no vector set (manifest.yaml) found")
    return {("." if d == root else d.relative_to(root).as_posix()): d for d in sets}


def _read(path: Path) -> VectorSet | str:
    """The set, or why it cannot be compared (the reader's one-line message names the set)."""
    try:
        return read(path)
    except VectorSetError as exc:
        return f"invalid set {exc}"


def compare_trees(root: str | Path, other: str | Path) -> list[SetDiff]:
    """Every set under ``root`` and under ``other``, paired by path, in name order; VectorSetError
    if either holds no set. When both roots are single sets they are paired whatever their names."""
    root, other = Path(root), Path(other)
    for r in (root, other):
        if not r.is_dir():
            raise VectorSetError(f"{r}: not a directory")
    mine, theirs = _sets_by_name(root), _sets_by_name(other)
    out = []
    for name in sorted(set(mine) | set(theirs)):
        if name not in theirs:
            out.append(SetDiff(name, problem=f"only in {root}, not in {other}"))
            continue
        if name not in mine:
            out.append(SetDiff(name, problem=f"only in {other}, not in {root}"))
            continue
        a, b = _read(mine[name]), _read(theirs[name])
        if isinstance(a, str) or isinstance(b, str):
            out.append(SetDiff(name, problem=a if isinstance(a, str) else b))
            continue
        out.append(compare_sets(a, b, name))
    return out
