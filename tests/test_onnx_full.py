"""make test-onnx: every test model in every quantize_static configuration, calibrated on 256
images and compared with onnxruntime on its whole evaluation split (the digits held-out split:
449 images; the second ViT: 200 random images). tests/test_onnx.py is the part make test runs.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx_zoo import gemm_figures

from hwvit.onnx import build, runtime
from hwvit.onnx.make import CONFIGS

pytestmark = [pytest.mark.onnx, pytest.mark.xdist_group("onnx")]


# GEMMs alone against onnxruntime, per million of their outputs (make test-onnx's whole splits):
# optimizations off, the file's float path: the digits ViT at most 5; the second and the HF-shaped
# ViT (random weights) at most 10, 5.4 measured, every one onnxruntime's float32 at a half (the
# order of its float32 sums, and its float32 dequantization and division: docs/onnx.md). On, the
# fused integer kernels: at most 5, but the digits uint8 file's 8.8 (one bias-add case of
# onnxruntime's float32 QLinearAdd, at every occurrence of its code) and the HF-shaped symmetric
# file's 8.1 (one P.V accumulator whose float32 product onnxruntime rounds onto a half, on 12 outputs).
OFF = {"digits": 5, "second": 10, "hf": 10}
ON = {("digits", "uint8"): 10, ("hf", "symmetric"): 10}


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("name", ["digits", "second", "hf"])
def test_gemms_and_agreement(onnx_zoo, name, config):
    """The GEMMs alone within 1 LSB of onnxruntime on at most ``OFF`` / ``ON`` per million of their
    outputs; the GELU tables equal onnxruntime everywhere; top-1 agreement with onnxruntime at least
    99.5% on the digits held-out split, graph optimizations off and on, and 100% with the file's own
    float LayerNorm and softmax in place of hwvit's."""
    imported, side = onnx_zoo.side(name, config, images=None)
    separate = imported.int_model.config.qkv == "separate"
    limits = {"off": OFF[name], "on": ON.get((name, config), 5)}
    for level, limit in limits.items():
        gemms, per_million, max_lsb = gemm_figures(side, level)
        assert gemms == 2 + (7 if separate else 5) * imported.int_model.config.depth
        assert max_lsb <= 1 and per_million <= limit, (level, per_million)
    assert all(d.differ == 0 for d in side.isolated["off"] if d.point.endswith("mlp.gelu"))
    if name == "digits":
        assert side.agreement["off"] >= 0.995 and side.agreement["on"] >= 0.995, side.agreement
        assert side.top1["hwvit"] >= 0.96 and side.file_float_agreement == 1.0
    else:  # random weights on random images: near-tied logits are common (the HF ViT: 92-96%);
        # what parts them is hwvit's LayerNorm alone, and the logits stay close
        assert side.agreement["off"] >= 0.9 and side.file_float_agreement == 1.0, side.agreement
        assert side.logits_sqnr_db["off"] > 20


def _gemm_requants(imported, x):
    """(point, accumulators, hwvit's outputs, the file's scales ``(s_in, s_w per channel, s_out)``, the
    output's zero point) of every GEMM requant of hwvit's forward on ``x`` (a MatMul's, before the Add
    of its bias)."""
    import re

    from hwvit.intvit import Trace

    g = imported.graph
    tr = Trace(records=True)
    imported.int_model.forward(runtime.input_codes(imported, x), trace=tr, quantized=True)
    for rec in tr.records:
        if rec.kind != "gemm" or rec.path.endswith(".qk"):
            continue
        acc, y = rec.tensors["acc"].data, rec.tensors["y"].data
        head = re.match(r"(layers\.\d+\.attn)\.(img\d+\.)?h\d+\.av$", rec.path)
        point = (
            head.group(1) + ".context" if head else {"embed.proj": "embed", "head": "logits"}.get(rec.path, rec.path)
        )
        step = g.by_out[imported.points[point]]
        if step.kind == "bias":
            step = g.by_out[g.source(step.inputs[0])]
        s_in = g.quant_of(g.source(step.inputs[0])).s
        s_w = g.quant_of(g.source(step.inputs[1])).scale if head else step.weight_q.scale
        s_w = np.broadcast_to(np.asarray(s_w, np.float64).reshape(-1), acc.shape[1:])
        yield point, acc, y, (s_in, s_w, step.out_q.s), rec.params.get("zero_out", 0)


