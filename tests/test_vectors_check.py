"""`hwvit check` / vectors.read reject every way a set can be damaged, each with one line."""

from __future__ import annotations

import hashlib
import io
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from hwvit import vectors
from hwvit.cli import main


@pytest.fixture
def gelu_set(tmp_path) -> Path:
    """A valid 10-element gelu set (x: 8-bit signed, table 256 entries, y)."""
    return vectors.write_set(vectors.random_record("gelu", 10, 4), tmp_path / "tree" / "layers.0.mlp.gelu")


def _manifest(set_dir: Path) -> dict:
    return yaml.safe_load((set_dir / "manifest.yaml").read_text())


def _save_manifest(set_dir: Path, man: dict) -> None:
    (set_dir / "manifest.yaml").write_text(yaml.safe_dump(man, sort_keys=False))


def _edit_line(path: Path, index: int, text: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    lines[index] = text
    path.write_text("".join(lines))


def _rehash(set_dir: Path, name: str) -> None:
    """Make the manifest's sha256 agree with a tampered file, so the content check must catch it."""
    man = _manifest(set_dir)
    for e in man["tensors"]:
        for ext, fname in e["files"].items():
            if fname == name:
                e["sha256"][ext] = hashlib.sha256((set_dir / fname).read_bytes()).hexdigest()
    _save_manifest(set_dir, man)


def _error(set_dir: Path) -> str:
    with pytest.raises(vectors.VectorSetError) as err:
        vectors.read(set_dir)
    message = str(err.value)
    assert "\n" not in message
    (result,) = vectors.check(set_dir)
    assert result == (set_dir, message)
    return message


def _damage_truncated(d: Path):
    (d / "x.hex").write_text("".join((d / "x.hex").read_text().splitlines(keepends=True)[:7]))
    _rehash(d, "x.hex")


def _damage_extra_lines(d: Path):
    (d / "x.hex").write_text((d / "x.hex").read_text() + "00\n01\n")
    _rehash(d, "x.hex")


def _damage_non_hex(d: Path):
    _edit_line(d / "x.hex", 4, "0z\n")
    _rehash(d, "x.hex")


def _damage_too_wide(d: Path):
    _edit_line(d / "y.hex", 2, "1ff\n")
    _rehash(d, "y.hex")


def _damage_missing(d: Path):
    (d / "table.hex").unlink()


def _damage_checksum(d: Path):
    # Consistent tampering: .hex and .npy still agree, only the checksums can tell.
    x = np.load(d / "x.npy")
    x[0] = 1 if x[0] != 1 else 2
    np.save(d / "x.npy", x)
    _edit_line(d / "x.hex", 0, f"{int(x[0]) & 0xFF:02x}\n")


def _damage_escape(d: Path):
    man = _manifest(d)
    man["tensors"][0]["files"]["hex"] = "../x.hex"
    _save_manifest(d, man)
    (d.parent / "x.hex").write_bytes((d / "x.hex").read_bytes())


DAMAGE = {
    "truncated": (_damage_truncated, "x.hex: truncated: 7 lines, expected 10"),
    "extra lines": (_damage_extra_lines, "x.hex: extra lines: 12 lines, expected 10"),
    "non-hex character": (_damage_non_hex, "x.hex: line 5: non-hex character 'z'"),
    "value too wide": (_damage_too_wide, "y.hex: line 3: value 0x1ff does not fit 8 bits"),
    "missing file": (_damage_missing, "table.hex: missing file"),
    "checksum mismatch": (
        _damage_checksum,
        r"x.hex: checksum mismatch \(manifest [0-9a-f]{12}\.\.\., file [0-9a-f]{12}\.\.\.\)",
    ),
    "path leaving the set": (_damage_escape, "manifest: tensor x: file path '../x.hex' leaves the set directory"),
}


@pytest.mark.parametrize("fault", list(DAMAGE))
def test_each_fault_is_rejected_with_its_message(gelu_set, fault):
    damage, message = DAMAGE[fault]
    damage(gelu_set)
    assert re.fullmatch(f"{re.escape(str(gelu_set))}: {message}", _error(gelu_set))


@pytest.mark.parametrize("fault", list(DAMAGE))
def test_cli_check_exits_non_zero_with_one_line(gelu_set, fault):
    damage, message = DAMAGE[fault]
    damage(gelu_set)
    result = CliRunner().invoke(main, ["check", str(gelu_set)])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and re.fullmatch(f"Error: {re.escape(str(gelu_set))}: {message}", lines[0])


def test_hex_and_npy_must_agree(gelu_set):
    x = np.load(gelu_set / "x.npy")
    x[3] = x[3] + 1 if x[3] < 127 else 0
    np.save(gelu_set / "x.npy", x)
    _rehash(gelu_set, "x.npy")
    assert re.search(r"x.npy and x.hex differ at element 3 \(npy -?\d+, hex -?\d+\)$", _error(gelu_set))


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda m: m.pop("seed"), "manifest: missing key 'seed'"),
        (lambda m: m.update(extra=1), "manifest: unknown key 'extra'"),
        (lambda m: m.update(kind="conv"), "manifest: kind 'conv' not one of"),
        (lambda m: m.update(format=2), "manifest: format 2, this hwvit reads 1"),
        (lambda m: m["params"].update(in_bits="8"), "manifest: param in_bits='8' is not int"),
        (
            lambda m: m["params"].update(rounding="half_sideways"),
            "manifest: param rounding='half_sideways', expected 'half_up'",
        ),
        (
            lambda m: m["tensors"][1].update(shape=[255]),
            "manifest: gelu tensor table: role/shape/bits/signed "
            "('parameter', [255], 8, True), contract says ('parameter', [256], 8, True)",
        ),
        (lambda m: m["tensors"][2].update(shape=[2, 5]), "manifest: gelu tensor y: role/shape/bits/signed"),
        (lambda m: m["tensors"][0].update(bits=70), "manifest: tensor x: bits 70 outside [1, 64]"),
        (lambda m: m["tensors"][1].update(role="input"), "manifest: gelu tensor table: role/shape/bits/signed"),
        (lambda m: m["tensors"].pop(2), "manifest: gelu: missing tensor 'y'"),
        (lambda m: m["tensors"][0]["files"].update(hex="/etc/passwd"), "leaves the set directory"),
        (lambda m: m["tensors"][0]["files"].update(npy="y.npy"), "two tensors share a file name"),
        (lambda m: m["tensors"][0].update(dtype="int64"), "manifest: tensor x: dtype 'int64', expected 'int8'"),
        (lambda m: m.update(lut_file="x.hex"), "manifest: lut_file 'x.hex', expected 'table.hex'"),
        (lambda m: m.update(config_hash="abc"), "manifest: config_hash is not a sha256 hex digest"),
    ],
)
def test_manifest_schema_faults(gelu_set, edit, message):
    man = _manifest(gelu_set)
    edit(man)
    _save_manifest(gelu_set, man)
    assert message in _error(gelu_set)


