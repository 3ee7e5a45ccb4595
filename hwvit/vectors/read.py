"""Read a vector set back, trusting nothing: the testbenches' only way in.

``read(dir)`` validates everything ``hwvit check`` validates (manifest schema and contract,
files present and inside the set, line counts, digit counts, widths, `.hex` == `.npy`, sha256)
and returns int64 arrays. Any fault is a ``VectorSetError`` with a one-line message naming the
set and the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hwvit.record import Tensor
from hwvit.textfiles import read_yaml
from hwvit.vectors.format import MANIFEST, VectorSetError, decode_hex, decode_npy, sha256
from hwvit.vectors.schema import check_manifest


@dataclass
class VectorSet:
    """One validated vector set: a block's parameters and its integer tensors."""

    kind: str
    path: str  # block path in the model, e.g. "layers.3.softmax"
    directory: Path
    params: dict[str, Any]
    tensors: dict[str, Tensor]  # data as int64, shaped
    manifest: dict[str, Any]

    @property
    def seed(self) -> int | None:
        return self.manifest["seed"]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.tensors[name].data

    def _entry(self, name: str) -> dict[str, Any]:
        for entry in self.manifest["tensors"]:
            if entry["name"] == name:
                return entry
        raise KeyError(f"{self.path}: no tensor {name!r} (have {', '.join(self.tensors)})")

    def hex_path(self, name: str) -> Path:
        """The `$readmemh` file of tensor ``name``."""
        return self.directory / self._entry(name)["files"]["hex"]

    def npy_path(self, name: str) -> Path:
        return self.directory / self._entry(name)["files"]["npy"]


def load_manifest(set_dir: Path) -> dict[str, Any]:
    """Parse and schema-check ``set_dir/manifest.yaml`` (no tensor files are opened)."""
    path = set_dir / MANIFEST
    if not path.is_file():
        raise VectorSetError(f"no {MANIFEST}")
    manifest = read_yaml(path, error=VectorSetError, label=MANIFEST)  # read_manifest prefixes the set
    check_manifest(manifest)
    return manifest


def read_manifest(set_dir: str | Path) -> dict[str, Any]:
    """The schema-checked manifest of a set, without reading its tensors (cheap: for filtering)."""
    try:
        return load_manifest(Path(set_dir))
    except VectorSetError as exc:
        raise VectorSetError(f"{set_dir}: {exc}") from None


def _read_file(set_dir: Path, root: Path, fname: str) -> bytes:
    path = set_dir / fname
    if path.is_symlink() and not path.resolve().is_relative_to(root):
        raise VectorSetError(f"{fname}: symlink leaves the set directory")
    if not path.is_file():
        raise VectorSetError(f"{fname}: missing file")
    return path.read_bytes()


def _load_tensor(set_dir: Path, root: Path, entry: dict[str, Any]) -> Tensor:
    bits, signed, shape = entry["bits"], entry["signed"], entry["shape"]
    hex_name, npy_name = entry["files"]["hex"], entry["files"]["npy"]
    hex_raw = _read_file(set_dir, root, hex_name)
    npy_raw = _read_file(set_dir, root, npy_name)
    count = int(np.prod(shape))
    try:
        values = decode_hex(hex_raw, count, bits, signed)
    except VectorSetError as exc:
        raise VectorSetError(f"{hex_name}: {exc}") from None
    try:
        array = decode_npy(npy_raw)
    except VectorSetError as exc:
        raise VectorSetError(f"{npy_name}: {exc}") from None
    if array.dtype.name != entry["dtype"]:
        raise VectorSetError(f"{npy_name}: dtype {array.dtype.name}, manifest says {entry['dtype']}")
    if list(array.shape) != shape:
        raise VectorSetError(f"{npy_name}: shape {list(array.shape)}, manifest says {shape}")
    data = array.astype(np.int64).reshape(-1)
    diff = np.flatnonzero(data != values)
    if diff.size:
        i = int(diff[0])
        raise VectorSetError(
            f"{npy_name} and {hex_name} differ at element {i} (npy {int(data[i])}, hex {int(values[i])})"
        )
    for ext, raw in (("hex", hex_raw), ("npy", npy_raw)):
        digest = sha256(raw)
        if digest != entry["sha256"][ext]:
            raise VectorSetError(
                f"{entry['files'][ext]}: checksum mismatch (manifest "
                f"{entry['sha256'][ext][:12]}..., file {digest[:12]}...)"
            )
    return Tensor(
        data=values.reshape(shape),
        bits=bits,
        signed=signed,
        role=entry["role"],
        scale=entry["scale"],
        layout=entry["layout"],
    )


def read(set_dir: str | Path) -> VectorSet:
    """Read and fully validate the vector set in ``set_dir``; VectorSetError on any fault."""
    set_dir = Path(set_dir)
    try:
        if not set_dir.is_dir():
            raise VectorSetError("not a directory")
        manifest = load_manifest(set_dir)
        root = set_dir.resolve()
        tensors = {e["name"]: _load_tensor(set_dir, root, e) for e in manifest["tensors"]}
    except VectorSetError as exc:
        raise VectorSetError(f"{set_dir}: {exc}") from None
    except OSError as exc:
        raise VectorSetError(f"{set_dir}: {exc.strerror or exc}") from None
    return VectorSet(
        kind=manifest["kind"],
        path=manifest["path"],
        directory=set_dir,
        params=dict(manifest["params"]),
        tensors=tensors,
        manifest=manifest,
    )
