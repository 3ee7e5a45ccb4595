"""The command line: versions, model options, JSON output, one-line errors with exit codes."""

from __future__ import annotations

import json

import pytest
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
    assert lines["heap"].startswith("kept (glibc")  # every hwvit command keeps freed arrays (hwvit/heap.py)
    assert lines["kernels"].startswith("int16_avx2 runs here; int8_avx2 runs here; int8_vnni ")


def test_info_refuses_an_unknown_backend_in_one_line(monkeypatch):
    from hwvit.ops import gemm_backends

    monkeypatch.setenv(gemm_backends.ENV, "int8_avx3")
    res = CliRunner().invoke(main, ["info"])
    assert res.exit_code == 1
    assert res.output.startswith("Error: HWVIT_GEMM: unknown GEMM backend 'int8_avx3'; choose one of ")
    assert res.output.count("\n") == 1 and "Traceback" not in res.output


def test_info_says_which_kernels_run_on_this_cpu(monkeypatch, fake_cpu):
    from hwvit.ops import gemm_backends, native

    monkeypatch.setattr(native, "EMULATE_VNNI", False)
    fake_cpu(["avx2", "fma", "sse4_2", "aes"])
    monkeypatch.setenv(gemm_backends.ENV, "int8_vnni")
    res = run("info")
    lines = dict(line.split(None, 1) for line in res.output.strip().splitlines())
    no_vnni = "the CPU has no AVX-VNNI or AVX512-VNNI"
    assert lines["int8-flags"] == "avx2 fma"  # the int8-relevant ones, in a fixed order
    assert lines["kernels"] == f"int16_avx2 runs here; int8_avx2 runs here; int8_vnni not here ({no_vnni})"
    assert lines["gemm"] == f"int8_vnni (HWVIT_GEMM=int8_vnni), cannot run here: {no_vnni}"
    assert f"int8_vnni not here ({no_vnni})" in lines["backends"] and "int64 runs here" in lines["backends"]
    # Faked flags must not run the real tile (SIGILL where the CPU lacks it): its exactness check runs int64.
    monkeypatch.setitem(gemm_backends._IMPL, "int8_vnni", gemm_backends._int64)
    fake_cpu(["avx2", "avx_vnni"])
    lines = dict(line.split(None, 1) for line in run("info").output.strip().splitlines())
    assert lines["kernels"] == "int16_avx2 runs here; int8_avx2 runs here; int8_vnni runs here (avxvnni tile)"
    fake_cpu("avx2 avx512f avx512bw avx512vl avx512_vnni avx512_bf16".split())
    lines = dict(line.split(None, 1) for line in run("info").output.strip().splitlines())
    assert lines["kernels"] == "int16_avx2 runs here; int8_avx2 runs here; int8_vnni runs here (avx512vnni tile)"
    assert lines["int8-flags"] == "avx2 avx512f avx512bw avx512vl avx512_vnni avx512_bf16"


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
    """Batch 1 and 16 by default, each with int, float and the torch dynamic int8 peer timed in one loop."""
    res = run("bench", "--model", "digits", "--repeats", "1", "--json")
    assert res.exit_code == 0, res.output
    runs = json.loads(res.output)["runs"]
    assert [r["batch"] for r in runs] == [1, 16]
    for data in runs:
        assert data["int_ms"] > 0 and data["float_ms"] > 0 and data["torch_int8_ms"] > 0
        assert data["int_vs_torch_int8"] == pytest.approx(data["int_ms"] / data["torch_int8_ms"])
        assert 0.0 <= data["outside_gemm_share"] <= 1.0
        assert data["cpu_flags"] == gemm_backends_flags()
    _check_markdown(runs)


