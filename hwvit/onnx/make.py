"""A quantized ONNX file of a float ViT, as an ML team's tools write one: the file hwvit then reads.

``export`` writes a torch model with torch's legacy exporter (``dynamo=False``, opset 17: no
onnxscript needed); ``quantize`` runs onnxruntime's ``quantize_static`` (QDQ) on calibration images
in one of the configurations the files in use come in (``CONFIGS``); ``pow2_scales`` rounds every
scale of a QDQ file to a power of two and its constant codes with it (what a calibration that
rounds its scales writes). ``hwvit onnx-demo`` and the tests make their files with these.
"""

from __future__ import annotations

import logging
import math
import warnings
from pathlib import Path

import numpy as np

# quantize_static's options per configuration: symmetric int8 activations with per-channel weights;
# onnxruntime's defaults (asymmetric int8 activations, one scale per weight tensor); uint8
# activations with zero points.
CONFIGS = {
    "symmetric": {"per_channel": True, "extra_options": {"ActivationSymmetric": True}},
    "default": {},
    "uint8": {"activation_type": "QUInt8"},
}


def export(model, sample, path) -> None:
    """``model`` (float, eval) to ``path`` with a dynamic batch, input ``input``, output ``logits``."""
    import torch

    sample = torch.as_tensor(np.asarray(sample, np.float32))
    with warnings.catch_warnings():  # the legacy exporter's notes and its tracer's warnings on shape checks
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model, sample, str(path), dynamo=False, opset_version=17, input_names=["input"],
            output_names=["logits"], dynamic_axes={"input": {0: "b"}, "logits": {0: "b"}},
        )  # fmt: skip


def quantize(src, dst, calib: np.ndarray, config: str = "symmetric", batch: int = 64) -> None:
    """``src`` quantized by onnxruntime's ``quantize_static`` (QDQ) on images ``calib`` into ``dst``."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    if config not in CONFIGS:
        raise ValueError(f"quantization configuration {config!r}; choose from {', '.join(CONFIGS)}")
    options = dict(CONFIGS[config])
    if "activation_type" in options:
        options["activation_type"] = getattr(QuantType, options["activation_type"])
    calib = np.asarray(calib, np.float32)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"input": calib[i : i + batch]} for i in range(0, len(calib), batch)])

        def get_next(self):
            return next(self.batches, None)

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # quantize_static logs its advice on pre-processing at warning level
    try:
        with warnings.catch_warnings():  # third-party deprecation notes inside quantize_static
            warnings.simplefilter("ignore", DeprecationWarning)
            quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ, **options)
    finally:
        root.setLevel(level)


def _pow2(s: np.ndarray) -> np.ndarray:
    """The power of two at or above each scale (the codes' range still holds what the scale held)."""
    s = np.asarray(s, np.float64)
    return np.exp2(np.ceil(np.log2(s))).astype(np.float32)


def pow2_scales(src, dst) -> None:
    """``src`` with every quantizer's scale rounded up to a power of two: activation scales as they
    are, constant codes (weights, the class token, the position table) requantized from their
    dequantized values, and every int32 bias of a Conv / Gemm / MatMul at ``s_in * s_w``, so
    its codes stay in the accumulator's units."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(src))
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    scale_of: dict[str, np.ndarray] = {}  # scale initializer -> its new value
    for node in g.node:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear") and node.input[1] in inits:
            old = numpy_helper.to_array(inits[node.input[1]])
            scale_of.setdefault(node.input[1], _pow2(old))

    def dq_scale(name: str) -> str | None:
        node = producer.get(name)
        return node.input[1] if node is not None and node.op_type == "DequantizeLinear" else None

    for node in g.node:  # biases in the accumulator's units
        if node.op_type in ("Conv", "Gemm", "MatMul") and len(node.input) > 2 and node.input[2]:
            sx, sw, sb = dq_scale(node.input[0]), dq_scale(node.input[1]), dq_scale(node.input[2])
            if sx and sw and sb:
                scale_of[sb] = (scale_of[sx] * scale_of[sw]).astype(np.float32)
    done = set()
    for node in g.node:  # constant codes requantized at their new scales
        if node.op_type != "DequantizeLinear" or node.input[0] not in inits or node.input[0] in done:
            continue
        done.add(node.input[0])
        codes = numpy_helper.to_array(inits[node.input[0]])
        old = numpy_helper.to_array(inits[node.input[1]]).astype(np.float64)
        new = scale_of[node.input[1]].astype(np.float64)
        zero = numpy_helper.to_array(inits[node.input[2]]).astype(np.int64) if len(node.input) > 2 else 0
        shape = [1] * codes.ndim
        axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
        if np.ndim(old) and old.size > 1:
            shape[axis] = -1
            old, new, zero = old.reshape(shape), new.reshape(shape), np.reshape(zero, shape)
        real = (codes.astype(np.int64) - zero) * old
        info = np.iinfo(codes.dtype)
        fresh = np.clip(np.rint(real / new) + zero, info.min, info.max).astype(codes.dtype)
        inits[node.input[0]].CopyFrom(numpy_helper.from_array(fresh, node.input[0]))
    for name, value in scale_of.items():
        inits[name].CopyFrom(numpy_helper.from_array(np.asarray(value, np.float32).reshape(
            numpy_helper.to_array(inits[name]).shape), name))  # fmt: skip
    onnx.save(model, str(dst))


def is_pow2(s) -> bool:
    """Whether every scale in ``s`` is a power of two."""
    return all(math.frexp(float(v))[0] == 0.5 for v in np.asarray(s).reshape(-1))


def digits_file(path, config: str = "symmetric", calib_images: int = 256, pow2: bool = False) -> Path:
    """The bundled digits ViT as a quantized ONNX file at ``path``, calibrated on the first
    ``calib_images`` training images (the held-out split stays unseen)."""
    import tempfile

    from hwvit.float.digits import load_demo_model, load_digits_split

    path = Path(path)
    x_train = load_digits_split()[0]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "float.onnx"
        export(load_demo_model(), x_train[:1], src)
        q = Path(tmp) / "quantized.onnx"
        quantize(src, q, x_train[:calib_images].numpy(), config)
        if pow2:
            pow2_scales(q, q)
        from hwvit.atomic import atomic_file

        with atomic_file(path) as out:
            out.write_bytes(q.read_bytes())
    return path


__all__ = ["CONFIGS", "digits_file", "export", "is_pow2", "pow2_scales", "quantize"]
