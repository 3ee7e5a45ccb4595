"""Elaborate a team's top module with yosys and read its ports (direction, width).

The widths come from the elaborated design with the bind's parameter values applied
(``hierarchy -chparam``), so a width that depends on a parameter is checked as the simulator
will build it; no regular expression reads the Verilog.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hwvit import toolchain


class ElaborationError(ValueError):
    """yosys could not read or elaborate the sources; the message is one line."""


def ports(sources: list[Path], top: str, parameters: dict[str, Any]) -> dict[str, tuple[str, int]]:
    """{port: (direction 'input'|'output'|'inout', width)} of ``top`` elaborated with ``parameters``."""
    yosys = toolchain.require("yosys")
    chparam = " ".join(f"-chparam {name} {int(value)}" for name, value in parameters.items())
    files = " ".join(f'"{Path(s).resolve()}"' for s in sources)
    with tempfile.TemporaryDirectory() as tmp:
        out_json = Path(tmp) / "design.json"
        # proc: the JSON backend refuses modules that still hold processes.
        script = (
            f'read_verilog -defer -I"{toolchain.repo().rtl}" {files}; '
            f"hierarchy -top {top} {chparam}; proc; write_json {out_json}"
        )
        out = toolchain.run_tool([yosys, "-q", "-p", script], timeout=300)
        if out.returncode != 0 or not out_json.exists():
            lines = [ln.strip() for ln in (out.stderr + out.stdout).splitlines() if "ERROR" in ln]
            why = lines[0] if lines else f"exit {out.returncode}"
            raise ElaborationError(f"yosys cannot elaborate {top}: {why}")
        design = json.loads(out_json.read_text())
    for module in design.get("modules", {}).values():
        if module.get("attributes", {}).get("top"):
            return {name: (p["direction"], len(p["bits"])) for name, p in module["ports"].items()}
    raise ElaborationError(f"yosys found no top module {top}")
