"""`--cluster slurm` on a real one-node SLURM: the same results as a local run, and a cancelled job.

Opt-in (`make test-slurm`, or `pytest -m slurm` as root with Debian's slurm-wlm and munge): the
fixture starts `munged` (as the munge user, on a socket of its own), `slurmctld -D` and `slurmd -D`
on a slurm.conf in a temporary folder (free ports, the node as `slurmd -C` reports it), and stops
them by process id afterwards. hwvit runs as a subprocess with SLURM_CONF pointing there, so its
dask-jobqueue cluster submits real `sbatch` jobs, each starting a Dask worker on this Python.
Missing SLURM fails here (it never skips): these tests exist to say whether it works.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from hwvit import vectors
from hwvit.record import Tensor

pytestmark = [pytest.mark.slurm, pytest.mark.xdist_group("slurm")]
ROOT = Path(__file__).resolve().parents[1]
HWVIT = [sys.executable, "-c", "from hwvit.cli import main; main(prog_name='hwvit')"]
SBIN = os.pathsep.join((os.environ.get("PATH", ""), "/usr/sbin", "/sbin"))
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo")
KINDS = ("requant", "gelu", "softmax", "residual_add")  # 2 random sets each, plus one failing set
JOB_NAME = "hwvit-slurm-test"
TIMEOUT = 600  # seconds any one hwvit command may take here (a loaded 2-core machine)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    proc.wait(timeout=30)


def _slurm_conf(d: Path, sock: Path) -> str:
    node = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True, env={"PATH": SBIN})
    host = socket.gethostname().split(".")[0]
    assert node.stdout.startswith(f"NodeName={host} "), node.stdout  # slurmd -D registers as hostname -s
    return "\n".join(
        [
            "ClusterName=hwvittest",
            f"SlurmctldHost={host}",
            "SlurmUser=root",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            "AuthType=auth/munge",
            f"AuthInfo=socket={sock}",
            "CredType=cred/munge",
            f"StateSaveLocation={d}/state",
            f"SlurmdSpoolDir={d}/spool",
            f"SlurmctldPidFile={d}/slurmctld.pid",
            f"SlurmdPidFile={d}/slurmd.pid",
            f"SlurmctldLogFile={d}/slurmctld.log",
            f"SlurmdLogFile={d}/slurmd.log",
            # No cgroups in a container: track processes by parent pid, no task binding, no accounting.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "ReturnToService=2",
            "MpiDefault=none",
            "SwitchType=switch/none",
            f"{node.stdout.splitlines()[0]} State=UNKNOWN",  # CPUs, sockets, RealMemory as measured
            f"PartitionName=hwvit Nodes={host} Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


@pytest.fixture(scope="module")
def slurm() -> dict[str, str]:
    """A one-node SLURM of our own; yields the environment (SLURM_CONF) for its client commands."""
    missing = [name for name in DAEMONS if shutil.which(name, path=SBIN) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not found: apt-get install slurm-wlm munge (make test-slurm does)")
    if os.geteuid() != 0:
        pytest.fail("the one-node SLURM needs root (munged runs as the munge user, slurmd as root)")
    d = Path(tempfile.mkdtemp(prefix="hwvit-slurm-"))
    d.chmod(0o755)  # munged (the munge user) must reach its socket directory below
    munge_dir = d / "munge"
    munge_dir.mkdir(mode=0o755)  # munged wants execute for all on the socket's directory
    munge = pwd.getpwnam("munge")
    os.chown(munge_dir, munge.pw_uid, munge.pw_gid)
    sock = munge_dir / "munge.socket"
    (d / "state").mkdir()
    (d / "spool").mkdir()
    (d / "slurm.conf").write_text(_slurm_conf(d, sock))
    env = {**os.environ, "SLURM_CONF": str(d / "slurm.conf"), "PATH": SBIN}
    procs: list[subprocess.Popen] = []
    outs = []

    def start(cmd: list[str], name: str, **kw) -> None:
        out = (d / f"{name}.out").open("w")
        outs.append(out)
        procs.append(subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=d, **kw))

    def logs() -> str:
        return "\n".join(
            f"== {p.name}\n{p.read_text()[-1500:]}"
            for p in sorted(d.glob("*.out")) + sorted(d.glob("*.log")) + sorted(munge_dir.glob("*.log"))
        )

    try:
        start(
            [
                "munged",
                "-F",
                f"--socket={sock}",
                f"--pid-file={munge_dir}/munged.pid",
                f"--log-file={munge_dir}/munged.log",
                f"--seed-file={munge_dir}/munged.seed",
            ],
            "munged",
            user="munge",
            group="munge",
            extra_groups=[],
        )
        deadline = time.monotonic() + 30
        while not sock.exists():
            assert procs[0].poll() is None and time.monotonic() < deadline, f"munged did not start\n{logs()}"
            time.sleep(0.1)
        start(["slurmctld", "-D", "-i"], "slurmctld")
        start(["slurmd", "-D"], "slurmd")
        deadline = time.monotonic() + 90
        while True:
            state = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, env=env).stdout
            if state.strip() == "idle":
                break
            dead = [p.args[0] for p in procs if p.poll() is not None]
            assert not dead and time.monotonic() < deadline, (
                f"node not idle ({state.strip()!r}, exited: {dead})\n{logs()}"
            )
            time.sleep(0.5)
        yield {"SLURM_CONF": env["SLURM_CONF"]}
    finally:
        if len(procs) == 3 and procs[1].poll() is None:
            # Our controller knows only our jobs: cancel them so no worker outlives the daemons.
            subprocess.run(["scancel", "--full", "-p", "hwvit"], env=env, capture_output=True, timeout=30)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                q = subprocess.run(["squeue", "-h"], capture_output=True, text=True, env=env, timeout=30)
                if not q.stdout.strip():
                    break
                time.sleep(0.5)
        for proc in reversed(procs):
            _stop(proc)
        for out in outs:
            out.close()
        shutil.rmtree(d, ignore_errors=True)


def _env(slurm: dict[str, str]) -> dict[str, str]:
    env = {**os.environ, **slurm}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"  # result lines arrive as they are printed
    return env


def _hwvit(*args: str, env: dict[str, str], cwd: Path, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run([*HWVIT, *args], capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)


def _cluster_args(logs: Path, jobs: int = 2) -> list[str]:
    """One core and 1 GB per batch job; the job name finds them in squeue; worker logs under ``logs``,
    worker scratch beside it."""
    opts = [
        "cores=1",
        "memory=1GB",
        f"jobs={jobs}",
        "walltime=00:30:00",
        f"job_name={JOB_NAME}",
        f"log_directory={logs}",
        f"local_directory={logs.parent / 'dask'}",  # the workers' scratch, not /tmp/dask-scratch-space
        "timeout=60",
    ]
    return ["--cluster", "slurm", *(a for o in opts for a in ("--cluster-opt", o))]


def _jobs(slurm: dict[str, str]) -> list[tuple[str, str]]:
    """(job id, state) of our workers' batch jobs."""
    q = subprocess.run(
        ["squeue", "-h", "-n", JOB_NAME, "-o", "%i %T"],
        capture_output=True,
        text=True,
        env=_env(slurm),
        timeout=30,
        check=True,
    )
    return [tuple(line.split()) for line in q.stdout.splitlines() if line.strip()]


