"""The O_EXCL build lock: exclusive between processes, a dead owner's lock is broken, released on exit."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from hwvit.buildlock import locked


def test_lock_excludes_another_process_until_released(tmp_path):
    lock = tmp_path / "b.lock"
    probe = (
        "import sys, time; from hwvit.buildlock import locked\n"
        f"t = time.monotonic()\nwith locked({str(lock)!r}): print(round(time.monotonic() - t, 1))"
    )
    with locked(lock):
        assert lock.read_text() == f"{socket.gethostname()} {os.getpid()}"
        child = subprocess.Popen([sys.executable, "-c", probe], stdout=subprocess.PIPE, text=True)
        time.sleep(1.5)
        assert child.poll() is None  # still waiting for us
    out, _ = child.communicate(timeout=30)
    assert float(out) >= 1.0 and not lock.exists()


def test_lock_of_a_dead_process_on_this_host_is_broken(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    lock = tmp_path / "b.lock"
    lock.write_text(f"{socket.gethostname()} {int(dead.stdout)}")
    with locked(lock):
        assert lock.read_text().endswith(f" {os.getpid()}")
    assert not lock.exists()


def test_fresh_lock_of_another_host_is_not_broken(tmp_path, monkeypatch):
    lock = tmp_path / "b.lock"
    lock.write_text("some-other-host 1")
    monkeypatch.setenv("HWVIT_LOCK_STALE_S", "2")
    start = time.monotonic()
    with locked(lock):  # waits until the lock is older than 2 s, then breaks it
        waited = time.monotonic() - start
    assert 1.0 < waited < 30


def test_empty_lock_file_is_broken_only_once_it_is_old(tmp_path, monkeypatch):
    """An empty file (an owner that died between creating and writing it, or a plain flock file of
    an earlier release) must not block builds forever, nor be broken while an owner may still write."""
    import hwvit.buildlock as bl

    lock = tmp_path / "b.lock"
    lock.write_text("")
    assert not bl._stale(lock, 3600.0)  # fresh: its owner may be about to write its name
    old = time.time() - bl.EMPTY_STALE_S - 5
    os.utime(lock, (old, old))
    assert bl._stale(lock, 3600.0)
    with locked(lock):
        assert lock.read_text().endswith(f" {os.getpid()}")


def test_lock_of_a_zombie_on_this_host_is_broken(tmp_path):
    """An owner that exited but is not reaped yet (signal 0 still reaches it) holds nothing."""
    from hwvit import buildlock

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        for _ in range(200):  # until it has exited; not waited for, so it stays a zombie
            if buildlock._zombie(child.pid):
                break
            time.sleep(0.05)
        assert buildlock._zombie(child.pid)
        lock = tmp_path / "z.buildlock"
        lock.write_text(f"{socket.gethostname()} {child.pid}")
        assert buildlock._stale(lock, 3600.0)
    finally:
        child.wait()
    assert not buildlock._zombie(os.getpid())
