"""Where work runs beyond this process: a Dask cluster named by one ``--cluster`` string.

- ``local`` or ``local:N``: a Dask LocalCluster of N single-threaded worker processes on this
  machine (N defaults to the CPU count);
- ``tcp://HOST:PORT``: an existing Dask scheduler (``dask scheduler``; workers started with
  ``dask worker tcp://HOST:PORT`` and this package importable);
- ``slurm``, ``lsf``, ``pbs``, ``sge``: a dask-jobqueue cluster; ``--cluster-opt key=value`` pairs
  go to its constructor (``cores=4 memory=8GB queue=regress walltime=01:00:00``), except
  ``jobs=N`` (batch jobs to submit, default 1). The submission is awaited (not the jobs' start):
  a job the queue refuses is an error at once, not a run that waits forever for workers.

``timeout=S`` (every kind) bounds how long connecting waits for the scheduler (default 10 s).
Task retries: Dask reschedules the tasks of a worker that died on another one (the scheduler's
``allowed-failures``, 3 by default); ``submit_retries`` adds retries of tasks that raised.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

JOBQUEUE = {"slurm": "SLURMCluster", "lsf": "LSFCluster", "pbs": "PBSCluster", "sge": "SGECluster"}
SUBMIT = {"slurm": "sbatch", "lsf": "bsub", "pbs": "qsub", "sge": "qsub"}  # checked before starting
CONNECT_TIMEOUT_S = 10.0
submit_retries = 2


class ClusterError(RuntimeError):
    """The cluster could not be started or reached (one line for the CLI)."""


@dataclass
class ClusterSpec:
    kind: str  # local, tcp, or a JOBQUEUE key
    address: str = ""
    workers: int | None = None  # local:N
    options: dict[str, Any] = field(default_factory=dict)
    timeout: float = CONNECT_TIMEOUT_S


def _value(text: str) -> Any:
    """``key=value`` values: integers and floats as numbers, true/false as booleans, else text."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse(spec: str, opts: tuple[str, ...] | list[str] = ()) -> ClusterSpec:
    """The ``--cluster`` string and ``--cluster-opt`` pairs; ValueError names what is wrong."""
    options: dict[str, Any] = {}
    for item in opts:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--cluster-opt {item!r}: expected key=value")
        options[key.strip().replace("-", "_")] = _value(value.strip())
    timeout = options.pop("timeout", CONNECT_TIMEOUT_S)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
        raise ValueError(f"--cluster-opt timeout={timeout!r}: expected seconds > 0")
    spec = spec.strip()
    if spec == "local" or spec.startswith("local:"):
        n = spec.partition(":")[2]
        if n and (not n.isdigit() or int(n) < 1):
            raise ValueError(f"--cluster {spec!r}: expected local or local:N with N >= 1")
        if options:
            raise ValueError("--cluster-opt other than timeout applies to slurm, lsf, pbs and sge only")
        return ClusterSpec("local", workers=int(n) if n else None, timeout=float(timeout))
    if spec.startswith("tcp://"):
        host, _, port = spec[len("tcp://") :].rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"--cluster {spec!r}: expected tcp://HOST:PORT")
        if options:
            raise ValueError("--cluster-opt other than timeout applies to slurm, lsf, pbs and sge only")
        return ClusterSpec("tcp", address=spec, timeout=float(timeout))
    if spec in JOBQUEUE:
        return ClusterSpec(spec, options=options, timeout=float(timeout))
    raise ValueError(f"--cluster {spec!r}: expected local[:N], tcp://HOST:PORT, or one of {', '.join(JOBQUEUE)}")


