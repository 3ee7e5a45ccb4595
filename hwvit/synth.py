"""Static checks and synthesis of the RTL: Verilator lint, Icarus -g2005, yosys cell counts.

The one place the tests, ``hwvit synth`` and ``hwvit mutate`` call these tools from:
``lint`` and ``iverilog`` return the offending lines (empty: clean), ``synth_block`` the cell
counts before and after technology mapping.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hwvit import toolchain


def __getattr__(name: str):
    """``BLOCKS``: the top-level blocks (each the twin of an hwvit.ops kernel) and the parameters
    they are synthesized with (each kind's ``synth``: small but representative sizes, so a run
    stays within a few minutes)."""
    if name == "BLOCKS":
        from hwvit import blocks

        return {k: dict(v.synth) for k, v in blocks.kinds().items() if v.synth is not None}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _paths(sources: str | Path | Sequence[str | Path], rtl: Path | None = None) -> list[str]:
    """Source files as absolute paths; relative names are taken from the repository root."""
    root = toolchain.repo().root
    items = [sources] if isinstance(sources, (str, Path)) else list(sources)
    out = []
    for src in items:
        path = Path(src)
        if not path.is_absolute():
            path = (rtl / path.name) if rtl is not None and path.parts[0] == "rtl" else root / path
        out.append(str(path))
    return out


def lint(sources, params: dict[str, int] | None = None, rtl: Path | None = None) -> list[str]:
    """``verilator --lint-only -Wall`` with nothing switched off; the warning and error lines."""
    rtl = rtl or toolchain.repo().rtl
    args = [f"-G{k}={v}" for k, v in (params or {}).items()]
    out = toolchain.run_tool(
        [toolchain.require("verilator"), "--lint-only", "-Wall", f"-I{rtl}", *args, *_paths(sources, rtl)],
        env=toolchain.sim_env(),
        timeout=120,
    )
    text = out.stdout + out.stderr
    bad = [ln for ln in text.splitlines() if ln.startswith(("%Warning", "%Error"))]
    return bad or ([f"verilator exit {out.returncode}: {text[-500:]}"] if out.returncode else [])


def iverilog(
    sources,
    top: str,
    params: dict[str, int] | None = None,
    rtl: Path | None = None,
    timeout: float = 120,
    memory: int | None = None,
) -> list[str]:
    """Plain Verilog-2005: ``iverilog -g2005 -Wall``; the lines it printed (timescale notes aside);
    ``memory``: the address space its elaborator may map (``toolchain.run_tool``).

    Icarus evaluates the blocks' parameter checks (``initial`` + ``$finish``) only at run time,
    so this also runs the compiled design for zero time and reports a failed check.
    """
    rtl = rtl or toolchain.repo().rtl
    args = [f"-P{top}.{k}={v}" for k, v in (params or {}).items()]
    with tempfile.TemporaryDirectory() as tmp:
        out = toolchain.run_tool(
            [
                toolchain.require("icarus"),
                "-g2005",
                "-Wall",
                "-o",
                f"{tmp}/a.vvp",
                "-s",
                top,
                f"-I{rtl}",
                f"-y{rtl}",
                *args,
                *_paths(sources, rtl),
            ],
            timeout=timeout,
            memory=memory,
        )
        lines = [
            ln
            for ln in (out.stdout + out.stderr).splitlines()
            if ln.strip() and "timescale" not in ln.lower() and "inherit" not in ln.lower()
        ]
        if out.returncode:
            return lines or [f"iverilog exit {out.returncode}"]
        run = toolchain.run_tool(["vvp", "-n", f"{tmp}/a.vvp"], timeout=60)
        return lines + [ln for ln in (run.stdout + run.stderr).splitlines() if "ERROR" in ln or "error" in ln]


@dataclass
class SynthResult:
    block: str
    ok: bool
    cells: int = 0
    by_type: dict[str, int] = field(default_factory=dict)  # after techmap: $_AND_, $_DFF_P_, ...
    coarse: dict[str, int] = field(default_factory=dict)  # before it: $macc (multipliers), $mem_v2, ...
    warnings: list[str] = field(default_factory=list)
    message: str = ""
    log: str = ""
    memory_bits: int = 0  # storage of the inferred memories (tables, row buffers), before mapping
    longest_path: int = 0  # cells on the longest register-to-register path after techmap (ltp -noff)

    @property
    def flip_flops(self) -> int:
        return sum(v for k, v in self.by_type.items() if "DFF" in k)

    @property
    def latches(self) -> int:
        return sum(v for k, v in {**self.coarse, **self.by_type}.items() if "LATCH" in k.upper())


_CELLS = re.compile(r"^\s+Number of cells:\s+(\d+)", re.M)
_TYPE = re.compile(r"^\s+(\$\S+)\s+(\d+)$", re.M)
_MARK = "Printing statistics."


def parse_stat(text: str) -> tuple[int, dict[str, int]]:
    """Total cells and cells per type of the last `stat` section in ``text``."""
    section = text[text.rfind(_MARK) :] if _MARK in text else text
    totals = _CELLS.findall(section)
    if not totals:
        raise ValueError("yosys printed no cell statistics")
    by_type: dict[str, int] = {}
    for name, count in _TYPE.findall(section):
        by_type[name] = by_type.get(name, 0) + int(count)
    return int(totals[-1]), by_type


def synth_block(
    block: str, params: dict[str, int] | None = None, timeout: int = 900, rtl: Path | None = None
) -> SynthResult:
    """`yosys synth -flatten -top block` over rtl/*.v: cells before and after techmap, warnings."""
    exe = toolchain.require("yosys")
    rtl = rtl or toolchain.repo().rtl
    files = sorted(rtl.glob("*.v"))
    from hwvit import blocks

    spec = blocks.kinds().get(block)
    top = block
    if spec is not None:  # a kind kept outside rtl/ (HWVIT_BLOCKS): its own files too
        files += [p for p in spec.rtl_paths(toolchain.repo().root) if p.resolve().parent != rtl.resolve()]
        top = spec.top  # a kind bound to another's module (softmax_shiftmax_exact; layernorm_ptf_exact: layernorm)
    sources = " ".join(str(p) for p in files)
    chparam = " ".join(
        f"-set {k} {v}" for k, v in (__getattr__("BLOCKS").get(block, {}) if params is None else params).items()
    )
    script = f"read_verilog -I{rtl} {sources}\n"
    if chparam:
        script += f"chparam {chparam} {top}\n"
    # Stop after the coarse passes for a stat of word-level cells ($mul, $mem_v2, $dlatch), then finish.
    # The memories ($mem_v2: WIDTH x SIZE each) are dumped before the fine passes map them to
    # flip-flops; `ltp -noff` gives the longest path of cells between flip-flops after techmap.
    script += (
        f"synth -flatten -top {top} -run begin:fine\nstat\ndump t:$mem_v2\n"
        f"synth -flatten -top {top} -run fine:\nstat\nltp -noff\n"
    )
    with tempfile.NamedTemporaryFile("w", suffix=".ys", delete=False) as fh:
        fh.write(script)
        path = fh.name
    try:
        out = toolchain.run_tool([exe, "-s", path], timeout=timeout)
    except subprocess.TimeoutExpired:
        return SynthResult(block, False, message=f"yosys timed out after {timeout} s")
    finally:
        Path(path).unlink(missing_ok=True)
    if out.returncode != 0:
        err = [ln for ln in (out.stderr + out.stdout).splitlines() if "ERROR" in ln]
        return SynthResult(
            block,
            False,
            message=(err[0] if err else f"yosys exit {out.returncode}").strip(),
            log=out.stdout[-4000:] + out.stderr,
        )
    try:
        cells, by_type = parse_stat(out.stdout)
        first = out.stdout.find(_MARK)  # the coarse stat; synth's own final stat comes after ours
        _, coarse = parse_stat(out.stdout[first : out.stdout.find(_MARK, first + 1)])
    except ValueError as exc:
        return SynthResult(block, False, message=str(exc))
    warnings = [ln.strip() for ln in out.stdout.splitlines() if "Warning" in ln]
    res = SynthResult(block, True, cells, by_type, coarse, warnings, log=out.stdout)
    res.memory_bits = memory_bits(out.stdout)
    ltp = _LTP.search(out.stdout)
    res.longest_path = int(ltp.group(1)) if ltp else 0
    return res


_LTP = re.compile(r"Longest topological path in \S+ \(length=(\d+)\)")
_MEM_CELL = re.compile(r"cell \$mem_v2 .*?\n  end", re.S)


def memory_bits(log: str) -> int:
    """Bits of the memories yosys inferred (each $mem_v2 cell's WIDTH x SIZE, as dumped before the
    fine passes map them to flip-flops): a table or row buffer's storage."""
    total = 0
    for cell in _MEM_CELL.findall(log):
        width = re.search(r"parameter \\WIDTH (\d+)", cell)
        size = re.search(r"parameter \\SIZE (\d+)", cell)
        if width and size:
            total += int(width.group(1)) * int(size.group(1))
    return total


def report_markdown(results: list[SynthResult]) -> str:
    lines = [
        "# Synthesis: yosys cell counts per block",
        "",
        "Generic `synth -flatten` (yosys 0.23) of each block, at its defaults except the parameters "
        "listed (small row buffers and array, so the run takes seconds; buffers of flip-flops grow "
        "linearly with them). `$_DFF*` cells are flip-flops, `$_AND_/$_OR_/$_XOR_/$_MUX_...` are gates; "
        "a generic cell count ranks blocks, it is not an area. "
        "Regenerate with `hwvit synth --out docs/synth.md`.",
        "",
        "| block | parameters | cells | flip-flops | muxes | longest path (cells) | memory bits | status |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        mux = sum(v for k, v in r.by_type.items() if "MUX" in k)
        status = "ok" if r.ok else f"failed: {r.message}"
        params = ", ".join(f"{k}={v}" for k, v in __getattr__("BLOCKS").get(r.block, {}).items()) or "defaults"
        lines.append(
            f"| {r.block} | {params} | {r.cells} | {r.flip_flops} | {mux} | {r.longest_path} | {r.memory_bits} "
            f"| {status} |"
        )
    return "\n".join(lines) + "\n"


# The accelerator core as docs/synth.md gives it: a 2 x 2 array and memories small enough that yosys
# maps them to flip-flops in a few minutes (`hwvit synth --core`).
CORE_PARAMS = {
    "ROWS": 2, "COLS": 2, "ACT_DEPTH": 256, "WGT_DEPTH": 256, "PRM_DEPTH": 64, "PROG_DEPTH": 16,
    "MAX_M": 16, "MAX_K": 64, "MAX_N": 64, "MAX_ROW": 16, "MAX_C": 16,
}  # fmt: skip
_CORE_ROW = re.compile(r"^\| vit_core \|.*\|$", re.M)


def core_row(res: SynthResult) -> str:
    """The core's row of docs/synth.md's accelerator-core table."""
    mux = sum(v for k, v in res.by_type.items() if "MUX" in k)
    return f"| vit_core | as above | {res.cells} | {res.flip_flops} | {mux} | ok |"


def with_core_row(page: str, row: str) -> str:
    """``page`` with its accelerator-core row replaced by ``row`` (ValueError if it has none)."""
    if len(_CORE_ROW.findall(page)) != 1:
        raise ValueError("no single `| vit_core | ... |` row to replace")
    return _CORE_ROW.sub(lambda _: row, page)


def keep_sections(table: str, old: str | None) -> str:
    """``table`` (report_markdown's page) followed by the sections of ``old`` that the command does not
    write: from its first ``## `` heading on (docs/synth.md's accelerator core, measured by its own run)."""
    at = -1 if old is None else old.find("\n## ")
    return table if at < 0 else table + old[at:]
