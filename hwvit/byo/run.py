"""Run a team's block on vector sets through its bind file (hwvit sim --rtl ... --bind ...).

``prepare`` does everything that can fail on a bad bind or bad RTL before any simulation: it
reads the bind, reads every set of the bind's kind, elaborates the top with each distinct set of
parameters and checks every bound port (one-line ``BindError``). ``run`` then builds once per
(simulator, parameters) in the user's cache and runs sim/byotb.py.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwvit import simulate
from hwvit.byo import elaborate
from hwvit.byo.bind import Bind, BindError, check_ports, load


@dataclass(frozen=True)
class Design:
    """A team's checked block: sources, top and bind; ``options``: the same as `hwvit sim` options
    (--rtl, --top, --bind, as given), for the command that reruns a mismatching vector."""

    sources: tuple[Path, ...]
    top: str
    bind: Bind
    options: str = ""


def prepare(rtl: list[str | Path], bind_path: str | Path, top: str | None, set_dirs: list[Path]) -> Design:
    """The checked design for these sets; BindError (one line) on the first problem."""
    from hwvit import vectors

    bind = load(bind_path)
    options = " ".join(
        [*(f"--rtl {shlex.quote(str(src))}" for src in rtl)]
        + ([f"--top {shlex.quote(top)}"] if top else [])
        + [f"--bind {shlex.quote(str(bind_path))}"]
    )
    top = top or bind.top
    if not top:
        raise BindError(f"{bind_path}: no top module (give --top NAME or `top:` in the bind file)")
    sources = []
    for src in rtl:
        path = Path(src).resolve()
        if not path.is_file():
            raise BindError(f"{src}: no such RTL file")
        sources.append(path)
    seen: dict[str, Any] = {}
    for set_dir in set_dirs:
        vset = vectors.read(set_dir)
        if vset.kind != bind.kind:
            raise BindError(f"{set_dir}: a {vset.kind} set, but {bind_path} binds a {bind.kind} block")
        params = bind.hdl_parameters(vset.params)
        key = json.dumps(params, sort_keys=True)
        if key not in seen:
            try:
                seen[key] = elaborate.ports(sources, top, params)
            except elaborate.ElaborationError as exc:
                raise BindError(f"{bind_path}: {exc}") from None
        check_ports(bind, top, seen[key], vset)
    return Design(tuple(sources), top, bind, options)


def run(
    design: Design,
    set_dir: str | Path,
    simulator: str,
    *,
    build_root: Path | None = None,
    waves: bool = False,
    seed: int = 1,
    testcase: str = "run_vectors",
    extra_env: dict[str, str] | None = None,
) -> simulate.SimResult:
    """One set through the team's block on one simulator; never raises on a mismatch."""
    result = simulate.run_bind(
        design.sources,
        design.top,
        design.bind,
        Path(set_dir),
        simulator,
        name=f"byo-{design.top}",
        build_root=build_root,
        waves=waves,
        seed=seed,
        testcase=testcase,
        extra_env={"HWVIT_BYO_OPTIONS": design.options, **(extra_env or {})},
    )
    result.extra.setdefault("top", design.top)
    return result


def _run_safely(design: Design, set_dir: str, simulator: str, waves: bool, build_root: str | None):
    try:
        return run(design, set_dir, simulator, waves=waves, build_root=Path(build_root) if build_root else None)
    except Exception as exc:  # noqa: BLE001 - report, don't crash the whole run
        first = (str(exc).strip().splitlines() or [""])[0]
        return simulate.SimResult(
            design.bind.kind, set_dir, simulator, False, message=f"{exc.__class__.__name__}: {first}"
        )


def run_many(
    design: Design,
    jobs: list[tuple[str, str]],
    *,
    workers: int = 1,
    waves: bool = False,
    build_root: str | Path | None = None,
    on_result=None,
) -> list[simulate.SimResult]:
    """(set_dir, simulator) pairs through the team's block, ``workers`` at a time, in order."""
    import concurrent.futures as cf

    root = str(build_root) if build_root else None
    results = []
    with cf.ProcessPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(_run_safely, design, d, s, waves, root) for d, s in jobs]
        for fut in futures:
            results.append(fut.result())
            if on_result is not None:
                on_result(results[-1])
    return results
