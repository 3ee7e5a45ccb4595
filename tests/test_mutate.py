"""The RTL mutant generator (hwvit.mutate) and the `hwvit mutate` command's refusals."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from hwvit import mutate, toolchain
from hwvit.cli import main

ROOT = Path(__file__).resolve().parents[1]

SNIPPET = """module m (input wire clk_i, input wire rst_ni, input wire a_i, output wire out_valid_o);
  // a comment: x >= y + 1
  initial begin
    if (A < 2) begin
      $display("ERROR: m: A >= 2");
      $finish;
    end
  end
  reg [3:0] cnt_q, cnt_d;
  assign out_valid_o = cnt_q >= 4'd3;
  always @* begin
    cnt_d = cnt_q + 4'd1;
    if (a_i && !rst_ni) cnt_d = 4'd0;
  end
endmodule
"""


def _afters(text: str) -> set[tuple[str, str]]:
    return {(m.operator, m.after) for m in mutate.mutants(text, "rtl/m.v")}


def test_snippet_mutants():
    got = _afters(SNIPPET)
    for expected in [
        ("compare", "assign out_valid_o = cnt_q > 4'd3;"),
        ("const", "assign out_valid_o = cnt_q >= 4'd4;"),
        ("stuck-1", "assign out_valid_o = 1'b1;"),
        ("stuck-0", "assign out_valid_o = 1'b0;"),
        ("arith", "cnt_d = cnt_q - 4'd1;"),
        ("logic", "if (a_i || !rst_ni) cnt_d = 4'd0;"),
        ("if-inverted", "if (!(a_i && !rst_ni)) cnt_d = 4'd0;"),
    ]:
        assert expected in got, expected
    # Comments, the parameter check and declarations are never mutated.
    for mutant in mutate.mutants(SNIPPET, "rtl/m.v"):
        assert mutant.line not in (1, 2, 3, 4, 5, 6, 9), mutant


def test_the_engine_check_bounds_are_not_mutated():
    """The bounds a block hands to row_stream's parameter checks are part of those checks (its
    initial block, never mutated); the engine's structural parameters and the ports are."""
    text = """module b (input wire clk_i);
  row_stream #(
    .NAME("b"), .MAX_N(MAX_N), .LIMIT(4096), .W(8), .OUT_MIN(2), .DEPTH(3), .GO_AFTER(2),
    .A_NAME("K"), .A_VAL(K), .A_MIN(1), .A_MAX(1 << IN_BITS)) u_stream (
    .clk_i(clk_i), .done_i(1'b1)
  );
endmodule
"""
    got = {m.after for m in mutate.mutants(text, "rtl/b.v")}
    assert '.NAME("b"), .MAX_N(MAX_N), .LIMIT(4096), .W(9), .OUT_MIN(2), .DEPTH(3), .GO_AFTER(2),' in got
    assert '.NAME("b"), .MAX_N(MAX_N), .LIMIT(4096), .W(8), .OUT_MIN(2), .DEPTH(3), .GO_AFTER(1),' in got
    assert ".clk_i(clk_i), .done_i(1'b0)" in got
    assert not [a for a in got if "4097" in a or "4095" in a or "OUT_MIN(1)" in a or "OUT_MIN(3)" in a]
    assert not [a for a in got if a.startswith(".A_NAME")]


@pytest.mark.parametrize("path", sorted((ROOT / "rtl").glob("*.v")), ids=lambda p: p.name)
def test_each_mutant_changes_one_point(path):
    text = path.read_text()
    found = mutate.mutants(text, f"rtl/{path.name}")
    assert len(found) >= 5  # the smallest module, rtl/row_max.v, has 5
    lines = text.split("\n")
    for mutant in found:
        new = mutant.apply(text).split("\n")
        changed = [i for i, (a, b) in enumerate(zip(lines, new)) if a != b]
        assert changed == [mutant.line - 1] and new[mutant.line - 1].strip() == mutant.after, mutant
    # The journal keys outcomes by mutant: two mutants with one key would share an outcome (a
    # constant's +1 and -1 once did, hiding a survivor behind its killed twin).
    keys = [mutant.key for mutant in found]
    assert len(set(keys)) == len(keys), [k for k in keys if keys.count(k) > 1][:3]


