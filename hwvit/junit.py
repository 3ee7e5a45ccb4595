"""Simulation results as a JUnit XML file and as JSON, for CI servers (Jenkins, GitLab).

One test case per (set, simulator): ``classname`` is ``hwvit.sim.<simulator>.<kind>``, ``name`` the
set's directory relative to the directory simulated; a failing case carries the result's message
(the first mismatching element: tensor, index, expected, got) in its ``<failure>``.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from hwvit.atomic import write_atomic
from hwvit.simulate import SimResult


def _name(res: SimResult, root: Path) -> str:
    try:
        return str(Path(res.set_dir).resolve().relative_to(root.resolve()))
    except ValueError:
        return res.set_dir


def to_xml(results: list[SimResult], root: str | Path, seconds: float = 0.0) -> bytes:
    root = Path(root)
    failed = sum(not r.passed for r in results)
    suites = ET.Element("testsuites", name="hwvit sim", tests=str(len(results)), failures=str(failed))
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=f"hwvit sim {root}",
        tests=str(len(results)),
        failures=str(failed),
        errors="0",
        skipped="0",
        time=f"{seconds:.3f}",
    )
    for res in results:
        case = ET.SubElement(
            suite, "testcase", classname=f"hwvit.sim.{res.simulator}.{res.kind}", name=_name(res, root)
        )
        if not res.passed:
            failure = ET.SubElement(
                case, "failure", message=res.message or "failed", type="mismatch" if res.first else "error"
            )
            failure.text = res.line()
        else:
            out = ET.SubElement(case, "system-out")
            out.text = res.line()
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True)


def write_junit(path: str | Path, results: list[SimResult], root: str | Path, seconds: float = 0.0) -> None:
    write_atomic(path, to_xml(results, root, seconds))


def to_json(results: list[SimResult]) -> str:
    failed = sum(not r.passed for r in results)
    rows = [
        {
            "kind": r.kind,
            "set": r.set_dir,
            "simulator": r.simulator,
            "passed": r.passed,
            "elements": r.elements,
            "mismatches": r.mismatches,
            "first": r.first,
            "cycles": r.cycles,
            "message": r.message,
        }
        for r in results
    ]
    return json.dumps({"passed": len(results) - failed, "failed": failed, "results": rows}, indent=2, default=int)
