"""--simulator takes every simulator cocotb's runner drives Verilog on; the command lines hwvit hands
each, for one block's build and test, written by cocotb's own runner classes with no simulator
installed: ``shutil.which`` finds fake executables and ``Runner._execute`` records the commands
instead of running them."""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from cocotb_tools import runner as cocotb_runner

from hwvit import toolchain

sim_build = importlib.import_module("hwvit.simulate.build")  # hwvit.simulate.build is also a function
launch = importlib.import_module("hwvit.simulate.launch")

VENDOR_SIMS = [s for s in toolchain.RUNNER_SIMULATORS if s not in toolchain.SIMULATORS]
PARAMS = {"ACC_BITS": 32, "OUT_BITS": 8}
TOP = "requant"


def test_the_choices_are_cocotbs_verilog_runners():
    supported = cocotb_runner.SUPPORTED_RUNNERS
    assert set(toolchain.RUNNER_SIMULATORS) | set(toolchain.VHDL_ONLY) == set(supported)
    for name in toolchain.RUNNER_SIMULATORS:
        assert "verilog" in supported[name].supported_gpi_interfaces, name
    for name in toolchain.VHDL_ONLY:
        assert "verilog" not in supported[name].supported_gpi_interfaces, name
    assert toolchain.RUNNER_SIMULATORS[:2] == toolchain.SIMULATORS == ("icarus", "verilator")
    assert set(toolchain.RUNNER_EXECUTABLES) == set(toolchain.VENDOR) == set(sim_build.SIM_FLAGS)


def test_hwvits_own_additions_table():
    flags = sim_build.SIM_FLAGS
    # Icarus and Verilator get exactly what they got before the table
    assert flags["icarus"] == sim_build.SimFlags(wave_plusarg="+dumpfile_path={run_dir}/{toplevel}.fst")
    assert flags["verilator"] == sim_build.SimFlags(
        build_args=("-Wno-fatal", "--x-assign", "unique", "--x-initial", "unique", "-O2", "--output-split", "0"),
        wave_build_args=("--trace-structs",),
    )
    # the runners that drop build()'s timescale get it from hwvit, in their own spelling
    assert flags["questa"].build_args == ("-timescale", "1ns/1ps", "+acc")
    assert flags["riviera"].build_args == flags["activehdl"].build_args == ("-timescale", "1ns/1ps")
    assert flags["vcs"].build_args == ("-timescale=1ns/1ps",)
    assert flags["dsim"].build_args == ("-timescale", "1ns/1ps")
    assert flags["xcelium"] == sim_build.SimFlags(waves_at_build=False)
    assert flags["questa-qisqrun"] == sim_build.SimFlags(parameters_at_test=False)
    assert sim_build.TIMESCALE == ("1ns", "1ps")


# --- the command lines, recorded ----------------------------------------------------------------
@pytest.fixture
def fake_sims(monkeypatch):
    """Every runner executable "on PATH"; ``Runner._execute`` records (step, commands, Tcl do files)."""
    saved = dict(os.environ)  # build_design sets PATH and VERILATOR_ROOT in this process
    fakes = {exe for exes in toolchain.RUNNER_EXECUTABLES.values() for exe in exes}
    real_which = shutil.which

    def which(cmd, mode=os.F_OK | os.X_OK, path=None):
        if cmd in fakes:
            return f"/fake/bin/{cmd}"
        return None if cmd == "ccache" else real_which(cmd, mode, path)

    monkeypatch.setattr(shutil, "which", which)
    calls: list[dict] = []

    def execute(self, cmds, cwd):
        dos = []
        for cmd in cmds:
            for i, arg in enumerate(cmd[:-1]):
                if arg == "-do" and Path(cmd[i + 1]).is_file():  # Aldec: a Tcl script in a temp file
                    dos.append(Path(cmd[i + 1]).read_text())
                    Path(cmd[i + 1]).unlink()
        calls.append({"cmds": [list(c) for c in cmds], "do": "\n".join(dos), "env": dict(self.env)})

    monkeypatch.setattr(cocotb_runner.Runner, "_execute", execute)
    yield calls
    os.environ.clear()
    os.environ.update(saved)


def _run(simulator, tmp_path, waves=False):
    """Build and test the requant block for ``simulator``: (build call, test call, sources, rtl)."""
    tb = sim_build.tb_module("requant")
    repo = toolchain.repo()
    sources = [(repo.root / s).resolve() for s in tb.SOURCES]
    build_dir = sim_build.build_design(
        "requant", simulator, sources, tb.TOPLEVEL, PARAMS, build_root=tmp_path / "b", waves=waves
    )
    set_dir = tmp_path / "set"
    set_dir.mkdir(exist_ok=True)
    result = launch.run_test(build_dir, simulator, set_dir, "requant", tb.TOPLEVEL, "test_requant", PARAMS, waves=waves)
    assert not result.passed  # nothing ran: the testbench wrote no result
    return build_dir, sources, repo.rtl.resolve()


