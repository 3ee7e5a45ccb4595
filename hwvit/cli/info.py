"""`hwvit info`: versions of the toolchain and the shipped presets."""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version

import click

from hwvit import __version__, toolchain


def _pkg(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def _compute_rows() -> list[tuple[str, str]]:
    """The CPU (model, family, cores), every int8-relevant flag it has and what torch says of them, the
    GEMM backend in use (probed once per machine), each backend's "runs here" or the one reason it
    cannot, which C kernel ``int8_vnni`` runs, the heap setting (hwvit/heap.py) and CUDA."""
    import torch

    from hwvit import heap
    from hwvit.ops import cpu, gemm_backends, native

    feats = cpu.features()
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none (--device cuda unavailable)"
    torch_view = f"capability {feats.torch_capability}; " + (
        "disagrees with /proc/cpuinfo: " + "; ".join(feats.disagreements)
        if feats.disagreements
        else "agrees with /proc/cpuinfo on " + " ".join(flag for flag, _ in feats.torch_says)
    )
    gemm = gemm_backends.describe().split(";")[0]
    named = gemm_backends.named()
    why = gemm_backends.why_not_here(named) if named else None
    if why:
        gemm += f", cannot run here: {why}"
    status = {name: gemm_backends.why_not_here(name) for name in gemm_backends.BACKENDS}
    kernels = []  # hwvit's own C kernels: whether each runs on this CPU
    for name in ("int16_avx2", "int8_avx2", "int8_vnni"):
        kernels.append(f"{name} " + (f"not here ({status[name]})" if status[name] else "runs here"))
    if status["int8_vnni"] is None:
        tile = {v: k for k, v in native.KINDS.items()}[native.vnni_kind()]
        kernels[-1] += f" ({tile} tile)"
    backends = ", ".join(f"{n} " + (f"not here ({why})" if why else "runs here") for n, why in status.items())
    return [
        (
            "cpu",
            f"{feats.name}, {feats.cores} cores",
        ),
        ("int8-flags", " ".join(feats.int8_flags) or "none"),
        ("torch-cpu", torch_view),
        ("gemm", gemm),
        ("backends", backends),
        ("kernels", "; ".join(kernels)),
        ("heap", heap.state()),
        ("cuda", gpu),
    ]


@click.command()
def info() -> None:
    """Print the versions of python, torch, cocotb, iverilog, verilator, yosys, the presets, the
    checkpoint families (--family), the CPU,
    the GEMM backend chosen for it, the GPU, the block kinds and each block's arithmetic variants.

    \b
    Example:
      hwvit info
    """
    from hwvit import blocks, variants
    from hwvit.cli.common import fail
    from hwvit.float.config import list_presets
    from hwvit.float.keymaps import MODEL_FAMILIES
    from hwvit.ops import gemm_backends

    try:
        gemm_backends.named()  # a bad HWVIT_GEMM: one line, before anything is printed
    except ValueError as exc:
        fail(f"{gemm_backends.ENV}: {exc}")
    rows = [
        ("hwvit", __version__),
        ("python", platform.python_version()),
        ("torch", _pkg("torch")),
        ("numpy", _pkg("numpy")),
        ("cocotb", _pkg("cocotb")),
        ("iverilog", toolchain.version("icarus")),
        ("verilator", toolchain.version("verilator")),
        ("yosys", toolchain.version("yosys")),
        ("presets", ", ".join(list_presets())),
        ("families", ", ".join(MODEL_FAMILIES)),
        *_compute_rows(),
        ("blocks", ", ".join(blocks.names())),
        *((f"{family} variants", ", ".join(variants.names(family))) for family in variants.FAMILIES),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        click.echo(f"{key:<{width}}  {value}")
