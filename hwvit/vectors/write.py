"""Write block records as vector sets: deterministic bytes, published atomically.

A set is built in a temporary directory next to its destination and renamed into place, so a
reader sees either no set or a whole one; a failure or Ctrl-C removes the temporary directory.
``write_sets`` builds a whole tree (one subdirectory per record) the same way. The manifest is
checked by the same validator as ``read`` before any file is written, so the writer cannot
produce a set the reader rejects.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from hwvit import __version__
from hwvit.atomic import atomic_dir, refuse_unowned
from hwvit.formats import Rounding
from hwvit.record import BlockRecord, Tensor
from hwvit.vectors.check import find_sets
from hwvit.vectors.format import FORMAT_VERSION, MANIFEST, PATH_RE, VectorSetError, encode_hex, encode_npy, sha256
from hwvit import blocks
from hwvit.vectors.schema import check_manifest

# libyaml's emitter when present (10x faster than PyYAML's; byte-identical output for our documents).
_BaseDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

Progress = Callable[[str, int], None]  # (block path, elements written) after each set
# Threads writing tensors: formatting, hashing and file creation release the GIL and overlap (2 cores here).
WRITER_THREADS = 2


@dataclass
class WriteSummary:
    """What a write produced."""

    sets: int = 0
    tensors: int = 0
    bytes: int = 0
    elements: int = 0

    def add(self, other: WriteSummary) -> None:
        self.sets += other.sets
        self.tensors += other.tensors
        self.bytes += other.bytes
        self.elements += other.elements

    def line(self) -> str:
        """``12 sets, 48 tensors, 1.2 MB`` (decimal megabytes)."""
        size = f"{self.bytes / 1e6:.1f} MB" if self.bytes >= 100_000 else f"{self.bytes / 1e3:.1f} kB"
        return f"{self.sets} set{'s' * (self.sets != 1)}, {self.tensors} tensors, {size}"


def config_hash(params: dict[str, Any], model_config: Any = None) -> str:
    """sha256 of the canonical JSON of a block's params plus (optionally) the model config."""
    doc = {"params": _plain(params), "model": _plain(model_config)}
    return sha256(json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str).encode())


def _plain(value: Any) -> Any:
    """numpy scalars -> Python scalars (recursively), so YAML and JSON see plain types."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


class _Dumper(_BaseDumper):
    """Block-style YAML with short scalar lists (shapes) in flow style: `shape: [197, 768]`."""


def _represent_list(dumper: Any, data: list) -> yaml.Node:
    flow = all(not isinstance(v, (list, dict)) for v in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _represent_list)


def dump_manifest(manifest: dict[str, Any]) -> bytes:
    return yaml.dump(manifest, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120).encode()


def _tensor_entry(name: str, tensor: Tensor) -> dict[str, Any]:
    scale = None if tensor.scale is None else float(tensor.scale)
    return {
        "name": name,
        "role": tensor.role,
        "shape": [int(d) for d in tensor.data.shape],
        "bits": int(tensor.bits),
        "signed": bool(tensor.signed),
        "layout": tensor.layout,
        "scale": scale,
        "dtype": tensor.fmt.dtype.name,
        "files": {"hex": f"{name}.hex", "npy": f"{name}.npy"},
        "sha256": {"hex": "0" * 64, "npy": "0" * 64},
    }  # filled in as the files are written


def build_manifest(
    record: BlockRecord,
    *,
    seed: int | None = None,
    config_hash: str | None = None,
    source_sha256: str | None = None,
    model_config: Any = None,
    provenance: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest of ``record`` with placeholder checksums, validated against the contract.
    ``provenance`` (hwvit.vectors.provenance): what made a traced set, recorded as given."""
    params = {k: _plain(record.params[k]) for k in sorted(record.params)}
    params.setdefault("rounding", Rounding.HALF_UP.value)
    params = dict(sorted(params.items()))
    manifest: dict[str, Any] = {
        "format": FORMAT_VERSION,
        "hwvit_version": __version__,
        "kind": record.kind,
        "path": record.path,
        "params": params,
        "seed": None if seed is None else int(seed),
        "config_hash": config_hash or _config_hash(params, model_config),
        "source_sha256": source_sha256,
    }
    lut = blocks.get(record.kind).lut
    if lut:
        manifest["lut_file"] = f"{lut}.hex"
    if isinstance(model_config, dict) and model_config.get("recipe") is not None:
        manifest["recipe"] = _plain(model_config["recipe"])  # the per-layer precision this set was made with
    if provenance is not None:
        manifest["provenance"] = _plain(provenance)
    manifest["tensors"] = [_tensor_entry(name, t) for name, t in record.tensors.items()]
    try:
        check_manifest(manifest)
        for name, tensor in record.tensors.items():
            _check_values(name, tensor)
    except VectorSetError as exc:
        raise VectorSetError(f"{record.path}: {str(exc).removeprefix('manifest: ')}") from None
    return manifest


