"""What the published arithmetics' released code computes, kept as test data (tests/authors/*.npz).

Each file is made by tests/authors/make_data.py from a checkout of the authors' repository and
holds a ``provenance`` entry (repository, commit, file, function, the command) and groups of rows:
``load(name)`` returns ``(provenance, groups)``, each group a dict of its scalars and arrays.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def load(name: str) -> tuple[dict, list[dict]]:
    with np.load(HERE / f"{name}.npz") as data:
        provenance = json.loads(str(data["provenance"]))
        groups = [dict(g) for g in json.loads(str(data["groups"]))]
        for key in data.files:
            index, sep, field = key.partition(".")
            if sep:
                groups[int(index)][field] = data[key]
    return provenance, groups