def _check_markdown(runs: list[dict]) -> None:
    """`hwvit bench --markdown`'s table of ``runs``: the header, then one row a run naming its machine
    (this CPU's name, cores and int8 flags), torch, the backend and the run's figures."""
    import torch

    from hwvit.bench import MARKDOWN_COLUMNS, markdown_table
    from hwvit.ops import cpu

    header, rule, *rows = markdown_table(runs).splitlines()
    assert [c.strip() for c in header.strip("|").split("|")] == list(MARKDOWN_COLUMNS)
    assert rule.count("|") == len(MARKDOWN_COLUMNS) + 1 and len(rows) == len(runs)
    feats = cpu.features()
    for row, r in zip(rows, runs):
        cells = dict(zip(MARKDOWN_COLUMNS, (c.strip() for c in row.strip("|").split("|"))))
        assert cells["machine"].startswith(f"{feats.name}, {feats.cores} cores, {' '.join(feats.int8_flags)}")
        assert (cells["torch"], cells["model"], cells["backend"]) == (
            torch.__version__,
            "digits",
            f"`{r['gemm_backend']}`",
        )
        assert (cells["batch"], cells["int ms"]) == (str(r["batch"]), f"{r['int_ms']:.1f}")
        assert cells["int/float"] == f"{r['int_ms'] / r['float_ms']:.2f}"
        assert cells["torch int8 ms"] == (f"{r['torch_int8_ms']:.1f}" if r["torch_int8_ms"] else "-")


def test_bench_markdown_prints_only_the_table(monkeypatch):
    """--markdown: the table and nothing else, a row per batch size (the figures of a fake run here:
    test_bench_prints_its_figures checks the table of real ones); with --json it is refused."""
    from hwvit import bench

    def fake(preset, repeats, batch, **kw):
        return {
            "model": preset, "batch": batch, "device": "cpu", "threads": 2, "numba_threads": 2,
            "load_avg_1min": 0.5, "int_ms": 10.0 * batch, "float_ms": 20.0 * batch, "ratio": 0.5,
            "int_images_per_s": 100.0, "torch_int8_ms": None, "int_vs_torch_int8": None,
            "gemm_backend": "int8_avx2", "cpu": "Some CPU", "cpu_family_model": [25, 1], "cores": 2,
            "cpu_flags": ["avx2", "fma"], "torch": "2.13.0+cpu",
        }  # fmt: skip

    monkeypatch.setattr(bench, "bench_forward", fake)
    res = run("bench", "--model", "vit-tiny", "--batch", "1", "--batch", "4", "--markdown")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0].startswith("| machine | torch |") and len(lines) == 4, res.output
    assert lines[3] == (
        "| Some CPU (family 25 model 1), 2 cores, avx2 fma; load 0.5 | 2.13.0+cpu | vit-tiny | `int8_avx2` | 2 "
        "| 4 | 40.0 | 80.0 | - | 0.50 | - | 100.0 |"
    )
    res = CliRunner().invoke(main, ["bench", "--markdown", "--json"])
    assert (res.exit_code, res.output) == (2, "Error: give --markdown or --json, not both\n")


def gemm_backends_flags() -> list[str]:
    from hwvit.ops import cpu

    return cpu.features().int8_flags


def test_bench_table_names_cpu_backend_and_peer():
    res = run("bench", "--model", "digits", "--repeats", "1", "--batch", "2")
    assert res.exit_code == 0, res.output
    out = res.output
    assert "torch int8 ms" in out and "int/torch8" in out and "GEMM backend " in out
    assert "int8 flags " + " ".join(gemm_backends_flags()) in out
    rows = [line.split() for line in out.splitlines() if line.split()[:1] == ["2"]]
    assert len(rows) == 1 and len(rows[0]) == 9  # batch, 3 times, 2 ratios, 2 rates, the share


