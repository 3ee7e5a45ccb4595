"""`hwvit tb export`: a self-checking SystemVerilog testbench of one block and one vector set.

Sign-off simulators (Questa, VCS, Xcelium) run SystemVerilog benches, not cocotb. ``export``
writes, for a block kind and a vector set of that kind, a directory holding

- ``tb_<kind>.sv``: module ``hwvit_tb_<kind>``, plain SystemVerilog (no classes, no UVM): it reads
  the set's tensors with ``$readmemh``, holds reset, sets the configuration ports, writes the
  table one entry per clock, streams every input beat with random idle cycles on the input and
  random ready drops on the output, compares every output element (and the row-end flag where the
  block has one), prints the first mismatch in the words of the cocotb bench
  (sim/tbutil.py ``finish``) and ends with one ``PASS``/``FAIL`` line: ``$finish`` (exit 0) on a
  pass, ``$fatal(1)`` (exit 1 on Icarus and Verilator) on a failure;
- the set's ``.hex`` files and ``manifest.yaml``, copied unchanged;
- ``rtl/``: copies of the block's Verilog files, so the directory alone runs on another machine;
- ``files.f``: those files and the bench, by paths relative to the directory, for any simulator.

The bench's text is SystemVerilog in templates/*.sv.tmpl (Jinja2), filled by this package:
``dut`` finds the block (the design under test) and its elaborated ports, ``stream`` and ``gemm``
give each kind's bench its values, ``sv`` the few expressions that depend on widths known only at
export; this module checks the output directory and writes it.

Kinds: the streaming blocks (requant, residual_add, gelu, softmax, layernorm, and the arithmetic
variants' blocks such as softmax_ibert) through a bind
(hwvit.byo.bind): the reference block's own (``hwvit bind template KIND``) or a team's bind file
with its RTL, valid_ready or AXI4-Stream; the request/result units divu and isqrt (valid/ready,
one request at a time, several values per beat) and the GEMM engine (its operand and parameter
read ports served from memories in the bench, one clock of latency, the output rows written into
result images, acc and y compared once done_o pulses) with the reference ports. The block is
elaborated with yosys for the set's parameters (hwvit.byo.elaborate) so that every signal of the
bench has its port's exact width, and a bind is checked against it as `hwvit sim --bind` checks.

One process drives and checks: every input changes just after a falling edge, handshakes are
read one time unit later and complete at the next rising edge. No non-blocking assignment in an
initial block (Verilator runs those as blocking ones) and no sampling at the active edge, so the
bench behaves the same on an event-driven and a compiled simulator.

Stalls come from a xorshift32 generator in the bench, seeded by ``+seed=N`` (default 1), not
from ``$urandom``: the same seed gives the same stall pattern on every simulator, so a failure
seen on one reproduces cycle for cycle on another. ``+stall=P`` sets the stall percentage (default
30, at most 95), ``+vectors=DIR`` where the ``.hex`` files are (default: the working directory).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from hwvit.atomic import atomic_dir, refuse_unowned
from hwvit.tbexport.dut import (
    UNITS,
    ExportError,
    check_kind,
    design,
    read_set,
    reference_sources,
    stream_kinds,
)
from hwvit.tbexport.gemm import GemmBench
from hwvit.tbexport.stream import StreamBench
from hwvit.tbexport.sv import FILES_LIST

__all__ = [
    "FILES_LIST",
    "UNITS",
    "ExportError",
    "Exported",
    "check_kind",
    "export",
    "reference_sources",
    "stream_kinds",
]

RTL_DIR = "rtl"  # the block's Verilog, copied beside the bench


@dataclass(frozen=True)
class Exported:
    out_dir: Path
    bench: Path
    top: str
    elements: int
    sources: tuple[Path, ...]


def bench_name(kind: str) -> str:
    return f"tb_{kind}.sv"


def _owned(dest: Path) -> dict[str, None]:
    """The files a previous export wrote into ``dest``: files.f and what it lists inside the
    directory, the manifest and the .hex files it names."""
    from hwvit import vectors

    owned = {FILES_LIST: None, "manifest.yaml": None}
    for line in (dest / FILES_LIST).read_text(errors="replace").splitlines():
        if line.strip() and not Path(line.strip()).is_absolute():
            owned[Path(line.strip()).as_posix()] = None
    try:
        manifest = vectors.read_manifest(dest)
    except vectors.VectorSetError:
        return owned
    owned.update({t["files"]["hex"]: None for t in manifest["tensors"]})
    return owned


def _out_check(force: bool):
    def check(dest: Path) -> None:
        if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
            raise ExportError(f"{dest}: exists and is not a directory")
        if dest.is_dir() and any(dest.iterdir()):
            if not force:
                raise ExportError(f"{dest} already exists (use --force to replace it)")
            if not (dest / FILES_LIST).is_file() or not any(dest.glob("tb_*.sv")):
                raise ExportError(
                    f"{dest}: --force replaces only a bench `hwvit tb export` wrote, and it holds none "
                    f"(no {FILES_LIST}, no tb_*.sv); choose another directory"
                )
            try:  # a simulator's outputs (tb.vvp, obj_dir/) are the user's: removed by the user
                refuse_unowned(dest, _owned(dest), "a bench `hwvit tb export` wrote")
            except FileExistsError as exc:
                raise ExportError(str(exc)) from None

    return check


def _copied(sources: list[Path]) -> list[tuple[Path, str]]:
    """(source, its path in the bench directory: rtl/NAME) for each distinct source file."""
    out: list[tuple[Path, str]] = []
    for src in dict.fromkeys(sources):
        name = f"{RTL_DIR}/{src.name}"
        clash = next((s for s, n in out if n == name), None)
        if clash is not None:
            raise ExportError(f"{src} and {clash}: two Verilog files named {src.name}; rename one")
        out.append((src, name))
    return out


def export(
    kind: str,
    set_dir: str | Path,
    out_dir: str | Path,
    *,
    bind_path: str | None = None,
    rtl: list[str] | tuple[str, ...] = (),
    top: str | None = None,
    force: bool = False,
) -> Exported:
    """Write the bench of ``kind`` on the set in ``set_dir`` to ``out_dir`` (atomically).

    Without ``bind_path`` the bench drives the reference block (rtl/, or ``rtl`` files with the
    reference ports); with it, the team's block in ``rtl`` through its bind file. ExportError
    (one line) on any fault; nothing is written then.
    """
    check_kind(kind)
    if top and not rtl:
        raise ExportError("--top names your block: give its Verilog with --rtl FILE")
    out = Path(out_dir)
    check = _out_check(force)
    check(out)  # before the work: a refused directory costs no elaboration
    vset = read_set(kind, Path(set_dir))
    block = design(kind, vset, bind_path, list(rtl), top)
    bench = GemmBench(vset, block) if kind == "gemm" else StreamBench(kind, vset, block)
    text = bench.text()
    name = bench_name(kind)
    copied = _copied(block.sources)
    files = [rel for _, rel in copied] + [name]
    try:
        with atomic_dir(out, check) as tmp:
            (tmp / RTL_DIR).mkdir()
            for src, rel in copied:
                shutil.copyfile(src, tmp / rel)
            (tmp / name).write_text(text)
            for tensor in vset.tensors:
                src = vset.hex_path(tensor)
                shutil.copyfile(src, tmp / src.name)
            shutil.copyfile(Path(vset.directory) / "manifest.yaml", tmp / "manifest.yaml")
            (tmp / FILES_LIST).write_text("\n".join(files) + "\n")
    except OSError as exc:
        raise ExportError(f"{out}: {exc.strerror or exc}") from None
    return Exported(out, out / name, block.top, bench.elements * bench.n_out, tuple(block.sources))
