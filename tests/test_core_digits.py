"""The digits ViT through the RTL core (rtl/vit_core.v): every logit equal to the integer model's.

Verilator: 10 held-out images on 8 x 8, the core's counters and per-instruction cycles equal to the
cycle model; Icarus: a one-layer random model on 4 x 4 (seconds), and one digits image on 4 x 4
(half a minute: `make test-slow`, and every core mutant of `hwvit mutate`); a corrupted weight is
found at the instruction that uses it (digits on Verilator, the tiny model on Icarus); an undefined
op halts the run; a loop count's bit 31 counts. Expected logits come from the integer model (hwvit.intvit),
never from the code under test.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from core_models import TINY, tiny_source

from hwvit import pipeline, toolchain
from hwvit.cli import main
from hwvit.core import cycles, isa
from hwvit.core import run as crun
from hwvit.core.coredir import read_core_dir
from hwvit.ops.reference import residual_add_ref

pytestmark = pytest.mark.xdist_group("vit_core")


@pytest.fixture(scope="session")  # session: kept when xdist runs other modules between its tests
def digits(tmp_path_factory):
    """(int model, compiled dir, held-out inputs quantized, labels), compiled by `hwvit compile`."""
    from hwvit.cli.loading import build_models
    from hwvit.quant import QuantConfig

    out = tmp_path_factory.mktemp("core") / "digits"
    res = CliRunner().invoke(main, ["compile", "--model", "digits", "--out", str(out)])
    assert res.exit_code == 0, res.output
    source, _, model = build_models({"preset": "digits"}, QuantConfig(), 256, 0)
    x, labels = pipeline.eval_inputs(source, 10)
    return model, read_core_dir(out), model.quantize_input(x.numpy()), labels


def test_compile_is_deterministic(digits, tmp_path):
    """A second compile (library path, same model spec) is byte-identical to `hwvit compile`'s."""
    from hwvit.core.compile import compile_model
    from hwvit.core.coredir import write_core_dir
    from hwvit.quant import QuantConfig

    model, core, _, _ = digits
    spec = {
        "preset": "digits",
        "checkpoint": None,
        "family": None,
        "config": None,
        "heads": None,
        "quant": QuantConfig().to_dict(),  # a block's arithmetic only where it is not hwvit's
        "calib_images": 256,
        "seed": 0,
    }
    write_core_dir(compile_model(model), tmp_path / "again", spec)
    names = sorted(p.name for p in core.path.iterdir())
    assert names == sorted(p.name for p in (tmp_path / "again").iterdir())
    for name in names:
        assert (tmp_path / "again" / name).read_bytes() == (core.path / name).read_bytes(), name


def _check_cycles(run: crun.CoreRun, core) -> None:
    assert set(run.after_reset) >= {"busy", "done", "pc", "total", "gemm_beats"} and run.reset_wrong == {}
    want = cycles.program_cycles(core.program, run.rows, run.cols)
    for c in run.cycles:
        assert {k: c[k] for k in want} == want
        assert c["pc"] == len(core.program) - 1  # halted at END, held there after the run
    per_instr = [cycles.instr_cycles(ins, run.rows, run.cols) for ins in core.program[:-1]]
    assert run.perf == per_instr


def test_digits_verilator_ten_images_bit_exact(digits):
    model, core, xq, labels = digits
    toolchain.require("verilator")
    run = crun.run_images(core, model, xq, "verilator", 8, 8, host_load=True)  # memories via the host port
    assert run.got.shape == (10, 10)
    np.testing.assert_array_equal(run.got, run.expected)
    assert (run.got.argmax(1) == run.expected.argmax(1)).all()
    assert (run.expected.argmax(1) == labels).mean() >= 0.8  # the model classifies, not a constant
    _check_cycles(run, core)


@pytest.mark.slow  # 33 s of make test's budget: the tiny model below shows Icarus on 4 x 4 there
def test_digits_icarus_one_image_bit_exact_on_4x4(digits):
    model, core, xq, _ = digits
    toolchain.require("icarus")
    run = crun.run_images(core, model, xq[:1], "icarus", 4, 4, host_load=True)  # a second array size
    np.testing.assert_array_equal(run.got, run.expected)
    _check_cycles(run, core)


def _tiny_dir(out: Path, biases: bool):
    """(int model, compiled dir, one quantized input) of the seeded one-layer ViT TINY
    (tests/core_models.py), its biases drawn or not. Without, the directory's model spec is what
    `hwvit core run` rebuilds. The scratchpad's regions start at act_base = the power of two at or
    above the layout's size, so every region lies in the scratchpad's upper half: every act address
    has its top bit set (from 0, the top bit was 0 in every operand a GEMM read)."""
    from hwvit.cli.core import _spec
    from hwvit.core.compile import compile_model
    from hwvit.core.coredir import write_core_dir
    from hwvit.quant import QuantConfig, quantize_model

    source, data = tiny_source(biases)
    model = quantize_model(source.model, data.calib, QuantConfig())
    x, _ = pipeline.eval_inputs(source, 1)
    size = max(b + n for b, n in compile_model(model, images=False).regions.values())
    compiled = compile_model(model, act_base=1 << (size - 1).bit_length())
    depth = compiled.sizes["ACT_DEPTH"]
    assert depth & (depth - 1) == 0 and min(b for b, _ in compiled.regions.values()) >= depth // 2, compiled.sizes
    write_core_dir(compiled, out, _spec("digits", None, None, TINY, None, QuantConfig(), 64, 0))
    return model, read_core_dir(out), model.quantize_input(x.numpy())


