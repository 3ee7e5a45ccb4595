"""Read what a testbench run found (the JSON result ``sim/tbutil.py`` writes) into a ``SimResult``,
and turn a run that ended without one into a FAIL result that says why."""

from __future__ import annotations

import json
from pathlib import Path

from hwvit.simresult import SimResult  # its own module: the testbenches write it
from hwvit.textfiles import first_line


def no_simulator(kind: str, set_dir: Path, simulator: str, exc: BaseException) -> SimResult:
    """The result of a run whose simulator failed to start."""
    return SimResult(kind, str(set_dir), simulator, False, message=f"simulator failed: {exc}")


def read_result(run_dir: Path, kind: str, set_dir: Path, simulator: str) -> SimResult:
    """The result the testbench wrote to ``run_dir/result.json``, with the run's coverage file
    (``extra["coverage_dat"]``) where a Verilator coverage build wrote one; a FAIL result naming
    the simulation log when the testbench wrote none."""
    result_file = run_dir / "result.json"
    if not result_file.exists():
        return SimResult(
            kind, str(set_dir), simulator, False, message=f"testbench wrote no result; see {run_dir / 'sim.log'}"
        )
    data = json.loads(result_file.read_text())
    result = SimResult(kind=kind, set_dir=str(set_dir), simulator=simulator, **data)
    if (run_dir / "coverage.dat").exists():  # written by a Verilator coverage build as the run ends
        result.extra["coverage_dat"] = str(run_dir / "coverage.dat")
    return result


def failed(set_dir: str, simulator: str, exc: BaseException) -> SimResult:
    """A FAIL result for a run that raised: a bad vector set, or the exception's class and first line."""
    from hwvit import vectors

    if isinstance(exc, vectors.VectorSetError):
        return SimResult("?", set_dir, simulator, False, message=f"bad vector set: {exc}")
    return SimResult("?", set_dir, simulator, False, message=first_line(exc, with_type=True))


def lost(set_dir: str, simulator: str, exc: BaseException) -> SimResult:
    """A FAIL result for a cluster task that never came back (e.g. KilledWorker after every retry)."""
    return SimResult("?", set_dir, simulator, False, message=f"task lost: {first_line(exc, with_type=True)}")
