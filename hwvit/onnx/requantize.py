"""A quantized ONNX file's linear layers with their weights at other widths, for ``hwvit sensitivity``.

The file fixes every width; what an architect asks of it is what narrower weights in one layer
would cost against the file's own model. A layer's weights at ``b`` bits are the file's dequantized
weights ``w = s_w * c`` on a symmetric ``b``-bit grid over the same range, with the file's
granularity (one scale per output channel or per tensor):

    s_w' = s_w * max|c| / (2^(b-1) - 1),   c' = round_half_even(c * s_w / s_w'),   |c'| <= 2^(b-1) - 1

stored int8 as the file stores its codes. The layer's int32 bias codes (a QDQ file's bias at the
accumulator scale ``s_in * s_w``) are re-quantized as a quantizer writes them at the new
accumulator scale: ``b' = round_half_even(b * s_w / s_w')`` at scale ``s_b * s_w' / s_w``. The
edited model is the file's QDQ graph with those codes and scales replaced: a QDQ file in its own
right, which onnxruntime runs and hwvit.onnx.build reads as it reads the file (the requant
multiplier ``s_in * s_w' / s_out``, round half to even). Every other weight, bias, scale, zero
point, table and the arithmetic of LayerNorm and softmax stay the file's.
"""

from __future__ import annotations

import numpy as np

from hwvit.onnx.graph import GraphError


def narrowed(codes: np.ndarray, scale: np.ndarray, axis: int | None, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """(codes, scale) of symmetric weights ``codes * scale`` (int8, one scale per tensor or along
    ``axis``) re-quantized on a ``bits``-bit symmetric grid over the same range (module docstring).
    A channel whose codes are all 0 keeps its scale."""
    if not 2 <= bits <= 8:
        raise ValueError(f"weight width {bits}: hwvit re-quantizes weights at 2 to 8 bits")
    top = (1 << (bits - 1)) - 1
    c = np.asarray(codes, np.int64)
    s = np.asarray(scale, np.float32)
    shape = [1] * c.ndim
    if s.size > 1:
        shape[axis] = -1
        peak = np.abs(c).max(axis=tuple(d for d in range(c.ndim) if d != axis % c.ndim))
    else:
        peak = np.abs(c).max(initial=0)
    along = shape if s.size > 1 else ()  # a scale per channel broadcasts along axis
    new = np.where(peak > 0, s.astype(np.float64) * peak / top, s).astype(np.float32).reshape(s.shape)
    real = c * s.astype(np.float64).reshape(along)
    fresh = np.clip(np.rint(real / new.astype(np.float64).reshape(along)), -top, top)
    return fresh.astype(np.int8), new


def weights_at(model, widths: dict[str, int], weights: dict[str, str]):
    """A copy of QDQ ``model`` whose layers in ``widths`` (layer path -> bits) have their weights at
    those widths; ``weights``: layer path -> its dequantized weight tensor (hwvit.onnx.build's
    ``Imported.weights``). New initializers carry the layer's name; the file's stay for the others."""
    import onnx
    from onnx import numpy_helper

    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    inits = {i.name: i for i in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    for path, bits in widths.items():
        if path not in weights:
            raise ValueError(f"{path!r} is not a linear layer of the file (they are: {', '.join(weights)})")
        dq = producer.get(weights[path])
        if dq is None or dq.op_type != "DequantizeLinear" or dq.input[0] not in inits or dq.input[1] not in inits:
            raise GraphError(f"{path}: its weight is not a DequantizeLinear of constant codes")
        codes = numpy_helper.to_array(inits[dq.input[0]])
        if codes.dtype != np.int8:
            raise GraphError(f"{path}: {codes.dtype} weight codes; hwvit re-quantizes int8 weights")
        scale = numpy_helper.to_array(inits[dq.input[1]])
        axis = next((a.i for a in dq.attribute if a.name == "axis"), 1)
        fresh, new = narrowed(codes, scale, axis, bits)
        names = [f"{path}.weight_{bits}bit", f"{path}.weight_{bits}bit_scale"]
        g.initializer.extend([numpy_helper.from_array(fresh, names[0]), numpy_helper.from_array(new, names[1])])
        dq.input[0], dq.input[1] = names
        for node in (n for n in g.node if len(n.input) > 2 and n.input[1] == weights[path]):
            bias_dq = producer.get(node.input[2])
            if bias_dq is None or bias_dq.op_type != "DequantizeLinear" or bias_dq.input[0] not in inits:
                continue  # a float bias (a QONNX file's): hwvit.onnx.build reads it at the new scale
            b = numpy_helper.to_array(inits[bias_dq.input[0]]).astype(np.float64)
            s_b = numpy_helper.to_array(inits[bias_dq.input[1]]).astype(np.float64)
            ratio = new.astype(np.float64) / scale.astype(np.float64)  # s_w' / s_w, per channel or one
            b_names = [f"{path}.bias_{bits}bit", f"{path}.bias_{bits}bit_scale"]
            g.initializer.extend([
                numpy_helper.from_array(np.rint(b / ratio).astype(np.int32), b_names[0]),
                numpy_helper.from_array((s_b * ratio).astype(np.float32), b_names[1]),
            ])  # fmt: skip
            bias_dq.input[0], bias_dq.input[1] = b_names
    return out


__all__ = ["narrowed", "weights_at"]