def test_bench_breakdown_splits_the_int_forward_by_op():
    """--breakdown: per hwvit.ops entry its calls (as many as a forward makes, counted here by a wrapper
    of the test's own), its ms, and the ms in hwvit's compiled kernels, which can only be part of it;
    afterwards every op and kernel is the module's own again."""
    import sys

    from numba.core.dispatcher import Dispatcher

    from hwvit import ops, pipeline
    from hwvit.engine import Engine, blocks, compiled
    from hwvit.ops import native
    from hwvit.quant import quantize_model

    args = ("bench", "--model", "digits", "--repeats", "2", "--batch", "1", "--no-peer", "--gemm", "int8_avx2")
    res = run(*args, "--breakdown", "--json")
    assert res.exit_code == 0, res.output
    (data,) = json.loads(res.output)["runs"]
    b = data["breakdown"]
    source = pipeline.load_source("digits", seed=0)
    model = quantize_model(source.model.eval(), pipeline.calibration_inputs(source, 2, 0))
    counted, stacks = [], []
    real, real_stack = ops.linear, blocks.encoder_blocks
    ops.linear = lambda *a, **k: counted.append(1) or real(*a, **k)
    blocks.encoder_blocks = lambda *a, **k: stacks.append(1) or real_stack(*a, **k)
    try:
        Engine(model)(pipeline.eval_inputs(source, 1, 0)[0].numpy())
    finally:
        ops.linear, blocks.encoder_blocks = real, real_stack
    assert b["ops"]["linear"]["calls"] == len(counted) > 0
    assert b["ops"]["encoder_blocks"]["calls"] == len(stacks) == 1  # the stack of blocks: one call
    for name, row in b["ops"].items():
        assert row["calls"] > 0 and 0 <= row["compiled_ms"] <= row["ms"] <= b["forward_ms"], name
        assert row["rest_ms"] >= 0, name
    assert b["ops"]["linear"]["compiled_ms"] > 0  # the C kernels ran, and were timed as such
    assert sum(row["ms"] for row in b["ops"].values()) < 1.5 * b["forward_ms"]
    assert ops.linear is sys.modules["hwvit.ops.gemm"].linear and isinstance(native._linear_parallel, Dispatcher)
    assert compiled.encoder_block.__name__ == "encoder_block"  # the bench's GEMM timer took its wrapper off
    text = run(*args, "--breakdown").output
    assert "int forward by hwvit.ops entry" in text and "compiled ms" in text
    assert any(line.split()[:1] == ["linear"] for line in text.splitlines())
    assert "breakdown" not in json.loads(run(*args, "--json").output)["runs"][0]


@pytest.mark.usefixtures("vnni_here")
def test_bench_all_backends_times_every_exact_backend(monkeypatch):
    from hwvit.ops import gemm_backends

    monkeypatch.setattr(gemm_backends, "_chosen", None)
    res = run("bench", "--model", "digits", "--repeats", "1", "--batch", "1", "--all-backends", "--no-peer", "--json")
    assert res.exit_code == 0, res.output
    (data,) = json.loads(res.output)["runs"]
    here = [n for n in gemm_backends.BACKENDS if gemm_backends.why_not_here(n) is None]
    assert sorted(data["backends_ms"]) == sorted(here)
    assert {"int16_avx2", "int8_avx2", "int8_vnni", "int64"} <= set(
        here
    )  # this project's CPUs: AVX2 at least (int8_vnni emulated)
    assert all(ms > 0 for ms in data["backends_ms"].values())
    assert data["torch_int8_ms"] is None


@pytest.mark.parametrize(
    "args, message",
    [
        (["compare", "--model", "digits", "--config", "vit-tiny"], "--config applies to --checkpoint only"),
        (["compare", "--family", "hf"], "--family applies to --checkpoint only"),
        (["compare", "--json", "-q"], "--json prints only the JSON"),
        (["compare", "--force"], "--force applies to --out only"),
        (["compare", "--labels", __file__], "--labels applies to --images only"),
        (["compare", "--mean", "0.5"], "--mean applies to --images/--calib only"),
        (["compare", "--heads", "4"], "--heads applies to --checkpoint only"),
        (["compare", "--exp", "shift", "--exp-entries", "32"], "--exp-entries applies to --exp table only"),
        (["sweep", "--config", "vit-tiny"], "--config applies to --checkpoint only"),
        (["sweep", "--seed", "3"], "the digits model has neither"),
        (["compare", "--model", "digits", "--seed", "3"], "the digits model has neither"),
        (["sim", ".", "--block", "conv"], "'conv' is not one of"),
        (["sim", ".", "--simulator", "modelsim6"], "'modelsim6' is not one of"),
        (["synth", "--block", "conv"], "'conv' is not one of"),
    ],
)
def test_option_combinations_that_do_nothing_are_refused(args, message):
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output


