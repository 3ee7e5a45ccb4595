"""Forms of QDQ files that quantizers other than onnxruntime's write (TensorRT Model Optimizer's, in
make test-onnx's tests/test_onnx_full.py::test_modelopt_file), made here from onnxruntime's digits
file by editing its graph, each against the file it was made from: weights stored float and
quantized in the graph, a fused qkv quantized in parts after its split, a residual skip the file
leaves float, a GEMM the file leaves float.
"""

from __future__ import annotations

import numpy as np
import pytest

from hwvit.onnx import build, runtime
from hwvit.onnx.ort import session


def _load(path):
    import onnx

    return onnx.load(str(path))


def _save(model, path):
    import onnx

    onnx.save(model, str(path))
    return path


def _producer(model) -> dict:
    return {o: n for n in model.graph.node for o in n.output}


def _drop(model, codes: list[str]) -> None:
    """Each QuantizeLinear writing one of ``codes`` taken out with its DequantizeLinear nodes: their
    readers read the float tensor it quantized."""
    for c in codes:
        q = _producer(model)[c]
        dqs = [n for n in model.graph.node if n.op_type == "DequantizeLinear" and n.input[0] == c]
        outs = {d.output[0] for d in dqs}
        for n in model.graph.node:
            n.input[:] = [q.input[0] if i in outs else i for i in n.input]
        kept = [n for n in model.graph.node if n is not q and all(n is not d for d in dqs)]
        del model.graph.node[:]
        model.graph.node.extend(kept)


def _scale(model, t: str) -> np.ndarray:
    """The scale of the DequantizeLinear writing ``t``."""
    from onnx import numpy_helper

    inits = {i.name: i for i in model.graph.initializer}
    return numpy_helper.to_array(inits[_producer(model)[t].input[1]]).astype(np.float32)


