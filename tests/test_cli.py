"""The command line: versions, model options, JSON output, one-line errors with exit codes."""

from __future__ import annotations

import json

from click.testing import CliRunner

from hwvit import __version__
from hwvit.cli import main


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_version_and_help():
    assert __version__ in run("--version").output
    out = run("--help").output
    for cmd in ("vectors", "check", "sim", "compare", "sweep", "bench", "synth", "demo", "info", "train-demo"):
        assert cmd in out


def test_info_shows_toolchain_and_presets():
    res = run("info")
    assert res.exit_code == 0
    lines = dict(line.split(None, 1) for line in res.output.strip().splitlines())
    assert lines["cocotb"].startswith("2.1")
    assert lines["torch"].startswith("2.13.0")
    assert "Verilator 5.48" in lines["verilator"]
    assert "Icarus Verilog version 11" in lines["iverilog"]
    for preset in ("vit-b16", "vit-tiny", "simple-vit", "ecg1d", "digits"):
        assert preset in lines["presets"]


def test_compare_json_on_digits():
    res = run("compare", "--model", "digits", "--limit", "40", "--calib-images", "64", "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["images"] == 40
    assert 0.0 <= data["agreement"] <= 1.0 and data["top1_float"] >= 0.9
    paths = [row["path"] for row in data["layers"]]
    assert paths[0] == "input" and paths[-1] == "logits"
    assert all({"sqnr_db", "cosine", "max_err_lsb", "mean_err_lsb"} <= set(row) for row in data["layers"])


def test_bad_model_options_are_one_line_errors():
    res = run("compare", "--model", "no-such-preset")
    assert res.exit_code != 0
    assert res.output.startswith("Error:") and "no-such-preset" in res.output
    assert "Traceback" not in res.output


def test_checkpoint_errors_are_one_line(tmp_path):
    ckpt = tmp_path / "m.safetensors"
    ckpt.write_bytes(b"not a checkpoint")
    for extra in ([], ["--family", "hf"]):
        res = run("compare", "--checkpoint", str(ckpt), *extra)
        assert res.exit_code == 1 and res.output.startswith("Error:") and "not a readable .safetensors" in res.output
        assert "Traceback" not in res.output


def test_bad_inputs_file(tmp_path):
    import numpy as np

    bad = tmp_path / "x.npy"
    np.save(bad, np.zeros((2, 3, 8, 8), dtype=np.float32))
    res = run("compare", "--model", "digits", "--images", str(bad), "--calib-images", "16")
    assert res.exit_code == 1 and "3 channels; the model takes 1" in res.output


def test_synth_one_block():
    res = run("synth", "--block", "requant")
    assert res.exit_code == 0, res.output
    assert "1 synthesized, 0 failed" in res.output
    cells = int(res.output.split()[1])
    assert cells > 1000  # a 32 x 31 multiplier and a saturating shifter are not free


def test_bench_prints_its_figures():
    res = run("bench", "--model", "digits", "--repeats", "1", "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["int_ms"] > 0 and data["float_ms"] > 0
    assert 0.0 <= data["outside_gemm_share"] <= 1.0
