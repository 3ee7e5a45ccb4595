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
    """CPU (model, capability, flags), the GEMM backend in use (probed once per machine), whether
    hwvit's C kernels run on this CPU, the heap setting (hwvit/heap.py) and CUDA."""
    import torch

    from hwvit import heap
    from hwvit.ops import gemm_backends

    cpu = gemm_backends.cpu_info()
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none (--device cuda unavailable)"
    flags = " ".join(cpu["flags"]) or "none"

    def why_not(name: str) -> str | None:
        why = gemm_backends.why_unavailable(name)
        return why.split("unavailable: ", 1)[-1] if why else None

    gemm = gemm_backends.describe().split(";")[0]
    named = gemm_backends.named()
    why = why_not(named) if named else None
    if why:
        gemm += f", cannot run here: {why}"
    kernels = []  # hwvit's own C kernels: whether each runs on this CPU
    for name in ("int16_avx2", "int8_vnni"):
        why = why_not(name)
        kernels.append(f"{name} " + (f"not here ({why})" if why else "runs here"))
    return [
        ("cpu", f"{cpu['model']}, {cpu['cores']} cores, capability {cpu['capability']}, flags {flags}"),
        ("gemm", gemm),
        ("kernels", "; ".join(kernels)),
        ("heap", heap.state()),
        ("cuda", gpu),
    ]


@click.command()
def info() -> None:
    """Print the versions of python, torch, cocotb, iverilog, verilator, yosys, the presets, the CPU,
    the GEMM backend chosen for it and the GPU.

    \b
    Example:
      hwvit info
    """
    from hwvit.float.config import list_presets

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
        *_compute_rows(),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        click.echo(f"{key:<{width}}  {value}")
