"""pytest side of the testbenches: simulators as a parameter, a helper to run one vector set."""

from __future__ import annotations

from pathlib import Path

import pytest

from hwvit import simulate, toolchain

SIMULATORS = list(toolchain.SIMULATORS)


@pytest.fixture(params=SIMULATORS)
def simulator(request) -> str:
    """Each simulator in turn; a missing one fails the test with its install command."""
    toolchain.require(request.param)  # raises ToolMissing("... install it with: ...")
    return request.param


def run_set(set_dir: Path, simulator: str, **kwargs) -> simulate.SimResult:
    """Run one vector set through its block's testbench and assert bit-exactness."""
    result = simulate.run(set_dir, simulator, **kwargs)
    assert result.passed, result.message
    assert result.elements > 0, f"{set_dir}: testbench compared nothing"
    return result
