"""The wheel alone is enough: built from a copy of the checkout, installed into a fresh target
directory outside it, `hwvit vectors` then `hwvit sim --simulator both` run from a temporary
directory; builds land in the user's cache directory, never in the package or the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hwvit import toolchain

CHECKOUT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.xdist_group("wheel")


def _checkout_files() -> list[str]:
    """Tracked and untracked-but-not-ignored files: what a fresh clone plus local edits hold."""
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=CHECKOUT, capture_output=True, check=True
    )
    return [f for f in out.stdout.decode().split("\0") if f and (CHECKOUT / f).is_file()]


def _tree(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")} if path.exists() else set()


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> str:
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{' '.join(cmd)} exited {out.returncode}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


@pytest.fixture(scope="session")  # session: kept when xdist runs other modules between its tests
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(target, checkout copy): the wheel built from a copy of the checkout and pip-installed into a
    fresh target dir."""
    import shutil

    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    for rel in _checkout_files():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(CHECKOUT / rel, src / rel)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # --no-build-isolation: the venv's setuptools builds it (no index needed); --no-deps: the
    # dependencies are the venv's, so the target holds hwvit alone.
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(base / "dist"),
            str(src),
        ],
        cwd=base,
        env=env,
    )
    wheels = list((base / "dist").glob("hwvit-*.whl"))
    assert len(wheels) == 1, wheels
    target = base / "target"
    _run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheels[0])],
        cwd=base,
        env=env,
    )
    return target, src


def _env(target: Path, cache: Path) -> dict[str, str]:
    env = toolchain.sim_env({k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    env.update(PYTHONPATH=str(target), XDG_CACHE_HOME=str(cache))
    # ccache's objects stay the caller's (Verilator's runtime, the same for every build: ~19 s of
    # compiling per cold build); hwvit's own cache, the builds included, is the new one above
    env.setdefault("CCACHE_DIR", str(toolchain.cache_dir().parent / "ccache"))  # ccache's default there
    return env


def test_wheel_carries_rtl_and_testbenches(installed):
    hdl = installed[0] / "hwvit" / "_hdl"
    for rel in ("rtl/softmax.v", "rtl/round_sat.v", "sim/tbutil.py", "sim/test_requant.py", "docs/rtl.md"):
        assert (hdl / rel).is_file(), rel
        assert (hdl / rel).read_bytes() == (CHECKOUT / rel).read_bytes(), f"{rel} differs from the checkout"
    # `hwvit tb export`'s SystemVerilog templates are package data
    templates = sorted(p.name for p in (CHECKOUT / "hwvit" / "tbexport" / "templates").glob("*.sv.tmpl"))
    shipped = sorted(p.name for p in (installed[0] / "hwvit" / "tbexport" / "templates").glob("*.sv.tmpl"))
    assert templates and shipped == templates, shipped


def test_installed_wheel_vectors_then_sim_both(installed, tmp_path):
    """Run from a directory inside a checkout (the copy the wheel was built from): the checkout,
    like the installed package, gains nothing; the builds are in the cache."""
    installed, checkout = installed
    work, cache = checkout / "scratch", tmp_path / "cache"
    work.mkdir()
    env = _env(installed, cache)
    hwvit = [sys.executable, "-c", "import sys; from hwvit.cli import main; sys.argv[0] = 'hwvit'; main()"]
    where = _run(
        [sys.executable, "-c", "import hwvit, hwvit.toolchain as t; print(hwvit.__file__); print(t.repo().root)"],
        cwd=work,
        env=env,
    ).split()
    assert where[0].startswith(str(installed)), where  # the wheel's hwvit, not the checkout's
    assert where[1] == str(installed / "hwvit" / "_hdl"), where
    before_pkg, before_checkout = _tree(installed), _tree(checkout)

    _run(
        hwvit + ["vectors-random", "requant", "--cases", "64", "--seed", "1", "--out", "sets/requant"],
        cwd=work,
        env=env,
    )
    _run(
        hwvit + ["vectors-random", "softmax", "--cases", "6", "--row-len", "9", "--seed", "2", "--out", "sets/softmax"],
        cwd=work,
        env=env,
    )
    out = _run(hwvit + ["sim", "sets", "--simulator", "both"], cwd=work, env=env)
    lines = out.strip().splitlines()
    assert lines[-1] == "4 passed, 0 failed", out
    assert sum(line.startswith("PASS") for line in lines) == 4, out

    # The team's starting point comes out of the wheel too.
    _run(hwvit + ["rtl", "export", "team"], cwd=work, env=env)
    assert (work / "team" / "rtl" / "softmax.v").read_bytes() == (CHECKOUT / "rtl" / "softmax.v").read_bytes()
    assert (work / "team" / "docs" / "arithmetic.md").is_file()
    template = _run(hwvit + ["bind", "template", "gelu"], cwd=work, env=env)
    assert "kind: gelu" in template and (work / "team" / "bind" / "gelu.yaml").read_text() == template

    builds = sorted(p.name.rsplit("-", 1)[0] for p in (cache / "hwvit" / "sim_build").iterdir() if p.is_dir())
    assert builds == ["requant-icarus", "requant-verilator", "softmax-icarus", "softmax-verilator"], builds
    assert {p.split("/")[0] for p in _tree(work)} == {"sets", "team"}, _tree(work)
    assert _tree(installed) - before_pkg <= {p for p in _tree(installed) if "__pycache__" in p}, (
        "the run wrote into the installed package"
    )
    new = {p for p in _tree(checkout) - before_checkout if not p.startswith("scratch/")}
    assert not new, f"the run wrote into the checkout: {sorted(new)[:5]}"
