"""--force replaces only what hwvit wrote (issue 54): a file it did not write in an output directory
(a README the repository commits beside the sets, someone's notes, a simulator's build, an exported
file edited since) makes it refuse in one line naming that file, and nothing is deleted.

The case that lost files: `hwvit vectors --out vectors/ --force` in a clone after `make demo`
replaced vectors/, the demo's sets and the committed vectors/README.md with it.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from hwvit.cli import main


def run(*args: str):
    res = CliRunner().invoke(main, list(args))
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    return res


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_vectors_beside_a_committed_readme_are_kept(tmp_path):
    tree = tmp_path / "vectors"
    tree.mkdir()
    (tree / "README.md").write_text("# vectors/\nGenerated vector sets land here.\n")
    made = run("vectors-random", "softmax", "--cases", "2", "--row-len", "5", "--out", str(tree / "digits" / "sm"))
    assert made.exit_code == 0
    before = _files(tmp_path)
    res = run("vectors-random", "gelu", "--cases", "4", "--out", str(tree), "--force")
    assert res.exit_code == 1 and len(res.output.strip().splitlines()) == 1, res.output
    assert "--force replaces only vector sets hwvit wrote" in res.output and "README.md" in res.output, res.output
    assert _files(tmp_path) == before  # the README and the sets, as they were
    (tree / "README.md").unlink()
    assert run("vectors-random", "gelu", "--cases", "4", "--out", str(tree), "--force").exit_code == 0
    assert (tree / "manifest.yaml").is_file() and not (tree / "digits").exists()


def test_a_file_added_inside_a_set_is_kept(tmp_path):
    out = tmp_path / "set"
    assert run("vectors-random", "requant", "--cases", "3", "--out", str(out)).exit_code == 0
    (out / "notes.txt").write_text("mine")
    res = run("vectors-random", "requant", "--cases", "5", "--out", str(out), "--force")
    assert res.exit_code == 1 and "notes.txt" in res.output and (out / "notes.txt").read_text() == "mine"
    (out / "notes.txt").unlink()
    assert run("vectors-random", "requant", "--cases", "5", "--out", str(out), "--force").exit_code == 0


def test_a_bench_that_was_run_is_kept(tmp_path):
    sets, bench = tmp_path / "sets", tmp_path / "tb"
    assert run("vectors-random", "gelu", "--cases", "8", "--out", str(sets)).exit_code == 0
    assert run("tb", "export", "gelu", "--set", str(sets), "-o", str(bench)).exit_code == 0
    (bench / "tb.vvp").write_text("a simulator's build")
    res = run("tb", "export", "gelu", "--set", str(sets), "-o", str(bench), "--force")
    assert res.exit_code == 1 and "tb.vvp" in res.output and (bench / "tb.vvp").exists(), res.output
    (bench / "tb.vvp").unlink()
    assert run("tb", "export", "gelu", "--set", str(sets), "-o", str(bench), "--force").exit_code == 0


def test_an_edited_rtl_export_is_kept(tmp_path):
    out = tmp_path / "team"
    assert run("rtl", "export", str(out)).exit_code == 0
    assert run("rtl", "export", str(out), "--force").exit_code == 0  # untouched: replaced
    (out / "rtl" / "gelu.v").write_text("// the team's edit\n")
    res = run("rtl", "export", str(out), "--force")
    assert res.exit_code == 1 and "rtl/gelu.v (changed since it was written)" in res.output, res.output
    assert (out / "rtl" / "gelu.v").read_text() == "// the team's edit\n"


def test_a_core_directory_with_other_files_is_kept(tmp_path):
    out = tmp_path / "core"
    assert run("compile", "--model", "digits", "--calib-images", "16", "--out", str(out)).exit_code == 0
    assert run("compile", "--model", "digits", "--calib-images", "16", "--out", str(out), "--force").exit_code == 0
    (out / "run.log").write_text("mine")
    res = run("compile", "--model", "digits", "--calib-images", "16", "--out", str(out), "--force")
    assert res.exit_code == 1 and "run.log" in res.output and (out / "run.log").read_text() == "mine", res.output