@pytest.mark.parametrize(
    "kind,edit,message",
    [
        ("divu", lambda m: m["params"].pop("q_bits"), "manifest: divu params lack 'q_bits'"),
        ("divu", lambda m: m["params"].update(n_bits=64), "manifest: param n_bits=64 outside [2, 63]"),
        ("divu", lambda m: m["params"].update(q_bits=41), "manifest: divu q_bits=41 > n_bits=40"),
        ("divu", lambda m: m["params"].update(q_bits=8), "manifest: divu d_bits=24 < n_bits - q_bits = 32"),
        ("divu", lambda m: m["params"].update(d_bits=True), "manifest: param d_bits=True is not int"),
        (
            "divu",
            lambda m: m["tensors"][2].update(signed=True, dtype="int64"),
            "manifest: divu tensor quotient: role/shape/bits/signed ('output', [6], 40, True), "
            "contract says ('output', [6], 40, False)",
        ),
        ("divu", lambda m: m["tensors"].pop(3), "manifest: divu: missing tensor 'remainder'"),
        ("isqrt", lambda m: m["params"].update(in_bits=61), "manifest: isqrt in_bits=61 is odd"),
        ("isqrt", lambda m: m["params"].update(in_bits=64), "manifest: param in_bits=64 outside [4, 62]"),
        (
            "isqrt",
            lambda m: m["tensors"][1].update(bits=62, dtype="uint64"),
            "manifest: isqrt tensor root: role/shape/bits/signed ('output', [6], 62, False), "
            "contract says ('output', [6], 31, False)",
        ),
        ("isqrt", lambda m: m["tensors"][0].update(name="x"), "manifest: isqrt: unexpected tensor 'x'"),
    ],
)
def test_divu_and_isqrt_manifest_faults(tmp_path, kind, edit, message):
    """The serial units' parameters (ranges and the RTL's cross-checks) and tensors are checked too,
    and `hwvit check` reports each fault in one line with a non-zero exit."""
    set_dir = vectors.write_set(vectors.random_record(kind, 6, 1), tmp_path / kind)
    man = _manifest(set_dir)
    edit(man)
    _save_manifest(set_dir, man)
    assert message in _error(set_dir)
    result = CliRunner().invoke(main, ["check", str(set_dir)])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and message in lines[0], result.output