def runtime_dequantized(model, dq) -> np.ndarray:
    """A DequantizeLinear of constant codes, as onnxruntime computes it."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.graph.output.append(onnx.helper.make_empty_tensor_value_info(dq.output[0]))
    sess = session(m, False)
    x = np.zeros([1, *[d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim[1:]]], np.float32)
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"input": x})))[dq.output[0]]


def _logits(imported, x) -> np.ndarray:
    return imported.int_model.forward(runtime.input_codes(imported, x), quantized=True)


def test_quantized_constants_are_onnxruntimes():
    """A QuantizeLinear of a float constant (int8 and uint8, one scale or one per channel, values at
    exact halves of the grid and beyond its range) folds into the codes onnxruntime computes."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from hwvit.onnx import qonnx

    rng = np.random.default_rng(7)
    for dtype, axis in ((np.int8, None), (np.int8, 1), (np.uint8, 0), (np.uint8, 1)):
        scale = np.float32(0.02) if axis is None else rng.uniform(0.005, 0.05, 6 if axis == 0 else 5).astype(np.float32)
        z = 0 if dtype == np.int8 else 128
        zero = dtype(z) if axis is None else np.full(np.shape(scale), 3 if dtype == np.int8 else 120, dtype)
        grid = rng.integers(-140, 140, (6, 5)) + rng.choice([0.0, 0.5, -0.5, 0.25], (6, 5))
        s = scale if axis is None else (scale.reshape(-1, 1) if axis == 0 else scale.reshape(1, -1))
        w = (grid * s).astype(np.float32)
        inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.asarray(scale), "s"),
                 numpy_helper.from_array(np.asarray(zero), "z")]  # fmt: skip
        attrs = {} if axis is None else {"axis": axis}
        nodes = [helper.make_node("QuantizeLinear", ["w", "s", "z"], ["c"], name="wq", **attrs)]
        out_type = TensorProto.INT8 if dtype == np.int8 else TensorProto.UINT8
        graph = helper.make_graph(nodes, "g", [], [helper.make_tensor_value_info("c", out_type, [6, 5])], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
        onnx.checker.check_model(model)
        want = session(model, False).run(None, {})[0]
        conv = qonnx._Converter(model)
        got = qonnx._quantized_constant(conv, model.graph.node[0])
        assert got.dtype == want.dtype and np.array_equal(got, want), (dtype, axis)
        assert np.any(grid % 1 == 0.5) and (want.min() == np.iinfo(dtype).min or want.max() == np.iinfo(dtype).max)
    blocked = helper.make_node("QuantizeLinear", ["w", "s", "z"], ["c"], name="wq_blocks", axis=1, block_size=2)
    with pytest.raises(qonnx.GraphError, match="wq_blocks.*blocked quantization"):
        qonnx._quantized_constant(conv, blocked)
    conv.consts["z16"] = np.zeros(5, np.int16)
    wide = helper.make_node("QuantizeLinear", ["w", "s", "z16"], ["c"], name="wq_int16", axis=1)
    with pytest.raises(qonnx.GraphError, match="wq_int16.*int16 codes; hwvit reads int8 and uint8"):
        qonnx._quantized_constant(conv, wide)


def test_weights_quantized_in_the_graph(onnx_zoo, tmp_path):
    """Every weight of onnxruntime's file stored float (its dequantized codes) and quantized by a
    QuantizeLinear in the graph, as TensorRT Model Optimizer stores them: the same integer model."""
    from onnx import helper, numpy_helper

    path = onnx_zoo.file("digits", "symmetric")
    model = _load(path)
    inits = {i.name: i for i in model.graph.initializer}
    nodes, moved = [], 0
    for n in model.graph.node:
        if n.op_type == "DequantizeLinear" and n.input[0] in inits and inits[n.input[0]].data_type == 3:  # int8
            codes = numpy_helper.to_array(inits[n.input[0]]).astype(np.float32)
            s = numpy_helper.to_array(inits[n.input[1]]).astype(np.float32)
            axis = next((a.i for a in n.attribute if a.name == "axis"), 1)
            shape = [1] * codes.ndim
            if s.size > 1:
                shape[axis] = -1
            model.graph.initializer.append(numpy_helper.from_array(codes * s.reshape(shape), f"{n.input[0]}_float"))
            q = helper.make_node("QuantizeLinear", [f"{n.input[0]}_float", *n.input[1:]], [f"{n.input[0]}_q"],
                                 name=f"{n.name}_q", **({"axis": axis} if s.size > 1 else {}))  # fmt: skip
            n.input[0] = f"{n.input[0]}_q"
            nodes.append(q)
            moved += 1
        nodes.append(n)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    edited = build.load(_save(model, tmp_path / "float-weights.onnx"))
    x = onnx_zoo.data("digits", 8)[0]
    assert moved >= 3 * 4 + 2
    assert np.array_equal(_logits(edited, x), _logits(build.load(path), x))
    assert set(edited.origin.values()) == {"file", "hwvit arithmetic"}


def _qkv_parts(model, layer: int = 0) -> tuple[list[str], list[str]]:
    """(the quantizers the qkv's output meets up to its split into q, k, v; those of the parts the
    attention reads: q, K^T, v) of onnxruntime's digits file."""
    p = f"/layers.{layer}/attn/"
    whole = [f"{p}{t}_output_0_QuantizeLinear_Output" for t in ("qkv/MatMul", "qkv/Add", "Reshape", "Transpose")]
    whole += [f"{p}Split_output_{k}_QuantizeLinear_Output" for k in range(3)]
    whole += [f"{p}Squeeze_1_output_0_QuantizeLinear_Output"]
    parts = [f"{p}{t}_output_0_QuantizeLinear_Output" for t in ("Squeeze", "Transpose_1", "Squeeze_2")]
    return whole, parts


def test_fused_qkv_quantized_in_parts(onnx_zoo, tmp_path):
    """onnxruntime's file with the qkv quantized only in its q, K^T and v parts at the qkv's scale (a
    per-tensor quantizer commutes with moves, so the file means the same integers): hwvit reads three
    linears, each the qkv's weight rows of its features, and the same integer model as the file
    quantized whole, its parts onnxruntime's codes in the file's layout (K^T; the float bias put on
    the accumulator's grid, so that nothing but the layout can differ); a part that is not heads in
    order (v laid out (B, N, H, hd)) is refused in one line naming its node."""
    from onnx import helper, numpy_helper

    path = onnx_zoo.file("digits", "symmetric")
    whole_model = _load(path)
    for i in range(3):  # every block's: one form of attention through the model
        whole = _qkv_parts(whole_model, i)[0]
        _drop(whole_model, whole[:1])  # the MatMul's own quantizer, and its bias stored float: one linear step
        add = next(n for n in whole_model.graph.node if n.name == f"/layers.{i}/attn/qkv/Add")
        k, dq = next((k, _producer(whole_model)[t]) for k, t in enumerate(add.input) if "bias" in t)
        mm = _producer(whole_model)[next(t for t in add.input if "bias" not in t)]
        acc = np.float32(_scale(whole_model, mm.input[0])) * _scale(whole_model, mm.input[1])  # on its grid
        bias = (np.rint(runtime_dequantized(whole_model, dq) / acc.astype(np.float64)) * acc).astype(np.float32)
        whole_model.graph.initializer.append(numpy_helper.from_array(bias, f"qkv_bias_float_{i}"))
        add.input[k] = f"qkv_bias_float_{i}"
    whole_file = _save(whole_model, tmp_path / "whole.onnx")
    parts_model = _load(whole_file)
    for i in range(3):
        _drop(parts_model, _qkv_parts(parts_model, i)[0][1:])
    parts = _qkv_parts(parts_model, 0)[1]
    parts_file = _save(parts_model, tmp_path / "parts.onnx")
    a, b = build.load(whole_file), build.load(parts_file)
    x = onnx_zoo.data("digits", 8)[0]
    assert np.array_equal(_logits(a, x), _logits(b, x))
    fused, split = a.int_model.blocks[0].attn, b.int_model.blocks[0].attn
    assert split.qkv is None and fused.qkv is not None
    assert np.array_equal(np.concatenate([split.q.w, split.k.w, split.v.w]), fused.qkv.w)
    assert np.array_equal(np.concatenate([split.q.bias, split.k.bias, split.v.bias]), fused.qkv.bias)
    alone = runtime.isolated(b, runtime.input_codes(b, x), runtime.run_codes(b, x)[0])  # on onnxruntime's inputs
    for role in "qkv":  # in the file's layout (K^T)
        ours, theirs = alone[f"layers.0.attn.{role}"]
        d = np.abs(runtime._layout(f"layers.0.attn.{role}", ours, theirs) - theirs.astype(np.int64))
        assert np.count_nonzero(d) == 0, (role, d.max(), np.count_nonzero(d))

    v_q = _producer(parts_model)[parts[2]]
    v_dq = next(n for n in parts_model.graph.node if n.op_type == "DequantizeLinear" and n.input[0] == parts[2])
    there = helper.make_node("Transpose", [v_q.input[0]], ["v_nh"], perm=[0, 2, 1, 3], name="v_heads_last")
    back = helper.make_node("Transpose", ["v_nh_dq"], [v_dq.output[0]], perm=[0, 2, 1, 3], name="v_heads_back")
    v_q.input[0], v_dq.output[0] = "v_nh", "v_nh_dq"
    nodes = []
    for n in parts_model.graph.node:
        if n is v_q:
            nodes.append(there)
        nodes.append(n)
        if n is v_dq:
            nodes.append(back)
    del parts_model.graph.node[:]
    parts_model.graph.node.extend(nodes)
    with pytest.raises(ValueError, match=r"qkv/MatMul .*not contiguous heads") as err:
        build.load(_save(parts_model, tmp_path / "bad.onnx"))
    assert "\n" not in str(err.value)


def test_residual_skip_left_float(onnx_zoo, tmp_path):
    """onnxruntime's file with each block's second residual add reading the first's float sum (the
    file quantizes it for the LayerNorm alone, as TensorRT Model Optimizer's files do): hwvit carries
    the sum quantized along the skip too, the file's own integer model."""
    path = onnx_zoo.file("digits", "symmetric")
    plain = build.load(path)
    model = _load(path)
    producer = _producer(model)
    for i in range(3):
        add2 = next(n for n in model.graph.node if n.name == f"/layers.{i}/Add_1")
        for k, t in enumerate(add2.input):
            q = producer.get(producer[t].input[0]) if producer[t].op_type == "DequantizeLinear" else None
            if q is not None and q.output[0] == plain.points[f"layers.{i}.add1"]:
                add2.input[k] = q.input[0]
    assert sum(q.output[0] == plain.points["layers.0.add1"] for q in model.graph.node) == 1
    edited = build.load(_save(model, tmp_path / "skip.onnx"))
    x = onnx_zoo.data("digits", 8)[0]
    assert np.array_equal(_logits(edited, x), _logits(plain, x))


def test_a_gemm_left_float(onnx_zoo, tmp_path):
    """onnxruntime's file with the classifier's weight stored float (no quantizer, as TensorRT Model
    Optimizer leaves it): hwvit quantizes it symmetric int8 at ``max |w| / 127``, and says so as the
    logits' origin; the file's quantizer of the logits stays."""
    from onnx import numpy_helper

    path = onnx_zoo.file("digits", "symmetric")
    plain = build.load(path)
    model = _load(path)
    gemm = next(n for n in model.graph.node if n.op_type == "Gemm")
    dq = _producer(model)[gemm.input[1]]
    inits = {i.name: i for i in model.graph.initializer}
    codes = numpy_helper.to_array(inits[dq.input[0]]).astype(np.float32)
    s = numpy_helper.to_array(inits[dq.input[1]]).astype(np.float32)
    shape = [1] * codes.ndim
    if s.size > 1:
        shape[next((a.i for a in dq.attribute if a.name == "axis"), 1)] = -1
    w = codes * s.reshape(shape)
    model.graph.initializer.append(numpy_helper.from_array(w, "head_float"))
    gemm.input[1] = "head_float"
    edited = build.load(_save(model, tmp_path / "float-head.onnx"))
    assert edited.origin["logits"] == "hwvit calibration" and plain.origin["logits"] == "file"
    assert {p for p, o in edited.origin.items() if o != plain.origin[p]} == {"logits"}
    head = edited.int_model.readout.head
    want = np.rint(w / np.float32(float(np.abs(w).max()) / 127))
    assert np.array_equal(head.w, want.T if head.w.shape == want.T.shape else want)
