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


__all__ = ["session"]
