"""Every Verilog file: lint clean under verilator -Wall, accepted by iverilog -g2005."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hwvit import toolchain

RTL = Path(__file__).resolve().parents[1] / "rtl"
FILES = sorted(RTL.glob("*.v"))


def test_rtl_files_exist():
    names = {f.stem for f in FILES}
    assert {"requant", "gemm", "gelu", "softmax", "layernorm", "residual_add"} <= names


@pytest.mark.xdist_group("static")
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_verilator_lint_wall(path):
    exe = toolchain.require("verilator")
    out = subprocess.run([exe, "--lint-only", "-Wall", f"-I{RTL}", str(path)], capture_output=True, text=True,
                         env=toolchain.sim_env(), timeout=120)
    text = out.stdout + out.stderr
    assert out.returncode == 0 and "%Warning" not in text and "%Error" not in text, text[:2000]


@pytest.mark.xdist_group("static")
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_iverilog_2005(path, tmp_path):
    exe = toolchain.require("icarus")
    out = subprocess.run([exe, "-g2005", "-Wall", f"-I{RTL}", f"-y{RTL}", "-s", path.stem, "-o",
                          str(tmp_path / "a.out"), str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[:2000]
    # -Wall warnings about timescale inheritance are harmless; anything else is not.
    warnings = [ln for ln in out.stderr.splitlines() if "warning" in ln.lower() and "timescale" not in ln.lower()]
    assert not warnings, "\n".join(warnings[:20])


def test_one_module_per_file_named_after_it():
    import re

    for path in FILES:
        modules = re.findall(r"^\s*module\s+(\w+)", path.read_text(), re.M)
        assert modules == [path.stem], f"{path.name}: modules {modules}"