def test_equivalent_list_matches_real_mutants():
    """Every reviewed entry names a mutant the generator makes today, at the line it names, with a
    reason: an entry whose mutant is gone, or whose line moved, fails here until it is reviewed again."""
    entries = mutate.load_equivalent(ROOT)
    assert entries, "the reviewed list is empty"
    assert all(len(reason) > 20 for reason in entries.values())
    assert mutate.stale_equivalent(ROOT) == []


def test_a_moved_or_vanished_equivalent_is_named(tmp_path):
    (tmp_path / "rtl").mkdir()
    (tmp_path / "sim").mkdir()
    text = (ROOT / "rtl" / "gelu.v").read_text()
    (tmp_path / "rtl" / "gelu.v").write_text(text)
    first = mutate.mutants(text, "rtl/gelu.v")[0]
    entry = {"file": first.file, "line": first.line, "before": first.before, "after": first.after, "reason": "x" * 30}
    (tmp_path / mutate.EQUIVALENT_FILE).write_text(yaml.safe_dump([entry]))
    assert mutate.stale_equivalent(tmp_path) == []
    # A comment line above the mutant moves it down one line.
    lines = text.split("\n")
    lines.insert(first.line - 1, "// moved")
    (tmp_path / "rtl" / "gelu.v").write_text("\n".join(lines))
    (stale,) = mutate.stale_equivalent(tmp_path)
    assert stale.startswith(f"rtl/gelu.v:{first.line}: the mutant is now at line {first.line + 1}"), stale
    # The mutated text gone altogether.
    (tmp_path / "rtl" / "gelu.v").write_text(text.replace(first.before, "wire unrelated = 1'b0;"))
    (stale,) = mutate.stale_equivalent(tmp_path)
    assert "no such mutant any more" in stale, stale


def test_an_equivalent_entry_holds_at_its_line_only(tmp_path):
    """One text at two lines (a reset branch and a start branch assigning the same zeros): the
    entry for one line's mutant does not make the other line's equivalent."""
    text = (
        "module m (input wire clk_i, input wire a_i, output reg q_o);\n"
        "  always @(posedge clk_i) begin\n    if (a_i) begin\n      q_o <= 1'b0;\n"
        "    end else begin\n      q_o <= 1'b0;\n    end\n  end\nendmodule\n"
    )
    twins = [m for m in mutate.mutants(text, "rtl/m.v") if m.after == "q_o <= 1'b1;"]
    assert [m.line for m in twins] == [4, 6] and twins[0].before == twins[1].before
    (tmp_path / "sim").mkdir()
    first = twins[0]
    entry = {"file": first.file, "line": first.line, "before": first.before, "after": first.after, "reason": "x" * 30}
    (tmp_path / mutate.EQUIVALENT_FILE).write_text(yaml.safe_dump([entry]))
    listed = mutate.load_equivalent(tmp_path)
    assert mutate.key_of(twins[0]) in listed and mutate.key_of(twins[1]) not in listed


def test_equivalent_entry_needs_a_reason(tmp_path):
    (tmp_path / "sim").mkdir()
    (tmp_path / mutate.EQUIVALENT_FILE).write_text("- {file: rtl/x.v, line: 3, before: a, after: b}\n")
    with pytest.raises(ValueError, match="reason"):
        mutate.load_equivalent(tmp_path)


def test_report_score():
    m = mutate.mutants(SNIPPET, "rtl/m.v")[0]
    report = mutate.Report(
        "m",
        "icarus",
        5,
        [
            mutate.Outcome(m, "killed"),
            mutate.Outcome(m, "killed"),
            mutate.Outcome(m, "killed"),
            mutate.Outcome(m, "survived"),
            mutate.Outcome(m, "equivalent"),
        ],
    )
    assert report.score == 0.75
    assert "3 killed, 1 survived, 1 equivalent, 0 did not compile; score 75.0%" in report.summary()


def test_cli_refuses_unknown_block():
    res = CliRunner().invoke(main, ["mutate", "--block", "nosuch"])
    assert res.exit_code != 0
    assert "block 'nosuch' has no rtl/nosuch.v" in res.output and "Traceback" not in res.output


def test_cli_lists_mutants():
    res = CliRunner().invoke(main, ["mutate", "--block", "gelu", "--list"])
    assert res.exit_code == 0, res.output
    assert "rtl/gelu.v:" in res.output and "stuck-1" in res.output