def _no_jobs_left(slurm: dict[str, str]) -> bool:
    """hwvit cancels its jobs on the way out; squeue lists them while they complete (CG)."""
    deadline = time.monotonic() + 30
    while _jobs(slurm) and time.monotonic() < deadline:
        time.sleep(0.5)
    return not _jobs(slurm)


def _worker_logs(logs: Path) -> str:
    return "\n".join(f"== {p.name}\n{p.read_text()[-3000:]}" for p in sorted(logs.glob("*")))


@pytest.fixture(scope="module")
def sets(tmp_path_factory) -> Path:
    """A small regression: 2 random sets of each of KINDS, plus a requant set with one wrong output."""
    tree = tmp_path_factory.mktemp("sets")
    for kind in KINDS:
        for seed in (1, 2):
            vectors.write_set(vectors.random_record(kind, cases=8, seed=seed), tree / f"{kind}-{seed}")
    rec = vectors.random_record("requant", cases=16, seed=3)
    y = rec.tensors["y"]
    data = y.data.copy()
    data[7] = data[7] - 1 if data[7] > y.fmt.lo else data[7] + 1
    rec.tensors["y"] = Tensor(data, y.bits, y.signed, y.role, y.scale)
    vectors.write_set(rec, tree / "zz_mismatch")
    return tree


@pytest.fixture(scope="module")
def local_sim(sets, tmp_path_factory) -> dict:
    """The regression run here (no cluster): the reference results; it also warms the build cache."""
    r = _hwvit("sim", str(sets), "--simulator", "icarus", "-j", "2", "--json", env=_env({}), cwd=ROOT)
    assert r.returncode == 1, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert (doc["passed"], doc["failed"]) == (2 * len(KINDS), 1), doc
    return doc


