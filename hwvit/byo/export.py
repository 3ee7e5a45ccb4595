"""`hwvit rtl export DIR`: the reference blocks, their docs and a bind template per kind, for a
team to start from. Written to a temporary directory beside DIR and renamed into place."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from hwvit import toolchain
from hwvit.atomic import atomic_dir, refuse_unowned
from hwvit.byo import kinds
from hwvit.byo.template import template

MARKER = ".hwvit-rtl-export"  # what --force may replace: only a previous export, every file as written


def _owned(dest: Path) -> dict[str, str | None]:
    """The files of a previous export (its marker lists them with their sha256), the marker itself."""
    try:
        listed = json.loads((dest / MARKER).read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        listed = {}
    return {**listed, MARKER: None} if isinstance(listed, dict) else {MARKER: None}


def kind_sources(kind: str) -> list[str]:
    """The reference files of a kind, from its testbench (rtl/... paths; the wrapper of gemm too)."""
    from hwvit.simulate import tb_module

    return [s for s in tb_module(kind).SOURCES if s.startswith("rtl/")]


def export(out: Path, force: bool = False) -> list[Path]:
    """Write the export to ``out``; return the files written (relative to ``out``)."""
    out = Path(out)

    def check(dest: Path) -> None:
        if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
            if not force:
                raise FileExistsError(f"{dest} already exists (use --force to replace a previous export)")
            if not (dest / MARKER).is_file():
                raise FileExistsError(
                    f"{dest}: --force replaces only a previous `hwvit rtl export`, and this is not one"
                )
            # an exported file the team has edited since, or one it added, is its work: kept
            refuse_unowned(dest, _owned(dest), "a previous `hwvit rtl export` as it wrote it")

    repo = toolchain.repo()
    with atomic_dir(out, check) as tmp:
        (tmp / "rtl").mkdir()
        for src in sorted(repo.rtl.glob("*.v")):
            shutil.copy2(src, tmp / "rtl" / src.name)
        (tmp / "docs").mkdir()
        for name in ("rtl.md", "arithmetic.md"):
            shutil.copy2(repo.docs / name, tmp / "docs" / name)
        (tmp / "bind").mkdir()
        for kind in kinds.KINDS:
            (tmp / "bind" / f"{kind}.yaml").write_text(template(kind))
        (tmp / "README.md").write_text(_readme())
        written = {
            p.relative_to(tmp).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(tmp.rglob("*"))
            if p.is_file()
        }
        (tmp / MARKER).write_text(json.dumps({"writer": "hwvit rtl export", "files": written}, indent=1) + "\n")
    return sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())


def _readme() -> str:
    lines = [
        "# hwvit reference blocks",
        "",
        "Plain Verilog-2005 (Icarus 11, Verilator 5, yosys). docs/rtl.md: ports, parameters, latency;",
        "docs/arithmetic.md: the arithmetic every block must match bit for bit. bind/KIND.yaml binds",
        "the reference block of KIND as it is: rename its ports to yours, then check your block with",
        "",
        "    hwvit sim SETS --rtl your_block.v --bind bind/KIND.yaml --simulator both",
        "",
        "| kind | files |",
        "|---|---|",
    ]
    for kind in [*kinds.KINDS, "gemm"]:
        lines.append(f"| {kind} | {', '.join(f'`{s}`' for s in kind_sources(kind))} |")
    lines += ["", "gemm has no bind: it reads operand memories (docs/rtl.md, gemm, operand-memory interface).", ""]
    return "\n".join(lines)
