"""What one testbench run found: written by the testbench (sim/tbutil.py), read by hwvit.simulate.

A module of its own, importing nothing of hwvit but its text helpers: hwvit.simulate loads the testbenches, and a
testbench importing hwvit.simulate back would close an import circle (tests/test_import_graph.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hwvit.textfiles import count


@dataclass
class SimResult:
    """What one testbench run found."""

    kind: str
    set_dir: str
    simulator: str
    passed: bool
    elements: int = 0  # output elements compared
    mismatches: int = 0
    first: dict[str, Any] | None = None  # {tensor, index, expected, got}
    waveform: str | None = None
    cycles: int | None = None
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        status = "PASS" if self.passed else "FAIL"
        text = f"{status} {self.kind:<12} {self.simulator:<9} {self.set_dir}: {count(self.elements, 'element')}"
        if self.cycles is not None:
            text += f", {self.cycles} cycles"
        if "variants" in self.extra:  # run_stress
            text += f" [{', '.join(self.extra['variants'])}]"
        if not self.passed:
            text += f" -- {self.message}"
        return text
