"""A fresh clone of this repository: where a newcomer runs the commands of the docs and of `--help`.

``fresh_clone(dest)`` checks out the repository's tracked files as they are now (HEAD plus the
uncommitted changes to tracked files, ``git stash create``, so a doc being edited is the one
tested) into ``dest``, with nothing else: no vector sets, reports or builds left by earlier runs,
and the files the repository commits (vectors/README.md) where a user finds them. The clone shares
the repository's objects (``git clone --shared``, a fraction of a second) and links ``.venv`` to
the virtual environment running the tests, so `make` and ``.venv/bin/activate`` work in it as in
the checkout without a second install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> str:
    git = shutil.which("git")
    assert git, "git is not installed: apt-get install -y git"
    res = subprocess.run([git, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"git {' '.join(args)}: {res.stderr.strip()}"
    return res.stdout.strip()


def snapshot() -> str:
    """The commit of the tracked files as they are in the working tree: HEAD, or a stash commit of
    the uncommitted changes (made on a copy of the index, so that test processes running at once
    never race for the checkout's index lock; no ref is written)."""
    index = Path(_git("rev-parse", "--path-format=absolute", "--git-path", "index"))
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "index"
        if index.exists():
            shutil.copyfile(index, copy)
        made = _git("stash", "create", env={**os.environ, "GIT_INDEX_FILE": str(copy)})
    return made or _git("rev-parse", "HEAD")


def fresh_clone(dest: Path, commit: str | None = None) -> Path:
    """Clone the repository at ``commit`` (default: ``snapshot()``) into ``dest``; return ``dest``."""
    commit = commit or snapshot()
    _git("clone", "-q", "--shared", "--no-checkout", str(ROOT), str(dest))
    _git("-c", "advice.detachedHead=false", "checkout", "-q", "--detach", commit, cwd=dest)
    venv = Path(sys.prefix)
    assert (venv / "bin" / "activate").is_file(), f"{venv}: the tests run outside a virtual environment (make setup)"
    (dest / ".venv").symlink_to(venv)
    # make's rule for the venv compares the stamp with pyproject.toml: the checkout's copy is new,
    # the linked venv already installed from the same file (a second older: no rounding makes it newer)
    stamp = venv / ".installed"
    if stamp.exists():
        older = stamp.stat().st_mtime_ns - 1_000_000_000
        os.utime(dest / "pyproject.toml", ns=(older, older))
    return dest