def test_refusal_is_one_line():
    res = CliRunner().invoke(main, ["compare", "--family", "hf"])
    assert (res.exit_code, res.output) == (2, "Error: --family applies to --checkpoint only\n")


@pytest.mark.parametrize(
    "args",
    [
        ["compare", "--model", "digits", "--out"],
        ["sweep", "--model", "digits", "--out"],
        ["demo", "--out"],
        ["demo", "--vectors"],
    ],
)
def test_out_dirs_follow_one_force_rule_before_any_work(tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)  # demo's other output directory defaults to a relative path
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "thesis.tex").write_text("keep")
    res = CliRunner().invoke(main, [*args, str(busy)])
    assert (res.exit_code, res.output) == (1, f"Error: {busy} already exists (use --force to replace it)\n")
    res = CliRunner().invoke(main, [*args, str(busy), "--force"])
    assert res.exit_code == 1 and ("--force replaces only" in res.output or "not a previous hwvit" in res.output)
    assert "[1/" not in res.output and (busy / "thesis.tex").read_text() == "keep"


def test_force_replaces_only_a_previous_output_of_the_same_kind(tmp_path):
    from click import ClickException

    from hwvit.cli.outdir import check_out_dir
    from hwvit.report.write import FILES

    report = tmp_path / "report"
    report.mkdir()
    (report / "report.json").write_text(json.dumps({"kind": "compare-report"}))
    (report / FILES[0]).write_text("old")
    check_out_dir(report, True, "compare-report")  # a previous report: --force may replace it
    for force, kind, message in (
        (False, "compare-report", "use --force"),
        (True, "sweep", "not a previous hwvit"),
        (True, "vectors", "holds none"),
    ):
        with pytest.raises(ClickException, match=message):
            check_out_dir(report, force, kind)
    check_out_dir(tmp_path / "new" / "dir", False, "sweep")  # missing: fine
    (tmp_path / "empty").mkdir()
    check_out_dir(tmp_path / "empty", False, "vectors")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ClickException, match="exists and is not a directory"):
        check_out_dir(tmp_path / "file", True, "vectors")


def test_bench_with_the_int16_kernel_names_it(monkeypatch):
    from hwvit.ops import gemm_backends

    monkeypatch.setattr(gemm_backends, "_chosen", None)  # --gemm sets it for the process: restored after
    res = run("bench", "--model", "digits", "--repeats", "1", "--batch", "1", "--gemm", "int16_avx2", "--json")
    assert res.exit_code == 0, res.output
    (data,) = json.loads(res.output)["runs"]
    assert data["gemm_backend"] == "int16_avx2"
    assert data["heap"].startswith("kept (glibc")


def test_a_named_backend_that_cannot_run_here_is_a_one_line_error(monkeypatch):
    from hwvit.ops import gemm_backends, native

    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "_why", None)
    monkeypatch.setattr(native, "_has_avx2", lambda: False)
    monkeypatch.setattr(gemm_backends, "_chosen", None)
    want = "Error: int16_avx2 GEMM unavailable: the CPU has no AVX2\n"
    res = CliRunner().invoke(main, ["bench", "--model", "digits", "--repeats", "1", "--gemm", "int16_avx2"])
    assert (res.exit_code, res.output) == (1, want)
    monkeypatch.setattr(gemm_backends, "_chosen", None)
    monkeypatch.setenv(gemm_backends.ENV, "int16_avx2")
    res = CliRunner().invoke(main, ["bench", "--model", "digits", "--repeats", "1"])
    assert (res.exit_code, res.output) == (1, want)


def test_the_vnni_backend_on_a_cpu_without_vnni_is_a_one_line_error(monkeypatch, fake_cpu):
    from hwvit.ops import gemm_backends, native

    monkeypatch.setattr(native, "EMULATE_VNNI", False)
    fake_cpu(["avx2", "fma"])
    monkeypatch.setattr(gemm_backends, "_chosen", None)
    res = CliRunner().invoke(main, ["bench", "--model", "digits", "--repeats", "1", "--gemm", "int8_vnni"])
    want = "Error: int8_vnni GEMM unavailable: the CPU has no AVX-VNNI or AVX512-VNNI\n"
    assert (res.exit_code, res.output) == (1, want)
