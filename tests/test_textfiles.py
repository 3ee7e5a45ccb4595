"""hwvit.textfiles: the one YAML reader (safe_load, one-line errors naming the file and line) and
the one ``first_line``; and the readers that use it keep their one-line messages."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from hwvit.textfiles import first_line, parse_yaml, read_yaml


class OwnError(Exception):
    pass


def test_read_yaml_returns_plain_data(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("row_len: 197\nnames: [a, b]\n")
    assert read_yaml(path) == {"row_len": 197, "names": ["a", "b"]}
    path.write_text("")
    assert read_yaml(path) is None


def test_read_yaml_names_file_and_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("a: 1\nkind: [unclosed\n")
    with pytest.raises(ValueError) as err:
        read_yaml(path)
    assert str(err.value) == f"{path}: not valid YAML at line 3"
    with pytest.raises(OwnError, match=r"^manifest.yaml: cannot read recipe: not valid YAML at line 3$"):
        read_yaml(path, what="recipe", error=OwnError, label="manifest.yaml")


def test_read_yaml_refuses_tags_and_unreadable_files(tmp_path):
    tagged = tmp_path / "tag.yaml"
    tagged.write_text("!!python/object/apply:os.system ['false']\n")
    with pytest.raises(ValueError, match="not valid YAML"):
        read_yaml(tagged)  # safe_load: no object is built, nothing runs
    missing = tmp_path / "missing.yaml"
    with pytest.raises(OwnError, match=r"missing.yaml: cannot read config \(No such file or directory\)$"):
        read_yaml(missing, what="config", error=OwnError)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"a: \xff\xfe\n")
    with pytest.raises(ValueError, match=r"bin.yaml: cannot read \(not UTF-8 text\)$"):
        read_yaml(binary)
    with pytest.raises(ValueError, match=r"^--set 'x=\[': not valid YAML at line 1$"):
        parse_yaml("[", "--set 'x=['")


def test_first_line():
    assert first_line(ValueError("one\ntwo")) == "one"
    assert first_line(ValueError("\n  one\n")) == "one"
    assert first_line(KeyError()) == "KeyError"
    assert first_line(OSError("no such\nfile"), with_type=True) == "OSError: no such"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["vectors-random", "gelu", "--block-config", "{bad}"], "{bad}: not valid YAML at line 3"),
        (["vectors-random", "gelu", "--set", "in_bits=[8"], "--set 'in_bits=[8': value: not valid YAML at line 1"),
    ],
)
def test_cli_yaml_errors_are_one_line(tmp_path, args, message):
    from hwvit.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("row_len: 1\nx: [\n")
    args = [str(bad) if a == "{bad}" else a for a in args]
    message = message.replace("{bad}", str(bad))
    result = CliRunner().invoke(main, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    assert result.output.strip() == f"Error: {message}"
    assert not (tmp_path / "out").exists()


def test_cli_gemm_choices_are_the_backends():
    from hwvit.cli import main
    from hwvit.ops.gemm_backends import BACKENDS

    result = CliRunner().invoke(main, ["bench", "--gemm", "bogus"])
    assert result.exit_code == 2
    listed = ", ".join(repr(name) for name in ("auto", *BACKENDS))
    assert f"is not one of {listed}." in result.output