def test_sim_on_slurm_equals_local(sets, local_sim, slurm, tmp_path):
    logs = tmp_path / "logs"
    start = time.monotonic()
    r = _hwvit("sim", str(sets), "--simulator", "icarus", *_cluster_args(logs), "--json", env=_env(slurm), cwd=tmp_path)
    took = time.monotonic() - start
    assert r.returncode == 1, f"{r.stderr[-3000:]}\n{_worker_logs(logs)}"
    doc = json.loads(r.stdout)
    assert doc == local_sim  # every set once, same pass/fail, elements, cycles and first mismatch
    assert [x["set"] for x in doc["results"] if not x["passed"]] == [str(sets / "zz_mismatch")]
    workers = [p for p in logs.glob("*.err") if "Start worker" in p.read_text()]
    assert workers, _worker_logs(logs)  # the tasks ran in batch jobs' Dask workers
    assert _no_jobs_left(slurm)  # the cluster cancelled its jobs on the way out
    print(f"sim on slurm: {len(doc['results'])} sets in {took:.1f} s, {len(workers)} workers")


def test_sweep_on_slurm_equals_local(slurm, tmp_path):
    args = ["sweep", "--model", "digits", "--quick", "--limit", "24", "--calib-images", "48", "-q"]
    local = _hwvit(*args, "--out", str(tmp_path / "local"), env=_env({}), cwd=ROOT)
    assert local.returncode == 0, local.stderr[-3000:]
    logs = tmp_path / "logs"
    dist = _hwvit(*args, "--out", str(tmp_path / "slurm"), *_cluster_args(logs), env=_env(slurm), cwd=tmp_path)
    assert dist.returncode == 0, f"{dist.stderr[-3000:]}\n{_worker_logs(logs)}"
    a, b = (json.loads((tmp_path / d / "sweep.json").read_text()) for d in ("local", "slurm"))

    def metrics(doc: dict) -> list[dict]:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in doc["rows"]]  # wall time differs

    assert len(a["rows"]) == 6 and metrics(b) == metrics(a)
    assert {k: v for k, v in b.items() if k != "rows"} == {k: v for k, v in a.items() if k != "rows"}
    assert any("Start worker" in p.read_text() for p in logs.glob("*.err")), _worker_logs(logs)
    assert _no_jobs_left(slurm)


def test_scancel_mid_run_every_set_once(sets, local_sim, slurm, tmp_path):
    """One worker's batch job cancelled while tasks run: its tasks go to the other worker (or are
    reported as lost); every set is reported exactly once, none lost, none twice."""
    logs = tmp_path / "logs"
    env = _env(slurm)
    proc = subprocess.Popen(
        [*HWVIT, "sim", str(sets), "--simulator", "icarus", *_cluster_args(logs)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        lines.append(proc.stdout.readline())  # the first result: both workers have taken tasks
        running = []
        deadline = time.monotonic() + 60
        while len(running) < 2 and time.monotonic() < deadline:
            running = [job for job, state in _jobs(slurm) if state == "RUNNING"]
            time.sleep(0.2)
        assert len(running) == 2, (running, lines)
        cancelled = running[-1]
        subprocess.run(["scancel", cancelled], env=env, check=True, timeout=30)
        rest, _ = proc.communicate(timeout=TIMEOUT)
        lines += rest.splitlines()
    finally:
        _stop(proc)
    results = [line for line in lines if line.startswith(("PASS ", "FAIL "))]
    paths = sorted(line.split()[3].rstrip(":") for line in results)
    expected = sorted(x["set"] for x in local_sim["results"])
    assert paths == expected, f"{lines}\n{_worker_logs(logs)}"  # each set exactly once
    local = {x["set"]: x["passed"] for x in local_sim["results"]}
    for line in results:
        path = line.split()[3].rstrip(":")
        # a set whose task was retried on the other worker has its local result; one that could
        # not finish anywhere is a FAIL naming the lost task, never a silent pass or a double.
        assert line.startswith("PASS ") == local[path] or "task lost" in line, line
    passed = sum(line.startswith("PASS ") for line in results)
    assert lines[-1].strip() == f"{passed} passed, {len(results) - passed} failed"
    assert _no_jobs_left(slurm)
    print(f"scancel {cancelled}: {passed} passed, {len(results) - passed} failed of {len(results)}")