def test_endless_generate_loop_is_a_compile_failure(tmp_path, monkeypatch):
    """A mutant whose generate loop never ends (`gi = gi - 1`) hangs elaboration: the compile check
    gives up after COMPILE_TIMEOUT and reports it as a build failure, with no traceback."""
    rtl = tmp_path / "rtl"
    rtl.mkdir()
    (rtl / "loopy.v").write_text(
        "module loopy (input wire [3:0] a_i, output wire [3:0] y_o);\n"
        "  genvar gi;\n"
        "  generate\n"
        "    for (gi = 0; gi < 4; gi = gi - 1) begin : g_bit\n"
        "      assign y_o[gi] = ~a_i[gi];\n"
        "    end\n"
        "  endgenerate\n"
        "endmodule\n"
    )
    monkeypatch.setattr(mutate.runner, "COMPILE_TIMEOUT", 5)
    error = mutate.runner._compiles(tmp_path, "loopy", "verilator")
    assert error == "iverilog did not finish elaborating in 5 s (an endless generate loop?)", error
    assert not _elaborating(tmp_path), "ivl left running after the timeout"


def test_endless_generate_loop_runs_out_of_memory_first(tmp_path, monkeypatch):
    """A generate loop that never advances (`gi = gi + 0`) grows Icarus's elaborator by hundreds of MB
    a second: the compile check caps its address space (COMPILE_MEMORY), so it fails there, long
    before the timeout or the kernel's OOM killer, and counts as a build failure."""
    rtl = tmp_path / "rtl"
    rtl.mkdir()
    (rtl / "stuck.v").write_text(
        "module stuck (input wire [3:0] a_i, output wire [3:0] y_o);\n"
        "  genvar gi;\n"
        "  generate\n"
        "    for (gi = 0; gi < 4; gi = gi + 0) begin : g_bit\n"
        "      assign y_o[gi] = ~a_i[gi];\n"
        "    end\n"
        "  endgenerate\n"
        "endmodule\n"
    )
    monkeypatch.setattr(mutate.runner, "COMPILE_MEMORY", 256 << 20)
    monkeypatch.setattr(mutate.runner, "COMPILE_TIMEOUT", 600)
    error = mutate.runner._compiles(tmp_path, "stuck", "icarus")
    assert error == "iverilog ran out of 256 MiB elaborating (an endless generate loop?)", error
    assert not _elaborating(tmp_path), "ivl left running"
    (rtl / "stuck.v").write_text((rtl / "stuck.v").read_text().replace("gi + 0", "gi + 1"))
    assert mutate.runner._compiles(tmp_path, "stuck", "icarus") is None  # the cap leaves a real build room


def _elaborating(tree) -> list[int]:
    """Pids of Icarus's ivl still elaborating something under ``tree`` (its -C file names the -y dir)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
            if not args[0].endswith(b"/ivl"):
                continue
            confs = [Path(a[2:].decode()) for a in args if a.startswith(b"-C")]
            if any(str(tree) in c.read_text(errors="replace") for c in confs if c.exists()):
                pids.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return pids


def test_cli_source_lists_a_part_of_the_block():
    res = CliRunner().invoke(main, ["mutate", "--block", "gemm", "--source", "gemm_pe.v", "--list"])
    assert res.exit_code == 0, res.output
    files = {line.split(":", 1)[0] for line in res.output.splitlines()}
    assert files == {"rtl/gemm_pe.v"}, files


@pytest.mark.parametrize(
    "args, message",
    [
        (["--block", "gelu", "--source", "gemm_pe.v"], "--source gemm_pe.v: block gelu is built from gelu.v"),
        (
            ["--block", "gemm", "--source", "../conftest.py"],
            "--source ../conftest.py: block gemm is built from gemm.v,",
        ),
        (["--block", "gemm", "--block", "requant", "--source", "round_sat.v"], "give exactly one --block"),
    ],
)
def test_cli_source_refusals(args, message):
    res = CliRunner().invoke(main, ["mutate", *args, "--list"])
    assert res.exit_code == 1 and message in res.output and "Traceback" not in res.output, res.output
    assert len(res.output.strip().splitlines()) == 1


def test_killer_named_from_the_failed_line():
    mu = mutate.mutants(SNIPPET, "rtl/m.v")[0]
    failed = "FAILED sim/test_requant.py::test_rounding_variant[icarus-gemmlowp] - AssertionError: requant"
    assert mutate.killer(mutate.Outcome(mu, "killed", failed)) == "test_rounding_variant[icarus-gemmlowp]"
    assert mutate.killer(mutate.Outcome(mu, "killed", "suite timed out after 120 s")) is None
    assert mutate.killer(mutate.Outcome(mu, "survived", "4 passed in 3.1s")) is None


def test_order_hook_puts_named_tests_first(monkeypatch):
    """A name with parameters picks that one test; a bare prefix every test of the function."""

    class Item:
        def __init__(self, name):
            self.name = name

    names = [
        "test_random[icarus-8]",
        "test_random[icarus-6]",
        "test_reset",
        "test_variant[icarus-a]",
        "test_variant[icarus-b]",
    ]
    items = [Item(n) for n in names]
    monkeypatch.setenv(mutate.ORDER_ENV, "test_variant[icarus-b],test_reset,test_random")
    mutate.order.pytest_collection_modifyitems(None, items)
    assert [i.name for i in items] == [
        "test_variant[icarus-b]",
        "test_reset",
        "test_random[icarus-8]",
        "test_random[icarus-6]",
        "test_variant[icarus-a]",
    ]


def test_suite_fingerprint_covers_the_verilog_wrapper(tmp_path):
    """A survivor runs again when the block's testbench wrapper changes, not only its test file."""
    (tmp_path / "sim").mkdir()
    (tmp_path / "sim" / "test_gemm.py").write_text("def test_x(): pass\n")
    (tmp_path / "sim" / "tb_gemm.v").write_text("module tb_gemm; endmodule\n")
    before = mutate.suite_fingerprint(tmp_path, "gemm")
    (tmp_path / "sim" / "tb_gemm.v").write_text("module tb_gemm; wire junk; endmodule\n")
    assert mutate.suite_fingerprint(tmp_path, "gemm") != before