def test_unreadable_manifests(gelu_set):
    (gelu_set / "manifest.yaml").write_text("kind: [unclosed\n")
    assert _error(gelu_set).endswith("manifest.yaml: not valid YAML at line 2")
    (gelu_set / "manifest.yaml").write_text("!!python/object:os.system {}\n")
    assert "not valid YAML" in _error(gelu_set)  # safe_load: no object construction
    (gelu_set / "manifest.yaml").write_text("- a list\n")
    assert _error(gelu_set).endswith("manifest: not a mapping")


def test_npy_faults(gelu_set):
    np.save(gelu_set / "y.npy", np.load(gelu_set / "y.npy").astype(np.int16))
    assert _error(gelu_set).endswith("y.npy: dtype int16, manifest says int8")
    buf = io.BytesIO()
    np.save(buf, np.array([1, 2], dtype=object), allow_pickle=True)
    (gelu_set / "y.npy").write_bytes(buf.getvalue())
    assert "y.npy: not a valid .npy file" in _error(gelu_set)


def test_symlink_out_of_the_set_is_rejected(gelu_set, tmp_path):
    outside = tmp_path / "outside.hex"
    outside.write_bytes((gelu_set / "x.hex").read_bytes())
    (gelu_set / "x.hex").unlink()
    (gelu_set / "x.hex").symlink_to(outside)
    assert _error(gelu_set).endswith("x.hex: symlink leaves the set directory")


def test_tree_check_reports_each_bad_set(tmp_path):
    root = tmp_path / "tree"
    records = [vectors.random_record(k, 5, 0) for k in ("requant", "residual_add", "softmax")]
    for rec, path in zip(records, ("pool", "layers.0.add1", "layers.0.attn.softmax")):
        rec.path = path
    vectors.write_sets(records, root)
    (root / ".out.tmp-abc").mkdir()  # a writer's temporary directory is not a set
    (root / ".out.tmp-abc" / "manifest.yaml").write_text("junk")
    assert vectors.find_sets(root) == sorted(root / p for p in ("pool", "layers.0.add1", "layers.0.attn.softmax"))
    assert all(err is None for _, err in vectors.check(root))
    ok = CliRunner().invoke(main, ["check", str(root)])
    assert ok.exit_code == 0 and ok.output == "3 sets valid\n"
    (root / "pool" / "y.hex").write_text("00\n")
    bad = CliRunner().invoke(main, ["check", str(root), "-v"])
    assert bad.exit_code == 1
    lines = bad.output.strip().splitlines()
    assert lines[0] == f"ok   {root / 'layers.0.add1'}"
    assert lines[2] == f"FAIL {root / 'pool'}: y.hex: truncated: 1 lines, expected 5"
    assert lines[-1] == "Error: 1 of 3 sets invalid"


def test_check_without_sets(tmp_path):
    result = CliRunner().invoke(main, ["check", str(tmp_path)])
    assert result.exit_code == 1 and "no vector set (manifest.yaml) found" in result.output
    assert CliRunner().invoke(main, ["check", str(tmp_path / "nope")]).exit_code == 2
