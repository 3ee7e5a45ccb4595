"""What this CPU can run: read once from /proc/cpuinfo, cross-checked with torch, asked by every backend.

``features()`` is the one place hwvit reads the CPU. It keeps the whole flag set (a backend's
requirement is a subset test on it, so no list of "wanted" flags can drop one that a kernel needs),
the model (name, family, model number), the cores, and torch's own view of the CPU
(``torch.backends.cpu.get_cpu_capability()`` and ``torch.cpu._is_*_supported()``), so that ``hwvit
info`` can say where the two disagree. ``REQUIRES`` names the flags each of hwvit's C kernels needs;
``missing(kernel)`` says which of them this CPU lacks.
"""

from __future__ import annotations

import hashlib
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path

# Flags that decide how fast and how exactly int8 products run, in the order `hwvit info` lists them.
INT8_FLAGS = (
    "sse4_1",
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx_vnni",
    "avx_vnni_int8",
    "avx512_bf16",
    "amx_tile",
    "amx_int8",
    "asimddp",  # arm64 dot product (SDOT/UDOT)
    "i8mm",  # arm64 int8 matrix multiply
)

# The flags each kernel of csrc/gemm_kernels.c needs (native.KINDS names them).
REQUIRES = {
    "int16": ("avx2",),
    "avxvnni": ("avx2", "avx_vnni"),
    "avx512vnni": ("avx2", "avx512f", "avx512vl", "avx512_vnni"),  # vpdpbusd on ymm: the EVEX form needs VL
    "emulated": ("avx2",),
    "amx": ("avx2", "avx512f", "avx512vl", "amx_tile", "amx_int8"),  # tdpbusd tiles; AVX-512 requantizer
    "amx_emulated": ("avx2",),
    "split7": ("avx2",),
}

# torch's probes of the same features (torch.cpu._is_<name>_supported), beside the flags they mirror
_TORCH_PROBES = {"avx2": "avx2", "avx512": "avx512f", "vnni": "avx512_vnni", "amx_tile": "amx_tile"}


@dataclass(frozen=True)
class Features:
    model: str
    family: int | None
    model_number: int | None
    flags: frozenset = field(default_factory=frozenset)  # every flag /proc/cpuinfo lists
    cores: int = 1
    torch_capability: str = "unknown"
    torch_says: tuple = ()  # (flag, torch's answer) for the features torch probes itself

    def has(self, *names: str) -> bool:
        return all(n in self.flags for n in names)

    @property
    def int8_flags(self) -> list[str]:
        """The int8-relevant flags this CPU has, in INT8_FLAGS order."""
        return [f for f in INT8_FLAGS if f in self.flags]

    @property
    def disagreements(self) -> list[str]:
        """Features where torch and /proc/cpuinfo disagree, e.g. ``avx512_vnni: cpuinfo yes, torch no``."""
        out = []
        for flag, torch_yes in self.torch_says:
            if torch_yes != (flag in self.flags):
                out.append(
                    f"{flag}: cpuinfo {'yes' if flag in self.flags else 'no'}, torch {'yes' if torch_yes else 'no'}"
                )
        return out

    @property
    def flags_sha(self) -> str:
        return hashlib.sha1(" ".join(sorted(self.flags)).encode()).hexdigest()[:12]

    @property
    def name(self) -> str:
        """The model name with its family and model number where /proc/cpuinfo gives them."""
        fam = f" (family {self.family} model {self.model_number})" if self.family is not None else ""
        return self.model + fam

    def describe(self) -> str:
        return f"{self.name}, {self.cores} cores, flags {' '.join(self.int8_flags) or 'none'}"


def parse_cpuinfo(text: str) -> tuple[str | None, int | None, int | None, frozenset]:
    """(model name, family, model number, flags) of the first processor block of /proc/cpuinfo text
    (x86 ``flags``, arm64 ``Features``)."""
    name = family = number = None
    flags: frozenset = frozenset()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip()
        if not sep:
            if name is not None or flags:  # the first processor's block ended
                break
            continue
        if key == "model name" and name is None:
            name = value.strip()
        elif key == "cpu family" and family is None:
            family = _int(value)
        elif key == "model" and number is None:
            number = _int(value)
        elif key in ("flags", "Features") and not flags:
            flags = frozenset(value.split())
    return name, family, number, flags


def _int(text: str) -> int | None:
    try:
        return int(text.strip(), 0)
    except ValueError:
        return None


def _torch_view() -> tuple[str, tuple]:
    try:
        import torch
    except ImportError:
        return "unknown", ()
    try:
        capability = torch.backends.cpu.get_cpu_capability()
    except AttributeError:
        capability = "unknown"
    says = []
    for probe, flag in _TORCH_PROBES.items():
        fn = getattr(torch.cpu, f"_is_{probe}_supported", None)
        if fn is not None:
            try:
                says.append((flag, bool(fn())))
            except RuntimeError:
                pass
    return capability, tuple(says)


def read(cpuinfo: Path = Path("/proc/cpuinfo")) -> Features:
    """The CPU as /proc/cpuinfo (and torch) describe it now."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        text = ""
    name, family, number, flags = parse_cpuinfo(text)
    capability, says = _torch_view()
    return Features(
        model=name or platform.processor() or platform.machine(),
        family=family,
        model_number=number,
        flags=flags,
        cores=os.cpu_count() or 1,
        torch_capability=capability,
        torch_says=says,
    )


_features: Features | None = None


def features() -> Features:
    """This CPU, read once per process (/proc/cpuinfo has a block per core: long on a big server)."""
    global _features
    if _features is None:
        _features = read()
    return _features


def missing(kernel: str, feats: Features | None = None) -> list[str]:
    """The flags kernel ``kernel`` (a key of REQUIRES) needs that this CPU lacks."""
    feats = feats or features()
    return [f for f in REQUIRES[kernel] if f not in feats.flags]