def test_fingerprint_follows_code_not_comments(tmp_path):
    """Outcomes stay current across a comment edit that moves no line (a header reworded), and go
    stale with any code edit or a line added anywhere (mutant keys carry line numbers)."""
    (tmp_path / "rtl").mkdir()
    f = tmp_path / "rtl" / "b.v"
    base = (
        "// b: a block\nmodule b (input wire a_i, output wire y_o);  // ports\n"
        "  assign y_o = a_i; /* x\n y */\nendmodule\n"
    )
    f.write_text(base)
    fp = mutate.fingerprint(tmp_path, "b", "rtl/b.v")
    f.write_text(base.replace("a block", "a block, reworded at length").replace("x\n y", "z\n w"))
    assert mutate.fingerprint(tmp_path, "b", "rtl/b.v") == fp
    f.write_text(base + "\n")
    assert mutate.fingerprint(tmp_path, "b", "rtl/b.v") != fp
    f.write_text(base.replace("// b: a block\n", "// b: a block\n// more\n"))
    assert mutate.fingerprint(tmp_path, "b", "rtl/b.v") != fp
    f.write_text(base.replace("= a_i;", "= ~a_i;"))
    assert mutate.fingerprint(tmp_path, "b", "rtl/b.v") != fp
    f.write_text(base.replace("a_i; /*", 'a_i; initial $display("// one"); /*'))
    one = mutate.fingerprint(tmp_path, "b", "rtl/b.v")
    f.write_text(base.replace("a_i; /*", 'a_i; initial $display("// two"); /*'))
    assert mutate.fingerprint(tmp_path, "b", "rtl/b.v") != one  # a string is code, even with // in it


SINK = """module s (input wire [3:0] a_i, input wire [3:0] b_i, output wire [3:0] y_o);
  wire [3:0] used = a_i & b_i;
  assign y_o = used;
  // bits dropped on purpose
  wire unused_bits = ^{a_i[3:1],
                       b_i[3:1]};
endmodule
"""


def test_dead_sink_only_for_a_wire_nothing_reads():
    by_name: dict[str | None, int] = {}
    for m in mutate.mutants(SINK, "rtl/s.v"):
        name = mutate.dead_sink(SINK, m)
        by_name[name] = by_name.get(name, 0) + 1
        if m.line in (5, 6):  # both lines of the sink's expression
            assert name == "unused_bits", m
        else:
            assert name is None, m
    assert by_name.get("unused_bits", 0) >= 4 and by_name.get(None, 0) >= 1, by_name


def test_every_rtl_sink_is_read_nowhere():
    """The sinks the campaign counts as equivalent without a run: named unused_*, one occurrence each."""
    for path in sorted((ROOT / "rtl").glob("*.v")):
        text = path.read_text()
        for m in mutate.mutants(text, f"rtl/{path.name}"):
            name = mutate.dead_sink(text, m)
            if name is not None:
                assert name.startswith("unused"), (path.name, name)


