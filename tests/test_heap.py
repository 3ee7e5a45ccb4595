"""hwvit.heap: glibc keeps large freed arrays in the heap once keep() ran, maps them afresh without it.

Each case runs in a fresh interpreter (mallopt is process-wide) and reads glibc's own counters
(``mallinfo2``: ``hblkhd`` bytes in mapped blocks, ``arena`` bytes of heap).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwvit import heap
from hwvit.cli import main

ROOT = Path(__file__).resolve().parents[1]

PROBE = r"""
import ctypes, json, sys
import numpy as np
from hwvit import heap

class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
state = heap.keep() if sys.argv[1] == "keep" else heap.state()
a = np.ones(64 << 20, dtype=np.uint8)  # 64 MiB: above glibc's largest default mmap threshold
during = libc.mallinfo2()
del a
after = libc.mallinfo2()
print(json.dumps({"state": state, "mapped": during.hblkhd, "heap_after_free": after.arena}))
"""


def _probe(how: str, env_value: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != heap.ENV}
    if env_value is not None:
        env[heap.ENV] = env_value
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", PROBE, how], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_keep_serves_large_arrays_from_the_heap_and_keeps_them():
    kept = _probe("keep")
    assert kept["state"].startswith("kept"), kept
    assert kept["mapped"] < 64 << 20  # not a mapping of its own
    assert kept["heap_after_free"] >= 64 << 20  # still the process's after free: the next one reuses it


def test_without_keep_glibc_maps_and_returns_them():
    for result in (_probe("defaults"), _probe("keep", "default")):
        assert result["mapped"] >= 64 << 20, result
        assert result["heap_after_free"] < 64 << 20
    assert _probe("keep", "default")["state"] == "malloc defaults (HWVIT_MALLOC=default)"


def test_bad_setting_is_a_one_line_error(monkeypatch):
    monkeypatch.setenv(heap.ENV, "off")
    with pytest.raises(ValueError, match="HWVIT_MALLOC: expected 'keep' or 'default', got 'off'"):
        heap.mode()
    monkeypatch.setattr(heap, "_state", None)
    result = CliRunner().invoke(main, ["info"])
    assert result.exit_code == 1
    assert result.output.strip() == "Error: HWVIT_MALLOC: expected 'keep' or 'default', got 'off'"
