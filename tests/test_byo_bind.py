"""Bind files: every mistake is one line naming the file and the entry, found before any simulation.

The port checks run against the RTL as yosys elaborates it with the set's parameters, so a width
that only a parameter makes wrong is caught too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hwvit import vectors
from hwvit.byo import bind as bindmod
from hwvit.byo import kinds, run
from hwvit.byo.template import template

ROOT = Path(__file__).resolve().parents[1]
GELU = ROOT / "examples" / "byo" / "gelu"
SOFTMAX = ROOT / "examples" / "byo" / "softmax"
SOFTMAX_RTL = [SOFTMAX / "team_softmax.v", ROOT / "rtl" / "softmax.v", ROOT / "rtl" / "divu.v"]


@pytest.fixture(scope="module")
def gelu_set(tmp_path_factory) -> Path:
    return vectors.write_set(vectors.random_record("gelu", 16, seed=1), tmp_path_factory.mktemp("s") / "gelu")


@pytest.fixture(scope="module")
def softmax_set(tmp_path_factory) -> Path:
    record = vectors.random_record("softmax", 3, seed=1, row_len=5)
    return vectors.write_set(record, tmp_path_factory.mktemp("s") / "softmax")


def _edited(tmp_path: Path, source: Path, edit) -> Path:
    data = yaml.safe_load(source.read_text())
    edit(data)
    path = tmp_path / "bind.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _error(rtl, bind_path, set_dir) -> str:
    with pytest.raises(bindmod.BindError) as info:
        run.prepare(rtl, bind_path, None, [set_dir])
    text = str(info.value)
    assert "\n" not in text, text
    assert text.startswith(str(bind_path)) or text.startswith(str(rtl[0])), text
    return text


def test_examples_are_accepted(gelu_set, softmax_set):
    design = run.prepare([GELU / "team_gelu.v"], GELU / "bind.yaml", None, [gelu_set])
    assert design.top == "team_gelu" and design.bind.style == "axis"
    design = run.prepare(SOFTMAX_RTL, SOFTMAX / "bind.yaml", None, [softmax_set])
    assert design.bind.input["tlast"] == "s_axis_tlast"


def test_port_the_rtl_lacks(tmp_path, gelu_set):
    path = _edited(tmp_path, GELU / "bind.yaml", lambda d: d["input"].update(tvalid="s_axis_valid"))
    text = _error([GELU / "team_gelu.v"], path, gelu_set)
    assert "input.tvalid: team_gelu has no port 's_axis_valid'" in text


def test_config_port_the_rtl_lacks(tmp_path, softmax_set):
    path = _edited(tmp_path, SOFTMAX / "bind.yaml", lambda d: d["ports"].update(row_len="cfg_len"))
    assert "ports.row_len: team_softmax has no port 'cfg_len'" in _error(SOFTMAX_RTL, path, softmax_set)


def test_wrong_width_from_a_parameter(tmp_path, gelu_set):
    """YW fixed at 6 while the set's outputs are 8 bits: the elaborated m_axis_tdata is 6 bits wide."""
    path = _edited(tmp_path, GELU / "bind.yaml", lambda d: d["parameters"].update(YW=6))
    text = _error([GELU / "team_gelu.v"], path, gelu_set)
    assert "output.tdata: port m_axis_tdata of team_gelu is 6 bits wide, gelu needs at least 8 (set gelu)" in text


def test_wrong_width_valid_ready(tmp_path, gelu_set):
    """The reference gelu bound field by field: a 6-bit out_data_o cannot carry 8-bit outputs."""
    from hwvit import toolchain

    source = tmp_path / "template.yaml"
    source.write_text(template("gelu"))
    path = _edited(tmp_path, source, lambda d: d["parameters"].update(OUT_BITS=6))
    text = _error([toolchain.repo().rtl / "gelu.v"], path, gelu_set)
    assert text.endswith("output.fields.y: port out_data_o of gelu is 6 bits wide, gelu needs 8 (set gelu)"), text


def test_axis_field_past_tdata(tmp_path, gelu_set):
    path = _edited(tmp_path, GELU / "bind.yaml", lambda d: d["output"].update(fields={"y": 4}))
    text = _error([GELU / "team_gelu.v"], path, gelu_set)
    assert "output.tdata: port m_axis_tdata of team_gelu is 8 bits wide, gelu needs at least 12" in text


def test_wrong_direction(tmp_path, gelu_set):
    path = _edited(tmp_path, GELU / "bind.yaml", lambda d: d["input"].update(tready="s_axis_tvalid"))
    assert "is an input, the bind needs an output" in _error([GELU / "team_gelu.v"], path, gelu_set)