def test_equivalent_file_has_no_entry_glued_to_another():
    """Each entry a mapping of its own keys: a duplicate key (an entry pasted onto the previous
    one's reason) would let the later one silently replace it."""

    class Strict(yaml.SafeLoader):
        pass

    def mapping(loader, node, deep=False):
        keys = [loader.construct_object(k, deep=deep) for k, _ in node.value]
        assert len(keys) == len(set(keys)), f"line {node.start_mark.line + 1}: duplicate keys {keys}"
        return yaml.SafeLoader.construct_mapping(loader, node, deep)

    Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    entries = yaml.load((ROOT / mutate.EQUIVALENT_FILE).read_text(), Loader=Strict)
    assert all(set(e) == {"file", "line", "before", "after", "reason"} for e in entries)


def test_first_tests_exist_in_their_suites():
    """Every test a block's mutants run first (its kind's mutate_first, the core's CORE_FIRST) is a
    test function of that block's suite: a renamed test would silently lose the cheap first run."""
    root = toolchain.repo().root
    first = mutate.FIRST
    assert mutate.CORE in first and "gemm" in first
    for block, names in first.items():
        files, _ = mutate.suite_of(block)
        text = "".join((root / f).read_text() for f in files)
        for name in names:
            assert f"def {name.split('[')[0]}(" in text, (block, name)


def test_core_mutants_run_the_slow_digits_image():
    """make test leaves the digits image on Icarus out (slow), a core mutant's suite keeps it; block
    suites leave slow tests out."""
    text = (toolchain.repo().root / mutate.CORE_SUITE).read_text()
    assert re.search(r"@pytest\.mark\.slow[^\n]*\ndef test_digits_icarus_one_image", text)
    assert "slow" not in mutate.markers_of(mutate.CORE)
    assert "not slow" in mutate.markers_of("gemm") and "not gpu" in mutate.markers_of(mutate.CORE)


def _campaign_tree(tmp_path: Path, monkeypatch) -> Path:
    """A repository of one block ``b`` (rtl/b.v, sim/test_b.py) for campaign runs with a stub runner."""
    (tmp_path / "rtl").mkdir()
    (tmp_path / "sim").mkdir()
    (tmp_path / "rtl" / "b.v").write_text(
        "module b (input wire [3:0] a_i, output wire [3:0] y_o);\n  assign y_o = a_i + 4'd1;\nendmodule\n"
    )
    (tmp_path / "sim" / "test_b.py").write_text("def test_b(): pass\n")
    (tmp_path / mutate.EQUIVALENT_FILE).write_text("[]\n")
    monkeypatch.setattr(toolchain, "repo", lambda: toolchain.Repo(tmp_path))
    monkeypatch.setattr(toolchain, "require", lambda tool: tool)
    return tmp_path


def test_campaign_resumes_and_skips_what_was_reviewed_meanwhile(tmp_path, monkeypatch):
    """The journal keeps each outcome: a second campaign runs nothing; a survivor runs again once the
    suite changes, a killed mutant does not; a mutant written up as equivalent while the campaign
    runs is not run when its turn comes, and the table counts it equivalent."""
    root = _campaign_tree(tmp_path, monkeypatch)
    every = mutate.mutants((root / "rtl" / "b.v").read_text(), "rtl/b.v")
    assert len(every) >= 3
    late = every[-1]
    calls: list[str] = []

    def fake_run_one(mutant, block, simulator, root_, timeout, first=(), sim_limit=300):
        if mutant is None:
            return mutate.Outcome(None, "survived", "baseline", 1.0)
        calls.append(mutant.key)
        if len(calls) == 1:  # someone reviews the last mutant while the first one runs
            entry = {"file": late.file, "line": late.line, "before": late.before, "after": late.after, "reason": "r"}
            (root / mutate.EQUIVALENT_FILE).write_text(yaml.safe_dump([entry]))
        status = "killed" if mutant.key == every[0].key else "survived"
        return mutate.Outcome(mutant, status, "FAILED sim/test_b.py::test_b" if status == "killed" else "1 passed", 1.0)

    monkeypatch.setattr(mutate.campaigns, "run_one", fake_run_one)
    journal = mutate.Journal(tmp_path / "journal.jsonl")
    rows = mutate.campaign([("b", "rtl/b.v")], journal, simulator="icarus", jobs=1)
    assert late.key not in calls and len(calls) == len(every) - 1
    (row,) = rows
    assert row.counts.get("equivalent") == 1 and row.counts.get("killed") == 1
    assert row.counts.get("survived") == len(every) - 2 and row.pending == 0

    calls.clear()
    again = mutate.campaign([("b", "rtl/b.v")], mutate.Journal(tmp_path / "journal.jsonl"), simulator="icarus")
    assert calls == [] and again[0].counts == row.counts  # resumed from the journal: nothing ran

    (root / "sim" / "test_b.py").write_text("def test_b(): assert True\n")  # the suite changed
    mutate.campaign([("b", "rtl/b.v")], mutate.Journal(tmp_path / "journal.jsonl"), simulator="icarus")
    assert sorted(calls) == sorted(m.key for m in every[1:-1])  # survivors again, not the killed one


