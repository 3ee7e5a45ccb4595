"""CLI of the bring-your-own-block flow: `hwvit bind template`, `hwvit rtl export`, and
`hwvit sim --rtl --bind` refusing a bad bind in one line before anything is built."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from hwvit import vectors
from hwvit.byo import bind as bindmod
from hwvit.cli import main

ROOT = Path(__file__).resolve().parents[1]
GELU = ROOT / "examples" / "byo" / "gelu"


def test_bind_template_prints_a_bind_that_parses():
    res = CliRunner().invoke(main, ["bind", "template", "softmax"])
    assert res.exit_code == 0, res.output
    parsed = bindmod.parse(yaml.safe_load(res.output), "stdout")
    assert parsed.kind == "softmax" and parsed.ports["row_len"] == "row_len_i"
    assert res.output.count("#") > 20


def test_bind_template_gemm_points_to_the_docs():
    res = CliRunner().invoke(main, ["bind", "template", "gemm"])
    assert res.exit_code == 1
    assert res.output.strip().count("\n") == 0 and "operand-memory interface" in res.output


def test_rtl_export(tmp_path):
    out = tmp_path / "team"
    res = CliRunner().invoke(main, ["rtl", "export", str(out)])
    assert res.exit_code == 0, res.output
    for name in ("softmax.v", "divu.v", "gelu.v", "gemm_pe.v", "round_sat.v"):
        assert (out / "rtl" / name).read_bytes() == (ROOT / "rtl" / name).read_bytes()
    assert (out / "docs" / "rtl.md").read_text() == (ROOT / "docs" / "rtl.md").read_text()
    assert bindmod.load(out / "bind" / "layernorm.yaml").kind == "layernorm"
    assert "`rtl/softmax.v`, `rtl/row_stream.v`, `rtl/row_max.v`, `rtl/divu.v`" in (out / "README.md").read_text()
    again = CliRunner().invoke(main, ["rtl", "export", str(out)])
    assert again.exit_code == 1 and "already exists" in again.output
    assert CliRunner().invoke(main, ["rtl", "export", str(out), "--force"]).exit_code == 0
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    res = CliRunner().invoke(main, ["rtl", "export", str(other), "--force"])
    assert res.exit_code == 1 and "replaces only a previous" in res.output
    assert (other / "notes.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "team"]  # no temporary left behind


def test_sim_refuses_a_bad_bind_before_building(tmp_path):
    set_dir = vectors.write_set(vectors.random_record("gelu", 16, seed=1), tmp_path / "sets" / "gelu")
    bad = tmp_path / "bad.yaml"
    data = yaml.safe_load((GELU / "bind.yaml").read_text())
    data["output"]["tdata"] = "m_axis_data"
    bad.write_text(yaml.safe_dump(data))
    builds = tmp_path / "builds"
    res = CliRunner().invoke(
        main,
        [
            "sim",
            str(set_dir.parent),
            "--rtl",
            str(GELU / "team_gelu.v"),
            "--bind",
            str(bad),
            "--simulator",
            "both",
            "--build-dir",
            str(builds),
        ],
    )
    assert res.exit_code == 1
    assert res.output.strip() == (
        f"Error: {bad}: output.tdata: team_gelu has no port 'm_axis_data' (ports: aclk, "
        "areset, cfg_wr, cfg_addr, cfg_data, s_axis_tdata, s_axis_tvalid, s_axis_tready, "
        "m_axis_tdata, m_axis_tvalid, m_axis_tready)"
    )
    assert not builds.exists()  # nothing was built, nothing simulated


def test_sim_option_combinations(tmp_path):
    vectors.write_set(vectors.random_record("gelu", 16, seed=1), tmp_path / "sets" / "gelu")
    sets = str(tmp_path / "sets")
    res = CliRunner().invoke(main, ["sim", sets, "--rtl", str(GELU / "team_gelu.v")])
    assert res.exit_code == 2 and "--rtl and --bind go together" in res.output
    res = CliRunner().invoke(
        main, ["sim", sets, "--rtl", str(GELU / "team_gelu.v"), "--bind", str(GELU / "bind.yaml"), "--block", "gelu"]
    )
    assert res.exit_code == 2 and "--block does not apply with --bind" in res.output
    res = CliRunner().invoke(
        main,
        [
            "sim",
            sets,
            "--rtl",
            str(GELU / "team_gelu.v"),
            "--bind",
            str(ROOT / "examples" / "byo" / "softmax" / "bind.yaml"),
        ],
    )
    assert res.exit_code == 1 and "no softmax vector sets under" in res.output
