"""Run many (vector set, simulator) pairs, on local processes or a Dask cluster, and report each
result as it arrives (the last job of hwvit.simulate). Every failure becomes a FAIL result, never an
exception, so every pair is reported exactly once."""

from __future__ import annotations

import hashlib
from pathlib import Path

from hwvit.simresult import SimResult
from hwvit.simulate import launch
from hwvit.simulate.results import failed, lost


def _run_safely(
    set_dir: str, simulator: str, waves: bool, build_root: str | None, coverage: bool = False, stress: bool = False
) -> SimResult:
    """One set on one simulator; every failure becomes a FAIL result, never an exception."""
    try:
        root = Path(build_root) if build_root else None
        # launch.run looked up per call: sim/conftest.py wraps it for coverage runs
        if stress:
            return launch.run_stress(set_dir, simulator, waves=waves, build_root=root, coverage=coverage)
        return launch.run(set_dir, simulator, waves=waves, build_root=root, coverage=coverage)
    except Exception as exc:  # noqa: BLE001 - report, don't crash the whole run
        return failed(set_dir, simulator, exc)


def run_many(
    jobs: list[tuple[str, str]],
    *,
    workers: int = 1,
    waves: bool = False,
    build_root: str | Path | None = None,
    on_result=None,
    coverage: bool = False,
    stress: bool = False,
) -> list[SimResult]:
    """Run (set_dir, simulator) pairs, ``workers`` at a time (``stress``: ``run_stress``); results in order.

    Builds are shared through the per-build lock, so the first run of each (kind, simulator,
    parameters) builds while the others wait for it. ``on_result(result)`` is called as each
    result arrives, in order.
    """
    import concurrent.futures as cf

    root = str(build_root) if build_root else None
    results: list[SimResult] = []
    with cf.ProcessPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(_run_safely, d, s, waves, root, coverage, stress) for d, s in jobs]
        for fut in futures:
            res = fut.result()
            results.append(res)
            if on_result is not None:
                on_result(res)
    return results


def run_on_cluster(
    client, jobs: list[tuple[str, str]], *, waves: bool = False, build_root: str | Path | None = None, on_result=None
) -> list[SimResult]:
    """Run (set_dir, simulator) pairs as Dask tasks on ``client``'s workers; results in the order given.

    One task per pair (the set's RTL configuration comes from its manifest, so the task is one
    (set, simulator, configuration)). Each worker builds a configuration once into its build root
    (shared with --build-dir: then once in all, under the O_EXCL lock). ``on_result`` sees each
    result as it finishes, in completion order. A worker lost mid-run has its tasks rescheduled by
    the scheduler; a task that still cannot finish becomes a FAIL result, so every pair is
    reported exactly once.
    """
    import uuid

    from distributed import as_completed

    from hwvit import cluster

    root = str(build_root) if build_root else None
    run_id = uuid.uuid4().hex[:8]  # two runs sharing a scheduler never share a task key
    futures, where = [], {}
    for i, (d, s) in enumerate(jobs):
        fut = client.submit(
            _run_safely,
            d,
            s,
            waves,
            root,
            pure=False,
            retries=cluster.submit_retries,
            key=f"hwvit-sim-{run_id}-{i}-{hashlib.sha1(f'{d}:{s}'.encode()).hexdigest()[:8]}",
        )
        futures.append(fut)
        where[fut.key] = (i, d, s)
    results: dict[int, SimResult] = {}
    for fut in as_completed(futures):
        i, d, s = where[fut.key]
        try:
            res = fut.result()
        except Exception as exc:  # noqa: BLE001 - e.g. KilledWorker after every retry
            res = lost(d, s, exc)
        if i in results:  # as_completed yields a future once; this guards the count regardless
            continue
        results[i] = res
        if on_result is not None:
            on_result(res)
    return [results[i] for i in range(len(jobs))]