def test_a_campaign_narrowed_to_lines_runs_only_those(tmp_path, monkeypatch):
    """--all --line: only the mutants of those lines run (two campaigns can share a long file), the
    table still counts every mutant, the rest pending."""
    root = _campaign_tree(tmp_path, monkeypatch)
    (root / "rtl" / "b.v").write_text(
        "module b (input wire [3:0] a_i, output wire [3:0] y_o, output wire [3:0] z_o);\n"
        "  assign y_o = a_i + 4'd1;\n  assign z_o = a_i - 4'd2;\nendmodule\n"
    )
    every = mutate.mutants((root / "rtl" / "b.v").read_text(), "rtl/b.v")
    lines = {m.line for m in every}
    assert len(lines) >= 2
    first = min(lines)
    calls = []

    def fake_run_one(mutant, block, simulator, root_, timeout, first_=(), sim_limit=300):
        calls.append(mutant)
        return mutate.Outcome(mutant, "survived" if mutant is None else "killed", "1 passed", 1.0)

    monkeypatch.setattr(mutate.campaigns, "run_one", fake_run_one)
    book = mutate.Journal(tmp_path / "journal.jsonl")
    rows = mutate.campaign([("b", "rtl/b.v")], book, simulator="icarus", lines={first})
    ran = [m for m in calls if m is not None]
    assert ran and {m.line for m in ran} == {first}
    assert rows[0].total == len(every) and rows[0].pending == len(every) - len(ran)


def test_an_edited_suite_is_checked_on_the_unmutated_rtl_again(tmp_path, monkeypatch):
    """The unmutated suite runs once per (block, RTL, suite): after a test is added or edited it runs
    again before any mutant, so a suite that fails on the unmutated RTL stops the campaign instead of
    "killing" every mutant, and the time limit follows the suite's new length."""
    root = _campaign_tree(tmp_path, monkeypatch)
    baselines: list[int] = []
    broken = {"now": False}

    def fake_run_one(mutant, block, simulator, root_, timeout, first=(), sim_limit=300):
        if mutant is None:
            baselines.append(1)
            status = "killed" if broken["now"] else "survived"
            return mutate.Outcome(None, status, "FAILED sim/test_b.py::test_b" if broken["now"] else "1 passed", 1.0)
        return mutate.Outcome(mutant, "survived", "1 passed", 1.0)

    monkeypatch.setattr(mutate.campaigns, "run_one", fake_run_one)
    mutate.campaign([("b", "rtl/b.v")], mutate.Journal(tmp_path / "journal.jsonl"), simulator="icarus")
    assert baselines == [1]
    mutate.campaign([("b", "rtl/b.v")], mutate.Journal(tmp_path / "journal.jsonl"), simulator="icarus")
    assert baselines == [1]  # nothing to run: no baseline either
    (root / "sim" / "test_b.py").write_text("def test_b(): assert False\n")  # the suite changed (and broke)
    broken["now"] = True
    with pytest.raises(RuntimeError, match="fails for b on the unmutated RTL"):
        mutate.campaign([("b", "rtl/b.v")], mutate.Journal(tmp_path / "journal.jsonl"), simulator="icarus")
    assert baselines == [1, 1]


