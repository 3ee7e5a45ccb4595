"""Every vector set byte for byte (issue 27, "What must not change"), the same on every CPU (issue 60).

The sets of tests/golden/make_checksums.py (the traced sets and core directory `hwvit demo`
writes, `hwvit vectors-random` for every kind with fixed seeds) are written again into a
temporary directory and every file's sha256 is compared with tests/golden/vector_checksums.json:
one checksum per file, valid on every machine. The demo's sets are written here with this CPU's
own kernels, and again in fresh interpreters that run the float kernels of every lower ATen CPU
capability this CPU supports (make_checksums.EMULATION: ATen, MKL, oneDNN and numpy lowered to
the default (SSE) and AVX2 levels): every one must give the same bytes. The JSON is rewritten only
for an intended change of arithmetic or format (see make_checksums.py), never to make this test pass.

The last two tests prove the comparison can fail: a kernel patched to move one element by one
LSB must show up as a difference naming the set and the file.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).parent / "golden" / "make_checksums.py"
_spec = importlib.util.spec_from_file_location("hwvit_golden_checksums", _PATH)
golden = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = golden
_spec.loader.exec_module(golden)

RANDOM_REQUANT = "random/requant/defaults-seed0"
DEMO_GELU = "demo/layers.0.mlp.gelu"


@pytest.fixture(scope="module")
def expected() -> dict:
    return golden.load_checksums()


@pytest.fixture(scope="module")
def digits_model():
    return golden.demo_model()


def _assert_same(want: dict[str, dict[str, str]], got: dict[str, dict[str, str]]) -> None:
    diffs = golden.differences(want, got)
    assert not diffs, (
        f"vector sets differ from tests/golden/vector_checksums.json; first: {diffs[0]}\n"
        + "\n".join(diffs[:20])
        + (f"\n... {len(diffs) - 20} more" if len(diffs) > 20 else "")
    )


def _one_lsb_up(y: np.ndarray, index: int, hi: int) -> np.ndarray:
    """``y`` with element ``index`` (flat) moved by one LSB: up, or down where it sits at ``hi``."""
    y = np.array(y, copy=True)
    v = int(y.flat[index])
    y.flat[index] = v + 1 if v < hi else v - 1
    return y


def test_demo_sets_byte_for_byte(tmp_path, digits_model, expected):
    """The demo's sets, calibrated on this CPU."""
    golden.write_demo_sets(digits_model, tmp_path)
    got = golden.tree_checksums(tmp_path)
    assert len(expected["demo"]) == 59  # 58 traced blocks + the core directory
    _assert_same(expected["demo"], got)


def test_demo_sets_under_every_capability_here(tmp_path, digits_model, expected):
    """The demo's sets under every lower ATen capability this CPU runs (fresh interpreters): the
    same bytes. A float32 calibration of the same model, taken in the same interpreters, finds
    ranges that differ between them: the emulation does move the float kernels."""
    caps = golden.capabilities_here()[:-1]  # the highest one is this process's, tested above
    if not caps:
        pytest.fail("this CPU runs only ATen's default kernels: nothing to emulate (the test needs an x86 CPU)")
    docs = golden.demo_under_capabilities(caps, tmp_path)
    for cap, doc in docs.items():
        diffs = golden.differences(expected["demo"], doc["sets"])
        assert not diffs, f"ATEN_CPU_CAPABILITY={cap}: {len(diffs)} files differ; first: {diffs[0]}"
    # between the emulated capabilities (one thread each); with only one of them, against this process
    found = [doc["float32"] for doc in docs.values()]
    if len(found) == 1:
        found.append(golden.float32_ranges(digits_model["source"], digits_model["calib"]))
    assert any(f != found[0] for f in found), "float32 ranges identical everywhere: the emulation changes no kernel"


def test_random_sets_byte_for_byte(tmp_path, expected):
    golden.write_random_sets(tmp_path)
    got = golden.tree_checksums(tmp_path)
    _assert_same(expected["random"], got)


