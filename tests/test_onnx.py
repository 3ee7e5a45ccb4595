"""hwvit.onnx: a quantized ONNX (QDQ) model as its own integer model, beside onnxruntime.

The files come from tests/onnx_zoo.py (the digits ViT and a second, differently shaped ViT,
exported and quantized by onnxruntime's quantize_static), calibrated on 64 images and compared on
64: one configuration per property here; every model in every configuration, calibrated on 256
images and compared on the whole held-out split, is tests/test_onnx_full.py (make test-onnx).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx_zoo import gemm_figures

from hwvit.onnx import build, graph, read, runtime

pytestmark = pytest.mark.xdist_group("onnx")  # one worker makes the session's files


def test_symmetric_gemms_and_tables(onnx_zoo):
    """Symmetric int8, per-channel weights (digits): the GEMMs alone within 1 LSB of onnxruntime on
    at most 5 per million of their outputs, with graph optimizations off (the file's float path) and
    on (its fused integer kernels); every imported table (GELU's erf chain, the 1/sqrt(d) scaling)
    equals the file's own nodes on all 256 codes, and GELU alone equals onnxruntime everywhere."""
    imported, side = onnx_zoo.side("digits", "symmetric")
    for level in ("off", "on"):
        gemms, per_million, max_lsb = gemm_figures(side, level)
        assert gemms == 2 + 5 * imported.int_model.config.depth  # embed, logits; qkv, context, proj, fc1, fc2
        assert max_lsb <= 1 and per_million <= 5, (level, per_million)
    gelu = [d for d in side.isolated["off"] if d.point.endswith("mlp.gelu")]
    assert len(gelu) == imported.int_model.config.depth and all(d.differ == 0 for d in gelu)
    g = imported.graph
    for i, blk in enumerate(imported.int_model.blocks):
        assert blk.attn.scores_table is not None
        for table, point in ((blk.gelu, f"layers.{i}.mlp.gelu"), (blk.attn.scores_table, f"layers.{i}.attn.scores")):
            name = imported.points[point]
            src = g.by_out[name].inputs[0]
            q_in = g.quant_of(src)
            got = build.table_of(g, src, name)  # the file's nodes from the codes, in onnxruntime
            codes = np.arange(q_in.range[0], q_in.range[1] + 1)
            off_in, off_out = build._off(q_in), build._off(g.by_out[name].out_q)
            assert np.array_equal(table.table[codes + off_in + 128] - off_out, got), point


def test_power_of_two_scales(onnx_zoo):
    """The symmetric file with every scale rounded up to a power of two (hwvit.onnx.make.pow2_scales,
    its constant codes requantized): every GEMM's integers alone equal onnxruntime's exactly, graph
    optimizations off and on (its float32 arithmetic is exact on such scales)."""
    from hwvit.onnx import make

    imported, side = onnx_zoo.side("digits", "symmetric", pow2=True)
    g = imported.graph
    assert all(make.is_pow2(s.out_q.scale) for s in g.steps)
    assert all(make.is_pow2(s.weight_q.scale) for s in g.steps if s.weight_q is not None)
    for level in ("off", "on"):
        gemms, per_million, _ = gemm_figures(side, level)
        assert gemms == 2 + 5 * imported.int_model.config.depth and per_million == 0, (level, per_million)
    assert side.agreement["off"] == 1.0


def test_hf_shaped_vit(onnx_zoo):
    """An HF-shaped ViT (transformers' ViTForImageClassification, exported with SDPA attention):
    separate q, k, v projections, each a MatMul then an int8 bias add, and Q and K each scaled by
    head_dim^-1/4 in a quantized Mul of its own, read as tables before Q.K^T. Symmetric int8: every
    GEMM alone within 1 LSB of onnxruntime, optimizations off and on, the Q and K tables equal the
    file's nodes on all 256 codes and onnxruntime everywhere, and the parting from onnxruntime is
    hwvit's LayerNorm alone."""
    imported, side = onnx_zoo.side("hf", "symmetric")
    m = imported.int_model
    assert m.config.qkv == "separate" and m.config.dim == 32 and m.config.heads == 2
    for level in side.isolated:  # on: its fused kernels, in the graph onnxruntime deploys
        gemms, per_million, max_lsb = gemm_figures(side, level)
        assert gemms == 2 + 5 * m.config.depth + 2 * m.config.depth  # q, k, v apart
        assert max_lsb <= 1 and per_million <= 100, (level, per_million)
    g = imported.graph
    for i, blk in enumerate(m.blocks):
        for role in ("q", "k"):
            table, point = getattr(blk.attn, f"{role}_table"), f"layers.{i}.attn.{role}_scaled"
            src = g.by_out[imported.points[point]].inputs[0]
            codes = np.arange(-128, 128)
            assert np.array_equal(table.table[codes + 128], build.table_of(g, src, imported.points[point]))
    scaled = [d for d in side.isolated["off"] if d.point.endswith("_scaled")]
    assert len(scaled) == 2 * m.config.depth and all(d.differ == 0 for d in scaled)
    assert side.file_float_agreement == 1.0 and side.logits_sqnr_db["off"] > 20


@pytest.mark.parametrize(("name", "config"), [("digits", "uint8"), ("second", "default")])
def test_zero_points(onnx_zoo, name, config):
    """uint8 activations with zero points (digits) and onnxruntime's defaults, asymmetric int8 with
    per-tensor weights (the second ViT): the GEMMs alone within 1 LSB of onnxruntime on at most 5 per
    million of their outputs with graph optimizations off (the file's float path); the second ViT's
    with them on too (its fused integer kernels: its int8 activations become uint8 there, its softmax
    writes uint8 probabilities and P.V reads them). The digits uint8 file's fused kernels part on one
    case alone: the first fc1's bias add (onnxruntime's QLinearAdd, in float32) rounds one (channel,
    code) pair, whose exact value lies 3e-6 above a half, down, at every occurrence of that code
    (make test-onnx states its figure). The logits close (the end-to-end agreement on the whole split
    is make test-onnx's)."""
    imported, side = onnx_zoo.side(name, config, on=name == "second")
    for level in side.isolated:
        gemms, per_million, max_lsb = gemm_figures(side, level)
        assert gemms == 2 + 5 * imported.int_model.config.depth
        assert max_lsb <= 1 and per_million <= 5, (level, per_million)
    assert side.agreement["off"] >= 0.95
    assert side.logits_sqnr_db["off"] > 20


@pytest.mark.parametrize(("name", "config"), [("second", "default"), ("hf", "symmetric"), ("digits", "uint8")])
def test_deployed_points_are_the_whole_files(onnx_zoo, name, config):
    """With graph optimizations on, every point is read in the graph onnxruntime deploys for the whole
    file (hwvit.onnx.runtime.Observer): that graph, run as written, gives the file's logits bit for
    bit; it holds the fused integer kernels; every point is found in it; and its codes, turned back
    to the file's (zero point, NHWC layout), equal the file's float path's up to the first
    projections (a zero point or layout not turned back would part there by up to 255)."""
    imported = build.load(onnx_zoo.file(name, config))
    model = imported.graph.model
    x, _ = onnx_zoo.data(name, 16)
    dep = runtime.deployed(model)
    kinds = {n.op_type for n in dep.graph.node}
    assert {"QLinearMatMul", "QLinearAdd"} <= kinds and "QLinearSoftmax" in kinds, kinds
    whole = runtime.session(model, True)
    inp = whole.get_inputs()[0].name
    assert np.array_equal(whole.run(None, {inp: x})[0], runtime.session(dep, False).run(None, {inp: x})[0])
    on, off = runtime.Observer(imported, True), runtime.Observer(imported, False)
    assert set(on.renamed) == set(imported.points.values()) - {model.graph.output[0].name}
    if name == "digits":  # onnxruntime's NHWC QLinearConv writes the patch embedding
        assert on.renamed[imported.points["embed"]][2]
    codes_on, _ = on.run(x)
    codes_off, _ = off.run(x)
    assert set(codes_on) == set(codes_off) == set(imported.points)
    first = {"input", "embed", "tokens", "layers.0.norm1", "layers.0.attn.qkv", "layers.0.attn.q"}
    for point, c in codes_off.items():
        assert codes_on[point].shape == c.shape, point
        d = np.abs(codes_on[point] - c)  # later points part as float32 roundings accumulate
        assert d.max() == 0 if point in first else d.max() < 32, (point, d.max())


def test_digits_top1_and_agreement(onnx_zoo):
    """Top-1 close to onnxruntime's; agreement with it high (99.5% on the whole split is make
    test-onnx's), and complete once hwvit's own arithmetic points (LayerNorm, softmax: what the file
    leaves float) are computed as the file computes them: every parting is hwvit's arithmetic."""
    _, side = onnx_zoo.side("digits", "symmetric")
    assert side.top1["hwvit"] >= 0.95 and abs(side.top1["hwvit"] - side.top1["off"]) <= 0.05
    assert side.agreement["off"] >= 0.95 and side.file_float_agreement == 1.0


def test_softmax_cumulative_differs(onnx_zoo):
    """hwvit's own softmax rounds cumulatively: about a fifth of the probabilities 1 LSB from the
    file's (each rounded alone); round_each: none."""
    _, side = onnx_zoo.side("digits", "symmetric", images=16, softmax="hwvit", on=False)
    probs = [d for d in side.isolated["off"] if d.point.endswith("attn.probs")]
    assert probs and all(0.05 < d.differ / d.elements < 0.4 and d.max_lsb == 1 for d in probs)
    _, side = onnx_zoo.side("digits", "symmetric")
    probs = [d for d in side.isolated["off"] if d.point.endswith("attn.probs")]
    assert probs and sum(d.differ for d in probs) <= 2


def test_round_each_kernel_equals_reference():
    from hwvit import variants
    from hwvit.variants.base import SoftmaxContext

    v = variants.get("softmax", "round_each")
    rng = np.random.default_rng(0)
    for s_out, bits in ((1 / 255, 8), (1 / 127, 7), (0.0041, 8)):
        p = v.prepare(SoftmaxContext(0.07, 8, bits, s_out=s_out))
        x = rng.integers(-128, 128, (40, 17))
        x[0] = 127  # a constant row: every probability 1/17
        x[1, :] = -128
        x[1, 0] = 127  # one hot
        assert np.array_equal(v.kernel(x, p), np.array(v.reference(x, p)))
        assert v.kernel(x, p)[1, 0] == round(1 / s_out) or v.kernel(x, p)[1, 0] == (1 << bits) - 1


def test_round_each_has_rtl():
    """softmax=round_each's sets run on its Verilog (sim/test_variants.py holds it bit-exact)."""
    from hwvit import blocks
    from hwvit.blocks.variant_rtl import PENDING
    from hwvit.simulate.build import tb_module

    assert blocks.get("softmax_round_each").rtl[0] == "rtl/softmax_round_each.v"
    assert tb_module("softmax_round_each") is not None
    assert "softmax_round_each" not in PENDING


def test_gemm_and_requant_zero_equal_references():
    """The zero-point GEMM (one gemm plus row-sum corrections) and requant (rounded one bit wider,
    then the zero point, then one saturation) equal their references on random and extreme cases."""
    from hwvit import ops
    from hwvit.ops.reference import gemm_zero_ref, requant_zero_ref

    rng = np.random.default_rng(2)
    for a_signed, za, zw in ((True, -128, 127), (False, -128, -7), (True, 5, 0)):
        lo, hi = (-128, 127) if a_signed else (0, 255)
        a, w = rng.integers(lo, hi, (5, 19), endpoint=True), rng.integers(-128, 127, (7, 19), endpoint=True)
        a[0], w[0] = lo, 127
        bias = rng.integers(-(1 << 20), 1 << 20, 7)
        acc = ops.gemm_zero(a, w, bias, a_signed, za, zw)
        assert acc.tolist() == gemm_zero_ref(a.tolist(), w.tolist(), bias.tolist(), za, zw)
    acc = np.concatenate([rng.integers(-(1 << 31), 1 << 31, 300), [2, -2, 6, -6, (1 << 31) - 1, -(1 << 31)]])
    for rounding in ("half_up", "half_even", "half_away", "floor"):
        for zero in (0, -128, 127, 5):
            got = ops.requant_zero(acc, 1 << 30, 32, 8, rounding, zero)  # acc / 4: ties at +-2, +-6
            assert got.tolist() == requant_zero_ref(acc.tolist(), 1 << 30, 32, 8, rounding, zero), (rounding, zero)


def test_residual_add_zp_equals_reference():
    from hwvit.ops.reference import residual_add_zp_ref
    from hwvit.ops.residual_add import residual_add, residual_add_zp

    rng = np.random.default_rng(1)
    a, b = rng.integers(-128, 128, 500), rng.integers(-128, 128, 500)
    for rounding in ("half_up", "half_even", "half_away", "floor"):
        for zeros in ((0, 0, 0), (-128, 5, 127), (3, -7, -2)):
            got = residual_add_zp(a, b, 1 << 30, 3 << 29, 33, 8, rounding, *zeros)
            want = residual_add_zp_ref(a.tolist(), b.tolist(), 1 << 30, 3 << 29, 33, 8, rounding, *zeros)
            assert got.tolist() == want
    assert np.array_equal(residual_add_zp(a, b, 1 << 30, 3 << 29, 33), residual_add(a, b, 1 << 30, 3 << 29, 33))


def _with_node(model, node, before: str, rewire: str, to: str):
    """``model`` with ``node`` placed before the node named ``before``, whose input ``rewire`` it reads
    as ``to`` instead."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    nodes = list(m.graph.node)
    at = next(k for k, n in enumerate(nodes) if n.name == before)
    nodes[at].input[list(nodes[at].input).index(rewire)] = to
    nodes.insert(at, node)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m


def test_qcdq_clips_of_codes(onnx_zoo, tmp_path):
    """QCDQ, as Brevitas exports a narrow or sub-8-bit quantizer: a Clip of a weight's codes is folded
    into them (the model equals the file with its codes clipped); a Clip of an activation's codes is
    nothing over the whole 8-bit range and refused in one line, naming the node, when narrower."""
    import onnx
    from onnx import helper, numpy_helper

    path = onnx_zoo.file("digits", "symmetric")
    model = onnx.load(str(path))
    inits = {i.name: i for i in model.graph.initializer}
    matmul = next(n for n in model.graph.node if n.name == "/layers.0/mlp/fc1/MatMul")
    dq = next(n for n in model.graph.node if n.output[0] == matmul.input[1])  # the weight's
    codes = numpy_helper.to_array(inits[dq.input[0]])
    lo, hi = np.int8(-20), np.int8(20)
    assert np.abs(codes).max() > 20
    bounds = [numpy_helper.from_array(lo, "clip_lo"), numpy_helper.from_array(hi, "clip_hi")]
    clip = helper.make_node("Clip", [dq.input[0], "clip_lo", "clip_hi"], ["clipped"], name="weight_clip")
    clipped = _with_node(model, clip, dq.name, dq.input[0], "clipped")
    clipped.graph.initializer.extend(bounds)
    onnx.save(clipped, str(tmp_path / "qcdq.onnx"))
    by_hand = onnx.ModelProto()
    by_hand.CopyFrom(model)
    for init in by_hand.graph.initializer:
        if init.name == dq.input[0]:
            init.CopyFrom(numpy_helper.from_array(np.clip(codes, lo, hi), init.name))
    onnx.save(by_hand, str(tmp_path / "by_hand.onnx"))
    x = onnx_zoo.data("digits", 8)[0]
    got, want, plain = (build.load(f) for f in (tmp_path / "qcdq.onnx", tmp_path / "by_hand.onnx", path))
    got_logits = got.int_model.forward(runtime.input_codes(got, x), quantized=True)
    assert np.array_equal(got_logits, want.int_model.forward(runtime.input_codes(want, x), quantized=True))
    assert not np.array_equal(got_logits, plain.int_model.forward(runtime.input_codes(plain, x), quantized=True))
    q = next(n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == "input")
    reader = next(n for n in model.graph.node if q.output[0] in n.input)
    for (a, b), ok in (((-128, 127), True), ((-127, 127), False)):
        ins = [numpy_helper.from_array(np.int8(a), "act_lo"), numpy_helper.from_array(np.int8(b), "act_hi")]
        node = helper.make_node("Clip", [q.output[0], "act_lo", "act_hi"], ["act_clipped"], name="act_clip")
        m = _with_node(model, node, reader.name, q.output[0], "act_clipped")
        m.graph.initializer.extend(ins)
        onnx.save(m, str(tmp_path / "act.onnx"))
        if ok:
            same = build.load(tmp_path / "act.onnx").int_model.forward(x)
            assert np.array_equal(same, build.load(path).int_model.forward(x))
            continue
        with pytest.raises(ValueError, match=r"act_clip.*clipped to \[-127, 127\].*narrow_range=False") as err:
            build.load(tmp_path / "act.onnx")
        assert "\n" not in str(err.value)


def test_a_file_quantized_at_its_gemm_inputs(onnx_zoo, tmp_path):
    """A QDQ file that leaves a GEMM's output float (the quantizers after fc1's MatMul and after its
    bias add taken out, as a file quantized at its GEMMs' inputs alone leaves them): without
    calibration inputs, one line; with them, that point is quantized at hwvit's calibration and every
    other keeps the file's quantizer. With the bias add's quantizer alone taken out, the MatMul's
    codes reach the GELU's quantizer through a per-channel add: no table of one code, one line."""
    import onnx

    path = onnx_zoo.file("digits", "symmetric")
    imported = build.load(path)

    def without(names: list[str], to: str):
        model = onnx.load(str(path))
        for point in names:
            q = next(n for n in model.graph.node if n.output[0] == point)
            dq = [n for n in model.graph.node if point in n.input]
            for n in model.graph.node:
                for k, i in enumerate(n.input):
                    if any(i == d.output[0] for d in dq):
                        n.input[k] = q.input[0]
            kept = [n for n in model.graph.node if n is not q and n not in dq]
            del model.graph.node[:]
            model.graph.node.extend(kept)
        onnx.save(model, str(tmp_path / to))
        return tmp_path / to

    matmul = "/layers.0/mlp/fc1/MatMul_output_0_QuantizeLinear_Output"
    with pytest.raises(ValueError, match=r"fc1\.bias_DequantizeLinear .*: reads .* a table of one code") as err:
        build.load(without([imported.points["layers.0.mlp.fc1"]], "add.onnx"))
    assert "\n" not in str(err.value)
    partial = without([matmul, imported.points["layers.0.mlp.fc1"]], "partial.onnx")
    with pytest.raises(ValueError, match="give calibration inputs") as err:
        build.load(partial)
    assert "\n" not in str(err.value)
    x_calib = onnx_zoo.model("digits")[1][:256]
    partial = build.load(partial, calib=x_calib)
    assert partial.origin["layers.0.mlp.fc1"] == "hwvit calibration"
    assert {p for p, o in partial.origin.items() if o == "hwvit calibration"} == {"layers.0.mlp.fc1"}
    for p in ("layers.0.mlp.gelu", "layers.0.attn.qkv", "logits"):
        assert partial.graph.quant_of(partial.points[p]).same(imported.graph.quant_of(imported.points[p])), p
    from click.testing import CliRunner

    from hwvit.cli import main

    args = ["vectors", "--checkpoint", str(tmp_path / "partial.onnx"), "--variant", "softmax=round_each", "--limit",
            "1", "--blocks", "layers.0.mlp.fc1*", "--out", str(tmp_path / "vec"), "-q"]  # fmt: skip
    res = CliRunner().invoke(main, args)  # the CLI calibrates it, with another arithmetic too
    assert res.exit_code == 0 and "sets" in res.output, res.output


def test_a_file_of_a_fixed_batch(onnx_zoo, tmp_path):
    """A file exported with a static batch of 2 (its Reshapes fix it too): onnxruntime runs it in
    slices of 2, the last one padded, so `hwvit compare` of 5 images works, and onnxruntime's codes
    at every point, optimizations off and on, are those of the same model exported with a dynamic
    batch."""
    import warnings

    import torch
    from click.testing import CliRunner

    from hwvit.cli import main
    from hwvit.onnx import make

    model, x_calib, x, _ = onnx_zoo.model("digits")
    src = tmp_path / "fixed-float.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, torch.as_tensor(x_calib[:2]), str(src), dynamo=False, opset_version=17,
                          input_names=["input"], output_names=["logits"])  # fmt: skip
    fixed = tmp_path / "fixed.onnx"
    make.quantize(src, fixed, x_calib[:64], "symmetric", batch=2)
    dynamic = tmp_path / "dynamic.onnx"
    onnx_zoo.file("digits", "symmetric")  # the digits ViT's float export, dynamic batch
    make.quantize(onnx_zoo.root / "digits.onnx", dynamic, x_calib[:64], "symmetric")
    a, b = build.load(fixed), build.load(dynamic)
    for level in (False, True):
        got, logits = runtime.Observer(a, level).run(x[:5])
        want, want_logits = runtime.Observer(b, level).run(x[:5])
        assert got.keys() == want.keys() and len(got) > 40 and logits.shape == (5, 10)
        assert all(np.array_equal(got[p], want[p]) for p in got) and np.array_equal(logits, want_logits)
    res = CliRunner().invoke(main, ["compare", "--checkpoint", str(fixed), "--limit", "5", "-q"])
    assert res.exit_code == 0 and "5 images" in res.output, res.output


def test_vectors_of_an_imported_model(onnx_zoo, tmp_path):
    """The imported model traces and writes vector sets that `hwvit check` accepts."""
    from hwvit import vectors
    from hwvit.intvit import Trace

    imported = build.load(onnx_zoo.file("digits", "uint8"), softmax="round_each")
    tr = Trace(records=True)
    imported.int_model.forward(np.zeros((1, 1, 8, 8), np.float32), trace=tr)
    kinds = {r.kind for r in tr.records}
    assert {"gemm", "residual_add", "gelu", "layernorm", "softmax_round_each"} <= kinds
    for rec in tr.records[:12]:
        d = vectors.write_set(rec, tmp_path / rec.path.replace(".", "_"))
        vectors.read(d)
    from hwvit.vectors.check import check

    # every set of a zero point or another rounding: its outputs computed again from its inputs
    assert all(error is None for _, error in check(tmp_path))


def test_imported_sets_pass_the_verilog(onnx_zoo, tmp_path):
    """`hwvit vectors` of the uint8 file, then `hwvit sim` on Icarus: Q.K^T of a head (zero points of
    both operands and of the output, half to even: rtl/gemm.v ZERO_POINTS) and a 3-D linear's bias
    add (rtl/residual_add.v, half to even, three zero points) bit-exact; every set of every file on
    both simulators is make test-onnx's."""
    from click.testing import CliRunner

    from hwvit import vectors
    from hwvit.cli import main

    out = tmp_path / "vec"
    path = onnx_zoo.file("digits", "uint8")
    blocks = "layers.0.attn.h0.qk,layers.0.attn.qkv.bias"
    res = CliRunner().invoke(main, ["vectors", "--checkpoint", str(path), "--limit", "1", "--blocks", blocks,
                                    "--out", str(out), "-q"])  # fmt: skip
    assert res.exit_code == 0, res.output
    params = {vectors.read(d).kind: vectors.read(d).params for d in vectors.find_sets(out)}
    assert params["gemm"]["rounding"] == "half_even" and params["gemm"]["zero_a"] and params["gemm"]["zero_w"]
    assert params["residual_add"]["rounding"] == "half_even" and params["residual_add"]["zero_b"]
    res = CliRunner().invoke(main, ["sim", str(out), "--simulator", "icarus", "-q"])
    assert res.exit_code == 0 and "2 passed, 0 failed" in res.output, res.output


def test_compare_with_zero_points(onnx_zoo, tmp_path):
    """`hwvit compare --checkpoint` of the uint8 file (zero points at every point): the float-vs-int
    table dequantizes each point as scale * (q - zero) (every point's SQNR, accumulated and alone,
    above 20 dB; read as scale * q the input alone would be near 0 dB), and the onnxruntime side by
    side is in the terminal, report.json and report.html."""
    import json

    from click.testing import CliRunner

    from hwvit.cli import main

    path = onnx_zoo.file("digits", "uint8")
    out = tmp_path / "report"
    res = CliRunner().invoke(main, ["compare", "--checkpoint", str(path), "--limit", "16", "--out", str(out)])
    assert res.exit_code == 0, res.output
    for line in ("point (vs onnxruntime)", "onnxruntime (optimizations off): top-1 agreement",
                 "with the file's own float at hwvit's arithmetic points"):  # fmt: skip
        assert line in res.output, res.output
    result = json.loads((out / "report.json").read_text())["result"]
    assert build.load(path).int_model.zero_at("input") != 0
    for row in result["layers"]:
        assert row["sqnr_db"] > 20 and row["isolated_sqnr_db"] > 20, row
    side = result["onnxruntime"]
    assert side["images"] == 16 and {d["point"] for d in side["isolated"]["off"]} >= {"embed", "logits"}
    html = (out / "report.html").read_text()
    assert "Side by side with onnxruntime" in html and "layers.0.attn.qkv" in html
    assert sorted(p.name for p in out.iterdir()) == sorted(["report.md", "report.html", "report.json", "sqnr.png",
                                                            "worst_error.png", "logits.png"])  # fmt: skip


def test_sweep_and_bench(onnx_zoo, tmp_path):
    """--checkpoint model.onnx on the other commands: sweep varies the arithmetic of the points the file
    leaves float (softmax, LayerNorm) around the file's model; bench times its integer model beside the
    file in onnxruntime (compile: tests/test_onnx_core.py; sensitivity: tests/test_onnx_sensitivity.py)."""
    import json

    from click.testing import CliRunner

    from hwvit.cli import main

    path = str(onnx_zoo.file("digits", "symmetric"))
    runner = CliRunner()
    res = runner.invoke(main, ["sweep", "--checkpoint", path, "--limit", "8", "--out", str(tmp_path / "sw"), "-q"])
    assert res.exit_code == 0, res.output
    rows = json.loads((tmp_path / "sw" / "sweep.json").read_text())["rows"]
    assert [(r["factor"], r["label"]) for r in rows] == [("baseline", "the file's model"), ("softmax", "round_each")]
    res = runner.invoke(main, ["sweep", "--checkpoint", path, "--act-bits", "6", "--out", str(tmp_path / "no")])
    assert res.exit_code != 0 and "--act-bits: a quantized ONNX file fixes it" in res.output
    res = runner.invoke(main, ["bench", "--checkpoint", path, "--repeats", "1", "--batch", "1", "--json"])
    assert res.exit_code == 0, res.output
    run = json.loads(res.output)["runs"][0]
    assert run["onnxruntime_ms"] > 0 and run["int_ms"] > 0 and run["torch_int8_ms"] is None


def _qonnx_graph(bits=8.0, narrow=0, rounding="ROUND", signed=1, scale=(0.05,)):
    """input (2, 4) -> Quant -> Identity -> output, a QONNX graph of one activation quantizer."""
    import onnx
    from onnx import helper, numpy_helper

    inits = [numpy_helper.from_array(np.asarray(v, np.float32).reshape(shape), name) for name, v, shape in (
        ("s", scale, (len(scale),) if len(scale) > 1 else ()), ("z", 0.0, ()), ("b", bits, ()))]  # fmt: skip
    quant = helper.make_node("Quant", ["input", "s", "z", "b"], ["q"], domain="qonnx.custom_op.general",
                             signed=signed, narrow=narrow, rounding_mode=rounding)  # fmt: skip
    nodes = [quant, helper.make_node("Identity", ["q"], ["y"])]
    x = helper.make_tensor_value_info("input", onnx.TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 4])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("qonnx.custom_op.general", 1)]
    return helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits), opset_imports=opsets)