def test_a_killed_mutant_listed_equivalent_is_named(tmp_path, monkeypatch):
    """A mutant the journal has killed but the reviewed list calls equivalent is a reviewing error:
    the table would count it equivalent, so the campaign names it and exits 1."""
    root = _campaign_tree(tmp_path, monkeypatch)
    every = mutate.mutants((root / "rtl" / "b.v").read_text(), "rtl/b.v")

    def fake_run_one(mutant, block, simulator, root_, timeout, first=(), sim_limit=300):
        return mutate.Outcome(mutant, "survived" if mutant is None else "killed", "FAILED sim/test_b.py::test_b", 1.0)

    monkeypatch.setattr(mutate.campaigns, "run_one", fake_run_one)
    journal = mutate.Journal(tmp_path / "journal.jsonl")
    mutate.campaign([("b", "rtl/b.v")], journal, simulator="icarus")
    assert mutate.killed_yet_equivalent([("b", "rtl/b.v")], journal) == []
    m = every[0]
    entry = {"file": m.file, "line": m.line, "before": m.before, "after": m.after, "reason": "wrong"}
    (root / mutate.EQUIVALENT_FILE).write_text(yaml.safe_dump([entry]))
    (bad,) = mutate.killed_yet_equivalent([("b", "rtl/b.v")], journal)
    assert bad["key"] == m.key
    monkeypatch.setattr(mutate, "targets", lambda include_core=True: [("b", "rtl/b.v")])
    res = CliRunner().invoke(
        main, ["mutate", "--all", "--block", "b", "--table", "--journal", str(tmp_path / "journal.jsonl")]
    )
    assert res.exit_code == 1 and f"KILLED BUT LISTED EQUIVALENT b rtl/b.v:{m.line}" in res.output, res.output


def test_the_table_names_the_machine_and_simulator_of_its_outcomes(tmp_path, monkeypatch):
    """`hwvit mutate --table` (no --all needed) prints the journal's table; each row names the machine
    and simulator its outcomes ran on, a row of nothing run names none."""
    _campaign_tree(tmp_path, monkeypatch)
    (tmp_path / "sim" / "test_c.py").write_text("def test_c(): pass\n")
    (tmp_path / "rtl" / "c.v").write_text(
        "module c (input wire a_i, output wire y_o);\n  assign y_o = !a_i;\nendmodule\n"
    )

    def fake_run_one(mutant, block, simulator, root_, timeout, first=(), sim_limit=300):
        return mutate.Outcome(mutant, "survived" if mutant is None else "killed", "FAILED sim/test_b.py::test_b", 1.0)

    monkeypatch.setattr(mutate.campaigns, "run_one", fake_run_one)
    monkeypatch.setattr(mutate.journal, "machine", lambda: "CPU X (family 6 model 1), 2 cores, flags avx2")
    journal = tmp_path / "journal.jsonl"
    mutate.campaign([("b", "rtl/b.v")], mutate.Journal(journal), simulator="icarus")
    monkeypatch.setattr(mutate, "targets", lambda include_core=True: [("b", "rtl/b.v"), ("c", "rtl/c.v")])
    res = CliRunner().invoke(main, ["mutate", "--table", "--journal", str(journal)])
    assert res.exit_code == 0, res.output
    head, _, b_row, c_row = res.output.strip().splitlines()[-4:]
    assert head.endswith("| measured on |")
    assert b_row.startswith("| b | rtl/b.v |") and b_row.endswith(
        "| CPU X (family 6 model 1), 2 cores, flags avx2; icarus |"
    )
    assert c_row.startswith("| c | rtl/c.v |") and c_row.endswith("| n/a | 0.0 min |  |")


def test_wall_limit_kills_a_simulator_spinning_at_one_instant():
    """A mutant's simulator that never returns (a combinational loop spins Icarus at one simulated
    time, where no testbench time limit fires) is killed at the wall-clock limit hwvit mutate sets,
    and only then: a process that ends in time runs to its end."""
    import subprocess
    import time

    from hwvit.simulate.launch import wall_limit

    t0 = time.monotonic()
    with wall_limit(1.0) as fired:
        rc = subprocess.run(["sleep", "60"], check=False).returncode
    assert fired.is_set() and rc == -9 and time.monotonic() - t0 < 30
    with wall_limit(30.0) as fired:
        rc = subprocess.run(["sleep", "0.1"], check=False).returncode
    assert rc == 0 and not fired.is_set()
    with wall_limit(0) as fired:  # no limit
        rc = subprocess.run(["sleep", "1.5"], check=False).returncode
    assert rc == 0 and not fired.is_set()