def _flat(call):
    return [arg for cmd in call["cmds"] for arg in cmd]


@pytest.mark.parametrize("simulator", toolchain.RUNNER_SIMULATORS)
def test_build_and_test_commands(simulator, fake_sims, tmp_path, recwarn):
    build_dir, sources, rtl = _run(simulator, tmp_path)
    assert len(fake_sims) == 2, "one build step and one test step"
    build, test = fake_sims
    b, t = _flat(build), _flat(test)
    srcs = [str(s) for s in sources]
    # every compile gets the timescale once, from the runner or from hwvit's table
    compiles = [c for c in build["cmds"] + [x.split() for x in build["do"].splitlines()] if srcs[-1] in c]
    assert compiles
    for cmd in compiles:
        ts = [a for a in cmd if "1ns/1ps" in a]
        if simulator == "icarus":  # in a command file: iverilog -f cmds.f
            assert ts == [] and (build_dir / "cmds.f").read_text() == "+timescale+1ns/1ps\n"
        else:
            assert len(ts) == 1, cmd
    expect = {
        "icarus": (
            ["iverilog", "-s", TOP, f"-I{rtl}", "-Prequant.ACC_BITS=32", "-Prequant.OUT_BITS=8", "-f", *srcs],
            ["vvp", str(build_dir / "sim.vvp"), "-none"],
        ),
        "verilator": (
            [
                "/fake/bin/verilator",
                "--top-module",
                TOP,
                "--vpi",
                "-Wno-fatal",
                "--x-assign",
                "unique",
                "--x-initial",
                "unique",
                "-O2",
                "--output-split",
                "--timescale",
                "1ns/1ps",
                f"-I{rtl}",
                "-GACC_BITS=32",
                "-GOUT_BITS=8",
                *srcs,
                "make",
            ],
            [str(build_dir / TOP)],
        ),
        "questa": (
            ["vlib", "top"]
            + [
                a
                for src in srcs
                for a in ("vlog", "-work", "top", "-sv", f"+incdir+{rtl}", "-timescale", "1ns/1ps", "+acc", src)
            ],
            ["vsim", "-c", "-pli", "-gACC_BITS=32", "-gOUT_BITS=8", f"top.{TOP}", "run -all; quit"],
        ),
        "questa-qisqrun": (
            ["qrun", "-optimize", "-top", f"top.{TOP}", *srcs, f"+incdir+{rtl}", "-timescale", "1ns/1ps"]
            + ["-gACC_BITS=32", "-gOUT_BITS=8"],
            ["qrun", "-simulate", "-top", f"top.{TOP}"],
        ),
        "xcelium": (
            ["xrun", "-elaborate", "-timescale", "1ns/1ps", f"-incdir {rtl}"]
            + ['-gpg "ACC_BITS => 32"', '-gpg "OUT_BITS => 8"', f"-top {TOP}", *srcs],
            ["xrun", "-R", "-input", "@run; exit;"],
        ),
        "vcs": (
            ["vcs", "-timescale=1ns/1ps", f"+incdir+{rtl}", "-pvalue+requant.ACC_BITS=32"]
            + ["-pvalue+requant.OUT_BITS=8", "-top", TOP, *srcs, "-o", str(build_dir / "simv")],
            [str(build_dir / "simv")],
        ),
        "dsim": (
            ["dsim", "-genimage", "image", f"+incdir+{rtl}", "-defparam ACC_BITS=32", "-defparam OUT_BITS=8"]
            + ["-timescale", "1ns/1ps", *srcs],
            ["dsim", "-image", "image"],
        ),
    }
    if simulator in ("riviera", "activehdl"):  # vsimsa runs a Tcl script: alog to build, asim to test
        assert b[0] == t[0] == "vsimsa"
        alogs = [line.split() for line in build["do"].splitlines() if line.startswith("alog")]
        assert [a[-1] for a in alogs] == srcs  # one alog per source, in order
        for a in alogs:
            _in_order(a, ["alog", "-work", "top", "-sv", f"+incdir+{rtl}", "-timescale", "1ns/1ps"])
        asim = next(line.split() for line in test["do"].splitlines() if line.startswith("asim"))
        _in_order(asim, ["asim", "+access", "-gACC_BITS=32", "-gOUT_BITS=8", f"top.{TOP}"])
    else:
        want_build, want_test = expect[simulator]
        _in_order(b, want_build)
        _in_order(t, want_test)
    # the run's environment: the toplevel and the testbench module
    assert test["env"]["COCOTB_TOPLEVEL"] == TOP and test["env"]["COCOTB_TEST_MODULES"] == "test_requant"
    assert test["env"]["TOPLEVEL_LANG"] == "verilog" and test["env"]["HWVIT_SIMULATOR"] == simulator
    assert not [w for w in recwarn if "parameters passed to test() are ignored" in str(w.message)]