@pytest.fixture(scope="session")  # session: kept when xdist runs other modules between its tests
def tiny(tmp_path_factory):
    """TINY with drawn biases (_tiny_dir): its GEMMs add biases of both signs."""
    return _tiny_dir(tmp_path_factory.mktemp("core") / "tiny", biases=True)


def _altered(core, dest, key: str, edit) -> object:
    """A copy of compiled dir ``core`` at ``dest`` whose ``key`` image (wgt, prog, ...) has its lines
    passed through ``edit`` (a list of hex lines, changed in place), its sha256 in the manifest renewed."""
    shutil.copytree(core.path, dest)
    name = core.manifest["files"][key]["path"]
    lines = (dest / name).read_text().splitlines()
    edit(lines)
    text = "\n".join(lines) + "\n"
    (dest / name).write_text(text)
    manifest = yaml.safe_load((dest / "manifest.yaml").read_text())
    manifest["files"][key]["sha256"] = hashlib.sha256(text.encode()).hexdigest()
    (dest / "manifest.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return read_core_dir(dest)


def _with_instr(core, dest, j: int, **changes) -> object:
    """A copy of compiled dir ``core`` at ``dest`` whose instruction ``j`` has ``changes`` (Instr
    fields), encoded as the compiler encodes it (isa.Instr.word)."""

    def edit(lines):
        lines[j] = f"{dataclasses.replace(core.program[j], **changes).word():0{isa.WORD_BITS // 4}x}"

    return _altered(core, dest, "prog", edit)


def test_tiny_model_with_attention_wider_than_dim_icarus_bit_exact(tiny):
    """A seeded random one-layer ViT whose attention is wider than its tokens (heads x head_dim = 32,
    dim = 16), compiled and run on Icarus (4 x 4): every logit equal to the integer model's. The
    compiler once laid q, k, v out 3 x dim wide, so the qkv GEMM's rows overwrote each other (191
    of its outputs wrong). Seconds, not the digits image's half minute: a core mutant runs it first."""
    from hwvit.core.compile import compile_model
    from hwvit.core.shapes import shape_model

    toolchain.require("icarus")
    model, core, xq = tiny
    assert (model.config.dim, model.config.inner_dim) == (16, 32)
    run = crun.run_images(core, model, xq, "icarus", 4, 4)
    assert len(set(run.expected[0].tolist())) > 5  # logits that tell classes apart, not a constant
    bias = [int(word, 16) >> 40 for word in core.file("prm").read_text().split()]  # GEMM words: bias[31:0] on top
    assert sum(b >= 1 << 31 for b in bias) > 20 and sum(0 < b < 1 << 31 for b in bias) > 20
    np.testing.assert_array_equal(run.got, run.expected)
    _check_cycles(run, core)
    # one layer: the logits read only the cls row, so every instruction's output is compared too
    stepped = crun.find_mismatch(core, model, xq[0], "icarus", 4, 4)
    assert stepped is not None and stepped["instruction"] is None, stepped
    stand_in = compile_model(shape_model(model.config), images=False, act_base=core.sizes["IN_BASE"]).program
    assert [(i.op, i.unit, i.n, i.a, i.b, i.d) for i in stand_in] == [
        (i.op, i.unit, i.n, i.a, i.b, i.d) for i in core.program
    ]


def test_tiny_model_loaded_through_the_host_port_icarus_bit_exact(tiny):
    """The program, weights, parameters and constants written through the core's host port (select
    1 wgt, 2 prm, 3 prog, 0 act, every word), as a host processor loads them, over memories whose
    $readmemh images hold every bit inverted; between writes the bus carries junk (select, address,
    data) with write enable low. Every logit equal to the integer model's. The other runs load the
    memories by $readmemh and write only the input image, so a core that swapped two selects, or
    wrote act without host_we_i, passed them. Two images, the second started without a reset: its
    counters too are the cycle model's (start_i clears them)."""
    toolchain.require("icarus")
    model, core, xq = tiny
    run = crun.run_images(core, model, np.concatenate([xq, xq[..., ::-1]]), "icarus", 4, 4, host_load=True)
    assert len(run.cycles) == 2 and not np.array_equal(run.expected[0], run.expected[1])
    for key, name in crun.LINKS.items():
        right = (run.run_dir / crun.HOST_LINKS[key]).read_text().split()
        wrong = (run.run_dir / name).read_text().split()
        assert len(wrong) == len(right) and all(int(a, 16) & int(b, 16) == 0 for a, b in zip(right, wrong)), key
        assert all(int(a, 16) | int(b, 16) == (1 << 4 * len(a)) - 1 for a, b in zip(right, wrong)), key
    np.testing.assert_array_equal(run.got, run.expected)
    _check_cycles(run, core)


def test_core_run_host_load_cli_icarus(tmp_path):
    """`hwvit core run --host-load` on Icarus: the image matches through the host-port load."""
    toolchain.require("icarus")
    _, core, _ = _tiny_dir(tmp_path / "tiny", biases=False)  # the model its spec rebuilds
    args = ["core", "run", str(core.path), "--images", "1", "--simulator", "icarus", "--rows", "4", "--cols", "4"]
    res = CliRunner().invoke(main, [*args, "--host-load"])
    assert res.exit_code == 0, res.output
    assert "1/1 images matched: every output bit-exact (icarus, 4x4)" in res.output


def test_counters_carry_into_their_top_bits_icarus(tiny):
    """The cycle counters (40 bit) and the per-instruction cycle count (32 bit) are started, just
    after start clears them, from all ones below their top bit (cocotb writes the registers): the
    first count carries through every bit, and each reported count is the cycle model's plus that
    offset. No run lasts 2^39 cycles, so without this a counter one bit narrower passed."""
    toolchain.require("icarus")
    model, core, xq = tiny
    run = crun.run_images(core, model, xq, "icarus", 4, 4, poke=crun.COUNTER_POKE)
    np.testing.assert_array_equal(run.got, run.expected)
    want = cycles.program_cycles(core.program, 4, 4)
    for name in ("total", "ctrl", "gemm", "row", "elem", "load"):
        offset, width = crun.COUNTER_POKE[f"c_{'tot' if name == 'total' else name}_q"]
        assert want[name] > 0 and run.cycles[0][name] == (want[name] + offset) % (1 << width), name
    per_instr = [cycles.instr_cycles(ins, 4, 4) for ins in core.program[:-1]]
    offset, width = crun.COUNTER_POKE["icyc_q"]
    assert run.perf == [(per_instr[0] + offset) % (1 << width), *per_instr[1:]]


def test_sizes_as_tight_as_the_program_icarus(tiny, tmp_path):
    """The core built with MAX_M, MAX_K, MAX_N, MAX_ROW and MAX_C equal to the program's largest
    GEMM dimensions, softmax row and LayerNorm row (the compiler rounds each up to the next power
    of two above it, so their top bits were never 1): every logit equal to the integer model's.
    This fills the LayerNorm table (a 17th gamma/beta write, one LOAD cycle too many, wraps onto
    channel 0) and sets the top bit of every count the engines read (a count read one bit short
    passes with the compiler's headroom)."""
    from hwvit.core.compile import compile_model
    from hwvit.core.coredir import write_core_dir

    toolchain.require("icarus")
    model, core, xq = tiny
    compiled = compile_model(model, act_base=core.sizes["IN_BASE"])
    gemms = [i for i in compiled.program if i.op == isa.OP_GEMM]
    rows = {
        u: max(i.n[0] for i in compiled.program if i.op == isa.OP_STREAM and i.unit == u)
        for u in (isa.U_SOFTMAX, isa.U_LAYERNORM)
    }
    tight = {
        "MAX_M": max(i.n[0] for i in gemms),
        "MAX_K": max(i.n[1] for i in gemms),
        "MAX_N": max(i.n[2] for i in gemms),
        "MAX_ROW": rows[isa.U_SOFTMAX],
        "MAX_C": rows[isa.U_LAYERNORM],
    }
    assert tight["MAX_C"] == model.config.dim == 16 and tight["MAX_ROW"] == 5, tight
    assert all(compiled.sizes[k] > v for k, v in tight.items()), (compiled.sizes, tight)
    compiled.sizes.update(tight)
    write_core_dir(compiled, tmp_path / "tight", core.manifest["model"])
    run = crun.run_images(read_core_dir(tmp_path / "tight"), model, xq, "icarus", 4, 4)
    np.testing.assert_array_equal(run.got, run.expected)
    _check_cycles(run, core)


def test_gemm_count_bits_past_n_bits_are_unread_icarus(tiny, tmp_path):
    """A GEMM reads its N from N_BITS = clog2(MAX_N + 1) bits, the write mask too: the first Q.K^T
    (N = 5 tokens, not a multiple of the 4 columns) with bit N_BITS of its N set runs as N = 5 and
    its scores region ends as the unaltered program's (the logits read only the cls row). A mask
    that read the set bit wrote the last tile's three columns past N over the next rows' first
    scores."""
    toolchain.require("icarus")
    model, core, xq = tiny
    j = next(i for i, ins in enumerate(core.program) if ins.op == isa.OP_GEMM and ins.n[2] % 4)
    n_bits = crun.hdl_parameters(core, 4, 4)["MAX_N"].bit_length()  # clog2(MAX_N + 1)
    n = list(core.program[j].n)
    assert n[2] == 5 and n[2] < 1 << n_bits
    n[2] |= 1 << n_bits
    wide = _with_instr(core, tmp_path / "wide", j, n=tuple(n))
    base, size = core.region("scores")
    scores = []
    for c, tag in ((core, "scores"), (wide, "scores-wide")):
        job = crun._job(core, xq, "run", crun.cycle_limit(core, 4, 4))
        job["out"] = [base, size]
        result, _ = crun._simulate(c, "icarus", 4, 4, job, None, tag)
        scores.append(result["images"][0]["logits"])
    assert scores[0] == scores[1] and len(set(scores[0])) > 10


def test_undefined_op_halts_like_end_icarus(tiny, tmp_path):
    """An instruction whose op is none of END, GEMM, STREAM, LOAD halts the core there, as END does
    (rtl/vit_core.v ST_ISSUE): with the first GEMM's op byte 0x81 (GEMM with bit 7 set) the run's
    counters are the cycle model's for the program cut at that GEMM and ended, and the instructions
    before it took their modelled cycles. A decoder that read fewer op bits would run the GEMM."""
    toolchain.require("icarus")
    model, core, xq = tiny
    k = next(i for i, ins in enumerate(core.program) if ins.op == isa.OP_GEMM)

    bad = _with_instr(core, tmp_path / "bad", k, op=isa.OP_GEMM | 0x80)
    job = crun._job(core, xq, "run", crun.cycle_limit(core, 4, 4))
    job["prog_len"] = k + 1  # the per-instruction cycles are written up to the halt
    result, _ = crun._simulate(bad, "icarus", 4, 4, job, None, "halt")
    (image,) = result["images"]
    cut = core.program[:k] + [core.program[-1]]  # ... then END
    assert cut[-1].op == isa.OP_END
    assert {n: image["cycles"][n] for n in ("total", "ctrl", "gemm", "row", "elem", "load")} == (
        cycles.program_cycles(cut, 4, 4)
    )
    assert image["perf"] == [cycles.instr_cycles(ins, 4, 4) for ins in core.program[:k]]


# the STREAM cases under -m slow (and in the core's mutation suite): the bit-31 test below, cut at
# 600 cycles, also finds the core still busy and checks its bytes
@pytest.mark.parametrize(
    ("op", "field"), [*(pytest.param("stream", f, marks=pytest.mark.slow) for f in (1, 2, 3, 4)), ("load", 1)]
)
def test_loop_count_with_bit_31_runs_on_icarus(op, field, tiny, tmp_path):
    """Loop counts are 32-bit: a STREAM whose count n0, n1, n2 or n3 (f1-f4) or a LOAD whose word
    count n0 (f1) has bit 31 set runs 2^31 more loops, so the core is still busy long after the
    program's modelled cycles (the harness times out), where a count read from 31 bits would finish
    on time."""
    toolchain.require("icarus")
    model, core, xq = tiny
    code = {"stream": isa.OP_STREAM, "load": isa.OP_LOAD}[op]
    j = next(i for i, ins in enumerate(core.program) if ins.op == code)

    n = list(core.program[j].n)
    n[field - 1] |= 1 << 31
    bad = _with_instr(core, tmp_path / "bad", j, n=tuple(n))
    assert bad.program[j].n[field - 1] >= 1 << 31
    job = crun._job(core, xq, "run", cycles.program_cycles(core.program, 4, 4)["total"] + 2000)
    with pytest.raises(RuntimeError, match="wrote no result") as err:
        crun._simulate(bad, "icarus", 4, 4, job, None, f"huge-{op}-{field}")  # own run dir per case (xdist)
    log = Path(str(err.value).split("see ", 1)[1].strip())
    assert "timeout: program not done" in log.read_text()


def _run_alone(core, xq, ins, tmp_path: Path, tag: str, out: list[int], **job) -> dict:
    """Instruction ``ins`` (or a list of them) then END as a program of its own in ``core``'s
    memories, run on Icarus (4 x 4) with image ``xq``: the harness result of the image, ``out``
    ([base, length]) dumped."""
    prog = [*(ins if isinstance(ins, list) else [ins]), isa.end()]

    def edit(lines):
        lines[: len(prog)] = [f"{i.word():0{isa.WORD_BITS // 4}x}" for i in prog]

    alone = _altered(core, tmp_path / tag, "prog", edit)
    spec = crun._job(core, xq, "run", 20_000) | {"out": out, "prog_len": len(prog), **job}
    result, _ = crun._simulate(alone, "icarus", 4, 4, spec, None, tag)
    (image,) = result["images"]
    return image


def _with_prm_words(core, dest: Path, base: int, words) -> object:
    """A copy of ``core`` at ``dest`` whose parameter words from ``base`` on are ``words``."""

    def edit(lines):
        lines[base : base + len(words)] = [f"{int(v):0{len(lines[0])}x}" for v in words]

    return _altered(core, dest, "prm", edit)


def _row_stream(core, unit: int, c: int, rows: int, **fields) -> isa.Instr:
    """A STREAM of ``unit`` over ``rows`` rows of ``c`` bytes from IN_BASE to address 0 (below the
    tiny layout: the host's words)."""
    gen = (1, c, 0, 0)
    return isa.Instr(
        op=isa.OP_STREAM,
        unit=unit,
        n=(c, rows, 1, 1),
        a=isa.Gen(core.sizes["IN_BASE"], gen),
        d=isa.Gen(0, gen),
        **fields,
    )


def _act_after_load(core, xq) -> np.ndarray:
    """The scratchpad when a program starts: act.hex with the image the testbench writes at IN_BASE."""
    act = np.array([int(v, 16) for v in core.file("act").read_text().split()], dtype=np.int64)
    act[core.sizes["IN_BASE"] : core.sizes["IN_BASE"] + core.sizes["IN_LEN"]] = xq.reshape(-1) & 0xFF
    return act


def _first_addresses(n, gen: isa.Gen, count: int) -> np.ndarray:
    """The first ``count`` addresses (modulo 2^32) of a generator over loop counts ``n`` of any size,
    starting over after the last element: isa.gen_addresses over each count capped at ``count``
    (a level of more than ``count`` loops never wraps within them)."""
    every = isa.gen_addresses(tuple(min(c, count) for c in n), gen).reshape(-1)
    return every[np.arange(count) % every.size] & isa.MASK32


def _added(a, b) -> np.ndarray:
    """Bytes of ops residual_add_ref (M_a 3, M_b 5, shift 2, the bit-31 and four-level streams')
    of the scratchpad bytes ``a`` and ``b`` read as int8."""
    return np.array(residual_add_ref(*(list((v ^ 128) - 128) for v in (a, b)), 3, 5, 2)) & 0xFF


@pytest.mark.parametrize("unit", ["copy", "add"])
@pytest.mark.parametrize("field", [1, 2, 3, 4])
def test_stream_count_with_bit_31_on_icarus(field, unit, tiny, tmp_path):
    """A STREAM copy or residual add whose count n0, n1, n2 or n3 (the others 3) has bit 31 set
    never ends, so the timeout test above cannot tell its engines apart. Cut after 600 cycles
    (harness ``stop_after``), the core is busy and its first 200 output bytes (d = element index)
    are the copy / ops residual_add_ref of the bytes at the a (and b) generators' first 200
    addresses, counted with bit 31. A read-side generator (a or b) that took the count from 31 bits
    moves to the next level (at n3: stops) after 3 loops at that level: the bytes it would give are
    computed here and differ; a write side that did ends the instruction after 81 elements."""
    toolchain.require("icarus")
    model, core, xq = tiny
    base = core.sizes["IN_BASE"]
    n = [3, 3, 3, 3]
    n[field - 1] |= 1 << 31
    src = isa.Gen(base + 40, (1, 4, 13, -11 & isa.MASK32))
    src_b = isa.Gen(base + 61, (-1 & isa.MASK32, 7, -5 & isa.MASK32, 19)) if unit == "add" else isa.Gen()
    dst = isa.Gen(0, (1, 3, 9, 27))  # below IN_BASE: the 0s the tiny layout leaves to the host
    op = {"copy": isa.U_COPY, "add": isa.U_ADD}[unit]
    ins = isa.Instr(op=isa.OP_STREAM, unit=op, n=tuple(n), a=src, b=src_b, d=dst, mult_a=3, mult_b=5, shift=2)
    image = _run_alone(core, xq, ins, tmp_path, f"huge-{unit}-{field}", [0, 200], stop_after=600)

    act = _act_after_load(core, xq)
    assert not act[:base].any()
    assert (_first_addresses(n, dst, 200) == np.arange(200)).all()
    short = list(n)
    short[field - 1] = 3  # the count read from 31 bits: 3 loops at that level

    def out(a_counts, b_counts) -> np.ndarray:
        a = act[_first_addresses(a_counts, src, 200)]
        if unit == "copy":
            return a
        return _added(a, act[_first_addresses(b_counts, src_b, 200)])

    want = out(n, n)
    for wrong in (out(short, n), out(n, short)) if unit == "add" else (out(short, n),):
        if field == 4:  # the short side ends after 81 elements, the write side waits
            wrong = np.r_[want[:81], np.zeros(119, np.int64)]
        assert (want != wrong).sum() > 10
    assert image["busy_at_stop"] == 1
    np.testing.assert_array_equal(np.asarray(image["logits"]), want)


def test_load_of_2_to_the_15_plus_1_words_ends_icarus(tiny, tmp_path):
    """A LOAD's table address is 16 bits: the first LOAD with n0 = 2^15 + 1 words (the next
    instruction's op made undefined, so the core halts after it) ends in its modelled cycles, and
    the counters are the cycle model's for the program cut there. An address kept in 15 bits wraps
    before it reaches n0 - 1 and the LOAD never ends."""
    toolchain.require("icarus")
    model, core, xq = tiny
    j = next(i for i, ins in enumerate(core.program) if ins.op == isa.OP_LOAD)
    n = list(core.program[j].n)
    n[0] = (1 << 15) + 1
    long_load = _with_instr(core, tmp_path / "load", j, n=tuple(n))
    bad = _with_instr(long_load, tmp_path / "halt", j + 1, op=isa.OP_GEMM | 0x80)
    job = crun._job(core, xq, "run", cycles.program_cycles(core.program, 4, 4)["total"] + (1 << 17))
    job["prog_len"] = j + 2  # the per-instruction cycles are written up to the halt
    result, _ = crun._simulate(bad, "icarus", 4, 4, job, None, "long-load")
    (image,) = result["images"]
    cut = bad.program[: j + 1] + [core.program[-1]]
    assert cut[-1].op == isa.OP_END and cycles.instr_cycles(bad.program[j], 4, 4) > 1 << 15
    assert {k: image["cycles"][k] for k in ("total", "ctrl", "gemm", "row", "elem", "load")} == (
        cycles.program_cycles(cut, 4, 4)
    )
    assert image["perf"] == [cycles.instr_cycles(ins, 4, 4) for ins in bad.program[: j + 1]]


def test_gelu_stream_ignores_its_parameter_base_icarus(tiny, tmp_path):
    """A GELU STREAM reads no parameter word: after the GELU table's LOAD, a GELU stream over 64
    bytes (every 4th int8 value, -128 and 127 among them) whose p_base field points the core's
    parameter read one word below the table (so the word the LOAD logic then reads is the table's
    last entry, not its first) gives ops gelu_ref of the model's table on every byte. A table
    written on the unit field alone (without the LOAD's write enable) took that word into entry 0
    (x = -128) during the stream."""
    from hwvit.ops.reference import gelu_ref

    toolchain.require("icarus")
    model, core, _ = tiny
    load = next(i for i in core.program if i.op == isa.OP_LOAD and i.unit == isa.U_GELU)
    table = [int(v) for v in model.blocks[0].gelu.table]
    assert load.n[0] == 256 and load.p_base >= 1 and table[0] != table[255]
    x = np.arange(-128, 128, 4)
    x[-1] = 127
    length = core.sizes["IN_LEN"]
    assert x.size == length
    gelu = _row_stream(core, isa.U_GELU, length, 1, p_base=load.p_base - 1)
    image = _run_alone(core, x.reshape(1, -1), [load, gelu], tmp_path, "gelu-pbase", [0, length])
    want = np.array(gelu_ref(x.tolist(), table)) & 0xFF
    assert len(set(want.tolist())) > 20
    np.testing.assert_array_equal(np.asarray(image["logits"]), want)


def test_softmax_exp_table_every_entry_and_bit_icarus(tiny, tmp_path):
    """The exp table as ops.softmax takes it: 256 unsigned 24-bit entries, T[0] = 2^23. The test
    models' tables are below 2^23 past d = 0 and no score row holds both 127 and -128, so bit 23
    of an entry and entry 255 were never read. Here a softmax LOAD writes T[d] = round(2^23
    exp(-max(d - 2, 0)/64)) (2^23 at d = 1, 2; about 2^17 at 255), a LayerNorm LOAD of 16 words
    follows, then a softmax STREAM over 8 rows of 8, each holding 127, -128, 126, 125 and 111 (d =
    0, 255, 1, 2, 16), its p_base pointing the core's parameter read at another entry. Every byte
    is ops softmax_ref's with that table; a table cut at 255 entries, read without bit 23, or
    written without the LOAD's write enable (entry 16, the last LOAD's end) gives other bytes."""
    from hwvit.ops.reference import softmax_ref

    toolchain.require("icarus")
    model, core, _ = tiny
    load = next(i for i in core.program if i.op == isa.OP_LOAD and i.unit == isa.U_SOFTMAX)
    ln_load = next(i for i in core.program if i.op == isa.OP_LOAD and i.unit == isa.U_LAYERNORM)
    table = [int(round(2**23 * np.exp(-max(d - 2, 0) / 64))) for d in range(256)]
    assert load.n[0] == 256 and ln_load.n[0] == 16 and table[:3] == [2**23] * 3 and table[255] > 2**16

    mine = _with_prm_words(core, tmp_path / "exp", load.p_base, table)
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, size=(8, 8))
    for r in range(8):
        x[r, rng.permutation(8)[:5]] = (127, -128, 126, 125, 111)
    # p_base is unused by softmax; p_base + 16 is T[255]'s word
    smax = _row_stream(core, isa.U_SOFTMAX, 8, 8, p_base=load.p_base + 255 - 16)
    image = _run_alone(mine, x.reshape(1, -1), [load, ln_load, smax], tmp_path, "exp-table", [0, 64])

    def out(t) -> np.ndarray:
        return np.array([softmax_ref(row.tolist(), t) for row in x]).reshape(-1) & 0xFF

    want = out(table)
    for wrong in (table[:255], [table[0]] + [v % 2**23 for v in table[1:]], table[:16] + [table[255]] + table[17:]):
        assert (want != out(wrong)).sum() >= 8
    np.testing.assert_array_equal(np.asarray(image["logits"]), want)


