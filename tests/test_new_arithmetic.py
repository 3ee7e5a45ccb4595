"""A softmax arithmetic added from files outside hwvit alone (docs/blocks.md, "Adding a softmax or
LayerNorm arithmetic"): its kernel and declaration in one module named in HWVIT_VARIANTS, its
datapath module beside it. Nothing in the tree is edited, and the CLI's choices, the vector writer,
`hwvit check`, `hwvit sim` and the registry-driven tests' parametrization all take it up.

The toy arithmetic is ITA's softmax under another name, its datapath rtl/softmax_ita.v copied with
the module renamed, so that its Verilog is bit-exact by construction and the test checks the
plumbing, not an arithmetic.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hwvit import blocks, toolchain, variants

ROOT = Path(__file__).resolve().parents[1]

MODULE = '''
"""softmax=toy: ITA's softmax under another name, declared outside hwvit."""
import dataclasses
from pathlib import Path

from hwvit.blocks.variant_rtl import softmax_ita
from hwvit.variants.hwsoftmax import VARIANTS as HW

VARIANTS = [dataclasses.replace(next(v for v in HW if v.name == "ita"), name="toy")]
HERE = Path(__file__).parent
RTL_FIELDS = {
    "softmax_toy": {
        **softmax_ita.FIELDS,
        "rtl": (str(HERE / "softmax_toy.v"), *softmax_ita.FIELDS["rtl"][1:]),
        "ports": dataclasses.replace(softmax_ita.PORTS, name="softmax_toy"),
    }
}
'''


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    """The two files of the arithmetic: its module (kernel and declaration) and its datapath."""
    folder = tmp_path / "toy"
    folder.mkdir()
    (folder / "toy_softmax.py").write_text(MODULE)
    verilog = (ROOT / "rtl" / "softmax_ita.v").read_text()
    assert verilog.count("module softmax_ita") == 1
    (folder / "softmax_toy.v").write_text(verilog.replace("module softmax_ita", "module softmax_toy"))
    return folder


def _env(toy: Path) -> dict[str, str]:
    return {**os.environ, variants.ENV: str(toy / "toy_softmax.py")}


def _hwvit(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    code = "import sys; from hwvit.cli import main; sys.argv[0] = 'hwvit'; main()"
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=600)


def test_the_registry_takes_it_up(toy, monkeypatch):
    monkeypatch.setenv(variants.ENV, str(toy / "toy_softmax.py"))
    assert "toy" in variants.names("softmax") and variants.get("softmax", "toy").family == "softmax"
    spec = blocks.get("softmax_toy")
    assert spec.variant == "toy" and spec.family == "softmax" and spec.top == "softmax_toy"
    assert spec.rtl_paths(ROOT)[0] == toy / "softmax_toy.v" and spec.rtl[1] == "rtl/row_stream.v"
    monkeypatch.delenv(variants.ENV)
    assert "softmax_toy" not in blocks.names() and "toy" not in variants.names("softmax")


def test_a_module_that_cannot_load_is_one_line(tmp_path, monkeypatch):
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('no\\nmore')\n")
    monkeypatch.setenv(variants.ENV, str(bad))
    with pytest.raises(ValueError, match=r"^HWVIT_VARIANTS: cannot load .*bad.py: RuntimeError: no$"):
        variants.names("softmax")


def test_cli_vectors_check_and_the_tests_take_it_up(toy, tmp_path):
    """The CLI's kind choices and the vector writer (`hwvit vectors-random`), `hwvit check` (the
    variant's kernel again), and sim/test_variants.py's parametrization (collected, not run)."""
    env = _env(toy)
    out = tmp_path / "sets" / "toy"
    res = _hwvit(
        env, "vectors-random", "softmax_toy", "--cases", "6", "--row-len", "8", "--seed", "2", "--out", str(out)
    )
    assert res.returncode == 0, res.stdout + res.stderr
    res = _hwvit(env, "check", str(out))
    assert res.returncode == 0 and res.stdout.strip() == "1 set valid", res.stdout + res.stderr
    collect = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", "variants"]
    res = subprocess.run(
        [*collect, "sim/test_variants.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    ids = [line for line in res.stdout.splitlines() if "softmax_toy" in line]
    assert res.returncode == 0 and len(ids) >= 3, res.stdout[-2000:] + res.stderr[-2000:]


@pytest.mark.variants
def test_hwvit_sim_runs_its_verilog(toy, tmp_path):
    """`hwvit sim` knows the kind and runs its datapath, bit-exact (Icarus)."""
    toolchain.require("icarus")
    env = _env(toy)
    out = tmp_path / "set"
    res = _hwvit(
        env, "vectors-random", "softmax_toy", "--cases", "6", "--row-len", "8", "--seed", "2", "--out", str(out)
    )
    assert res.returncode == 0, res.stdout + res.stderr
    res = _hwvit(env, "sim", str(out), "--simulator", "icarus")
    assert res.returncode == 0 and "1 passed, 0 failed" in res.stdout, res.stdout + res.stderr
