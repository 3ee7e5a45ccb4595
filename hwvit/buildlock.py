"""A build lock that also works on NFS and other shared storage.

``flock``/``fcntl`` locks are not reliable across NFS clients (older servers ignore them, some
mounts use ``nolock``), so the lock is the creation of a file with ``O_CREAT | O_EXCL``, which
NFSv3+ performs atomically on the server. The file holds ``host pid``; a waiter polls every
``POLL_S`` and breaks a stale lock: one whose owner ran on this host and is gone (a killed
simulation worker, a zombie included: its parent may reap it only minutes later), one older
than ``HWVIT_LOCK_STALE_S`` seconds (default 3600: a Verilator build of the largest block
takes about a minute) whatever its host, or one that names no owner
``EMPTY_STALE_S`` after it was made (its owner died between creating and writing it; a live
owner writes its name at once).
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

POLL_S = 0.1
EMPTY_STALE_S = 10.0


def _zombie(pid: int) -> bool:
    """The process has exited and waits to be reaped (Linux /proc state Z): signal 0 still
    reaches it, but it holds nothing and never will again."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False  # no /proc (not Linux) or no such process: os.kill decides
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


def _stale(path: Path, max_age: float) -> bool:
    try:
        text = path.read_text()
        age = time.time() - path.stat().st_mtime
    except OSError:
        return False  # released meanwhile: the next try takes it
    if age > max_age:
        return True
    host, _, pid = text.partition(" ")
    if not host or not pid.strip().isdigit():
        return age > EMPTY_STALE_S  # no owner written: a crash between create and write
    if host != socket.gethostname():
        return False  # another machine's lock: only its age can tell
    if _zombie(int(pid)):
        return True  # killed, not yet reaped by its parent (a SIGKILLed Dask worker): gone
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@contextlib.contextmanager
def locked(path: str | Path) -> Iterator[None]:
    """Hold ``path`` as an exclusive lock file for the duration of the block."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    max_age = float(os.environ.get("HWVIT_LOCK_STALE_S", "3600"))
    me = f"{socket.gethostname()} {os.getpid()}"
    while True:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            if _stale(path, max_age):
                # Rename, then remove: two waiters breaking the same lock cannot both succeed.
                grave = path.with_name(f"{path.name}.stale-{os.getpid()}")
                with contextlib.suppress(OSError):
                    os.rename(path, grave)
                    os.unlink(grave)
                continue
            time.sleep(POLL_S)
            continue
        with os.fdopen(fd, "w") as fh:
            fh.write(me)
        break
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
