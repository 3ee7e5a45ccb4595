"""hwvit.atomic: outputs appear whole or not at all; refusals and failures leave the old state."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hwvit.atomic import atomic_dir, atomic_file, write_atomic


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_write_atomic_replaces_a_file_and_leaves_no_temporary(tmp_path):
    out = tmp_path / "table.md"
    out.write_text("old")
    write_atomic(out, "new ü")
    assert out.read_text(encoding="utf-8") == "new ü" and _listing(tmp_path) == ["table.md"]
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


def test_atomic_file_failure_keeps_the_old_file(tmp_path):
    out = tmp_path / "ckpt.bin"
    out.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="disk full"):
        with atomic_file(out) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("disk full")
    assert out.read_bytes() == b"old" and _listing(tmp_path) == ["ckpt.bin"]


def test_atomic_dir_creates_parents_and_publishes(tmp_path):
    dest = tmp_path / "a" / "b" / "set"
    with atomic_dir(dest) as tmp:
        assert tmp.parent == dest.parent and not dest.exists()
        (tmp / "x.hex").write_text("00\n")
    assert (dest / "x.hex").read_text() == "00\n"
    assert stat.S_IMODE(dest.stat().st_mode) == 0o755
    assert _listing(tmp_path / "a" / "b") == ["set", "set/x.hex"]


def test_atomic_dir_failure_removes_what_it_created(tmp_path):
    dest = tmp_path / "new" / "deeper" / "set"
    with pytest.raises(KeyboardInterrupt):
        with atomic_dir(dest) as tmp:
            (tmp / "x").write_text("partial")
            raise KeyboardInterrupt
    assert _listing(tmp_path) == []


def test_atomic_dir_replaces_only_what_check_allows(tmp_path):
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")

    def refuse(d: Path) -> None:
        if d.exists() and any(d.iterdir()):
            raise FileExistsError(f"{d} is not empty")

    with pytest.raises(FileExistsError):
        with atomic_dir(dest, refuse) as tmp:
            (tmp / "new.txt").write_text("x")
    assert _listing(tmp_path) == ["out", "out/keep.txt"]

    with atomic_dir(dest, lambda d: None) as tmp:  # allowed: swapped in whole, old tree gone
        (tmp / "new.txt").write_text("x")
    assert _listing(tmp_path) == ["out", "out/new.txt"]


def test_atomic_dir_checks_again_before_the_swap(tmp_path):
    dest = tmp_path / "out"
    calls = []

    def check(d: Path) -> None:
        calls.append(d.exists())
        if d.exists():
            raise FileExistsError("appeared meanwhile")

    with pytest.raises(FileExistsError, match="meanwhile"):
        with atomic_dir(dest, check) as tmp:
            (tmp / "f").write_text("x")
            os.mkdir(dest)  # someone else's output appears during the work
            (dest / "theirs").write_text("y")
    assert calls == [False, True] and _listing(tmp_path) == ["out", "out/theirs"]
