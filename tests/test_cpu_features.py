"""The CPU as hwvit reads it: the whole flag set, torch's view beside it, and the kernels that follow.

The tests that matter read the real /proc/cpuinfo of the machine they run on: where a kernel's flags
are there, the kernel must run (a detection bug, such as a flag filtered out before the check, fails
here on the CPU it hides a kernel from).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hwvit.ops import cpu, gemm_backends, native

ZEN4_BLOCK = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC 9R14 96-Core Processor
flags\t\t: fpu sse4_1 avx avx2 fma avx512f avx512dq avx512bw avx512vl avx512_bf16 avx512_vnni avx512vbmi

processor\t: 1
model name\t: something else
flags\t\t: fpu
"""


def _raw_flags() -> set[str]:
    """The first processor's flags, read here without hwvit's parser."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith(("flags", "Features")):
            return set(line.split(":", 1)[1].split())
    return set()


def test_parse_keeps_the_whole_flag_set_of_the_first_processor():
    name, family, model, flags = cpu.parse_cpuinfo(ZEN4_BLOCK)
    assert (name, family, model) == ("AMD EPYC 9R14 96-Core Processor", 25, 17)
    assert "avx512vl" in flags and "avx512vbmi" in flags and len(flags) == 12
    arm = "processor\t: 0\nFeatures\t: fp asimd asimddp i8mm\nCPU part\t: 0xd40\n"
    assert cpu.parse_cpuinfo(arm)[3] == frozenset({"fp", "asimd", "asimddp", "i8mm"})
    assert cpu.parse_cpuinfo("") == (None, None, None, frozenset())


def test_features_are_the_real_cpuinfo_flags_all_of_them():
    feats = cpu.read()
    raw = _raw_flags()
    assert raw, "no flags line in /proc/cpuinfo"
    assert feats.flags == raw  # nothing filtered away before a kernel asks
    assert feats.int8_flags == [f for f in cpu.INT8_FLAGS if f in raw]
    assert feats.cores >= 1 and feats.model


def test_every_kernel_whose_flags_this_cpu_has_runs_here(monkeypatch):
    """On this machine's real CPU: AVX2 means int16_avx2 runs; AMX with AVX512F/VL, else AVX-VNNI, else
    AVX512-VNNI with VL and F, means int8_vnni runs that real tile (not the emulation), and the probe
    may choose it."""
    monkeypatch.setattr(native, "EMULATE_VNNI", False)
    monkeypatch.setattr(native, "_cpu_vnni", None)
    monkeypatch.setattr(native, "_amx_ok", None)
    monkeypatch.setattr(cpu, "_features", None)  # read /proc/cpuinfo afresh
    raw = _raw_flags()
    if set(cpu.REQUIRES["int16"]) <= raw:
        assert gemm_backends.why_not_here("int16_avx2") is None
    want = None
    if set(cpu.REQUIRES["amx"]) <= raw:  # Linux grants the tile state on every kernel since 5.16
        assert native.amx_why() is None
        want = native.KINDS["amx"]
    elif set(cpu.REQUIRES["avxvnni"]) <= raw:
        want = native.KINDS["avxvnni"]
    elif set(cpu.REQUIRES["avx512vnni"]) <= raw:
        want = native.KINDS["avx512vnni"]
    if want is not None:
        assert native.vnni_kind() == want
        assert gemm_backends.why_not_here("int8_vnni") is None
        assert gemm_backends.is_exact("int8_vnni")
    else:
        with pytest.raises(RuntimeError, match="^int8_vnni GEMM unavailable: "):
            native.vnni_kind()


def test_torch_and_cpuinfo_agree_here():
    """torch probes avx2, avx512, vnni and amx itself (cpuinfo library, CPUID); on this machine it must
    see what /proc/cpuinfo lists, and hwvit reports both side by side."""
    feats = cpu.read()
    probed = dict(feats.torch_says)
    assert probed["avx2"] == torch.cpu._is_avx2_supported()
    assert set(probed) >= {"avx2", "avx512f", "avx512_vnni"}
    assert feats.disagreements == [], feats.disagreements
    assert feats.torch_capability == torch.backends.cpu.get_cpu_capability()


def test_a_disagreement_is_named():
    feats = cpu.Features(
        model="x", family=None, model_number=None, flags=frozenset({"avx2"}), torch_says=(("avx512_vnni", True),)
    )
    assert feats.disagreements == ["avx512_vnni: cpuinfo no, torch yes"]


def test_missing_names_the_flags_a_kernel_lacks(fake_cpu):
    fake_cpu(["avx2", "avx512f", "avx512_vnni"])
    assert cpu.missing("avx512vnni") == ["avx512vl"]
    assert cpu.missing("int16") == []
    assert cpu.missing("avxvnni") == ["avx_vnni"]


def test_gemm_cpu_info_reports_the_int8_flags_with_vl():
    """The flags gemm_backends.cpu_info reports (bench, info) include AVX512VL and AVX512BW where present."""
    raw = _raw_flags()
    flags = gemm_backends.cpu_info()["flags"]
    for f in ("avx512vl", "avx512bw", "avx512_vnni", "avx2"):
        assert (f in flags) == (f in raw)
