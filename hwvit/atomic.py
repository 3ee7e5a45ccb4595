"""Atomic outputs: a file or a directory appears whole or not at all.

Everything hwvit writes for a user (vector sets, reports, sweeps, checkpoints, tables) is built
under a temporary name beside its destination, on the same file system, and renamed into place
once complete; on any error or Ctrl-C the temporary is removed and the destination is left as it
was. rename(2) is atomic for a file, and for a directory onto a missing or empty one; replacing
a non-empty directory takes two renames (old aside, new in) and a reader sees the old or the
new tree, never a mix.

- ``atomic_file(path)``: yields a temporary path to write by name (``open``, ``np.save``,
  ``safetensors.torch.save_file``); ``write_atomic(path, data)`` does it in one call.
- ``atomic_dir(dest, check)``: yields a temporary directory; ``check(dest)`` decides, before the
  work and again just before the swap, whether an existing ``dest`` may be replaced (it raises
  to refuse).
- ``unowned(dest, owned)`` / ``refuse_unowned(...)``: what ``--force`` must not delete: the files
  under ``dest`` that hwvit's previous output there does not account for (a README a repository
  commits beside the outputs, a user's notes, a file edited since). A writer that replaces a
  directory whole calls it from its ``check``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

FILE_MODE = 0o644  # mkstemp makes 0600; outputs are meant to be shared
DIR_MODE = 0o755  # mkdtemp makes 0700


@contextmanager
def atomic_file(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on normal exit it replaces ``path`` (mode 0644)."""
    path = Path(path)
    parent = path.absolute().parent
    fd, name = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: str | Path, data: bytes | str) -> None:
    """Write ``data`` (str as UTF-8) to ``path`` atomically."""
    with atomic_file(path) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)


def unowned(dest: str | Path, owned: Mapping[str, str | None]) -> list[str]:
    """Files under ``dest`` (relative POSIX paths, sorted; a symlink counts as a file and is not
    followed) that ``owned`` does not account for: missing from it, or, where it gives a sha256
    (``None``: matched by name only), with other contents. Empty directories do not count."""
    dest = Path(dest)
    out = []
    for path in sorted(dest.rglob("*")):
        if path.is_dir() and not path.is_symlink():
            continue
        rel = path.relative_to(dest).as_posix()
        if rel not in owned:
            out.append(rel)
        elif owned[rel] is not None and (
            path.is_symlink() or hashlib.sha256(path.read_bytes()).hexdigest() != owned[rel]
        ):
            out.append(f"{rel} (changed since it was written)")
    return out


def refuse_unowned(dest: str | Path, owned: Mapping[str, str | None], what: str) -> None:
    """FileExistsError (one line) naming what ``unowned`` finds under ``dest``, if anything;
    ``what`` says what --force does replace ("vector sets hwvit wrote")."""
    extra = unowned(dest, owned)
    if extra:
        more = f" and {len(extra) - 3} more" if len(extra) > 3 else ""
        raise FileExistsError(
            f"{dest}: --force replaces only {what}, and this directory also holds "
            f"{', '.join(extra[:3])}{more}; move those away or choose another directory"
        )


def _is_empty_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink() and not any(path.iterdir())


@contextmanager
def atomic_dir(dest: str | Path, check: Callable[[Path], None] | None = None) -> Iterator[Path]:
    """Yield a temporary directory beside ``dest``; on normal exit it becomes ``dest``.

    A missing or empty ``dest`` is replaced by one rename. A non-empty one is replaced only if
    ``check(dest)`` returns (it raises to refuse); ``check`` runs before the work and again just
    before the swap, in case something appeared meanwhile. Parent directories are created; those
    created here are removed again if the work fails.
    """
    dest = Path(dest)
    if check is not None:
        check(dest)
    parent = dest.absolute().parent
    missing = [p for p in [parent, *parent.parents] if not p.exists()]
    created = missing[-1] if missing else None  # the topmost directory made here
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=parent))
    try:
        yield tmp
        os.chmod(tmp, DIR_MODE)
        if check is not None:
            check(dest)
        _publish(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise


def _publish(tmp: Path, dest: Path) -> None:
    if not (dest.exists() or dest.is_symlink()):
        os.rename(tmp, dest)
        return
    if _is_empty_dir(dest):
        os.replace(tmp, dest)  # rename(2) replaces an empty directory atomically
        return
    if not dest.is_dir() or dest.is_symlink():
        raise FileExistsError(f"{dest} exists and is not a directory; not replacing it")
    # Two renames; the old tree is deleted only once the new one is in place.
    old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.absolute().parent))
    os.rename(dest, old / "tree")
    try:
        os.rename(tmp, dest)
    except BaseException:
        os.rename(old / "tree", dest)  # put the previous output back
        shutil.rmtree(old, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
