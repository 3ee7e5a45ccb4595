"""A fused GEMM whose output the file quantizes in parts: each part a linear layer of its own.

TensorRT Model Optimizer quantizes a fused qkv projection after its split: the GEMM (and its float
bias add) writes all 3·D features, moves (Reshape, Transpose, Split, Squeeze) cut them into Q, K and
V, and each part meets its own QuantizeLinear. QGraph then sees three linear steps that share one
GEMM, each with the whole weight. Per-tensor quantization commutes with moves, so each part is the
GEMM of the weight's rows of its features, quantized, then moved: hwvit's separate q, k, v.

Which features a part holds is read, not assumed: the file runs once (onnxruntime, a zero image of
batch 1) with the GEMM's output replaced by a probe, once holding each element's feature index and
once its token index, and each part's quantizer input then shows where every element came from. A
part is accepted when it holds a contiguous range of features in hwvit's head order, laid out as
(B, H, N, hd) or, for K, (B, H, hd, N); anything else is refused in one line naming the node.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from hwvit.onnx.graph import LINEAR, GraphError, QGraph, Step, node_label


def split_shared(g: QGraph, input_shape) -> None:
    """Every group of linear steps of ``g`` that share one GEMM node, sliced to their parts in place."""
    groups: dict[int, list[Step]] = {}
    for step in g.steps:
        if step.kind == "linear":
            gemm = next(n for n in step.nodes if n.op_type in LINEAR)
            groups.setdefault(id(gemm), []).append(step)
    for steps in groups.values():
        if len(steps) > 1:
            _split(g, steps, input_shape)


def _gemm_out(step: Step) -> str:
    """The tensor where ``step``'s compute ends (the GEMM's, or its bias add's) and its moves begin."""
    compute = [n for n in step.nodes if n.op_type in LINEAR or n.op_type == "Add"]
    return compute[-1].output[0]


def _probe(g: QGraph, src: str, ends: list[str], input_shape) -> tuple[list, list]:
    """(feature index, token index) of every element of each tensor in ``ends``, the GEMM output
    ``src`` replaced by probes (the rest of the graph, its shape arithmetic, runs as the file does)."""
    import onnx

    from hwvit.onnx.ort import probe_shapes, session

    shape = probe_shapes(g.model, [src], input_shape)[0]
    if len(shape) != 3:
        raise GraphError(f"tensor {src!r}: a GEMM output of shape {shape} split into parts; hwvit reads (B, N, F)")
    m = onnx.ModelProto()
    m.CopyFrom(g.model)
    probe = "hwvit_probe"
    for node in m.graph.node:
        if node.output and node.output[0] == src:
            continue
        node.input[:] = [probe if i == src else i for i in node.input]
    m.graph.input.append(onnx.helper.make_tensor_value_info(probe, onnx.TensorProto.FLOAT, shape))
    del m.graph.output[:]
    m.graph.output.extend(onnx.helper.make_empty_tensor_value_info(e) for e in ends)
    sess = session(m, False)
    x = np.zeros([shape[0]] + [int(d) for d in input_shape[1:]], np.float32)
    feed = sess.get_inputs()[0].name
    runs = []
    for index in (np.arange(shape[2])[None, None, :], np.arange(shape[1])[None, :, None]):
        runs.append(sess.run(None, {feed: x, probe: np.broadcast_to(index, shape).astype(np.float32)}))
    return runs[0], runs[1]


def _split(g: QGraph, steps: list[Step], input_shape) -> None:
    src = _gemm_out(steps[0])
    q_nodes = {n.output[0]: n for n in g.q_nodes}
    ends = [q_nodes[s.out].input[0] for s in steps]
    feats, toks = _probe(g, src, ends, input_shape)
    for step, f, t in zip(steps, feats, toks):
        lo, n = _part(step, np.asarray(f, np.int64), np.asarray(t, np.int64))
        _slice(step, lo, n)


def _part(step: Step, f: np.ndarray, t: np.ndarray) -> tuple[int, int]:
    """(first feature, features) of a part laid out (B, H, N, hd) or (B, H, hd, N); else GraphError."""
    where = f"node {step.name} ({step.op})"
    if f.ndim == 4:
        for k_last in (False, True):
            ff, tt = (f.transpose(0, 1, 3, 2), t.transpose(0, 1, 3, 2)) if k_last else (f, t)
            _, h, n_tok, hd = ff.shape
            lo = int(ff.reshape(-1)[0])
            want_f = lo + np.arange(h)[:, None, None] * hd + np.arange(hd)[None, None, :]
            want_t = np.arange(n_tok)[None, :, None]
            if np.array_equal(ff[0], np.broadcast_to(want_f, ff.shape[1:])) and np.array_equal(
                tt[0], np.broadcast_to(want_t, tt.shape[1:])
            ):
                return lo, h * hd
    raise GraphError(
        f"{where}: its output is quantized in parts that are not contiguous heads of its features; hwvit reads "
        "a fused projection quantized whole or in q, k, v parts of (B, H, N, hd)"
    )


def _slice(step: Step, lo: int, n: int) -> None:
    """``step``'s weight, weight scales and bias cut to output features ``lo .. lo + n``."""
    if step.op == "Conv":
        raise GraphError(f"node {node_label(next(x for x in step.nodes if x.op_type in LINEAR))}: a convolution "
                         "quantized in parts")  # fmt: skip
    sel = slice(lo, lo + n)
    axis = 0 if step.op == "Gemm" and step.attrs.get("transB", 0) else 1  # the output features'
    step.weight = np.take(step.weight, np.arange(lo, lo + n), axis=axis)
    wq = step.weight_q
    if not wq.per_tensor:
        zero = np.broadcast_to(wq.zero.reshape(-1), wq.scale.reshape(-1).shape)
        step.weight_q = replace(wq, scale=wq.scale.reshape(-1)[sel], zero=zero[sel])
    if step.bias is not None:
        step.bias = np.asarray(step.bias).reshape(-1)[sel]
        if step.bias_codes is not None:
            step.bias_codes = np.asarray(step.bias_codes).reshape(-1)[sel]
            bq = step.bias_q
            if bq is not None and not bq.per_tensor:
                step.bias_q = replace(bq, scale=bq.scale.reshape(-1)[sel], zero=bq.zero.reshape(-1)[sel])


__all__ = ["split_shared"]
