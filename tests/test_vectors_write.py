"""Writing vector sets: manifest contents, round trip, determinism, atomicity, --force."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
import yaml

from hwvit import __version__, blocks, vectors
from hwvit.record import KINDS, BlockRecord, Tensor
from hwvit.vectors import write as write_mod

# every kind a random set can be made of (a team's function's kind, softmax_custom, has none)
RANDOM_KINDS = [k for k in KINDS if blocks.get(k).variant != "custom"]


def _gemm_record(path: str = "layers.0.attn.qkv", m: int = 3, k: int = 4, n: int = 5, seed: int = 0) -> BlockRecord:
    """A contract-shaped gemm record with arbitrary (not computed) values: writing does not compute."""
    rng = np.random.default_rng(seed)

    def t(shape, bits, signed, role, lo, hi, scale=None):
        return Tensor(rng.integers(lo, hi, shape, endpoint=True), bits, signed, role, scale)

    return BlockRecord(
        "gemm",
        path,
        {"m": m, "k": k, "n": n, "a_signed": True, "out_bits": 8},
        {
            "a": t((m, k), 8, True, "input", -128, 127, 0.0125),
            "w": t((n, k), 8, True, "parameter", -128, 127),
            "bias": t((n,), 32, True, "parameter", -(2**31), 2**31 - 1),
            "multiplier": t((n,), 32, False, "parameter", 0, 2**31 - 1),
            "shift": t((n,), 6, False, "parameter", 0, 62),
            "acc": t((m, n), 32, True, "output", -(2**31), 2**31 - 1),
            "y": t((m, n), 8, True, "output", -128, 127, 1.0 / 3.0),
        },
    )


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_manifest_records_everything(tmp_path):
    rec = _gemm_record()
    out = vectors.write_set(rec, tmp_path / "set", seed=11, source_sha256="ab" * 32)
    man = yaml.safe_load((out / "manifest.yaml").read_text())
    assert man["format"] == 1 and man["hwvit_version"] == __version__
    assert (man["kind"], man["path"], man["seed"], man["source_sha256"]) == ("gemm", "layers.0.attn.qkv", 11, "ab" * 32)
    assert man["params"] == {"m": 3, "k": 4, "n": 5, "a_signed": True, "out_bits": 8, "rounding": "half_up"}
    assert man["config_hash"] == vectors.config_hash(man["params"])
    entries = {e["name"]: e for e in man["tensors"]}
    assert list(entries) == list(rec.tensors)  # record order
    a = entries["a"]
    assert (a["role"], a["shape"], a["bits"], a["signed"], a["layout"], a["scale"], a["dtype"]) == (
        "input",
        [3, 4],
        8,
        True,
        "row-major",
        0.0125,
        "int8",
    )
    assert entries["multiplier"]["dtype"] == "uint32" and entries["shift"]["dtype"] == "uint8"
    assert entries["y"]["scale"] == 1.0 / 3.0 and entries["w"]["scale"] is None
    for name, e in entries.items():
        for ext in ("hex", "npy"):
            raw = (out / e["files"][ext]).read_bytes()
            assert e["files"][ext] == f"{name}.{ext}"
            assert e["sha256"][ext] == hashlib.sha256(raw).hexdigest()
    lines = (out / "acc.hex").read_text().splitlines()
    assert len(lines) == 15 and all(len(line) == 8 for line in lines)
    want = [f"{int(v) % 2**32:08x}" for v in rec.tensors["acc"].data.reshape(-1)]
    assert lines == want


def test_lut_file_is_recorded_for_table_kinds(tmp_path):
    for kind, table in (("gelu", "table.hex"), ("softmax", "exp_table.hex")):
        out = vectors.write_set(vectors.random_record(kind, 4, 0), tmp_path / kind)
        assert yaml.safe_load((out / "manifest.yaml").read_text())["lut_file"] == table
    out = vectors.write_set(vectors.random_record("requant", 4, 0), tmp_path / "rq")
    assert "lut_file" not in yaml.safe_load((out / "manifest.yaml").read_text())


@pytest.mark.parametrize("kind", RANDOM_KINDS)
def test_round_trip_every_kind(tmp_path, kind):
    rec = vectors.random_record(kind, 7, 3)
    vset = vectors.read(vectors.write_set(rec, tmp_path / kind, seed=3))
    assert (vset.kind, vset.path, vset.seed, vset.directory) == (kind, "random", 3, tmp_path / kind)
    assert vset.params == {**rec.params, "rounding": "half_up"}
    assert list(vset.tensors) == list(rec.tensors)
    for name, t in rec.tensors.items():
        got = vset.tensors[name]
        assert got.data.dtype == np.int64 and got.data.shape == t.data.shape
        assert np.array_equal(got.data, t.data) and np.array_equal(vset[name], t.data)
        assert (got.bits, got.signed, got.role, got.scale) == (t.bits, t.signed, t.role, t.scale)
        assert vset.hex_path(name) == tmp_path / kind / f"{name}.hex"
        assert vset.npy_path(name).is_file()


def test_same_inputs_give_a_byte_identical_tree(tmp_path):
    records = [_gemm_record(f"layers.{i}.mlp.fc1", seed=i) for i in range(3)]
    records += [vectors.random_record(k, 5, 1) for k in ("softmax",)]
    records[-1].path = "layers.0.attn.softmax"
    s1 = vectors.write_sets(records, tmp_path / "a", seed=5, source_sha256="0" * 64)
    s2 = vectors.write_sets(records, tmp_path / "b", seed=5, source_sha256="0" * 64)
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == sorted(r.path for r in records)
    assert (s1.sets, s1.tensors) == (4, 3 * 7 + 3) and s1 == s2
    assert s1.bytes == sum(len(v) for v in _tree(tmp_path / "a").values())
    # ...and a random set regenerated from the same seed is byte-identical too.
    vectors.write_set(vectors.random_record("layernorm", 6, 9), tmp_path / "ln1", seed=9)
    vectors.write_set(vectors.random_record("layernorm", 6, 9), tmp_path / "ln2", seed=9)
    assert _tree(tmp_path / "ln1") == _tree(tmp_path / "ln2")


def test_summary_line():
    assert write_mod.WriteSummary(12, 48, 1_234_567, 0).line() == "12 sets, 48 tensors, 1.2 MB"
    assert write_mod.WriteSummary(1, 3, 3_100, 0).line() == "1 set, 3 tensors, 3.1 kB"


def test_progress_reports_every_set(tmp_path):
    seen = []
    records = [_gemm_record(f"layers.{i}.proj", seed=i) for i in range(3)]
    vectors.write_sets(records, tmp_path / "t", progress=lambda path, n: seen.append((path, n)))
    assert seen == [(f"layers.{i}.proj", 3 * 4 + 5 * 4 + 3 * 5 + 2 * 3 * 5) for i in range(3)]


def _leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir())


def test_failure_mid_write_leaves_nothing(tmp_path, monkeypatch):
    calls = {"n": 0}
    real = write_mod.encode_npy

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 9:  # second set, second tensor: some files already written
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(write_mod, "encode_npy", flaky)
    records = [_gemm_record(f"layers.{i}.qkv", seed=i) for i in range(3)]
    with pytest.raises(OSError, match="No space"):
        vectors.write_sets(records, tmp_path / "deep" / "er" / "out")
    assert _leftovers(tmp_path) == []  # not even the parents it created
    (tmp_path / "keep").mkdir()
    calls["n"] = 4  # fails on the 5th of 7 tensors
    with pytest.raises(OSError):
        vectors.write_set(_gemm_record(), tmp_path / "keep" / "one")
    assert _leftovers(tmp_path / "keep") == []


def test_interrupt_leaves_nothing_and_keeps_the_old_set(tmp_path, monkeypatch):
    vectors.write_set(_gemm_record(seed=1), tmp_path / "s")
    before = _tree(tmp_path / "s")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(write_mod, "dump_manifest", interrupted)
    with pytest.raises(KeyboardInterrupt):
        vectors.write_set(_gemm_record(seed=2), tmp_path / "s", force=True)
    assert _leftovers(tmp_path) == ["s"] and _tree(tmp_path / "s") == before


def test_existing_set_needs_force(tmp_path):
    dest = tmp_path / "s"
    vectors.write_set(_gemm_record(seed=1), dest)
    old = _tree(dest)
    with pytest.raises(FileExistsError, match="already exists.*--force"):
        vectors.write_set(_gemm_record(seed=2), dest)
    assert _tree(dest) == old
    with pytest.raises(FileExistsError):
        vectors.write_sets([_gemm_record(seed=2)], dest)
    vectors.write_set(_gemm_record(seed=2), dest, force=True)
    assert _tree(dest) != old and vectors.read(dest).tensors["a"].data.shape == (3, 4)
    assert _leftovers(tmp_path) == ["s"]  # the old tree is gone, no temporaries
    vectors.write_sets([_gemm_record("x.y", seed=3)], dest, force=True)
    assert _leftovers(dest) == ["x.y"]


def test_empty_directory_and_files_as_destination(tmp_path):
    (tmp_path / "empty").mkdir()
    vectors.write_set(_gemm_record(), tmp_path / "empty")  # nothing to overwrite: no --force needed
    assert (tmp_path / "empty" / "manifest.yaml").is_file()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="--force replaces only vector sets, and it holds none"):
        vectors.write_set(_gemm_record(), tmp_path / "mine", force=True)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match="not a directory"):
        vectors.write_set(_gemm_record(), tmp_path / "file", force=True)
    assert (tmp_path / "file").read_text() == "x"


def test_published_set_is_world_readable(tmp_path):
    out = vectors.write_set(_gemm_record(), tmp_path / "s")
    assert os.stat(out).st_mode & 0o755 == 0o755


def test_writer_rejects_bad_records(tmp_path):
    rec = _gemm_record()
    rec.tensors["y"] = Tensor(np.full((3, 5), 200), 8, True, "output")
    with pytest.raises(vectors.VectorSetError, match=r"layers.0.attn.qkv: tensor y: value 200 outside 8-bit signed"):
        vectors.write_set(rec, tmp_path / "a")
    rec = _gemm_record()
    del rec.tensors["bias"]
    with pytest.raises(vectors.VectorSetError, match="missing tensor 'bias'"):
        vectors.write_set(rec, tmp_path / "b")
    rec = _gemm_record()
    rec.tensors["w"] = Tensor(np.zeros((5, 3), np.int64), 8, True, "parameter")
    with pytest.raises(vectors.VectorSetError, match="tensor w: role/shape/bits/signed"):
        vectors.write_set(rec, tmp_path / "c")
    rec = _gemm_record()
    rec.params["out_bits"] = 40
    with pytest.raises(vectors.VectorSetError, match=r"out_bits=40 outside \[2, 16\]"):
        vectors.write_set(rec, tmp_path / "d")
    with pytest.raises(vectors.VectorSetError, match="appears twice"):
        vectors.write_sets([_gemm_record("a.b"), _gemm_record("a.b")], tmp_path / "e")
    with pytest.raises(vectors.VectorSetError, match="cannot name a directory"):
        vectors.write_sets([_gemm_record("../up")], tmp_path / "f")
    assert _leftovers(tmp_path) == []


def test_numpy_scalars_in_params_are_written_as_plain_ints(tmp_path):
    rec = _gemm_record()
    rec.params = {k: (np.int64(v) if not isinstance(v, bool) else np.bool_(v)) for k, v in rec.params.items()}
    out = vectors.write_set(rec, tmp_path / "s")
    assert "!!" not in (out / "manifest.yaml").read_text()
    assert vectors.read(out).params["m"] == 3


def test_config_hash_covers_params_and_model_config():
    h = vectors.config_hash({"a": 1, "b": 2})
    assert h == vectors.config_hash({"b": 2, "a": 1}) and len(h) == 64
    assert h != vectors.config_hash({"a": 1, "b": 3})
    assert h != vectors.config_hash({"a": 1, "b": 2}, {"dim": 768})