def _make_cluster(spec: ClusterSpec):
    """The cluster object behind a local or jobqueue spec (tcp needs none)."""
    if spec.kind == "local":
        from distributed import LocalCluster

        # One thread per worker: a simulation or a forward uses a whole core, and torch's own
        # threads would fight over the same cores otherwise.
        return LocalCluster(n_workers=spec.workers, threads_per_worker=1, processes=True, dashboard_address=None)
    import shutil

    import dask_jobqueue

    if shutil.which(SUBMIT[spec.kind]) is None:
        # Without it the jobs fail to submit in the background and the run would wait forever.
        raise ValueError(f"{SUBMIT[spec.kind]} not found on PATH: run on a {spec.kind} submit host")
    options = dict(spec.options)
    jobs = options.pop("jobs", 1)
    cluster = getattr(dask_jobqueue, JOBQUEUE[spec.kind])(**options)

    async def submit() -> None:
        # What cluster.scale(jobs=N) does, but awaited: scale() submits in the background, where a
        # refused submission (no controller reachable, a wrong queue or account) is only logged
        # and the run would wait forever for workers. Here the submission (seconds: sbatch returns
        # once the job is queued, not started) raises, and the error becomes one line.
        for _ in range(int(jobs)):
            cluster.worker_spec.update(cluster.new_worker_spec())
        await cluster._correct_state()

    try:
        cluster.sync(submit)
    except RuntimeError as exc:
        from distributed.core import Status

        for job in cluster.workers.values():  # close() cancels the queued ones; it asserts that
            if job.job_id is None:  # every job it made started, and these never were queued
                job.status = Status.failed
        cluster.close()
        lines = [line.strip() for line in str(exc).partition("stderr:")[2].splitlines() if line.strip()]
        raise ValueError(f"{SUBMIT[spec.kind]} failed: {lines[-1] if lines else str(exc).splitlines()[0]}") from None
    return cluster


@contextlib.contextmanager
def connect(spec: ClusterSpec) -> Iterator[Any]:
    """A ``distributed.Client`` on the cluster; the cluster (not an existing scheduler) is closed after."""
    from distributed import Client

    cluster = None
    try:
        try:
            if spec.kind == "tcp":
                client = Client(spec.address, timeout=spec.timeout)
            else:
                cluster = _make_cluster(spec)
                client = Client(cluster, timeout=spec.timeout)
        except (OSError, TimeoutError) as exc:
            where = spec.address or spec.kind
            raise ClusterError(
                f"cannot reach the Dask scheduler at {where} within {spec.timeout:g} s ({exc.__class__.__name__})"
            ) from None
        except (TypeError, ValueError, ImportError) as exc:
            text = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
            raise ClusterError(f"cannot start the {spec.kind} cluster: {text}") from None
        try:
            yield client
        finally:
            client.close()
    finally:
        if cluster is not None:
            cluster.close()


def map_ordered(client, fn, shared: tuple, items: Iterable, *args, window: int | None = None) -> Iterator[Any]:
    """``fn(*shared, item, *args)`` for each item on the workers; results yielded in item order.

    ``shared`` (e.g. the models) is sent to every worker once. At most ``window`` items are in flight
    (default: twice the workers), so a streamed data set stays bounded in memory on the driver.
    A task that raises re-raises here, after ``submit_retries`` retries.
    """
    from distributed import as_completed

    shared_futures = client.scatter(list(shared), broadcast=True) if shared else []
    window = window or max(2, 2 * sum(client.nthreads().values()))
    pending: dict[str, int] = {}
    done: dict[int, Any] = {}
    ready = as_completed()
    nxt = 0  # the next index to yield
    source = iter(items)
    submitted = 0
    exhausted = False
    while True:
        while not exhausted and len(pending) < window:
            try:
                item = next(source)
            except StopIteration:
                exhausted = True
                break
            fut = client.submit(fn, *shared_futures, item, *args, pure=False, retries=submit_retries)
            pending[fut.key] = submitted
            ready.add(fut)
            submitted += 1
        if not pending:
            break
        fut = next(ready)
        done[pending.pop(fut.key)] = fut.result()
        while nxt in done:
            yield done.pop(nxt)
            nxt += 1
    while nxt in done:
        yield done.pop(nxt)
        nxt += 1