def test_second_vit_gemms_round_exactly(onnx_zoo):
    """Every GEMM requant of the second ViT's files, on its 200 images (each file's 2.8 million GEMM
    outputs): hwvit's integer is the real ``acc * s_in * s_w / s_out`` rounded half to even exactly
    (its 31-bit multiplier of the file's float64 ratio), so where onnxruntime's differ it is
    onnxruntime's float32 that lands on the other side of a half."""
    from fractions import Fraction

    x, _ = onnx_zoo.data("second", None)
    for config in CONFIGS:
        imported = build.load(onnx_zoo.file("second", config), softmax="round_each")
        outputs = 0
        for point, acc, y, (s_in, s_w, s_out), zero in _gemm_requants(imported, x):
            real = acc * (s_in * s_w / s_out)  # within 2^-40 of the exact value: only a near half needs Fractions
            exact = np.rint(real)
            for i in zip(*np.nonzero(np.abs(np.abs(real - np.floor(real)) - 0.5) < 1e-6)):
                ratio = Fraction(s_in) * Fraction(float(s_w[i[-1]])) / Fraction(s_out)
                exact[i] = round(Fraction(int(acc[i])) * ratio)  # Python's round: half to even
            assert np.array_equal(y, np.clip(exact.astype(np.int64) + zero, -128, 127)), (config, point)
            outputs += acc.size
        assert outputs > 800_000, outputs


@pytest.mark.parametrize("config", list(CONFIGS))
def test_power_of_two_scales(onnx_zoo, config):
    """Every configuration with its scales rounded up to powers of two: every GEMM's integers alone
    equal onnxruntime's exactly on the whole split with graph optimizations off (the file's meaning),
    and on at int8 (its fused kernels). At uint8 onnxruntime's fused bias add (QLinearAdd) rounds the
    exact halves such scales make otherwise than its own unoptimized graph: 0.9% of all GEMM outputs
    part by 1 LSB, every one at a GEMM followed by an int8 bias; requant=onnxruntime, which computes
    that add as QLinearAdd does, equals the deployed file at every GEMM and add."""
    imported, side = onnx_zoo.side("digits", config, images=None, pow2=True)
    gemms, per_million, _ = gemm_figures(side, "off")
    assert gemms == 2 + 5 * imported.int_model.config.depth and per_million == 0, per_million
    if config != "uint8":
        assert gemm_figures(side, "on")[1] == 0
    else:  # requant=onnxruntime is what it deploys: its QLinearAdd too, every GEMM and add equal
        deployed = build.load(onnx_zoo.file("digits", config, pow2=True), softmax="round_each", requant="onnxruntime")
        on = runtime.side_by_side(deployed, *onnx_zoo.data("digits", None), levels=("off", "on"))
        assert gemm_figures(on, "on")[1] == 0
        assert all(d.differ == 0 for d in on.isolated["on"] if ".add" in f".{d.point}")


def test_parting_images_are_hwvits_layernorm(onnx_zoo):
    """A file calibrated on 128 images: 2 of the first 200 held-out images part from onnxruntime
    (99.0%), at near-tied logits. Every GEMM, table and (round_each) softmax alone is the file's to
    within its float32 rounding; hwvit's integer LayerNorm alone differs by 1 LSB on about 0.8% of its
    outputs, which accumulate; with the file's own float LayerNorm at those points the agreement is
    100%: the parting is hwvit's LayerNorm arithmetic, not its calibration (every scale is the file's)."""
    _, side = onnx_zoo.side("digits", "symmetric", images=200, calib=128)
    assert side.agreement["off"] >= 0.985 and side.file_float_agreement == 1.0
    norms = [d for d in side.isolated["off"] if d.origin == "hwvit arithmetic" and ".norm" in f".{d.point}"]
    assert norms and all(d.max_lsb == 1 and 0 < d.differ / d.elements < 0.02 for d in norms)
    probs = [d for d in side.isolated["off"] if d.point.endswith("attn.probs")]
    assert sum(d.differ for d in probs) / sum(d.elements for d in probs) < 1e-4