def test_layernorm_parameters_of_both_signs_saturating_icarus(tiny, tmp_path):
    """LayerNorm's gamma is signed 15 bit and its output saturates to int8. The tiny model's norms
    have gamma 2^14 - 1 and beta 0, and their outputs never saturate. Here a LayerNorm LOAD writes
    gammas of alternating sign near 2^14 and betas of +-2^25 (half the channels), a GELU LOAD of
    256 words follows, then a LayerNorm STREAM (norm1's M, shift and eps) over the input's 4 rows
    of 16, its p_base pointing the core's parameter read at channel 5's word. Every byte is ops
    layernorm_ref's, with outputs saturated at both ends; gamma read without its sign, a 9-bit
    output cut to a byte, or a channel-0 write without the LOAD's write enable give other bytes."""
    from hwvit.ops.reference import layernorm_ref

    toolchain.require("icarus")
    model, core, xq = tiny
    ln = model.blocks[0].norm1
    ln_load = next(i for i in core.program if i.op == isa.OP_LOAD and i.unit == isa.U_LAYERNORM)
    gelu_load = next(i for i in core.program if i.op == isa.OP_LOAD and i.unit == isa.U_GELU)
    gamma = [(-1) ** c * (2**14 - 1 - 300 * c) for c in range(16)]
    beta = [(-1) ** (c // 2) * 2**25 * (c % 3) for c in range(16)]
    assert ln_load.n[0] == 16 and gelu_load.n[0] == 256 and min(gamma) < 0

    words = [isa.ln_prm_word(g, b) for g, b in zip(gamma, beta)]
    mine = _with_prm_words(core, tmp_path / "ln", ln_load.p_base, words)
    norm = _row_stream(
        core,
        isa.U_LAYERNORM,
        16,
        4,
        mult_a=int(ln.mult),
        shift=int(ln.shift),
        eps=int(ln.eps_int),
        p_base=(ln_load.p_base + 5 - 256) & isa.MASK32,  # unused by LayerNorm; + 256 is channel 5's word
    )
    image = _run_alone(mine, xq, [ln_load, gelu_load, norm], tmp_path, "ln-signs", [0, 64])

    rows = xq.reshape(4, 16)

    def out(g, b, bits=8) -> np.ndarray:
        got = [layernorm_ref(r.tolist(), g, b, int(ln.eps_int), int(ln.mult), int(ln.shift), bits) for r in rows]
        return np.array(got).reshape(-1) & 0xFF

    want = out(gamma, beta)
    assert (want == 127).sum() >= 5 and (want == 128).sum() >= 5 and ((want > 128) | (want < 127)).sum() >= 20
    for wrong in (
        out([g & 0x3FFF for g in gamma], beta),
        out(gamma, beta, 9),
        out(gamma[5:6] + gamma[1:], beta[5:6] + beta[1:]),
    ):
        assert (want != wrong).sum() >= 3
    np.testing.assert_array_equal(np.asarray(image["logits"]), want)


@pytest.mark.parametrize("unit", ["copy", "add"])
def test_stream_over_four_loop_levels_icarus(unit, tiny, tmp_path):
    """A STREAM copy, or residual add, whose four loop counts are all 3 (a count of 2 hides an index
    that steps by 2) and whose source strides differ per level and per source, some negative (modulo
    2^32), as a program of its own: the bytes it writes are the scratchpad's at isa.gen_addresses'
    source addresses (the add: ops residual_add_ref of the a and b bytes), in element order, and it
    takes its modelled cycles. The compiled programs use two levels at most, so a third or fourth
    level's count or stride could be wrong without any run noticing (the b generator's too)."""
    toolchain.require("icarus")
    model, core, xq = tiny
    base, length = core.sizes["IN_BASE"], core.sizes["IN_LEN"]
    n = (3, 3, 3, 3)
    strides = {"a": (1, 3, 8, -18), "b": (2, -1, 5, 7)}
    src = isa.Gen(base + 38, tuple(v & isa.MASK32 for v in strides["a"]))
    src_b = isa.Gen(base + 20, tuple(v & isa.MASK32 for v in strides["b"])) if unit == "add" else isa.Gen()
    dst = isa.Gen(core.sizes["ACT_DEPTH"] - 128, (1, 3, 9, 27))
    op = {"copy": isa.U_COPY, "add": isa.U_ADD}[unit]
    ins = isa.Instr(op=isa.OP_STREAM, unit=op, n=n, a=src, b=src_b, d=dst, mult_a=3, mult_b=5, shift=2, name=unit)
    image = _run_alone(core, xq, ins, tmp_path, f"{unit}4", [dst.base, 81])

    act = _act_after_load(core, xq)
    s = isa.gen_addresses(n, isa.Gen(src.base, strides["a"])).reshape(-1)
    s_b = isa.gen_addresses(n, isa.Gen(base + 20, strides["b"])).reshape(-1)
    for addr in (s, s_b):
        assert addr.min() >= base and addr.max() < base + length and len(set(addr.tolist())) > 30
    d = isa.gen_addresses(n, dst).reshape(-1)
    assert sorted(d - dst.base) == list(range(81))
    got = act[s]
    if unit == "add":
        got = _added(act[s], act[s_b])
    want = np.zeros(81, dtype=np.int64)
    want[d - dst.base] = got
    assert len(set(want.tolist())) > 20
    np.testing.assert_array_equal(np.asarray(image["logits"]), want)
    assert image["perf"] == [cycles.instr_cycles(ins, 4, 4)]
    assert image["cycles"]["elem"] == cycles.program_cycles([ins, isa.end()], 4, 4)["elem"]


def test_layernorm_eps_with_bit_61_icarus(tiny, tmp_path):
    """eps_int is 62 bits (f25, f26): norm1 with eps_int = 2^61 (the most ops.layernorm takes, inside
    the block's contract: Ve = (V << 22) + eps < 2^62 since V < 2^38) compiled and run on Icarus
    equals the integer model with that eps, and differs from the model's own eps (it reaches the
    logits)."""
    import dataclasses

    from hwvit.core.compile import compile_model
    from hwvit.core.coredir import write_core_dir

    toolchain.require("icarus")
    model, core, xq = tiny
    block = model.blocks[0]
    block = dataclasses.replace(block, norm1=dataclasses.replace(block.norm1, eps_int=1 << 61))
    wide = dataclasses.replace(model, blocks=(block, *model.blocks[1:]))
    write_core_dir(compile_model(wide, act_base=core.sizes["IN_BASE"]), tmp_path / "eps", core.manifest["model"])
    run = crun.run_images(read_core_dir(tmp_path / "eps"), wide, xq, "icarus", 4, 4)
    np.testing.assert_array_equal(run.got, run.expected)
    assert not np.array_equal(run.expected, np.asarray(model.forward(xq, quantized=True)).reshape(1, -1))


def _corrupted_weight_found(model, core, x1, simulator: str, rows: int, cols: int, tmp_path, name: str) -> None:
    """One weight of GEMM ``name`` (channel 0, k = 5) flipped in a copy of ``core``: stepping the
    program (stop_pc_i, cont_i) finds the first wrong output at that instruction, channel 0."""
    target = next(i for i, ins in enumerate(core.program) if ins.name == name)
    base = core.program[target].b.base

    def flip(lines):
        lines[base + 5] = f"{(int(lines[base + 5], 16) ^ 0x40):02x}"

    bad = _altered(core, tmp_path / "bad", "wgt", flip)
    info = crun.find_mismatch(bad, model, x1, simulator, rows, cols)
    assert info["instruction"] == target and info["name"] == name, info
    assert info["kind"] == isa.OP_NAMES[isa.OP_GEMM]
    assert info["expected"] != info["got"]
    assert len(info["at"]) == 2 and info["at"][1] == 0  # (token, channel): only channel 0's weight changed
    assert (tmp_path / "bad").exists() and info["scratchpad"].endswith("scratchpad.hex")


def test_corrupted_weight_is_found_at_its_instruction_verilator(digits, tmp_path):
    model, core, xq, _ = digits
    toolchain.require("verilator")
    _corrupted_weight_found(model, core, xq[0], "verilator", 8, 8, tmp_path, "layers.1.mlp.fc1")


def test_corrupted_weight_is_found_by_stepping_icarus(tiny, tmp_path):
    """The same search on Icarus (4 x 4), the tiny model: single-stepping checked in seconds on the
    simulator of the mutation campaign (whose core suite leaves the Verilator tests out)."""
    model, core, xq = tiny
    toolchain.require("icarus")
    _corrupted_weight_found(model, core, xq[0], "icarus", 4, 4, tmp_path, "layers.0.mlp.fc1")


def test_estimate_stand_in_has_the_real_programs_shape(digits):
    """`core estimate` compiles a zero-parameter stand-in; its program has the real one's loops and addresses."""
    from hwvit.core.compile import compile_model
    from hwvit.core.shapes import shape_model

    model, core, _, _ = digits
    stand_in = compile_model(shape_model(model.config), images=False).program
    assert [(i.op, i.unit, i.n, i.a, i.b, i.d, i.name) for i in stand_in] == [
        (i.op, i.unit, i.n, i.a, i.b, i.d, i.name) for i in core.program
    ]
    assert cycles.program_cycles(stand_in, 8, 8) == cycles.program_cycles(core.program, 8, 8)
