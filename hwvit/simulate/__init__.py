"""Run a block's cocotb testbench on a vector set, on Icarus or Verilator; one module per job:

- ``build``: load a kind's testbench module (``tb_module``) and build its design, cached;
- ``launch``: run the cocotb test on a built design (``run``, ``run_test``, ``run_stress``);
- ``results``: read the JSON result a testbench wrote into a ``SimResult``; FAIL results for runs
  that ended without one;
- ``batch``: many (set, simulator) pairs on local processes or a Dask cluster, each result
  reported as it arrives (``run_many``, ``run_on_cluster``).

Each job imports only the jobs before it (tests/test_layering.py). The names below are the
module's public interface from before the split.
"""

from hwvit.simresult import SimResult
from hwvit.simulate.batch import run_many, run_on_cluster
from hwvit.simulate.build import DEFAULT_BUILD_ROOT, build, build_design, default_build_root, tb_module
from hwvit.simulate.launch import (
    RESET_TESTCASES,
    assertion_rewriting_env,
    run,
    run_bind,
    run_stress,
    run_test,
    sim_pythonpath,
)

__all__ = [
    "DEFAULT_BUILD_ROOT",
    "RESET_TESTCASES",
    "SimResult",
    "assertion_rewriting_env",
    "build",
    "build_design",
    "default_build_root",
    "run",
    "run_bind",
    "run_many",
    "run_on_cluster",
    "run_stress",
    "run_test",
    "sim_pythonpath",
    "tb_module",
]
