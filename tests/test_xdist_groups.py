"""make test's --dist loadgroup really groups: the tests of one xdist_group run in one worker.

Costly session fixtures (the traced digits sets, the cluster, the RTL core's build) rely on it, and
it failed silently once: pytest 9.2 keeps node ids in a structured form, so xdist 3.8 could no longer
tag them with their group (pytest-xdist#1386) and each worker built those fixtures again.
"""

from __future__ import annotations

import re
import subprocess
import sys

TOY = """
import pytest

pytestmark = pytest.mark.xdist_group("one")


@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    pass
"""


def test_one_group_runs_in_one_worker(tmp_path):
    (tmp_path / "test_toy.py").write_text(TOY)
    cmd = [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider"]
    res = subprocess.run([*cmd, "test_toy.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    workers = re.findall(r"\[(gw\d+)\].*PASSED test_toy\.py::test_grouped", res.stdout)
    assert len(workers) == 6, res.stdout[-2000:]
    assert len(set(workers)) == 1, f"one group spread over workers {sorted(set(workers))}: pip install 'pytest<9.2'"
