"""`hwvit vectors`, `hwvit vectors-random` and `hwvit bench-vectors` through click's CliRunner."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from hwvit import vectors
from hwvit.cli import main
from hwvit.cli import vectors as cli_vectors


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_random_mode_writes_one_set(tmp_path):
    out = tmp_path / "sm"
    r = run("vectors-random", "softmax", "--cases", "12", "--row-len", "20", "--seed", "3", "--out", str(out))
    assert r.exit_code == 0, r.output
    assert r.output.startswith("1 set, 3 tensors, ") and r.output.endswith(f" kB -> {out}\n")
    vset = vectors.read(out)
    assert (vset.kind, vset.seed, vset.params["rows"], vset.params["row_len"]) == ("softmax", 3, 12, 20)
    again = run(
        "vectors-random", "softmax", "--cases", "12", "--row-len", "20", "--seed", "3", "--out", str(tmp_path / "sm2")
    )
    assert again.exit_code == 0 and _tree(out) == _tree(tmp_path / "sm2")


@pytest.mark.parametrize("kind,cases", [("divu", 400), ("isqrt", 400), ("requant", 64)])
def test_default_cases_hold_every_edge(tmp_path, kind, cases):
    """Without --cases, divu and isqrt sets are large enough for all their edge cases."""
    out = tmp_path / kind
    r = run("vectors-random", kind, "--out", str(out))
    assert r.exit_code == 0, r.output
    assert next(iter(vectors.read(out).tensors.values())).data.size == cases


def test_divu_and_isqrt_parameters_from_options(tmp_path):
    args = ["--set", "n_bits=48", "--set", "d_bits=32", "--set", "q_bits=25", "--cases", "9"]
    r = run("vectors-random", "divu", *args, "--out", str(tmp_path / "d"))
    assert r.exit_code == 0, r.output
    vset = vectors.read(tmp_path / "d")
    assert (vset.params["n_bits"], vset.params["d_bits"], vset.params["q_bits"]) == (48, 32, 25)
    assert [vset.tensors[n].bits for n in ("dividend", "divisor", "quotient", "remainder")] == [48, 32, 25, 32]
    r = run("vectors-random", "isqrt", "--in-bits", "20", "--cases", "9", "--out", str(tmp_path / "i"))
    assert r.exit_code == 0, r.output
    assert vectors.read(tmp_path / "i").tensors["root"].bits == 10


def test_existing_output_needs_force(tmp_path):
    out = str(tmp_path / "g")
    assert run("vectors-random", "gelu", "--out", out).exit_code == 0
    r = run("vectors-random", "gelu", "--seed", "1", "--out", out)
    assert r.exit_code == 1 and r.output == f"Error: {out} already exists (use --force to replace it)\n"
    assert vectors.read(out).seed == 0
    assert run("vectors-random", "gelu", "--seed", "1", "--out", out, "--force").exit_code == 0
    assert vectors.read(out).seed == 1


@pytest.mark.parametrize(
    "args,code,message",
    [
        (["vectors-random"], 2, "Missing argument"),
        (["vectors-random", "gelu", "--model", "digits"], 2, "No such option '--model'"),
        (["vectors", "--row-len", "5"], 2, "No such option '--row-len'"),
        (["vectors", "--labels", __file__], 2, "--labels applies to --images only"),
        (["vectors", "--resize", "8"], 2, "--resize applies to --images/--calib only"),
        (["vectors", "--config", "vit-tiny"], 2, "--config applies to --checkpoint only"),
        (["vectors", "--family", "hf"], 2, "--family applies to --checkpoint only"),
        (["vectors", "--model", "digits", "--checkpoint", __file__], 2, "give --model or --checkpoint, not both"),
        (["vectors", "--heads", "3"], 2, "--heads applies to --checkpoint only"),
        (["vectors", "--exp", "shift", "--exp-entries", "64"], 2, "--exp-entries applies to --exp table only"),
        (["vectors", "--percentile", "99.9"], 2, "--percentile applies to --calibration percentile only"),
        (["vectors", "--family", "sablock"], 2, "'sablock' is not one of"),
        (["vectors-random", "gelu", "--limit", "2"], 2, "No such option '--limit'"),
        (["vectors-random", "gelu", "--row-len", "3"], 2, "--row-len applies to softmax, not gelu"),
        (["vectors-random", "requant", "--k", "3"], 2, "--k applies to gemm, not requant"),
        (["vectors-random", "gemm", "--k", "3", "--set", "k=4"], 2, "--set k=... repeats --k; give it once"),
        (["vectors-random", "gemm", "--set", "nope"], 1, "--set 'nope': expected KEY=VALUE"),
        (["vectors-random", "gemm", "--set", "foo=1"], 1, "gemm: unknown parameter 'foo'"),
        (["vectors-random", "gemm", "--k", "0"], 2, "0 is not in the range"),
        (["vectors-random", "conv"], 2, "'conv' is not one of"),
        (["vectors-random", "softmax", "--in-bits", "4", "--entries", "100"], 1, "entries must be an integer"),
        (["vectors-random", "isqrt", "--in-bits", "7"], 1, "in_bits must be even"),
        (["vectors", "--block", "isqrt"], 2, "a traced model has no isqrt blocks of its own"),
        (["vectors-random", "gelu", "--in-bits", "20"], 1, "in_bits must be an integer in [2, 16]"),
        (["vectors-random", "divu", "--in-bits", "8"], 2, "--in-bits applies to gelu and softmax and isqrt, not divu"),
        (["vectors-random", "divu", "--set", "q_bits=41"], 1, "q_bits must be an integer in [2, 40]"),
        (["vectors-random", "divu", "--out-bits", "8"], 2, "--out-bits applies to"),
    ],
)
def test_bad_invocations(tmp_path, args, code, message):
    r = run(*args, "--out", str(tmp_path / "o"))
    assert r.exit_code == code, r.output
    assert message in r.output and "Traceback" not in r.output
    assert not (tmp_path / "o").exists()


def test_refusals_are_one_line(tmp_path):
    r = run("vectors", "--config", "vit-tiny", "--out", str(tmp_path / "o"))
    assert r.exit_code == 2 and r.output == "Error: --config applies to --checkpoint only\n"


def test_out_is_checked_before_the_trace(tmp_path, monkeypatch):
    traced = []
    monkeypatch.setattr(cli_vectors, "_model_records", lambda *a: traced.append(a))
    out = tmp_path / "busy"
    out.mkdir()
    (out / "notes.txt").write_text("keep")
    r = run("vectors", "--model", "digits", "--out", str(out))
    assert r.exit_code == 1 and r.output == f"Error: {out} already exists (use --force to replace it)\n"
    r = run("vectors", "--model", "digits", "--out", str(out), "--force")
    assert r.exit_code == 1 and "--force replaces only vector sets, and it holds none" in r.output
    r = run("vectors", "--model", "digits", "--out", str(out / "notes.txt" / "x"))
    assert r.exit_code == 1 and "is not a writable directory" in r.output
    assert traced == [] and (out / "notes.txt").read_text() == "keep"


def test_block_config_and_options(tmp_path):
    cfg = tmp_path / "block.yaml"
    cfg.write_text("k: 12\nn: 3\na_signed: false\n")
    out = tmp_path / "gemm"
    r = run(
        "vectors-random",
        "gemm",
        "--cases",
        "5",
        "--block-config",
        str(cfg),
        "--n",
        "6",
        "--set",
        "out_bits=10",
        "--out",
        str(out),
    )
    assert r.exit_code == 0, r.output
    p = vectors.read(out).params
    assert (p["m"], p["k"], p["n"], p["a_signed"], p["out_bits"]) == (5, 12, 6, False, 10)
    cfg.write_text("- not a mapping\n")
    r = run("vectors-random", "gemm", "--block-config", str(cfg), "--out", str(tmp_path / "x"))
    assert r.exit_code == 1 and "expected a mapping of block parameters" in r.output


def test_lut_from_npy_and_hex(tmp_path):
    table = (np.arange(-128, 128) // 3).astype(np.int64)
    np.save(tmp_path / "t.npy", table)
    (tmp_path / "t.hex").write_text("".join(f"{int(v) & 0xFF:02x}\n" for v in table))
    for name in ("t.npy", "t.hex"):
        out = tmp_path / f"g-{name}"
        r = run("vectors-random", "gelu", "--cases", "256", "--lut", str(tmp_path / name), "--out", str(out))
        assert r.exit_code == 0, r.output
        vset = vectors.read(out)
        assert np.array_equal(vset["table"], table)
        assert np.array_equal(vset["y"], table[vset["x"] + 128])
    (tmp_path / "bad.hex").write_text("00\nzz\n")
    r = run("vectors-random", "gelu", "--lut", str(tmp_path / "bad.hex"), "--out", str(tmp_path / "b"))
    assert r.exit_code == 1 and "bad.hex: line 2: non-hex character 'z'" in r.output
    r = run("vectors-random", "gemm", "--lut", str(tmp_path / "t.npy"), "--out", str(tmp_path / "b"))
    assert r.exit_code == 2 and "--lut applies to gelu and softmax, not gemm" in r.output


def _fake_trace(monkeypatch, seen: dict | None = None):
    records = []
    for kind, path in (
        ("layernorm", "layers.0.norm1"),
        ("softmax", "layers.0.attn.softmax"),
        ("residual_add", "layers.0.add1"),
        ("layernorm", "layers.1.norm1"),
        ("requant", "pool"),
    ):
        rec = vectors.random_record(kind, 3, 0)
        rec.path = path
        records.append(rec)

    def fake(kw, qconfig, calib_images, seed, quiet, device):
        if seen is not None:
            seen.update(preset=kw["preset"], limit=kw["limit"], seed=seed)
            assert device == "cpu"
        made = {
            "weights_sha256": "ab" * 32,
            "calibration_sha256": None,
            "inputs_sha256": None,
            "options": {"model": "fake"},
        }
        return records, "cd" * 32, {"model": "fake"}, made

    monkeypatch.setattr(cli_vectors, "_model_records", fake)
    return records


def test_model_mode_writes_a_tree(tmp_path, monkeypatch):
    seen: dict = {}
    _fake_trace(monkeypatch, seen)
    out = tmp_path / "vec"
    r = run("vectors", "--model", "vit-tiny", "--limit", "2", "--seed", "4", "--out", str(out), "--quiet")
    assert r.exit_code == 0, r.output
    assert seen == {"preset": "vit-tiny", "limit": 2, "seed": 4}
    assert r.output.startswith("5 sets, 18 tensors, ") and r.output.endswith(f" -> {out}\n")
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["layers.0.norm1", "layers.0.attn.softmax", "layers.0.add1", "layers.1.norm1", "pool"]
    )
    man = vectors.read(out / "pool").manifest
    assert man["source_sha256"] == "cd" * 32 and man["seed"] == 4
    assert man["config_hash"] == vectors.config_hash(man["params"], {"model": "fake"})
    assert man["provenance"]["weights_sha256"] == "ab" * 32 and man["provenance"]["options"] == {"model": "fake"}
    assert run("check", str(out)).output == "5 sets valid\n"


def test_model_mode_selects_blocks(tmp_path, monkeypatch):
    _fake_trace(monkeypatch)
    r = run(
        "vectors",
        "--model",
        "x",
        "--blocks",
        "layers.0.*,pool",
        "--block",
        "layernorm",
        "--out",
        str(tmp_path / "a"),
        "-q",
    )
    assert r.exit_code == 0, r.output
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["layers.0.norm1"]
    r = run("vectors", "--model", "x", "--blocks", "head*", "--out", str(tmp_path / "b"))
    assert r.exit_code == 1 and "no traced block matches --blocks 'head*'" in r.output
    assert not (tmp_path / "b").exists()


def test_model_mode_writes_every_traced_block(tmp_path):
    out = tmp_path / "digits"
    r = run("vectors", "--model", "digits", "--limit", "1", "--calib-images", "32", "--quiet", "--out", str(out))
    assert r.exit_code == 0, r.output
    names = {p.name for p in out.iterdir()}
    # 2x2-patch digits ViT: 3 blocks of 4 heads; every block instance the issue lists is there.
    for i in range(3):
        for part in (
            "norm1",
            "attn.qkv",
            "attn.h0.qk",
            "attn.softmax",
            "attn.h3.av",
            "attn.proj",
            "add1",
            "norm2",
            "mlp.fc1",
            "mlp.gelu",
            "mlp.fc2",
            "add2",
        ):
            assert f"layers.{i}.{part}" in names, f"layers.{i}.{part} missing"
    assert {"embed.proj", "pos_add", "norm", "head"} <= names
    assert run("check", str(out)).exit_code == 0
    manifest = yaml.safe_load((out / "layers.1.attn.softmax" / "manifest.yaml").read_text())
    assert manifest["kind"] == "softmax" and manifest["path"] == "layers.1.attn.softmax"
    assert manifest["source_sha256"] and len(manifest["source_sha256"]) == 64
    again = tmp_path / "again"
    run("vectors", "--model", "digits", "--limit", "1", "--calib-images", "32", "--quiet", "--out", str(again))
    assert (again / "head" / "y.hex").read_bytes() == (out / "head" / "y.hex").read_bytes()


def test_sigterm_handler_is_restored(tmp_path):
    before = signal.getsignal(signal.SIGTERM)
    assert run("vectors-random", "requant", "--out", str(tmp_path / "r")).exit_code == 0
    assert signal.getsignal(signal.SIGTERM) is before


def test_help_has_examples():
    for cmd in ("vectors", "vectors-random", "check", "bench-vectors"):
        r = run(cmd, "--help")
        assert r.exit_code == 0 and "Example:" in r.output


def _vit_b_layer_elements() -> int:
    t, d, h, f = 197, 768, 12, 3072

    def gemm(m, k, n):
        return m * k + n * k + 3 * n + 2 * m * n

    ln = 2 * t * d + 2 * d
    return (
        2 * ln
        + gemm(t, d, 3 * d)
        + h * gemm(t, d // h, t)
        + h * gemm(t, t, d // h)
        + gemm(t, d, d)
        + gemm(t, d, f)
        + gemm(t, f, d)
        + (2 * h * t * t + 256)
        + 2 * (3 * t * d)
        + (2 * t * f + 256)
    )


def test_bench_vectors_writes_one_vit_b_layer(tmp_path):
    r = run("bench-vectors", "--repeats", "1", "--dir", str(tmp_path), "--json")
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    assert res["sets"] == 2 + 1 + 12 + 1 + 12 + 1 + 1 + 1 + 1 + 1 + 1 == 34
    assert res["elements"] == _vit_b_layer_elements()
    assert res["elements_per_s"] == pytest.approx(res["elements"] / res["seconds"])
    assert list(tmp_path.iterdir()) == []  # cleaned up


def test_vectors_on_a_torch_device_writes_the_same_sets(tmp_path, monkeypatch):
    """The torch forward of hwvit.intvit.device (what --device cuda runs on the GPU), here run on
    the CPU in its place: the sets it writes are byte-identical to the numpy forward's."""
    import hwvit.intvit
    from hwvit.intvit.device import DeviceForward

    args = ["vectors", "--model", "digits", "--calib-images", "16", "--blocks", "layers.0.*,head", "--quiet"]
    a, b = tmp_path / "numpy", tmp_path / "torch"
    r = run(*args, "--out", str(a))
    assert r.exit_code == 0, r.output
    asked = []

    def torch_on_cpu(int_model, device="cpu"):
        asked.append(device)
        return DeviceForward(int_model, "cpu")

    monkeypatch.setattr(hwvit.intvit, "int_forward", torch_on_cpu)
    r = run(*args, "--out", str(b), "--device", "cpu")
    assert r.exit_code == 0, r.output
    assert asked == ["cpu"]  # --device reached the trace, which ran the torch forward
    tree = _tree(a)
    assert any(name.endswith("softmax/manifest.yaml") for name in tree)
    assert tree == _tree(b)


def test_vectors_device_cuda_without_a_gpu_is_one_line(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    r = run("vectors", "--model", "digits", "--device", "cuda", "--out", str(tmp_path / "v"))
    assert r.exit_code == 1
    assert r.output == "Error: device cuda: no CUDA GPU is available here (torch.cuda.is_available() is False)\n"
    assert not (tmp_path / "v").exists()