def test_unbound_input(tmp_path, gelu_set):
    path = _edited(tmp_path, GELU / "bind.yaml", lambda d: d.pop("ports"))
    assert "input cfg_wr of team_gelu is not bound" in _error([GELU / "team_gelu.v"], path, gelu_set)


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda d: d.update(interface="avalon_st"),
            "interface: unknown interface style 'avalon_st' (valid_ready or axis)",
        ),
        (lambda d: d["parameters"].update(XW=None), "parameters.XW has no source"),
        (lambda d: d["parameters"].update(XW={"from": "width"}), "parameters.XW has no source"),
        (lambda d: d["parameters"].update(XW={}), "parameters.XW has no source"),
        (lambda d: d.update(kind="conv"), "kind: 'conv' is not one of"),
        (lambda d: d.update(kind="gemm"), "operand-memory interface"),
        (lambda d: d["input"].pop("tready"), "input.tready missing"),
        (lambda d: d["input"].update(fields={}), "input.fields.x missing"),
        (lambda d: d["input"].update(fields={"x": 0, "z": 8}), "input.fields.z: no such field"),
        (lambda d: d["input"].update(fields={"x": -1}), "bit offset must be an integer >= 0"),
        (lambda d: d["input"].update(fields={"x": {"signal": "tuser", "offset": 0}}), "input.tuser names no port"),
        (lambda d: d["reset"].update(active="rising"), "reset.active: 'rising' is not low or high"),
        (lambda d: d["ports"].pop("tbl_addr"), "ports.tbl_addr missing"),
        (lambda d: d["ports"].update(row_len="x"), "gelu has no port row_len"),
        (lambda d: d.update(colour="blue"), "colour: unknown key"),
        (lambda d: d.update(clock="a b"), "clock: expected a port name"),
    ],
)
def test_shape_errors(tmp_path, gelu_set, edit, message):
    """Caught by the parser alone: no yosys, no simulator."""
    path = _edited(tmp_path, GELU / "bind.yaml", edit)
    with pytest.raises(bindmod.BindError) as info:
        bindmod.load(path)
    assert str(info.value) == f"{path}: {message}" or message in str(info.value), str(info.value)
    assert "\n" not in str(info.value)


def test_softmax_needs_row_ends(tmp_path):
    def edit(d):
        d["input"].pop("tlast")
        d["ports"].pop("row_len")

    path = _edited(tmp_path, SOFTMAX / "bind.yaml", edit)
    with pytest.raises(bindmod.BindError, match="row-length port"):
        bindmod.load(path)


def test_not_yaml_and_not_a_mapping(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [gelu\n")
    with pytest.raises(bindmod.BindError, match="not valid YAML at line"):
        bindmod.load(bad)
    bad.write_text("- gelu\n")
    with pytest.raises(bindmod.BindError, match="top level: expected a mapping"):
        bindmod.load(bad)
    bad.write_text("!!python/object/apply:os.system ['true']\n")  # safe_load refuses tags
    with pytest.raises(bindmod.BindError, match="not valid YAML"):
        bindmod.load(bad)


def test_set_of_another_kind(softmax_set):
    with pytest.raises(bindmod.BindError, match="a softmax set, but .* binds a gelu block"):
        run.prepare([GELU / "team_gelu.v"], GELU / "bind.yaml", None, [softmax_set])


def test_rtl_that_does_not_elaborate(tmp_path, gelu_set):
    broken = tmp_path / "broken.v"
    broken.write_text("module team_gelu(input wire a;\nendmodule\n")
    text = _error([broken], GELU / "bind.yaml", gelu_set)
    assert "yosys cannot elaborate team_gelu" in text


@pytest.mark.parametrize("kind", list(kinds.KINDS))
def test_template_fits_the_reference_block(kind, tmp_path):
    """The printed template parses and binds the reference block of its kind without a change."""
    from hwvit import toolchain

    path = tmp_path / "bind.yaml"
    path.write_text(template(kind))
    extra = {"softmax": {"row_len": 7}, "layernorm": {"c": 16}}.get(kind, {})
    set_dir = vectors.write_set(vectors.random_record(kind, 8, seed=2, **extra), tmp_path / "set")
    rtl = toolchain.repo().rtl
    sources = {
        "requant": ["requant", "round_sat"],
        "residual_add": ["residual_add", "round_sat"],
        "gelu": ["gelu"],
        "softmax": ["softmax", "divu"],
        "layernorm": ["layernorm", "isqrt", "divu", "requant", "round_sat"],
    }
    if kind in sources:
        files = [rtl / f"{s}.v" for s in sources[kind]]
    else:  # a kind declaring its own files (a variant's Verilog twin, hwvit/blocks/variant_rtl)
        from hwvit import blocks

        files = blocks.get(kind).rtl_paths(toolchain.repo().root)
    design = run.prepare(files, path, None, [set_dir])
    from hwvit import blocks

    assert design.top == blocks.get(kind).top and design.bind.style == "valid_ready"
    assert template(kind).count("\n") > 20  # commented, not bare