def test_mutant_suites_run_under_the_wall_limit(monkeypatch, tmp_path):
    """run_one hands a mutant's suite the wall-clock limit it is given (not the core's: its digits
    image is one long simulation, bounded by the suite's timeout alone), and the unmutated baseline
    none but pytest's --durations, whose longest test sets the limit: 4x it, at least a minute, 300 s
    where no baseline measured it."""
    import subprocess

    from hwvit.mutate import runner
    from hwvit.simulate.launch import WALL_LIMIT_ENV

    seen = {}
    durations = "..\n===== slowest 1 durations =====\n41.50s call     sim/test_softmax.py::test_x[icarus]\n2 passed\n"

    def fake_run(cmd, timeout, cwd, env):
        seen["env"], seen["cmd"] = env, cmd
        return subprocess.CompletedProcess(cmd, 0, stdout=durations, stderr="")

    monkeypatch.setattr(runner, "_compiles", lambda *a: None)
    monkeypatch.setattr(runner.toolchain, "run_tool", fake_run)
    base = runner.run_one(None, "softmax", "icarus", ROOT, 100)
    assert WALL_LIMIT_ENV not in seen["env"] and "--durations=1" in seen["cmd"] and base.longest == 41.5
    assert runner.sim_wall_limit(base.longest) == 166
    assert runner.sim_wall_limit(3.0) == runner.SIM_WALL_MIN and runner.sim_wall_limit(None) == 300
    mu = mutate.mutants((ROOT / "rtl/softmax.v").read_text(), "rtl/softmax.v")[0]
    monkeypatch.setattr(runner, "dead_sink", lambda *a: None)
    runner.run_one(mu, "softmax", "icarus", ROOT, 100, (), 166)
    assert seen["env"][WALL_LIMIT_ENV] == "166" and "--durations=1" not in seen["cmd"]
    runner.run_one(mu, "vit_core", "icarus", ROOT, 100, (), 166)
    assert WALL_LIMIT_ENV not in seen["env"]


def test_the_journal_keeps_the_baselines_longest_test(tmp_path):
    """A campaign resumed from its journal limits each simulation by the baseline it recorded."""
    from hwvit.mutate.journal import Journal

    j = Journal(tmp_path / "j.jsonl")
    j.record_baseline("softmax", "fp", 320.0, "suite", 41.5)
    j.record_baseline("gelu", "fp", 20.0, "suite")
    again = Journal(tmp_path / "j.jsonl")
    assert again.longest == {("softmax", "fp", "suite"): 41.5}
    assert again.baselines[("gelu", "fp", "suite")] == 20.0


# Tests of sim/test_variants*.py that build a kind's sets but stay out of its campaign on purpose.
OUTSIDE_CAMPAIGN = {
    # the authors' data lives in tests/authors/, which a mutant's copy of the tree leaves out
    "test_released_intgelu_outputs_bit_exact": "gelu_shiftgelu",
}


def test_every_variant_test_runs_in_its_kinds_campaign():
    """A variant kind's mutants run the tests of sim/test_variants*.py whose name or parameters name
    the kind (``-k <kind>``): a test that builds a kind's sets (names the kind in its body) under a
    name without it never runs in that kind's campaign, nor in the row engine's, and the mutants
    only it kills survive (softmax_log2_exact's threshold rows did)."""
    import ast
    import subprocess
    import sys

    from hwvit import blocks

    root = toolchain.repo().root
    kinds = {k for k, s in blocks.kinds().items() if s.variant and s.rtl}
    files = sorted(str(p.relative_to(root)) for p in (root / "sim").glob("test_variants*.py"))
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", "", *files],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    items: dict[str, list[str]] = {}
    for line in out.splitlines():
        if "::" in line:
            name = line.split("::", 1)[1]
            items.setdefault(name.split("[")[0], []).append(name)
    checked = 0
    for f in files:
        tree = ast.parse((root / f).read_text())
        consts = {
            t.id: node.value.value
            for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            for t in node.targets
            if isinstance(t, ast.Name)
        }
        for node in tree.body:
            if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
                continue
            named = {
                value
                for stmt in node.body  # not its decorators (a parametrize leaving a kind out names it)
                for n in ast.walk(stmt)
                for value in [n.value if isinstance(n, ast.Constant) else consts.get(getattr(n, "id", ""))]
                if isinstance(value, str) and value in kinds
            }
            for kind in named - {OUTSIDE_CAMPAIGN.get(node.name)}:
                ids = items.get(node.name, [])
                assert ids and any(kind in i for i in ids), (f, node.name, kind, ids[:3])
                checked += 1
    assert checked >= 10
