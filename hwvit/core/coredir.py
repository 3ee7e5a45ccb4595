"""A compiled core directory: program and memory images (.hex), manifest.yaml with sha256.

Written atomically (hwvit.atomic) and byte-for-byte deterministic; read back with every file's
hash checked and every path kept inside the directory. Bad directories raise CoreDirError with
one line.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from hwvit import __version__
from hwvit.atomic import atomic_dir, refuse_unowned
from hwvit.core import isa
from hwvit.core.compile import Compiled
from hwvit.textfiles import read_yaml
from hwvit.vectors.format import encode_hex

FORMAT = "hwvit-core"
FORMAT_VERSION = 1
MANIFEST = "manifest.yaml"
FILES = {
    "prog": ("prog.hex", isa.WORD_BITS),
    "act": ("act.hex", 8),
    "wgt": ("wgt.hex", 8),
    "prm": ("prm.hex", isa.PRM_BITS),
}


class CoreDirError(ValueError):
    """A core directory is missing, malformed or altered; the message is one line."""


def _hex_words(values, bits: int, depth: int) -> bytes:
    if bits == 8:
        arr = np.zeros(depth, dtype=np.int64)
        v = np.asarray(values, dtype=np.int64)
        arr[: v.size] = v
        return bytes(encode_hex(arr, 8))
    digits = bits // 4
    words = list(values) + [0] * (depth - len(values))
    return "".join(f"{w:0{digits}x}\n" for w in words).encode()


def _owned(dest: Path) -> dict[str, str | None]:
    """A previous core directory's files as its manifest lists them (with their sha256), and the manifest."""
    try:
        files = read_yaml(dest / MANIFEST, error=CoreDirError)["files"]
        listed = {str(f["path"]): str(f["sha256"]) for f in files.values()}
    except (CoreDirError, OSError, KeyError, TypeError, AttributeError):
        listed = {}
    return {**listed, MANIFEST: None}


def write_core_dir(c: Compiled, out: str | Path, model_spec: dict[str, Any], force: bool = False) -> Path:
    out = Path(out)

    def check(dest: Path) -> None:
        if dest.exists() and any(dest.iterdir()):
            if not force:
                raise FileExistsError(f"{dest} exists and is not empty (use --force to replace it)")
            refuse_unowned(dest, _owned(dest), "a core directory hwvit compiled")

    s = c.sizes
    blobs = {
        "prog": isa.prog_hex(c.program, s["PROG_DEPTH"]).encode(),
        "act": _hex_words(c.act, 8, s["ACT_DEPTH"]),
        "wgt": _hex_words(c.wgt, 8, s["WGT_DEPTH"]),
        "prm": _hex_words(c.prm, isa.PRM_BITS, s["PRM_DEPTH"]),
    }
    program = []
    for i, ins in enumerate(c.program):
        entry = {"i": i, "name": ins.name, "kind": ins.kind}
        if ins.op == isa.OP_GEMM:
            entry["mkn"] = [int(v) for v in ins.n[:3]]
        if ins.check:
            entry["check"] = ins.check
        program.append(entry)
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "hwvit_version": __version__,
        "model": model_spec,
        "input_shape": list(c.input_shape),
        "output": {"region": c.out_region, "count": int(c.out_count)},
        "sizes": {k: int(v) for k, v in s.items()},
        "regions": {k: [int(b), int(n)] for k, (b, n) in c.regions.items()},
        "files": {k: {"path": FILES[k][0], "sha256": hashlib.sha256(blobs[k]).hexdigest()} for k in FILES},
        "macs": int(sum(ins.macs() for ins in c.program)),
        "program": program,
    }
    with atomic_dir(out, check) as tmp:
        for k, blob in blobs.items():
            (tmp / FILES[k][0]).write_bytes(blob)
        (tmp / MANIFEST).write_text(yaml.safe_dump(manifest, sort_keys=False, width=120))
    return out


@dataclass
class CoreDir:
    path: Path
    manifest: dict[str, Any]
    program: list[isa.Instr]

    @property
    def sizes(self) -> dict[str, int]:
        return self.manifest["sizes"]

    def file(self, key: str) -> Path:
        return self.path / self.manifest["files"][key]["path"]

    def region(self, name: str) -> tuple[int, int]:
        base, size = self.manifest["regions"][name]
        return int(base), int(size)


def read_core_dir(path: str | Path) -> CoreDir:
    path = Path(path)
    if not path.is_dir():
        raise CoreDirError(f"{path}: not a directory (make one with `hwvit compile --model digits --out {path}`)")
    mf = path / MANIFEST
    if not mf.is_file():
        raise CoreDirError(f"{path}: no {MANIFEST}; not a compiled core directory")
    manifest = read_yaml(mf, error=CoreDirError)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CoreDirError(f"{mf}: not a {FORMAT} manifest")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise CoreDirError(f"{mf}: format_version {manifest.get('format_version')!r}, expected {FORMAT_VERSION}")
    try:
        files = manifest["files"]
        root = path.resolve()
        for key in FILES:
            rel = files[key]["path"]
            target = (path / rel).resolve()
            if root not in target.parents:
                raise CoreDirError(f"{mf}: file {rel!r} is outside the directory")
            if not target.is_file():
                raise CoreDirError(f"{path}: {rel} is missing")
            if hashlib.sha256(target.read_bytes()).hexdigest() != files[key]["sha256"]:
                raise CoreDirError(f"{path}: {rel} does not match its sha256 in {MANIFEST} (altered?)")
        entries = manifest["program"]
        words = [int(line, 16) for line in (path / files["prog"]["path"]).read_text().split()]
        program = [isa.from_fields(isa.word_fields(words[e["i"]]), e["name"], e.get("check")) for e in entries]
        for key in ("sizes", "regions", "output", "input_shape", "model"):
            manifest[key]  # noqa: B018 - presence check
    except CoreDirError:
        raise
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise CoreDirError(f"{mf}: malformed manifest ({exc.__class__.__name__}: {exc})") from None
    return CoreDir(path, manifest, program)