def test_qonnx_quant_nodes():
    """A QONNX Quant node of an activation as QuantizeLinear/DequantizeLinear: onnxruntime's run of the
    converted graph equals Quant's definition (scale * (clip(round_half_even(x / scale)) ...), ties
    included); what QDQ cannot carry is refused in one line naming the node and the Brevitas option.
    (make test-onnx: a whole Brevitas ViT against qonnx's own execution.)"""
    from hwvit.onnx import qonnx
    from hwvit.onnx.graph import GraphError

    x = np.array([[0.025, 0.075, -0.025, 7.0], [-9.0, 0.0749, 1.0, -0.125]], np.float32)  # ties, both rails
    model = qonnx.to_qdq(_qonnx_graph(), x)
    assert {n.op_type for n in model.graph.node} == {"QuantizeLinear", "DequantizeLinear", "Identity"}
    got = runtime.session(model, False).run(None, {"input": x})[0]
    want = np.float32(0.05) * np.clip(np.rint(x / np.float32(0.05)), -128, 127)
    assert np.array_equal(got, want.astype(np.float32))
    refused = (
        ({"narrow": 1}, "narrow_range=False"),
        ({"bits": 4.0}, "bit_width=8"),
        ({"rounding": "FLOOR"}, "rounding_mode FLOOR"),
        ({"scale": (0.1, 0.2, 0.3, 0.4)}, "per-channel"),
    )
    for kw, text in refused:
        with pytest.raises(GraphError, match=text) as err:
            qonnx.to_qdq(_qonnx_graph(**kw), x)
        assert "node " in str(err.value) and "\n" not in str(err.value)