_config_hash = config_hash  # build_manifest's keyword shadows the function name


def _check_values(name: str, tensor: Tensor) -> None:
    data = tensor.data
    if data.size == 0:
        raise VectorSetError(f"tensor {name} is empty")
    lo, hi = int(data.min()), int(data.max())
    fmt = tensor.fmt
    if lo < fmt.lo or hi > fmt.hi:
        bad = lo if lo < fmt.lo else hi
        raise VectorSetError(f"tensor {name}: value {bad} outside {fmt} [{fmt.lo}, {fmt.hi}]")


def _write_file(path: Path, *parts) -> tuple[str, int]:
    """Write buffers to a new file; return its sha256 and size (hashed from memory, no re-read)."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "xb") as fh:
        for part in parts:
            fh.write(part)
            digest.update(part)
            size += len(part)
    return digest.hexdigest(), size


def _write_tensor(directory: Path, entry: dict[str, Any], tensor: Tensor) -> tuple[dict[str, str], int]:
    """Write one tensor's `.hex` and `.npy`; return their sha256 by extension and the byte count."""
    digests, total = {}, 0
    for ext, parts in (
        ("hex", (encode_hex(tensor.data, tensor.bits),)),
        ("npy", encode_npy(tensor.data, tensor.bits, tensor.signed)),
    ):
        digests[ext], size = _write_file(directory / entry["files"][ext], *parts)
        total += size
    return digests, total


def _write_manifest(
    directory: Path, manifest: dict[str, Any], record: BlockRecord, results: list[tuple[dict[str, str], int]]
) -> WriteSummary:
    """Fill in the checksums and write the manifest last: a set with a manifest is complete."""
    summary = WriteSummary(sets=1, tensors=len(results))
    for entry, (digests, size) in zip(manifest["tensors"], results):
        entry["sha256"] = digests
        summary.bytes += size
        summary.elements += int(record.tensors[entry["name"]].data.size)
    text = dump_manifest(manifest)
    (directory / MANIFEST).write_bytes(text)
    summary.bytes += len(text)
    return summary


def _write_all(jobs: list[tuple[BlockRecord, dict[str, Any], Path]], progress: Progress | None) -> WriteSummary:
    """Write every set of ``jobs``; tensors go through a few threads (numpy formatting, hashing and
    file creation release the GIL), manifests are written in order by this thread."""
    summary = WriteSummary()
    pool = ThreadPoolExecutor(max_workers=WRITER_THREADS)
    try:
        futures = [
            [
                pool.submit(_write_tensor, directory, entry, record.tensors[entry["name"]])
                for entry in manifest["tensors"]
            ]
            for record, manifest, directory in jobs
        ]
        for (record, manifest, directory), set_futures in zip(jobs, futures):
            one = _write_manifest(directory, manifest, record, [f.result() for f in set_futures])
            summary.add(one)
            if progress is not None:
                progress(record.path, one.elements)
    finally:  # on an error or Ctrl-C: drop queued work and wait for running writes before cleanup
        pool.shutdown(wait=True, cancel_futures=True)
    return summary


def _is_empty_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink() and not any(path.iterdir())


