"""Synthesize each RTL block with yosys and count its cells (a first cost figure per block)."""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hwvit import toolchain

# The top-level blocks (each the twin of an hwvit.ops kernel) and the parameters they are
# synthesized with: small but representative sizes, so a run stays within a few minutes.
BLOCKS: dict[str, dict[str, int]] = {
    "requant": {},
    "residual_add": {},
    "gelu": {},
    "softmax": {"MAX_N": 64},
    "layernorm": {"MAX_C": 64},
    "gemm": {"ROWS": 4, "COLS": 4, "MAX_M": 64, "MAX_K": 256, "MAX_N": 256},
}


@dataclass
class SynthResult:
    block: str
    ok: bool
    cells: int = 0
    by_type: dict[str, int] = field(default_factory=dict)
    message: str = ""


_CELLS = re.compile(r"^\s+Number of cells:\s+(\d+)", re.M)
_TYPE = re.compile(r"^\s+(\$\S+)\s+(\d+)$", re.M)


def parse_stat(text: str) -> tuple[int, dict[str, int]]:
    """Total cells and cells per type of the last (top-level, flattened) `stat` section."""
    section = text[text.rfind("Printing statistics."):] if "Printing statistics." in text else text
    totals = _CELLS.findall(section)
    if not totals:
        raise ValueError("yosys printed no cell statistics")
    # With -flatten there is one module section; its counts are the design's.
    by_type: dict[str, int] = {}
    for name, count in _TYPE.findall(section):
        by_type[name] = by_type.get(name, 0) + int(count)
    return int(totals[-1]), by_type


def synth_block(block: str, params: dict[str, int] | None = None, timeout: int = 900) -> SynthResult:
    """Run `yosys synth -flatten -top block` over rtl/*.v and return the cell count."""
    exe = toolchain.require("yosys")
    rtl = toolchain.repo().rtl
    sources = " ".join(str(p) for p in sorted(rtl.glob("*.v")))
    chparam = " ".join(f"-set {k} {v}" for k, v in (params or BLOCKS.get(block, {})).items())
    script = f"read_verilog -I{rtl} {sources}\n"
    if chparam:
        script += f"chparam {chparam} {block}\n"
    script += f"synth -flatten -top {block}\nstat\n"
    with tempfile.NamedTemporaryFile("w", suffix=".ys", delete=False) as fh:
        fh.write(script)
        path = fh.name
    try:
        out = subprocess.run([exe, "-s", path], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return SynthResult(block, False, message=f"yosys timed out after {timeout} s")
    finally:
        Path(path).unlink(missing_ok=True)
    if out.returncode != 0:
        err = [ln for ln in (out.stderr + out.stdout).splitlines() if "ERROR" in ln]
        return SynthResult(block, False, message=(err[0] if err else f"yosys exit {out.returncode}").strip())
    try:
        cells, by_type = parse_stat(out.stdout)
    except ValueError as exc:
        return SynthResult(block, False, message=str(exc))
    return SynthResult(block, True, cells, by_type)


def report_markdown(results: list[SynthResult]) -> str:
    lines = ["# Synthesis: yosys cell counts per block", "",
             "Generic `synth -flatten` (yosys 0.23) of each block, at its defaults except the parameters "
             "listed (small row buffers and array, so the run takes seconds; buffers of flip-flops grow "
             "linearly with them). `$_DFF*` cells are flip-flops, `$_AND_/$_OR_/$_XOR_/$_MUX_...` are gates; "
             "a generic cell count ranks blocks, it is not an area. "
             "Regenerate with `hwvit synth --out docs/synth.md`.", "",
             "| block | parameters | cells | flip-flops | muxes | status |", "|---|---|---:|---:|---:|---|"]
    for r in results:
        dff = sum(v for k, v in r.by_type.items() if "DFF" in k)
        mux = sum(v for k, v in r.by_type.items() if "MUX" in k)
        status = "ok" if r.ok else f"failed: {r.message}"
        params = ", ".join(f"{k}={v}" for k, v in BLOCKS.get(r.block, {}).items()) or "defaults"
        lines.append(f"| {r.block} | {params} | {r.cells} | {dff} | {mux} | {status} |")
    return "\n".join(lines) + "\n"