# ------------------------------------------------------------------ refused files: one line, nothing written


def _refused(runner, args, tmp_path):
    from hwvit.cli import main

    out = tmp_path / "out"
    result = runner.invoke(main, [*args, "--out", str(out)])
    assert result.exit_code != 0
    message = result.output.strip()
    assert message.startswith("Error:") and len(message.splitlines()) == 1, message
    assert not out.exists()
    return message


@pytest.fixture
def runner():
    from click.testing import CliRunner

    return CliRunner()


def test_corrupt_file(runner, tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage" * 20)
    assert "not a readable ONNX file" in _refused(runner, ["compare", "--checkpoint", str(bad)], tmp_path)


def test_external_data_outside_folder(runner, tmp_path, onnx_zoo):
    import onnx

    m = onnx.load(str(onnx_zoo.file("digits", "symmetric")))
    init = m.graph.initializer[0]
    init.ClearField("raw_data")
    init.data_location = onnx.TensorProto.EXTERNAL
    init.external_data.add(key="location", value="../../etc/passwd")
    path = tmp_path / "ext.onnx"
    onnx.save(m, str(path))
    assert "outside the model's folder" in _refused(runner, ["vectors", "--checkpoint", str(path)], tmp_path)


def test_custom_domain(runner, tmp_path, onnx_zoo):
    import onnx

    m = onnx.load(str(onnx_zoo.file("digits", "symmetric")))
    m.graph.node[-1].domain = "com.example.custom"
    m.opset_import.add(domain="com.example.custom", version=1)
    path = tmp_path / "custom.onnx"
    onnx.save(m, str(path))
    assert "custom domain" in _refused(runner, ["compare", "--checkpoint", str(path)], tmp_path)


def test_unsupported_node_and_not_a_vit(tmp_path, onnx_zoo, runner):
    import onnx
    from onnx import helper

    m = onnx.load(str(onnx_zoo.file("digits", "symmetric")))
    for node in m.graph.node:  # GELU's Erf -> a TopK of its input: not elementwise, not a block
        if node.op_type == "Erf":
            node.op_type = "Softmax"
            break
    path = tmp_path / "odd.onnx"
    onnx.save(m, str(path))
    message = _refused(runner, ["vectors", "--checkpoint", str(path)], tmp_path)
    assert "node " in message and "(Softmax)" in message and "hwvit cannot map" in message, message
    # a float model with no quantizers at all: not a QDQ ViT
    x = helper.make_tensor_value_info("input", onnx.TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])
    plain = helper.make_model(helper.make_graph([helper.make_node("Relu", ["input"], ["y"])], "g", [x], [y]))
    path2 = tmp_path / "plain.onnx"
    onnx.save(plain, str(path2))
    assert "not a QDQ model" in _refused(runner, ["compare", "--checkpoint", str(path2)], tmp_path)


