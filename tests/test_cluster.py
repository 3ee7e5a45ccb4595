"""`--cluster` on a loopback Dask cluster: same results as local, a lost worker, JUnit, a dead address.

The scheduler and workers are separate processes (`dask scheduler`, `dask worker --no-nanny` on
127.0.0.1), started here and always killed in the fixture's finally. The simulations use 5 of the
58 digits traced sets (one per block kind, the small head GEMM for the GEMMs) on Icarus: the whole
tree takes minutes per run on this 2-core machine, and every path (dispatch, retry, merge of
results) is the same for 5.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hwvit import cluster, vectors
from hwvit.record import Tensor

pytestmark = pytest.mark.xdist_group("cluster")  # heavy processes: one xdist worker runs them in turn
ROOT = Path(__file__).resolve().parents[1]
SUBSET = (
    "layers.0.norm1",
    "layers.0.attn.softmax",
    "layers.0.mlp.gelu",
    "layers.0.add1",
    "head",
)
HWVIT = [sys.executable, "-c", "from hwvit.cli import main; main(prog_name='hwvit')"]
TIMEOUT = 300  # seconds any one command may take here before the test fails


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"  # result lines arrive as they are printed
    return env


def _hwvit(*args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run([*HWVIT, *args], capture_output=True, text=True, env=_env(), timeout=timeout, cwd=ROOT)


def _dask(*args: str) -> list[str]:
    return [str(Path(sys.executable).with_name("dask")), *args]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


@pytest.fixture(scope="session")  # session: kept when xdist runs other modules between its tests
def traced(tmp_path_factory) -> Path:
    """5 digits traced sets, plus one requant set with one wrong output element (a failing case)."""
    out = tmp_path_factory.mktemp("traced")
    r = _hwvit(
        "vectors", "--model", "digits", "--limit", "1", "--calib-images", "32", "--quiet", "--out", str(out / "all")
    )
    assert r.returncode == 0, r.stderr
    sub = out / "sub"
    for name in SUBSET:
        shutil.copytree(out / "all" / name, sub / name)
    return sub


@pytest.fixture(scope="session")  # session: kept when xdist runs other modules between its tests
def with_failure(traced, tmp_path_factory) -> Path:
    tree = tmp_path_factory.mktemp("withfail")
    shutil.copytree(traced, tree, dirs_exist_ok=True)
    rec = vectors.random_record("requant", cases=64, seed=2)
    y = rec.tensors["y"]
    data = y.data.copy()
    data[7] = data[7] - 1 if data[7] > y.fmt.lo else data[7] + 1
    rec.tensors["y"] = Tensor(data, y.bits, y.signed, y.role, y.scale)
    vectors.write_set(rec, tree / "zz_mismatch")
    return tree


@pytest.fixture
def scheduler(tmp_path):
    """`dask scheduler` and two `dask worker` processes on 127.0.0.1; yields (address, workers)."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []
    try:
        procs.append(
            subprocess.Popen(
                _dask("scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"),
                env=_env(),
                cwd=tmp_path,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        for _ in range(2):
            procs.append(
                subprocess.Popen(
                    _dask("worker", address, "--nthreads", "1", "--no-nanny", "--host", "127.0.0.1", "--no-dashboard"),
                    env=_env(),
                    cwd=tmp_path,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        wait = (
            f"from distributed import Client; c = Client({address!r}, timeout=60); "
            "c.wait_for_workers(2, timeout=60); c.close()"
        )
        subprocess.run([sys.executable, "-c", wait], check=True, timeout=150, env=_env(), capture_output=True)
        yield address, procs[1:]
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith(("PASS ", "FAIL "))]


def test_cluster_spec_parsing():
    assert cluster.parse("local:3").workers == 3 and cluster.parse("local").workers is None
    spec = cluster.parse("slurm", ["cores=4", "memory=8GB", "jobs=2", "timeout=5"])
    assert (spec.kind, spec.options, spec.timeout) == ("slurm", {"cores": 4, "memory": "8GB", "jobs": 2}, 5.0)
    assert cluster.parse("tcp://10.0.0.1:8786").address == "tcp://10.0.0.1:8786"
    for bad, opts in (
        ("local:0", []),
        ("tcp://host", []),
        ("yarn", []),
        ("slurm", ["cores"]),
        ("local:2", ["cores=2"]),
        ("local", ["timeout=-1"]),
    ):
        with pytest.raises(ValueError):
            cluster.parse(bad, opts)


def test_cluster_sim_equals_local_with_junit(with_failure, scheduler, tmp_path):
    address, _ = scheduler
    local = _hwvit("sim", str(with_failure), "--simulator", "icarus", "-j", "2", "--json")
    junit = tmp_path / "sim.xml"
    dist = _hwvit(
        "sim", str(with_failure), "--simulator", "icarus", "--cluster", address, "--json", "--junit", str(junit)
    )
    assert local.returncode == 1 and dist.returncode == 1, dist.stderr[-2000:]
    local_doc, dist_doc = json.loads(local.stdout), json.loads(dist.stdout)
    assert (dist_doc["passed"], dist_doc["failed"]) == (len(SUBSET), 1)
    assert dist_doc == local_doc  # every field of every set: elements, cycles, first mismatch

    suite = ET.parse(junit).getroot().find("testsuite")
    cases = suite.findall("testcase")
    assert sorted(c.get("name") for c in cases) == sorted([*SUBSET, "zz_mismatch"])
    assert {c.get("classname").split(".")[2] for c in cases} == {"icarus"}
    failed = [c for c in cases if c.find("failure") is not None]
    assert [c.get("name") for c in failed] == ["zz_mismatch"]
    assert "y[7]" in failed[0].find("failure").get("message")
    assert suite.get("tests") == str(len(SUBSET) + 1) and suite.get("failures") == "1"


def test_lost_worker_lines_name_every_set_once(traced, scheduler):
    address, workers = scheduler
    proc = subprocess.Popen(
        [*HWVIT, "sim", str(traced), "--simulator", "icarus", "--cluster", address],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=_env(),
        cwd=ROOT,
    )
    lines = []
    try:
        assert proc.stdout is not None
        lines.append(proc.stdout.readline())  # the first result: runs are under way on both workers
        workers[1].send_signal(signal.SIGKILL)
        rest, _ = proc.communicate(timeout=TIMEOUT)
        lines += rest.splitlines()
    finally:
        _stop(proc)
    results = _lines("\n".join(lines))
    names = sorted(Path(line.split()[3].rstrip(":")).name for line in results)
    assert names == sorted(SUBSET), names  # each set exactly once, none lost, none twice
    assert lines[-1].strip() == f"{len(SUBSET)} passed, 0 failed" and proc.returncode == 0


def test_unreachable_scheduler_one_line(traced):
    port = _free_port()  # nothing listens there
    start = time.monotonic()
    r = _hwvit(
        "sim",
        str(traced),
        "--simulator",
        "icarus",
        "--cluster",
        f"tcp://127.0.0.1:{port}",
        "--cluster-opt",
        "timeout=3",
        timeout=60,
    )
    assert r.returncode == 1 and time.monotonic() - start < 60
    assert r.stderr.strip() == (
        f"Error: cannot reach the Dask scheduler at tcp://127.0.0.1:{port} within 3 s (OSError)"
    ), r.stderr
    assert r.stdout == ""


# 29-33 s: make test's budget (the sim and sweep cluster tests keep Dask in it); make bench runs it
@pytest.mark.slow
def test_compare_local_cluster_equals_local():
    args = ["compare", "--model", "digits", "--calib-images", "32", "--limit", "32", "--batch", "16", "--json"]
    local = _hwvit(*args)
    dist = _hwvit(*args, "--cluster", "local:2")
    assert local.returncode == 0 and dist.returncode == 0, dist.stderr[-2000:]
    a, b = json.loads(local.stdout), json.loads(dist.stdout)
    assert a["images"] == 32 and len(a["layers"]) > 10
    assert b == a  # top-1, agreement, logits SQNR and every layer's numbers, to the last digit


def _bin_without_sbatch(tmp_path: Path) -> Path:
    """A PATH directory with Icarus only: /usr/bin may hold a real sbatch (make test-slurm installs it)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for exe in ("iverilog", "vvp"):
        (bin_dir / exe).symlink_to(shutil.which(exe))
    return bin_dir


def _sim_on_slurm(traced: Path, path: str) -> subprocess.CompletedProcess:
    args = ["sim", str(traced), "--simulator", "icarus", "--cluster", "slurm"]
    return subprocess.run(
        [*HWVIT, *args, "--cluster-opt", "cores=1", "--cluster-opt", "memory=1GB"],
        capture_output=True,
        text=True,
        env={**_env(), "PATH": path},
        timeout=120,
        cwd=ROOT,
    )


def test_jobqueue_without_its_submit_command_one_line(traced, tmp_path):
    r = _sim_on_slurm(traced, f"{Path(sys.executable).parent}:{_bin_without_sbatch(tmp_path)}")  # no sbatch
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip() == (
        "Error: cannot start the slurm cluster: sbatch not found on PATH: run on a slurm submit host"
    ), r.stderr


def test_jobqueue_refused_submission_one_line(traced, tmp_path):
    """A submit command that refuses the job (no controller, a wrong queue) is one line at once: in
    the background, where dask-jobqueue submits, it was only logged and the run waited forever."""
    bin_dir = _bin_without_sbatch(tmp_path)
    sbatch = bin_dir / "sbatch"
    sbatch.write_text("#!/bin/sh\necho 'sbatch: error: invalid partition specified: regress' >&2\nexit 1\n")
    sbatch.chmod(0o755)
    r = _sim_on_slurm(traced, f"{Path(sys.executable).parent}:{bin_dir}")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip().splitlines()[-1] == (
        "Error: cannot start the slurm cluster: sbatch failed: sbatch: error: invalid partition specified: regress"
    ), r.stderr


def test_cluster_opt_needs_cluster(traced):
    r = _hwvit("sim", str(traced), "--cluster-opt", "cores=2", timeout=60)
    assert r.returncode == 2 and r.stderr.strip() == "Error: --cluster-opt applies to --cluster only"
