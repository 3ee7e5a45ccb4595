"""Vector sets on disk: one directory per block instance, ``manifest.yaml`` + `.hex` + `.npy`.

- ``write_set(record, dir)`` / ``write_sets(records, root)``: deterministic, atomic writers;
- ``read(dir)``: a fully validated ``VectorSet`` (the testbenches' way in);
- ``check(dir)`` / ``find_sets(root)``: validate a set or a tree (``hwvit check``);
- ``random_record(kind, cases, seed, **params)``: random unit-test cases computed with hwvit.ops.

The schema is documented in docs/vectors.md.
"""

from __future__ import annotations

from hwvit.vectors.check import check, find_sets
from hwvit.vectors.format import MANIFEST, VectorSetError
from hwvit.vectors.read import VectorSet, read, read_manifest
from hwvit.vectors.write import WriteSummary, config_hash, write_set, write_sets


def __getattr__(name: str):
    """``CONTRACT`` and ``PARAMS``: the registry's, by kind (hwvit.record)."""
    if name in ("CONTRACT", "PARAMS"):
        import hwvit.record

        return getattr(hwvit.record, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def random_record(kind: str, cases: int, seed: int, **params):
    """Random unit-test cases for ``kind`` (see hwvit.vectors.random_sets); imports hwvit.ops lazily."""
    from hwvit.vectors.random_sets import random_record as _random_record

    return _random_record(kind, cases, seed, **params)


__all__ = [
    "CONTRACT",
    "MANIFEST",
    "PARAMS",
    "VectorSet",
    "VectorSetError",
    "WriteSummary",
    "check",
    "config_hash",
    "find_sets",
    "random_record",
    "read",
    "read_manifest",
    "write_set",
    "write_sets",
]
