"""The core compiler and directory without a simulator: encoding, determinism, refusals, estimates."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from hwvit.cli import main
from hwvit.core import cycles, isa
from hwvit.core.compile import CoreCompileError, compile_model
from hwvit.core.coredir import CoreDirError, read_core_dir, write_core_dir
from hwvit.core.shapes import shape_model
from hwvit.float.config import load_preset


@pytest.fixture(scope="module")
def digits_shape_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("core") / "digits"
    write_core_dir(compile_model(shape_model(load_preset("digits"))), out, {"preset": "digits"})
    return out


def test_instruction_fields_round_trip(digits_shape_dir):
    core = read_core_dir(digits_shape_dir)
    assert core.program[-1].op == isa.OP_END
    kinds = {ins.kind for ins in core.program}
    assert {"gemm", "load", "copy", "layernorm", "softmax", "gelu", "residual_add"} <= kinds
    for ins in core.program:
        assert isa.from_fields(ins.fields()).word() == ins.word()


def test_write_is_deterministic(tmp_path):
    model = shape_model(load_preset("digits"))
    a, b = tmp_path / "a", tmp_path / "b"
    write_core_dir(compile_model(model), a, {"preset": "digits"})
    write_core_dir(compile_model(model), b, {"preset": "digits"})
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir()) and "manifest.yaml" in names
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def _one_line_error(args) -> str:
    res = CliRunner().invoke(main, args)
    assert res.exit_code != 0
    assert "Traceback" not in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.output
    return lines[0]


def test_bad_core_dirs_are_one_line_errors(digits_shape_dir, tmp_path):
    assert "not a directory" in _one_line_error(["core", "run", str(tmp_path / "missing")])
    (tmp_path / "empty").mkdir()
    assert "no manifest.yaml" in _one_line_error(["core", "run", str(tmp_path / "empty")])

    def clone(name: str) -> Path:
        dst = tmp_path / name
        dst.mkdir()
        for p in digits_shape_dir.iterdir():
            (dst / p.name).write_bytes(p.read_bytes())
        return dst

    altered = clone("altered")
    data = bytearray((altered / "wgt.hex").read_bytes())
    data[0:2] = b"7f" if data[0:2] != b"7f" else b"00"
    (altered / "wgt.hex").write_bytes(bytes(data))
    assert "does not match its sha256" in _one_line_error(["core", "run", str(altered)])

    escape = clone("escape")
    manifest = yaml.safe_load((escape / "manifest.yaml").read_text())
    manifest["files"]["act"]["path"] = "../altered/act.hex"
    (escape / "manifest.yaml").write_text(yaml.safe_dump(manifest))
    assert "outside the directory" in _one_line_error(["core", "run", str(escape)])

    garbled = clone("garbled")
    (garbled / "manifest.yaml").write_text("format: [unclosed\n")
    assert "not valid YAML" in _one_line_error(["core", "run", str(garbled)])
    with pytest.raises(CoreDirError):
        read_core_dir(garbled)


def test_act_base_moves_every_scratchpad_region():
    """compile_model(act_base=B): every region, the input (IN_BASE) and every scratchpad operand (a
    GEMM's a, its d, its w when w_act; a STREAM's a, b and d) B words up, the act image 0 below B
    and the base-0 image above it, ACT_DEPTH covering the top; the rest of the program unchanged.
    Bad bases are refused."""
    model = shape_model(load_preset("digits"))
    low, high = compile_model(model), compile_model(model, act_base=3000)
    assert {k: (b + 3000, n) for k, (b, n) in low.regions.items()} == high.regions
    assert high.sizes["IN_BASE"] == low.sizes["IN_BASE"] + 3000 == 3000
    top = max(b + n for b, n in high.regions.values())
    assert high.sizes["ACT_DEPTH"] == -(-top // 1024) * 1024 and len(high.act) == top
    assert not high.act[:3000].any() and (high.act[3000:] == low.act).all()
    assert {k: v for k, v in high.sizes.items() if k not in ("ACT_DEPTH", "IN_BASE")} == {
        k: v for k, v in low.sizes.items() if k not in ("ACT_DEPTH", "IN_BASE")
    }
    assert len(low.program) == len(high.program) and (low.wgt == high.wgt).all() and low.prm == high.prm
    moved = 0
    for lo, hi in zip(low.program, high.program):
        act_side = {"a", "d"} if lo.op in (isa.OP_GEMM, isa.OP_STREAM) else set()
        if lo.w_act or (lo.op == isa.OP_STREAM and lo.b != isa.Gen()):  # the residual add's second input
            act_side.add("b")
        for g in ("a", "b", "d"):
            assert getattr(hi, g).base - getattr(lo, g).base == (3000 if g in act_side else 0), (lo.name, g)
            assert getattr(hi, g).strides == getattr(lo, g).strides
        moved += len(act_side)
        unmoved = [f for i, f in enumerate(lo.fields()) if i not in (5, 10, 15)]
        assert unmoved == [f for i, f in enumerate(hi.fields()) if i not in (5, 10, 15)]
    assert moved > 20
    for bad in (-1, 2**30, True, 1.5):
        with pytest.raises(CoreCompileError, match="act_base"):
            compile_model(model, act_base=bad)


def test_unsupported_model_is_refused():
    with pytest.raises(CoreCompileError, match="patch embedding 'linear1d'"):
        compile_model(shape_model(load_preset("ecg1d")))


def test_gemm_cycles_match_the_documented_full_tile_formula():
    # docs/rtl.md: (T-1) * max(K, 2R+C) + K + R + C + 4 + r when every tile has R valid rows
    for m, k, n, r, c in [(64, 64, 64, 8, 8), (16, 11, 32, 4, 4), (197, 768, 2304, 16, 16), (8, 3, 8, 8, 8)]:
        tiles = -(-m // r) * -(-n // c)
        if m % r:
            continue
        assert cycles.gemm_cycles(m, k, n, r, c) == (tiles - 1) * max(k, 2 * r + c) + k + r + c + 4 + r


def test_estimate_prints_layers_and_utilization():
    res = CliRunner().invoke(
        main, ["core", "estimate", "--model", "vit-b16", "--rows", "16", "--cols", "16", "--clock-mhz", "500"]
    )
    assert res.exit_code == 0, res.output
    assert "layers.11" in res.output
    total = re.search(r"total: ([\d,]+) cycles/image = ([\d.,]+) images/s.*utilization ([\d.]+)%", res.output)
    assert total, res.output
    cyc, util = int(total.group(1).replace(",", "")), float(total.group(3))
    macs = sum(i.macs() for i in compile_model(shape_model(load_preset("vit-b16")), images=False).program)
    assert macs == 17_563_828_224  # 12 blocks of 197-token attention + MLP, patch embedding and head
    assert cyc >= macs / 256 and 0 < util < 100
    assert abs(util - 100 * macs / (cyc * 256)) < 0.1


def test_sha256_in_manifest_covers_every_file(digits_shape_dir):
    manifest = yaml.safe_load((digits_shape_dir / "manifest.yaml").read_text())
    for entry in manifest["files"].values():
        digest = hashlib.sha256((digits_shape_dir / entry["path"]).read_bytes()).hexdigest()
        assert digest == entry["sha256"]