@pytest.mark.parametrize("config", [*CONFIGS, "qcdq", "pt2e", "modelopt", "uint8-onnxruntime"])
def test_vectors_pass_the_verilog(onnx_zoo, config, tmp_path):
    """`hwvit vectors` of each digits file (onnxruntime's configurations; Brevitas' QCDQ, PT2E's and TensorRT
    Model Optimizer's,
    whose float points `hwvit vectors` calibrates; softmax=round_each, as onnxruntime rounds; the uint8
    file read as onnxruntime deploys it too, requant=onnxruntime), then `hwvit sim --simulator both`:
    every set passes bit for bit, softmax_round_each's on rtl/softmax_round_each.v."""
    from click.testing import CliRunner

    from hwvit import blocks, vectors
    from hwvit.cli import main

    out = tmp_path / "vec"
    made = {"qcdq": onnx_zoo.qcdq_file, "pt2e": onnx_zoo.pt2e_file, "modelopt": onnx_zoo.modelopt_file}
    config, _, requant = config.partition("-")
    path = made[config]() if config in made else onnx_zoo.file("digits", config)
    args = ["vectors", "--checkpoint", str(path), "--limit", "1"]
    if requant:
        args += ["--variant", f"requant={requant}"]
    res = CliRunner().invoke(main, [*args, "--variant", "softmax=round_each", "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output
    kinds = {vectors.read(d).kind for d in vectors.find_sets(out)}
    assert all(blocks.get(k).rtl for k in kinds), kinds
    if requant:
        rounding = {vectors.read(d).params.get("rounding") for d in vectors.find_sets(out)}
        assert {"onnxruntime", "onnxruntime_u8"} <= rounding, rounding
    assert {"gemm", "residual_add", "gelu", "layernorm", "softmax_round_each"} <= kinds
    res = CliRunner().invoke(main, ["sim", str(out), "--simulator", "both", "-j", "2", "-q"])
    sets = len(vectors.find_sets(out))
    assert res.exit_code == 0 and f"{2 * sets} passed, 0 failed" in res.output, res.output


def _qonnx_linear(int_model, weight: str):
    """hwvit's IntLinear of a QONNX file's weight initializer (its torch name)."""
    if weight.startswith("patch_embed."):
        return int_model.embed.patch_embed.proj
    if weight.startswith("head."):
        return int_model.readout.head
    _, i, part, name, _ = weight.split(".")
    block = int_model.blocks[int(i)]
    return getattr(block.attn if part == "attn" else block, name)


def test_qonnx_from_brevitas(onnx_zoo):
    """A QONNX file (Brevitas quantizes the digits ViT's linears and patch embedding: Quant nodes of
    weights and inputs; the residual stream and the inputs of LayerNorm, softmax and GELU float):
    hwvit reads it (its Quant nodes as the file's quantizers; the float points at hwvit's calibration
    and arithmetic) and its integers equal qonnx's execution (qonnx.core.onnx_exec, image by image)
    at every point the file quantizes: every weight code; every quantized input's codes, through
    hwvit's quantization of qonnx's float input at the file's quantizer; every GEMM's accumulators
    from those codes. End to end: top-1 on the held-out split as Brevitas' own."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx
    from qonnx.transformation.infer_shapes import InferShapes

    from hwvit.onnx.graph import Quant, quantize_f32

    dynamic, batch1 = onnx_zoo.qonnx_files()
    _, x_calib, x_test, y_test = onnx_zoo.model("digits")
    imported = build.load(dynamic, calib=x_calib[:256])
    m = imported.int_model
    assert (m.forward(x_test).argmax(1) == y_test).mean() >= 0.96
    origins = set(imported.origin.values())
    assert origins == {"file", "hwvit calibration", "hwvit arithmetic"}, origins
    qm = ModelWrapper(str(batch1)).transform(InferShapes())
    consts = {i.name for i in qm.graph.initializer}
    quants = [n for n in qm.graph.node if n.op_type == "Quant"]
    readers = {i: n for n in qm.graph.node for i in n.input}
    checked = {"weights": 0, "inputs": 0, "gemms": 0}
    for x in x_test[:3]:
        with warnings.catch_warnings():  # qonnx's notes on the shapes its shape inference left open
            warnings.simplefilter("ignore", UserWarning)
            ctx = execute_onnx(qm, {"input": x[None]}, return_full_exec_context=True)

        def codes(n, ctx=ctx):
            scale, zero = qm.get_initializer(n.input[1]), qm.get_initializer(n.input[2])
            c = ctx[n.output[0]] / scale + zero
            assert np.abs(c - np.rint(c)).max() < 1e-3
            return np.rint(c).astype(np.int64), float(scale)

        weights = {}
        for n in quants:
            if n.input[0] in consts:  # a weight: hwvit's codes are the file's
                c, s = codes(n)
                lin = _qonnx_linear(m, n.input[0])
                assert np.array_equal(lin.w, c.reshape(c.shape[0], -1)), n.input[0]
                weights[n.output[0]] = (lin, s)
                checked["weights"] += 1
        for n in quants:
            if n.input[0] in consts:
                continue
            c, s = codes(n)  # hwvit's quantization of qonnx's float input at the file's quantizer
            q = Quant(np.float32(s), np.zeros((), np.int64), None, np.dtype(np.int8))
            assert np.array_equal(quantize_f32(ctx[n.input[0]], q), c), n.name
            checked["inputs"] += 1
            gemm = readers[n.output[0]]
            w_name = next(i for i in gemm.input[1:] if i in weights or readers.get(i) is gemm)
            w_src = w_name if w_name in weights else None
            if w_src is None:  # a Transpose of the weight's Quant between
                w_src = next(t.input[0] for t in qm.graph.node if t.output[0] == w_name)
            lin, s_w = weights[w_src]
            out = ctx[gemm.output[0]]
            bias = qm.get_initializer(gemm.input[2]) if len(gemm.input) > 2 else 0  # Conv's and Gemm's own
            if gemm.op_type == "Conv":  # patches (c, kh, kw) as hwvit's conv embedding
                k = lin.w.shape[1]
                p = m.embed.patch_embed.patch_size
                b, ch, hh, ww = c.shape
                patches = c.reshape(b, ch, hh // p, p, ww // p, p).transpose(0, 2, 4, 1, 3, 5).reshape(b, -1, k)
                acc = patches @ lin.w.T
                ref = out.transpose(0, 2, 3, 1).reshape(acc.shape) - bias
            else:
                acc = c.reshape(-1, c.shape[-1]) @ lin.w.T
                ref = out.reshape(acc.shape)
                if gemm.op_type == "Gemm":
                    ref = ref - bias
            real = ref / (s * s_w)
            assert np.abs(real - acc).max() < 0.05, gemm.name  # the same integers, up to qonnx's float32
            checked["gemms"] += 1
    assert checked == {"weights": 3 * 14, "inputs": 3 * 14, "gemms": 3 * 14}, checked


def test_brevitas_qcdq_is_its_qonnx(onnx_zoo, tmp_path):
    """The Brevitas model of the QONNX tests exported as QCDQ (QuantizeLinear, Clip, DequantizeLinear
    at its GEMMs' inputs and weights; the residual stream, LayerNorm, softmax and GELU float): hwvit
    folds its Clips, calibrates its float points as the QONNX file's, and its integer model is the
    QONNX file's at every point (whose integers test_qonnx_integers_are_qonnxs checks against
    qonnx's execution); the file's own quantized points equal onnxruntime's (softmax round_each, as
    onnxruntime rounds the probabilities the context reads). Without calibration
    inputs, one line; `hwvit compare` calibrates them itself."""
    import json

    from click.testing import CliRunner

    from hwvit.cli import main

    qcdq, (dynamic, _) = onnx_zoo.qcdq_file(), onnx_zoo.qonnx_files()
    _, x_calib, x_test, _ = onnx_zoo.model("digits")
    with pytest.raises(ValueError, match="give calibration inputs") as err:
        build.load(qcdq)
    assert "\n" not in str(err.value)
    a, b = (build.load(f, calib=x_calib[:256], softmax="round_each") for f in (qcdq, dynamic))
    codes_a, logits_a = runtime.hwvit_codes(a, runtime.input_codes(a, x_test))
    codes_b, logits_b = runtime.hwvit_codes(b, runtime.input_codes(b, x_test))
    assert codes_a.keys() == codes_b.keys() and len(codes_a) > 50
    assert all(np.array_equal(codes_a[p], codes_b[p]) for p in codes_a) and np.array_equal(logits_a, logits_b)
    assert set(a.origin.values()) == {"file", "hwvit calibration", "hwvit arithmetic"}
    side = runtime.side_by_side(a, x_test[:64], levels=("off",))
    own = [d for d in side.isolated["off"] if d.origin == "file"]
    assert len(own) >= 7 and all(d.differ == 0 for d in own), [(d.point, d.differ) for d in own]
    res = CliRunner().invoke(main, ["compare", "--checkpoint", str(qcdq), "--limit", "32", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["top1_int"] >= 0.9


def _calibrated(onnx_zoo, path):
    """(imported, held-out images, labels) of a digits file that leaves points float: refused without
    calibration inputs, then read with hwvit's calibration on 256 training images (softmax
    round_each), its points' origins the file's, hwvit's calibration and hwvit's arithmetic."""
    _, x_calib, x_test, y_test = onnx_zoo.model("digits")
    with pytest.raises(ValueError, match="give calibration inputs"):
        build.load(path)
    imported = build.load(path, calib=x_calib[:256], softmax="round_each")
    assert set(imported.origin.values()) == {"file", "hwvit calibration", "hwvit arithmetic"}
    return imported, x_test, y_test


def test_pt2e_file(onnx_zoo):
    """A PT2E file (torchao's X86InductorQuantizer: int8 per-channel weights and uint8 inputs of every
    linear and convolution, the rest float; torch.onnx's dynamo exporter, its GELU one Gelu node):
    hwvit calibrates what it leaves float; the file's quantized points (the input and each GEMM's
    input that is one: the context, GELU's output) equal onnxruntime's alone; agreement with
    onnxruntime on the whole held-out split at least 99.5%, top-1 as the file's."""
    path = onnx_zoo.pt2e_file()
    imported, x_test, y_test = _calibrated(onnx_zoo, path)
    assert imported.graph.quant_of(imported.points["input"]).dtype == np.uint8
    side = runtime.side_by_side(imported, x_test, y_test, levels=("off",))
    own = [d for d in side.isolated["off"] if d.origin == "file"]
    assert len(own) >= 7 and all(d.differ == 0 for d in own), [(d.point, d.differ) for d in own]
    assert side.agreement["off"] >= 0.995 and abs(side.top1["hwvit"] - side.top1["off"]) <= 0.01, side.top1


def _biases_on_the_grid(src, dst) -> int:
    """``src`` with each float bias a GEMM's output adds moved onto the GEMM's accumulator grid as
    hwvit.onnx.build puts it: ``round(b / (s_in * s_w)) * (s_in * s_w)`` (float32 scales, their product
    per output channel). Returns how many biases moved."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(src))
    inits = {i.name: i for i in model.graph.initializer}
    producer = {o: n for n in model.graph.node for o in n.output}

    def scale_of(t: str) -> np.ndarray:
        dq = producer[t]
        assert dq.op_type == "DequantizeLinear", dq.op_type
        return numpy_helper.to_array(inits[dq.input[1]]).astype(np.float32)

    moved = 0
    for node in model.graph.node:
        gemm = next((producer[i] for i in node.input if i in producer and producer[i].op_type == "MatMul"), None)
        bias = next((i for i in node.input if i in inits and numpy_helper.to_array(inits[i]).size > 1), None)
        if node.op_type != "Add" or gemm is None or bias is None:
            continue
        acc = (scale_of(gemm.input[0]) * scale_of(gemm.input[1])).astype(np.float64)
        b = numpy_helper.to_array(inits[bias]).astype(np.float64)
        on_grid = (np.rint(b / acc) * acc).astype(np.float32)
        inits[bias].CopyFrom(numpy_helper.from_array(on_grid, bias))
        moved += 1
    onnx.save(model, str(dst))
    return moved


def test_modelopt_file(onnx_zoo, tmp_path):
    """A TensorRT Model Optimizer file (ONNX PTQ, int8, max calibration; tests/producers/modelopt_ptq.py):
    weights stored float and quantized in the graph, the fused qkv quantized in q, k, v parts after its
    split, the residual stream quantized into each LayerNorm and float along the skip; biases, scores,
    the last residual add and the classifier float. hwvit folds the weights' quantizers into the
    codes onnxruntime computes, slices the qkv into its parts, carries the stream quantized and
    calibrates what the file leaves float. On the whole held-out split, the file's quantized points
    without a float constant equal onnxruntime's alone; each GEMM with a float bias differs by at most
    1 LSB (hwvit rounds the bias onto the int32 accumulator grid), and with the file's biases moved
    onto that grid by at most 5 per million; agreement at least 99.5%. Deployed (optimizations on),
    every point is read, within 1 LSB."""
    import onnx

    from hwvit.onnx.ort import session

    path = onnx_zoo.modelopt_file()
    imported, x_test, y_test = _calibrated(onnx_zoo, path)
    # the qkv weight's codes as onnxruntime quantizes them, and hwvit's q, k, v parts of them
    model = onnx.load(str(path))
    name = imported.weights["layers.0.attn.q"]
    q_node = next(n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.output[0] in {
        d.input[0] for d in model.graph.node if d.op_type == "DequantizeLinear" and d.output[0] == name})  # fmt: skip
    model.graph.output.append(onnx.helper.make_empty_tensor_value_info(q_node.output[0]))
    sess = session(model, False)
    codes = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"input": x_test[:1]})))[q_node.output[0]]
    attn = imported.int_model.blocks[0].attn
    assert attn.qkv is None and codes.shape == (64, 192)
    assert np.array_equal(np.concatenate([attn.q.w, attn.k.w, attn.v.w]), codes.T)

    bias_gemms = (".attn.q", ".attn.k", ".attn.v", ".attn.proj", ".mlp.fc2")
    side = runtime.side_by_side(imported, x_test, y_test)
    own = [d for d in side.isolated["off"] if d.origin == "file"]
    exact = [d for d in own if not d.point.endswith(bias_gemms)]
    assert {d.point.split(".")[-1] for d in exact} == {"input", "context", "gelu", "add1", "add2"}
    assert all(d.differ == 0 for d in exact), [(d.point, d.differ) for d in exact]
    # deployed, onnxruntime moves q's, K^T's and v's quantizers up before their moves: read there
    on = {d.point: d for d in side.isolated["on"]}
    assert all(f"layers.{i}.attn.{r}" in on for i in range(3) for r in ("q", "k", "v", "context")), sorted(on)
    assert all(d.max_lsb <= 1 for d in on.values()), [(p, d.max_lsb) for p, d in on.items()]
    assert all(d.max_lsb <= 1 for d in own), [(d.point, d.max_lsb) for d in own]
    assert side.agreement["off"] >= 0.995 and abs(side.top1["hwvit"] - side.top1["off"]) <= 0.01, side.top1

    edited = tmp_path / "on-grid.onnx"
    assert _biases_on_the_grid(path, edited) == 3 * 4  # each block's qkv (one bias of q, k, v), proj, fc1, fc2
    imported = build.load(edited, calib=onnx_zoo.model("digits")[1][:256], softmax="round_each")
    side = runtime.side_by_side(imported, x_test, y_test, levels=("off",))
    gemms = [d for d in side.isolated["off"] if d.origin == "file" and d.point.endswith(bias_gemms)]
    assert len(gemms) >= 3 * 4, [d.point for d in gemms]
    per_million = 1e6 * sum(d.differ for d in gemms) / sum(d.elements for d in gemms)
    assert per_million <= 5, [(d.point, d.differ) for d in gemms]


def test_modelopt_file_on_the_core_verilator(onnx_zoo, tmp_path):
    """Model Optimizer's digits file compiled (`hwvit compile`, its float points calibrated as the CLI
    does) and run on the RTL core (Verilator, 8 x 8): q, k and v three GEMMs of their own, every
    logit of four held-out images equal to the file's integer model's."""
    from click.testing import CliRunner

    from hwvit import pipeline, toolchain
    from hwvit.cli import main
    from hwvit.core import run as crun
    from hwvit.core.coredir import read_core_dir

    toolchain.require("verilator")
    path = onnx_zoo.modelopt_file()
    res = CliRunner().invoke(main, ["compile", "--checkpoint", str(path), "--out", str(tmp_path / "core")])
    assert res.exit_code == 0, res.output
    core = read_core_dir(tmp_path / "core")
    names = [ins.name for ins in core.program]
    assert {"layers.0.attn.q", "layers.0.attn.k", "layers.0.attn.v"} <= set(names), names
    model = pipeline.load_quantized(path).int_model
    x, _ = onnx_zoo.data("digits", 4)
    run = crun.run_images(core, model, model.quantize_input(x), "verilator", 8, 8)
    np.testing.assert_array_equal(run.got, run.expected)


@pytest.mark.parametrize("name", ["second", "hf"])
def test_modelopt_files_of_other_shapes(onnx_zoo, name):
    """TensorRT Model Optimizer's files of the second ViT (its qkv quantized in parts, as the digits
    file's) and of the HF-shaped one (separate q, k, v; SDPA's scaling Muls after a Reshape whose sizes
    come from the graph's shapes, read as tables): each is read, and on the whole evaluation split
    the file's points that are no GEMM (tables, adds) equal onnxruntime's alone; its GEMMs (float32
    sums in onnxruntime, float biases) and hwvit's points are within 1 LSB."""
    path = onnx_zoo.modelopt_file(name)
    _, x_calib, x_test, y_test = onnx_zoo.model(name)
    imported = build.load(path, calib=x_calib[:256], softmax="round_each")
    attn = imported.int_model.blocks[0].attn
    assert attn.qkv is None and attn.q.w.shape == attn.k.w.shape == attn.v.w.shape
    side = runtime.side_by_side(imported, x_test, y_test, levels=("off",))
    own = [d for d in side.isolated["off"] if d.origin == "file"]
    gemms = (".attn.q", ".attn.k", ".attn.v", ".attn.context", ".attn.proj", ".mlp.fc1", ".mlp.fc2")
    exact = [d for d in own if not d.point.endswith(gemms)]
    assert len(exact) >= 2 * 3 and all(d.differ == 0 for d in exact), [(d.point, d.differ) for d in exact]
    assert all(d.max_lsb <= 1 for d in side.isolated["off"]), [(d.point, d.max_lsb) for d in side.isolated["off"]]


def test_qonnx_through_the_cli(onnx_zoo, tmp_path):
    """`hwvit compare` and `hwvit vectors` of the QONNX file (its float points calibrated on the digits
    training images): onnxruntime runs the file's QDQ form beside it; the sets pass check."""
    import json

    from click.testing import CliRunner

    from hwvit.cli import main
    from hwvit.vectors.check import check

    path = str(onnx_zoo.qonnx_files()[0])
    res = CliRunner().invoke(main, ["compare", "--checkpoint", path, "--limit", "32", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["top1_int"] >= 0.9 and out["onnxruntime"]["images"] == 32
    assert "hwvit calibration" in {d["origin"] for d in out["onnxruntime"]["isolated"]["off"]}
    res = CliRunner().invoke(main, ["vectors", "--checkpoint", path, "--limit", "1", "--blocks", "layers.0.*",
                                    "--out", str(tmp_path / "v"), "-q"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert all(error is None for _, error in check(tmp_path / "v"))


# requant=onnxruntime against the deployed files (optimizations on), per million of all GEMM outputs,
# measured: digits 0.08 / 0 / 0, second 0.36 / 0.36 / 0, HF-shaped 1.6 / 0 / 0 (symmetric, defaults,
# uint8); what is left is in the GEMMs onnxruntime leaves in float32 optimized (the patch embedding's
# Conv, HF's q, k and v MatMuls): one patch-embedding output and two of HF's v.
DEPLOYED = {("digits", "symmetric"): 0.5, ("second", "symmetric"): 1, ("second", "default"): 1, ("hf", "symmetric"): 2}


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("name", ["digits", "second", "hf"])
def test_requant_onnxruntime_is_what_it_deploys(onnx_zoo, name, config):
    """requant=onnxruntime (onnxruntime's binary32 multiplier and product at every GEMM, its QLinearAdd
    wherever it fuses an add) against the deployed file on the whole split: every GEMM within 1 LSB on
    at most ``DEPLOYED`` per million (0 where not listed), every add equal, and never more GEMM
    outputs apart than the file's own meaning (round half to even of the real multipliers)."""
    imported = build.load(onnx_zoo.file(name, config), softmax="round_each", requant="onnxruntime")
    x, y = onnx_zoo.data(name, None)
    side = runtime.side_by_side(imported, x, y)
    _, per_million, max_lsb = gemm_figures(side, "on")
    _, meaning = onnx_zoo.side(name, config, images=None)
    assert max_lsb <= 1 and per_million <= DEPLOYED.get((name, config), 0), per_million
    assert per_million <= gemm_figures(meaning, "on")[1]
    adds = [d for d in side.isolated["on"] if ".add" in f".{d.point}"]
    assert adds and all(d.differ == 0 for d in adds), [(d.point, d.differ) for d in adds if d.differ]
