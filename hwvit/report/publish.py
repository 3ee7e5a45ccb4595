"""Atomic output directories for reports and sweeps.

Rules (the same for `hwvit compare --out` and `hwvit sweep --out`):
- the files are written into a temporary sibling directory ``.<name>.tmp-XXXX`` on the same file
  system; on any error it is deleted and ``<name>`` is left as it was;
- a missing or empty ``<name>`` is replaced by one rename (atomic);
- an existing ``<name>`` is replaced only if it is a previous hwvit output of the same kind: its
  marker file (report.json / sweep.json) says so and it holds no file hwvit does not write. It is
  renamed aside, the new directory renamed in, the old one deleted: readers see the old or the new
  directory, never a mix (for the instant between the two renames, no directory);
- anything else (a file, a directory with other content) is refused with a ValueError, because
  replacing it would delete someone's files.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from hwvit.atomic import atomic_dir

MARKERS = {"compare-report": "report.json", "sweep": "sweep.json", "sensitivity": "sensitivity.json"}


def json_safe(obj):
    """``obj`` with numpy scalars as Python numbers and non-finite floats as the strings "inf"/"-inf"/"nan"."""
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    return obj


def _is_previous(path: Path, kind: str, files: tuple[str, ...]) -> str | None:
    """None if ``path`` is a previous output of ``kind``; otherwise the reason it is not."""
    marker = path / MARKERS[kind]
    try:
        meta = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"it has no readable {marker.name}"
    if not isinstance(meta, dict) or meta.get("kind") != kind:
        return f"its {marker.name} is not an hwvit {kind}"
    extra = sorted(p.name for p in path.iterdir() if p.name not in files)
    if extra:
        return f"it holds files hwvit did not write ({', '.join(extra[:3])})"
    return None


def check_out_dir(out_dir: str | Path, kind: str, files: tuple[str, ...]) -> Path:
    """The output path if it may be written (see the module rules); ValueError with one line otherwise."""
    out = Path(out_dir)
    if out.exists() or out.is_symlink():
        if not out.is_dir() or out.is_symlink():
            raise ValueError(f"{out}: exists and is not a directory")
        if any(out.iterdir()):
            why = _is_previous(out, kind, files)
            if why is not None:
                raise ValueError(
                    f"{out}: not empty and not a previous hwvit {kind} ({why}); choose another directory or remove it"
                )
    return out


@contextmanager
def staged_dir(out_dir: str | Path, kind: str, files: tuple[str, ...]) -> Iterator[tuple[Path, Path]]:
    """Yield ``(temporary dir, final dir)``; on normal exit the temporary dir becomes the final one.

    The body writes into the temporary directory; the caller must write the kind's marker file.
    """
    out = check_out_dir(out_dir, kind, files)
    with atomic_dir(out, lambda d: check_out_dir(d, kind, files)) as tmp:
        yield tmp, out
        written = sorted(p.name for p in tmp.iterdir())
        assert set(written) <= set(files), f"wrote undeclared files {set(written) - set(files)}"
        assert MARKERS[kind] in written, f"the {kind} marker {MARKERS[kind]} was not written"
