"""Where a command's tasks run: --cluster SPEC and --cluster-opt key=value (Dask), and the client."""

from __future__ import annotations

import contextlib
import functools

import click

from hwvit.cli.common import F, fail, refuse
from hwvit.textfiles import first_line


def cluster_options(func: F) -> F:
    """--cluster SPEC and --cluster-opt key=value (repeatable): run the command's tasks on Dask.

    The command receives ``cluster``: a parsed ``hwvit.cluster.ClusterSpec``, or None (run here,
    as without the option). Connect with ``cluster_client(spec)``."""

    @click.option(
        "--cluster",
        "cluster_spec",
        metavar="SPEC",
        help="Run on Dask: local[:N] (N worker processes here), tcp://HOST:PORT (a running "
        "`dask scheduler`), or slurm|lsf|pbs|sge (dask-jobqueue, see --cluster-opt).",
    )
    @click.option(
        "--cluster-opt",
        "cluster_opts",
        multiple=True,
        metavar="KEY=VALUE",
        help="Option of the jobqueue cluster (cores=4 memory=8GB queue=Q walltime=01:00:00 jobs=N), "
        "or timeout=S to reach the scheduler (every kind, default 10).",
    )
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        from hwvit import cluster

        spec, opts = kwargs.pop("cluster_spec"), kwargs.pop("cluster_opts")
        if opts and not spec:
            refuse("--cluster-opt applies to --cluster only")
        try:
            kwargs["cluster"] = cluster.parse(spec, opts) if spec else None
        except ValueError as exc:
            refuse(first_line(exc))
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


@contextlib.contextmanager
def cluster_client(spec):
    """A Dask client on ``spec`` (a ClusterSpec); unreachable or unstartable: one line, exit 1."""
    from hwvit import cluster

    try:
        with cluster.connect(spec) as client:
            yield client  # the body never raises ClusterError: only connecting does
    except cluster.ClusterError as exc:
        fail(str(exc))
