"""Keep glibc's malloc from returning large freed arrays to the kernel between two kernels.

Every kernel of the integer forward returns a fresh array; at ViT-B/16 batch 4 and up many are
tens of MB (the GEMM accumulators most of all). With glibc's defaults a block above the mmap threshold (dynamic, at most
32 MiB) is mapped anew on each allocation and freed heap above the trim threshold is handed back,
so most outputs arrive as fresh zero pages and pay a page fault per 4 KiB on their first write.
At ViT-B/16 batch 8 those faults cost about a third of the int forward's time.

``keep()`` raises them once per process with ``mallopt``: blocks up to 1 GiB come from the heap
and up to 2 GiB of freed heap stay with the process, so the next forward reuses pages that are
already mapped. The price: the process keeps its peak heap until it exits. Every ``hwvit``
command calls it (the CLI group), as do ``hwvit.bench.bench_forward`` and compare's tasks on Dask
workers; API users call it themselves. ``HWVIT_MALLOC=default`` leaves malloc as it is. Not glibc
(macOS, musl): nothing is changed, and ``keep()`` says so.
"""

from __future__ import annotations

import ctypes
import os
import platform

ENV = "HWVIT_MALLOC"
MMAP_THRESHOLD = 1 << 30  # bytes: blocks up to this size come from the heap
TRIM_THRESHOLD = (1 << 31) - 1  # bytes of free heap top kept (mallopt takes an int)
_M_TRIM_THRESHOLD = -1  # glibc malloc.h
_M_MMAP_THRESHOLD = -3

_state: str | None = None


def mode() -> str:
    """``keep`` or ``default``, from $HWVIT_MALLOC (unset: keep); anything else is a ValueError."""
    value = os.environ.get(ENV, "").strip().lower() or "keep"
    if value not in ("keep", "default"):
        raise ValueError(f"{ENV}: expected 'keep' or 'default', got {os.environ[ENV]!r}")
    return value


def keep() -> str:
    """Raise glibc's mmap and trim thresholds (once per process); returns what was done, in words."""
    global _state
    if _state is None:
        _state = _apply(mode())
    return _state


def state() -> str:
    """What ``keep()`` did in this process, or that it was not called."""
    return _state or "malloc defaults (keep() not called)"


def _apply(wanted: str) -> str:
    if wanted == "default":
        return f"malloc defaults ({ENV}=default)"
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return "malloc defaults (not glibc)"
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return "malloc defaults (no mallopt)"
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    if not (mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)):
        return "malloc defaults (mallopt refused)"
    return "kept (glibc mmap threshold 1 GiB, trim threshold 2 GiB)"
