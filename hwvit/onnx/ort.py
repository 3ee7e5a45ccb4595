"""An onnxruntime session of a model (a ModelProto or its bytes) on the CPU, one thread, its log
quiet: graph optimizations off (the file's meaning) or on (what onnxruntime deploys)."""

from __future__ import annotations


def session(model, optimize: bool, save_to: str | None = None):
    """``save_to``: onnxruntime writes the graph it runs there (optimizations on: the graph it deploys on
    this machine, its fused kernels as nodes)."""
    import onnx
    import onnxruntime as ort

    so = ort.SessionOptions()
    if save_to is not None:
        so.optimized_model_filepath = save_to
    so.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString() if isinstance(model, onnx.ModelProto) else model, so,
                                providers=["CPUExecutionProvider"])  # fmt: skip


def fixed_batch(sess) -> int | None:
    """The batch a session's first input fixes (a file exported with a static batch), else None."""
    dim = sess.get_inputs()[0].shape[0] if sess.get_inputs()[0].shape else None
    return dim if isinstance(dim, int) and dim > 0 else None


def run_batched(sess, x, names=None) -> list:
    """``sess.run(names, {input: x})`` for any number of rows of ``x``: a file whose batch is fixed
    runs in slices of that batch (the rows a last slice lacks padded with its last row, then cut),
    its per-row outputs joined again; an output without the batch dimension (a constant) is the
    first slice's."""
    import numpy as np

    feed = sess.get_inputs()[0].name
    batch = fixed_batch(sess)
    if batch is None or len(x) == batch:
        return sess.run(names, {feed: x})
    parts = []
    for start in range(0, len(x), batch):
        rows = x[start : start + batch]
        pad = batch - len(rows)
        if pad:
            rows = np.concatenate([rows, np.repeat(rows[-1:], pad, axis=0)])
        parts.append((sess.run(names, {feed: rows}), batch - pad))
    out = []
    for k, first in enumerate(parts[0][0]):
        if np.ndim(first) and np.shape(first)[0] == batch:
            out.append(np.concatenate([got[k][:n] for got, n in parts]))
        else:
            out.append(first)
    return out


def probe_shapes(model, names: list[str], input_shape) -> list[list[int]]:
    """The shapes of tensors ``names`` in one run of ``model`` (optimizations off) on a zero input of
    batch 1 and the rest of ``input_shape``."""
    import numpy as np
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    for name in names:
        m.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
    x = np.zeros([1] + [int(d) for d in input_shape[1:]], np.float32)
    return [list(a.shape) for a in run_batched(session(m, False), x, names)]


__all__ = ["fixed_batch", "probe_shapes", "run_batched", "session"]