def test_graph_steps_of_digits(onnx_zoo):
    g = graph.QGraph(read.load(onnx_zoo.file("digits", "symmetric")))
    kinds = [s.kind for s in g.steps if s.kind not in ("move", "const")]
    assert kinds.count("linear") == 1 + 4 * 3 + 1 and kinds.count("softmax") == 3 and kinds.count("layernorm") == 7


def test_requant_onnxruntime(onnx_zoo, tmp_path, runner):
    """`--variant requant=onnxruntime`: every GEMM requantizes as onnxruntime's fused kernels do (their
    binary32 multiplier f32(f32(s_a * s_w) / s_y) and product), every add it fuses into QLinearAdd as
    that computes (binary32 on the uint8 codes it runs on); on the uint8 file's images its GEMMs and
    adds alone equal onnxruntime's deployed integers, where the file's meaning parts from them (the
    first fc1's bias add: onnxruntime's QLinearAdd rounds one of its codes down); its vector sets
    (zero points, ROUNDING 5 and 6) pass rtl/gemm.v and rtl/residual_add.v on Icarus; any other
    requant variant of a file is refused in one line."""
    from onnx_zoo import gemm_figures

    from hwvit import vectors
    from hwvit.cli import main

    path = onnx_zoo.file("digits", "uint8")
    imported = build.load(path, softmax="round_each", requant="onnxruntime")
    assert imported.int_model.meta["quant"]["rounding"] == "onnxruntime"
    linears = [b.fc1.requant for b in imported.int_model.blocks]
    assert all(r.rounding == "onnxruntime" and 2**23 <= np.min(r.mult) <= np.max(r.mult) < 2**24 for r in linears)
    assert {b.add1.rounding for b in imported.int_model.blocks} == {"onnxruntime_u8"}
    x, y = onnx_zoo.data("digits")
    side = runtime.side_by_side(imported, x, y)
    gemms, per_million, _ = gemm_figures(side, "on")
    assert gemms == 2 + 5 * imported.int_model.config.depth and per_million == 0
    assert all(d.differ == 0 for d in side.isolated["on"] if ".add" in d.point)
    _, meaning = onnx_zoo.side("digits", "uint8")
    assert gemm_figures(meaning, "on")[1] > 0
    out = tmp_path / "vec"
    args = ["vectors", "--checkpoint", str(path), "--variant", "requant=onnxruntime", "--limit", "1"]
    res = runner.invoke(main, [*args, "--blocks", "layers.0.attn.h0.qk,layers.0.attn.proj,layers.0.add1",
                               "--out", str(out), "-q"])  # fmt: skip
    assert res.exit_code == 0, res.output
    rounding = {vectors.read(d).kind: vectors.read(d).params["rounding"] for d in vectors.find_sets(out)}
    assert rounding == {"gemm": "onnxruntime", "residual_add": "onnxruntime_u8"}, rounding
    res = runner.invoke(main, ["sim", str(out), "--simulator", "icarus", "-q"])
    assert res.exit_code == 0 and "3 passed, 0 failed" in res.output, res.output
    message = _refused(runner, ["compare", "--checkpoint", str(path), "--variant", "requant=floor"], tmp_path)
    assert "requant=onnxruntime" in message
