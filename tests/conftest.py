"""Shared fixtures."""

from __future__ import annotations

import os

# Two xdist workers share the cores: an OpenMP thread (numba's kernels, torch) that spins after each
# parallel region holds a core the other worker needs. On a 2-core Zen 3, tests/test_gemm_layouts.py
# beside another GEMM test file took 15.0 s, 5.1 s with sleeping threads (as alone). Set before
# numba or torch loads its OpenMP runtime, which reads it once; subprocesses inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

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
    from hwvit.ops import gemm_backends, native

    # a probe made while the emulation is on is this test's only (the process's choice comes back after)
    monkeypatch.setattr(gemm_backends, "_probe_result", gemm_backends._probe_result)
    monkeypatch.setattr(native, "EMULATE_VNNI", False)
    if not real_vnni():
        monkeypatch.setattr(native, "EMULATE_VNNI", True)
    return native.vnni_kind()


@pytest.fixture
def counted(monkeypatch):
    """``counted(module, name)``: a list that gains one entry at each call of ``module.name`` from now
    on (the function itself still runs); the module's own function is back after the test."""

    def count(module, name):
        seen = []
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, **kw: seen.append(1) or real(*a, **kw))
        return seen

    return count


@pytest.fixture
def fake_cpu(monkeypatch):
    """``fake_cpu(flags)``: this process sees a CPU with exactly those /proc/cpuinfo flags (as
    ``hwvit.ops.cpu.features()`` reports them); the kernels' once-per-process answer is reset."""
    from hwvit.ops import cpu, native

    def set_flags(flags):
        fake = cpu.Features(model="test CPU", family=None, model_number=None, flags=frozenset(flags))
        monkeypatch.setattr(cpu, "_features", fake)
        monkeypatch.setattr(native, "_cpu_vnni", None)  # the flags are read once per process
        return fake

    return set_flags


@pytest.fixture(params=["int16", "split7", "vnni", "amx"])
def kind(request, vnni_here) -> int:
    """The int16 kernel, the 7-bit split quads (vpmaddubsw, outliers listed), the int8 quad (vpdpbusd)
    kernel: the real one where the CPU has VNNI, else its AVX2 emulation (the same packing, offset,
    tile and requant; only the instruction differs), and the AMX tile: the real one where the CPU has
    it and Linux grants it, else its emulation in C (the same packing, padding and 32-row blocks)."""
    from hwvit.ops import native

    if request.param == "split7":
        return native.KINDS["split7"]
    if request.param == "amx":
        return native.KINDS["amx"] if native.amx_why() is None else native.KINDS["amx_emulated"]
    return native.KINDS["int16"] if request.param == "int16" else vnni_here


@pytest.fixture(scope="session")
def onnx_zoo(tmp_path_factory):
    """Quantized ONNX files of the tests' ViTs and their side-by-side runs, made on first use
    (tests/onnx_zoo.py); the tests that use it share one xdist group, so one worker makes them."""
    from onnx_zoo import Zoo

    return Zoo(tmp_path_factory.mktemp("onnx"))
