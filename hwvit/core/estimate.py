"""Per-layer cycles, images/s and MAC utilization of a program, from the cycle model."""

from __future__ import annotations

from hwvit.core import cycles as cyc
from hwvit.core import isa


def layer_of(name: str) -> str:
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "layers" else parts[0]


def per_layer(program: list[isa.Instr], rows: int, cols: int) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for ins in program:
        e = out.setdefault(layer_of(ins.name), {"cycles": 0, "gemm": 0, "macs": 0})
        c = cyc.instr_cycles(ins, rows, cols) if ins.op != isa.OP_END else 3
        e["cycles"] += c
        e["macs"] += ins.macs()
        if ins.op == isa.OP_GEMM:
            e["gemm"] += c
    return out


def estimate_table(program: list[isa.Instr], rows: int, cols: int, clock_mhz: float, name: str) -> list[str]:
    layers = per_layer(program, rows, cols)
    lanes = rows * cols
    lines = [
        f"{name} on a {rows}x{cols} core at {clock_mhz:g} MHz (cycle model of rtl/vit_core.v)",
        f"{'layer':<12} {'cycles':>14} {'ms':>10} {'MACs':>16} {'util':>7} {'gemm util':>9}",
    ]
    for lname, e in layers.items():
        util = e["macs"] / (e["cycles"] * lanes) if e["cycles"] else 0.0
        gutil = e["macs"] / (e["gemm"] * lanes) if e["gemm"] else 0.0
        lines.append(
            f"{lname:<12} {e['cycles']:>14,} {e['cycles'] / (clock_mhz * 1e3):>10.3f} {e['macs']:>16,} "
            f"{util:>7.1%} {gutil:>9.1%}"
        )
    total = sum(e["cycles"] for e in layers.values())
    macs = sum(e["macs"] for e in layers.values())
    roofline = macs / lanes
    cls = cyc.program_cycles(program, rows, cols)
    lines.append(
        f"total: {total:,} cycles/image = {clock_mhz * 1e6 / total:,.2f} images/s; MAC roofline "
        f"{roofline:,.0f} cycles; utilization {macs / (total * lanes):.1%} "
        f"(gemm {cls['gemm']:,}, row ops {cls['row']:,}, element-wise {cls['elem']:,}, "
        f"loads {cls['load']:,}, control {cls['ctrl']:,})"
    )
    return lines
