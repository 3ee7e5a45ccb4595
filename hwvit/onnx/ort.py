"""An onnxruntime session of a model (a ModelProto or its bytes) on the CPU, one thread, its log
quiet: graph optimizations off (the file's meaning) or on (what onnxruntime deploys)."""

from __future__ import annotations


def session(model, optimize: bool):
    import onnx
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString() if isinstance(model, onnx.ModelProto) else model, so,
                                providers=["CPUExecutionProvider"])  # fmt: skip


__all__ = ["session"]