def owned_files(root: Path) -> dict[str, None]:
    """The files of the vector sets under ``root``, by path relative to it: each set's manifest.yaml
    and the files its manifest names (what a writer here wrote; a set whose manifest does not read
    owns nothing)."""
    from hwvit.vectors.read import read_manifest

    owned: dict[str, None] = {}
    for set_dir in find_sets(root):
        try:
            manifest = read_manifest(set_dir)
        except VectorSetError:
            continue
        names = [MANIFEST, *(name for t in manifest["tensors"] for name in t["files"].values())]
        if manifest.get("lut_file"):
            names.append(manifest["lut_file"])
        rel = set_dir.relative_to(root)
        owned.update({(rel / name).as_posix(): None for name in names})
    return owned


def check_replaceable(dest: Path) -> None:
    """What --force may replace: a tree of vector sets and nothing else (FileExistsError, one line,
    naming a file no set accounts for: a README committed beside the sets, a user's notes)."""
    if not dest.is_dir() or dest.is_symlink():
        raise FileExistsError(f"{dest} exists and is not a directory; not replacing it")
    if not find_sets(dest):
        raise FileExistsError(
            f"{dest}: --force replaces only vector sets, and it holds none (no manifest.yaml); choose another directory"
        )
    refuse_unowned(dest, owned_files(dest), "vector sets hwvit wrote")


def _check_destination(dest: Path, force: bool) -> None:
    """A set's destination: missing or empty, or (with ``force``) a tree of vector sets and nothing else."""
    if (dest.exists() or dest.is_symlink()) and not _is_empty_dir(dest):
        if not force:
            raise FileExistsError(f"{dest} already exists (use --force to replace it)")
        check_replaceable(dest)


def _staging(dest: Path, force: bool):
    """A temporary directory beside ``dest`` that becomes ``dest`` when the body succeeds."""
    return atomic_dir(dest, lambda d: _check_destination(d, force))


def _manifests(records: list[BlockRecord], seed, config_hash, source_sha256, model_config, provenance) -> list[dict]:
    """``build_manifest`` of each record with the same run-wide fields (validated, before any write)."""
    return [
        build_manifest(
            r,
            seed=seed,
            config_hash=config_hash,
            source_sha256=source_sha256,
            model_config=model_config,
            provenance=provenance,
        )
        for r in records
    ]


def write_set(
    record: BlockRecord,
    out_dir: str | Path,
    *,
    seed: int | None = None,
    config_hash: str | None = None,
    source_sha256: str | None = None,
    force: bool = False,
    model_config: Any = None,
    provenance: dict[str, Any] | None = None,
) -> Path:
    """Write ``record`` as the vector set ``out_dir`` (atomically); return its path.

    ``config_hash`` defaults to ``config_hash(record.params, model_config)``. An existing
    non-empty ``out_dir`` raises FileExistsError unless ``force``, which replaces it whole if it
    holds vector sets and nothing else.
    """
    out_dir = Path(out_dir)
    (manifest,) = _manifests([record], seed, config_hash, source_sha256, model_config, provenance)
    with _staging(out_dir, force) as tmp:
        _write_all([(record, manifest, tmp)], None)
    return out_dir


def write_sets(
    records: Iterable[BlockRecord],
    out_root: str | Path,
    *,
    seed: int | None = None,
    config_hash: str | None = None,
    source_sha256: str | None = None,
    force: bool = False,
    model_config: Any = None,
    progress: Progress | None = None,
    provenance: dict[str, Any] | None = None,
) -> WriteSummary:
    """Write each record as ``out_root/<record.path>/``; the whole tree appears at once or not at all.
    ``provenance`` (hwvit.vectors.provenance.provenance): what made the sets, in every manifest."""
    records = list(records)
    out_root = Path(out_root)
    if not records:
        raise VectorSetError("no block records to write")
    seen: set[str] = set()
    for record in records:
        if not isinstance(record.path, str) or not PATH_RE.match(record.path):
            raise VectorSetError(f"block path {record.path!r} cannot name a directory")
        if record.path in seen:
            raise VectorSetError(f"block path {record.path!r} appears twice")
        seen.add(record.path)
    manifests = _manifests(records, seed, config_hash, source_sha256, model_config, provenance)
    with _staging(out_root, force) as tmp:
        jobs = []
        for record, manifest in zip(records, manifests):
            (tmp / record.path).mkdir()
            jobs.append((record, manifest, tmp / record.path))
        return _write_all(jobs, progress)
