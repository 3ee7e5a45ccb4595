"""What a simulation's Python is told about pytest's assertion rewriting (cocotb installs it before
the testbench is imported): the testbenches' own modules are rewritten, numpy and hwvit are not, and
pytest's plugins stay out of the simulator. Checked with pytest's own matcher on the patterns as
pytest splits them."""

from __future__ import annotations

import shlex
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from _pytest.pathlib import fnmatch_ex

import hwvit
from hwvit import toolchain
from hwvit.simulate import launch

REWRITE = "COCOTB_REWRITE_ASSERTION_FILES"


def _rewritten(env: dict[str, str], path: Path) -> bool:
    return any(fnmatch_ex(pattern, path) for pattern in shlex.split(env[REWRITE]))


def test_only_the_testbenches_are_rewritten(monkeypatch):
    monkeypatch.delenv(REWRITE, raising=False)
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    env = launch.assertion_rewriting_env()
    sim = toolchain.repo().sim
    for bench in ("test_requant.py", "test_gemm.py", "byotb.py", "streamtb.py", "tbutil.py"):
        assert (sim / bench).exists(), bench
        assert _rewritten(env, sim / bench), bench
    for module in (np.__file__, hwvit.__file__, Path(hwvit.__file__).with_name("toolchain.py")):
        assert not _rewritten(env, Path(module)), module
    assert env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1"


def test_a_path_with_a_space_stays_one_pattern(monkeypatch, tmp_path):
    monkeypatch.delenv(REWRITE, raising=False)
    root = tmp_path / "my repo"
    monkeypatch.setattr(toolchain, "repo", lambda: SimpleNamespace(sim=root / "sim"))
    env = launch.assertion_rewriting_env()
    assert len(shlex.split(env[REWRITE])) == 1
    assert _rewritten(env, root / "sim" / "test_requant.py")
    assert not _rewritten(env, root / "other" / "test_requant.py")


def test_the_callers_own_setting_is_kept(monkeypatch):
    monkeypatch.setenv(REWRITE, "*.py")
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "")
    assert launch.assertion_rewriting_env() == {}
