"""Build a block's testbench design for a simulator (the first job of hwvit.simulate).

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

cocotb's runner (``cocotb_tools.runner``) writes each simulator's command lines; what hwvit adds
to them, per simulator, is the one table ``SIM_FLAGS`` (docs/verification.md, "Simulators").
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

from hwvit import toolchain

# Legacy name kept for sim/bench_gemm.py's scratch sets; builds go to default_build_root().
DEFAULT_BUILD_ROOT = Path("sim_build")

# The testbenches' clocks are in ns; no block declares a `timescale, so every build gets this one.
TIMESCALE = ("1ns", "1ps")
_TS = "/".join(TIMESCALE)


@dataclass(frozen=True)
class SimFlags:
    """What hwvit hands one simulator on top of what cocotb's runner writes itself (toplevel,
    sources, include dir, parameters in the simulator's spelling, its VPI library)."""

    build_args: tuple[str, ...] = ()  # every build
    wave_build_args: tuple[str, ...] = ()  # builds with --waves
    wave_plusarg: str | None = None  # with --waves: a plusarg, formatted with run_dir and toplevel
    waves_at_build: bool = True  # False: the runner refuses waves at build (set at test only)
    parameters_at_test: bool = True  # False: the runner applies them at build only, and warns at test


SIM_FLAGS: dict[str, SimFlags] = {
    # Icarus dumps to the build dir unless told: each run writes its own waveform.
    "icarus": SimFlags(wave_plusarg="+dumpfile_path={run_dir}/{toplevel}.fst"),
    "verilator": SimFlags(
        # -O2 keeps C++ compile time low; --x-assign/--x-initial unique make X bugs visible.
        # One C++ unit (--output-split 0): the PyPI wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I
        # empty, so the split (precompiled-header) build Verilator picks for larger designs fails.
        build_args=("-Wno-fatal", "--x-assign", "unique", "--x-initial", "unique", "-O2", "--output-split", "0"),
        # VCD (the runner's --trace): Verilator's FST writer needs lz4 headers this machine lacks.
        wave_build_args=("--trace-structs",),
    ),
    # vlog: the runner drops the timescale; +acc keeps the signals the benches read visible to VPI
    # (both as cocotb's own Makefile.questa-compat passes them).
    "questa": SimFlags(build_args=("-timescale", _TS, "+acc")),
    # qrun: the runner passes -timescale and -voptargs=-access=rw+/. itself; parameters at build.
    "questa-qisqrun": SimFlags(parameters_at_test=False),
    # alog: the runner drops the timescale (cocotb's Makefile.riviera/.activehdl pass it; asim gets
    # +access +w_nets from the runner).
    "riviera": SimFlags(build_args=("-timescale", _TS)),
    "activehdl": SimFlags(build_args=("-timescale", _TS)),
    # xrun: -timescale and -access +rwc from the runner; waves only at the test step.
    "xcelium": SimFlags(waves_at_build=False),
    # vcs: the runner drops the timescale (cocotb's Makefile.vcs passes it; the runner passes
    # -debug_access+all +acc+3 itself).
    "vcs": SimFlags(build_args=(f"-timescale={_TS}",)),
    # dsim -genimage: the runner drops the build's timescale (cocotb's Makefile.dsim passes it).
    "dsim": SimFlags(build_args=("-timescale", _TS)),
}


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


def refuse_outside_domain(kind: str, vset) -> None:
    """ValueError naming where ``vset`` leaves the inputs its kind's Verilog computes exactly (the
    kind's ``rtl_domain``: layernorm_ptf's binary64 unit has no subnormals), so that `hwvit sim`
    refuses the set in one line instead of reporting a mismatch the block was never built for."""
    from hwvit import blocks

    spec = blocks.kinds().get(kind)
    fault = spec.rtl_domain(vset) if spec is not None and spec.rtl_domain is not None else None
    if fault:
        raise ValueError(f"{vset.directory}: {fault}")


def tb_module(kind: str) -> ModuleType | SimpleNamespace:
    """The testbench module of a block kind: its ``testbench`` (a cocotb module, loaded by path), the
    generic stream bench where it declares none, or ``sim/test_<kind>.py`` for a design that is not
    a block kind (the ViT core)."""
    from hwvit import blocks

    spec = blocks.kinds().get(kind)
    sim_dir = toolchain.repo().sim
    if spec is not None and not spec.rtl:
        from hwvit.blocks.variant_rtl import PENDING

        if kind in PENDING:
            raise ValueError(f"block kind {kind} has no Verilog block yet: {PENDING[kind]}")
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

    flags = SIM_FLAGS[toolchain.check_simulator(simulator)]
    toolchain.require(simulator)
    toolchain.apply_sim_env()
    repo = toolchain.repo()
    sources = [Path(s).resolve() for s in sources]
    build_args = [*flags.build_args, *(flags.wave_build_args if waves else ()), *(extra_args or [])]
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
            timescale=TIMESCALE,
            waves=waves and flags.waves_at_build,
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
