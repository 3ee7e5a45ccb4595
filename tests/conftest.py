"""Shared fixtures."""

from __future__ import annotations

import pytest


def real_vnni() -> bool:
    """Whether this CPU runs hwvit's VNNI kernel itself (AVX-VNNI, or AVX512-VNNI with AVX512VL)."""
    from hwvit.ops import native

    try:
        native.vnni_kind()
    except RuntimeError:
        return False
    return True


@pytest.fixture
def vnni_here(monkeypatch):
    """``int8_vnni`` runs here: the real vpdpbusd kernel where the CPU has it, else the same packing,
    offset and tile with the quads' sums formed by AVX2 instructions (``native.EMULATE_VNNI``)."""
    from hwvit.ops import native

    monkeypatch.setattr(native, "EMULATE_VNNI", False)
    if not real_vnni():
        monkeypatch.setattr(native, "EMULATE_VNNI", True)
    return native.vnni_kind()
