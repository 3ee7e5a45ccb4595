"""What the commands print where nobody watches a terminal (a log file, a pipe, CI): no progress
bar, whose carriage returns ran into the result line, but one plain line per stage; and counts in
the right number ("1 image", "1 mismatch"). CliRunner's streams are not terminals, as a log is not.
"""

from __future__ import annotations

import re

from click.testing import CliRunner

from hwvit.cli import main
from hwvit.textfiles import count


def test_count_says_one_and_many():
    assert [count(1, "image"), count(2, "image"), count(0, "set")] == ["1 image", "2 images", "0 sets"]
    assert [count(1, "mismatch"), count(38, "mismatch"), count(3, "class")] == [
        "1 mismatch",
        "38 mismatches",
        "3 classes",
    ]


def test_a_log_gets_a_line_per_stage_and_the_result_line_alone(tmp_path):
    out = tmp_path / "v"
    args = ["vectors", "--model", "digits", "--calib-images", "16", "--blocks", "layers.0.attn.*", "--out", str(out)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "\r" not in res.output and "%|" not in res.output, repr(res.output)
    lines = res.output.splitlines()
    assert re.fullmatch(r"writing \d+ sets \(\d+ elements\)", lines[-2]), lines
    assert re.fullmatch(rf"\d+ sets, \d+ tensors, [\d.]+ [kM]B -> {re.escape(str(out))}", lines[-1]), lines


def test_one_image_is_one_image():
    res = CliRunner().invoke(main, ["compare", "--model", "digits", "--limit", "1", "--calib-images", "16", "-q"])
    assert res.exit_code == 0, res.output
    assert res.output.startswith("digits: 1 image, top-1 float "), res.output