def test_checksums_cover_every_kind_and_file(expected):
    from hwvit.cli.vectors_random import vectors_random

    (kind_arg,) = [p for p in vectors_random.params if p.name == "kind"]
    from hwvit import blocks

    # The arithmetic variants' kinds (softmax_ibert, ...) came after these checksums; every other kind is here.
    kinds = {k for k in kind_arg.type.choices if not blocks.get(k).variant}
    assert set(golden.RANDOM_VARIANTS) == kinds
    assert len(kinds) == 8
    for kind in kinds:
        assert {f"random/{kind}/defaults-seed0", f"random/{kind}/defaults-seed1"} <= set(expected["random"])
    assert set(expected["random"]) == set(golden.random_set_names())
    every = {**expected["random"], **expected["demo"]}
    for name, files in every.items():
        if name == "demo-core":
            assert set(files) == {"manifest.yaml", "prog.hex", "act.hex", "wgt.hex", "prm.hex"}
            continue
        stems = {f.rsplit(".", 1)[0] for f in files if f != "manifest.yaml"}
        assert "manifest.yaml" in files and stems, name
        assert set(files) == {"manifest.yaml"} | {f"{s}.{ext}" for s in stems for ext in ("hex", "npy")}, name


def test_manifest_normalization_drops_only_the_version_line():
    text = b"format: 1\nhwvit_version: 0.1.0\nkind: gemm\nparams:\n  hwvit_version: 3\n"
    assert golden.normalized_manifest(text, "m") == b"format: 1\nkind: gemm\nparams:\n  hwvit_version: 3\n"
    with pytest.raises(ValueError, match="found 0"):
        golden.normalized_manifest(b"format: 1\nkind: gemm\n", "m")


def test_one_lsb_in_a_random_set_fails(monkeypatch, tmp_path, expected):
    import hwvit.ops

    real, calls = hwvit.ops.requant, []

    def requant_one_lsb_off(*args, **kwargs):
        calls.append(1)
        return _one_lsb_up(real(*args, **kwargs), 5, 127)  # the default set's out_bits: 8

    monkeypatch.setattr(hwvit.ops, "requant", requant_one_lsb_off)
    golden.write_random_set("requant", "defaults-seed0", tmp_path)
    assert calls, "the patched kernel was not called: patch the kernel the random requant set is made with"
    want = {RANDOM_REQUANT: expected["random"][RANDOM_REQUANT]}
    diffs = golden.differences(want, golden.tree_checksums(tmp_path))
    assert [d.split(":")[0] for d in diffs] == [
        f"set {RANDOM_REQUANT}, file y.hex",
        f"set {RANDOM_REQUANT}, file y.npy",
        f"set {RANDOM_REQUANT}, file manifest.yaml",
    ]
    with pytest.raises(AssertionError, match=f"first: set {RANDOM_REQUANT}, file y.hex: sha256"):
        _assert_same(want, golden.tree_checksums(tmp_path))


def test_one_lsb_in_the_traced_model_fails(monkeypatch, tmp_path, digits_model, expected):
    import hwvit.ops

    real, calls = hwvit.ops.gelu, []

    def gelu_one_lsb_off(*args, **kwargs):
        y = real(*args, **kwargs)
        calls.append(1)
        return _one_lsb_up(y, 100, 127) if len(calls) == 1 else y  # layer 0's GELU only, 8-bit output

    monkeypatch.setattr(hwvit.ops, "gelu", gelu_one_lsb_off)
    golden.write_demo_sets(digits_model, tmp_path, core=False)
    assert calls, "the patched kernel was not called: patch the kernel the traced GELU runs"
    want = {k: v for k, v in expected["demo"].items() if k != "demo-core"}
    diffs = golden.differences(want, golden.tree_checksums(tmp_path))
    assert diffs
    changed = {d.split(":")[0] for d in diffs}
    assert f"set {DEMO_GELU}, file y.hex" in changed and f"set {DEMO_GELU}, file y.npy" in changed
    assert f"set {DEMO_GELU}, file x.hex" not in changed
    # Upstream of layer 0's GELU nothing moves; downstream its consumer sees the changed input.
    for upstream in ("demo/embed.proj", "demo/layers.0.attn.qkv", "demo/layers.0.mlp.fc1"):
        assert not any(d.startswith(f"set {upstream},") for d in diffs), upstream
    assert "set demo/layers.0.mlp.fc2, file a.hex" in changed
    assert re.fullmatch(r"set demo/[\w.]+, file \w+\.(hex|npy): sha256 .*", diffs[0]), diffs[0]
    with pytest.raises(AssertionError, match=re.escape(f"first: {diffs[0]}")):
        _assert_same(want, golden.tree_checksums(tmp_path))