def _in_order(args, expected):
    """Each of ``expected`` is in ``args``, in that order (others may sit between)."""
    pos = 0
    for want in expected:
        assert want in args[pos:], f"{want!r} missing (in order) from {args}"
        pos = args.index(want, pos) + 1


@pytest.mark.parametrize("simulator", ["icarus", "verilator", "xcelium"])
def test_waves_per_simulator(simulator, fake_sims, tmp_path):
    build_dir, _, _ = _run(simulator, tmp_path, waves=True)  # xcelium: the runner refuses waves at build
    b, t = (_flat(c) for c in fake_sims)
    if simulator == "icarus":
        assert "cocotb_iverilog_dump" in b and "-fst" in t
        [plusarg] = [a for a in t if a.startswith("+dumpfile_path=")]
        assert plusarg.endswith(f"/{TOP}.fst") and str(build_dir / "runs") in plusarg
    elif simulator == "verilator":
        assert "--trace" in b and "--trace-structs" in b and "--trace" in t
    else:
        assert any("@database" in a for a in t)


# --- refusals and missing simulators ------------------------------------------------------------
@pytest.fixture
def no_tools(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(toolchain, "verilator_root", lambda: None)


@pytest.mark.parametrize("simulator", VENDOR_SIMS)
def test_a_missing_simulator_names_its_executables(simulator, no_tools):
    exes = toolchain.RUNNER_EXECUTABLES[simulator]
    with pytest.raises(toolchain.ToolMissing) as info:
        toolchain.require(simulator)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"{simulator} not found: {', '.join(exes)} not on PATH")
    assert toolchain.VENDOR[simulator] in msg


def test_only_the_missing_executables_are_named(monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda cmd, path=None: "/x/vsim" if cmd == "vsim" else real_which(cmd))
    with pytest.raises(toolchain.ToolMissing, match=r"^questa not found: vlib, vlog not on PATH \(the Siemens"):
        toolchain.require("questa")


@pytest.mark.parametrize("simulator", ["vcs", "xcelium", "questa", "riviera"])
def test_cli_missing_simulator_is_one_line_before_any_build(simulator, no_tools, tmp_path, monkeypatch):
    from hwvit.cli import main

    def no_build(*args, **kwargs):
        raise AssertionError("built")

    monkeypatch.setattr(cocotb_runner.Runner, "build", no_build)
    result = CliRunner().invoke(main, ["sim", str(tmp_path), "--simulator", simulator])
    assert result.exit_code == 1
    exes = ", ".join(toolchain.RUNNER_EXECUTABLES[simulator])
    assert result.output == f"Error: {simulator} not found: {exes} not on PATH" + result.output.split("PATH", 1)[1]
    assert result.output.count("\n") == 1


@pytest.mark.parametrize("simulator", sorted(toolchain.VHDL_ONLY))
def test_vhdl_only_simulators_are_refused(simulator, tmp_path):
    from hwvit.cli import main

    result = CliRunner().invoke(main, ["sim", str(tmp_path), "--simulator", simulator])
    assert result.exit_code == 2
    [line] = [x for x in result.output.splitlines() if x.startswith("Error:")]
    assert f"{simulator} ({toolchain.VHDL_ONLY[simulator]}) simulates VHDL only" in line
    assert "hwvit's blocks are Verilog" in line
    with pytest.raises(ValueError, match="simulates VHDL only"):
        sim_build.build_design("requant", simulator, [], TOP, {})
    with pytest.raises(ValueError, match="unknown simulator 'modelsim'"):
        sim_build.build_design("requant", "modelsim", [], TOP, {})


def test_both_is_still_icarus_and_verilator(monkeypatch):
    from hwvit.cli.sim_options import require_simulators

    checked = []
    monkeypatch.setattr(toolchain, "require", lambda tool: checked.append(tool) or tool)
    assert require_simulators("both") == ["icarus", "verilator"] == checked
    assert require_simulators("dsim") == ["dsim"]


def test_build_refuses_a_missing_simulator_before_building(no_tools, tmp_path):
    with pytest.raises(toolchain.ToolMissing, match="^xcelium not found: xrun not on PATH"):
        sim_build.build_design("requant", "xcelium", [], TOP, {}, build_root=tmp_path / "b")
    assert not (tmp_path / "b").exists()


def test_sim_choices_are_the_table_and_both():
    from hwvit.cli import main

    result = CliRunner().invoke(main, ["sim", ".", "--simulator", "x"])
    choices = (*toolchain.RUNNER_SIMULATORS, "both")
    assert result.exit_code == 2 and f"is not one of {', '.join(map(repr, choices))}." in result.output
