"""The Python tree passes the linter and the formatter configured in pyproject.toml ([tool.ruff])."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TREES = ["hwvit", "tests", "sim", "examples"]


def _ruff() -> str:
    exe = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(exe).exists():
        pytest.fail("ruff is not installed: pip install -e '.[dev]' (or pip install ruff==0.17.6)")
    return exe


@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff(args):
    result = subprocess.run([_ruff(), *args, *TREES], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, (
        f"ruff {' '.join(args)} found problems:\n{result.stdout[-4000:]}{result.stderr[-2000:]}"
    )
