"""Benchmark of `hwvit sim --cluster`: sets per minute on a loopback Dask cluster vs `-j N`.

Starts `dask scheduler` and N `dask worker --nthreads 1` processes on 127.0.0.1, runs
`hwvit sim DIR --simulator S --cluster tcp://...` and `hwvit sim DIR --simulator S -j N` (builds
warmed first, so both measure simulation, not compilation), and times 200 no-op tasks through
the same client: the dispatch overhead per task. Figures only, no asserts.

Run: ``.venv/bin/python sim/bench_cluster.py VECTOR_DIR [--simulator icarus] [--workers 2]``
(e.g. the 58 sets of ``hwvit vectors --model digits --limit 1 --calib-images 32 --out DIR``).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HWVIT = [sys.executable, "-c", "from hwvit.cli import main; main(prog_name='hwvit')"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def _timed(args: list[str]) -> float:
    start = time.perf_counter()
    r = subprocess.run([*HWVIT, *args], capture_output=True, text=True, env=_env())
    if r.returncode not in (0, 1):
        sys.exit(f"hwvit {' '.join(args)} failed: {r.stderr.strip().splitlines()[-1:]}")
    return time.perf_counter() - start


def _noop(i: int) -> int:
    return i


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("directory")
    ap.add_argument("--simulator", default="icarus")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from distributed import Client, as_completed

    from hwvit import vectors

    n_sets = len(vectors.find_sets(Path(a.directory)))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    dask = str(Path(sys.executable).with_name("dask"))
    procs = [
        subprocess.Popen(
            [dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            env=_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        for _ in range(a.workers):
            procs.append(
                subprocess.Popen(
                    [dask, "worker", address, "--nthreads", "1", "--no-nanny", "--host", "127.0.0.1", "--no-dashboard"],
                    env=_env(),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        client = Client(address, timeout=60)
        client.wait_for_workers(a.workers, timeout=120)
        common = ["sim", a.directory, "--simulator", a.simulator, "-q"]
        _timed([*common, "-j", str(a.workers)])  # warm the build cache
        t_local = _timed([*common, "-j", str(a.workers)])
        t_cluster = _timed([*common, "--cluster", address])
        start = time.perf_counter()
        futures = [client.submit(_noop, i, pure=False) for i in range(200)]
        for _ in as_completed(futures):
            pass
        per_task = (time.perf_counter() - start) / 200
        client.close()
    finally:
        for p in reversed(procs):
            p.kill()
            p.wait()
    runs = n_sets * (2 if a.simulator == "both" else 1)
    print(f"{runs} runs ({n_sets} sets, {a.simulator}), {a.workers} workers, warm builds")
    print(f"-j {a.workers}:            {t_local:6.1f} s  {60 * n_sets / t_local:6.1f} sets/min")
    print(f"loopback cluster: {t_cluster:6.1f} s  {60 * n_sets / t_cluster:6.1f} sets/min")
    print(
        f"no-op task round trip (200 tasks, as_completed): {1000 * per_task:.2f} ms/task; "
        f"whole-run difference per run: {1000 * (t_cluster - t_local) / runs:+.0f} ms"
    )


if __name__ == "__main__":
    main()
