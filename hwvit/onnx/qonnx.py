"""A QONNX file (Brevitas, FINN, hls4ml: ``Quant`` nodes) as the QDQ graph hwvit.onnx.build reads.

A QONNX ``Quant(x, scale, zeropt, bitwidth)`` node (attributes ``signed``, ``narrow``,
``rounding_mode``) outputs ``scale * (clip(round(x / scale + zeropt), lo, hi) - zeropt)``: a fake
quantizer, its integers implied. ``to_qdq`` makes them explicit:

- a ``Quant`` of a constant (weights) becomes its integer codes (int8) and a DequantizeLinear;
  any bit width up to 8 and narrow range are honoured in the codes;
- a ``Quant`` of an activation becomes QuantizeLinear + DequantizeLinear: 8 bits, ``ROUND`` (half to
  even, as QuantizeLinear), not narrow; anything else is refused in one line naming the node and
  the Brevitas option that avoids it;
- where the file leaves a tensor float that hwvit computes in integers (a GEMM's output, the
  residual stream, the inputs of LayerNorm, softmax and GELU), a QuantizeLinear + DequantizeLinear
  pair is inserted at hwvit's own calibrated scale (symmetric int8, ``max |x| / 127`` over the
  calibration images, as ``hwvit compare``'s minmax), and the constants added to or concatenated
  with the token stream (the position table, the class token) are quantized the same way.

The result is a QDQ graph of the same model, so the rest is hwvit.onnx.build's: every point the file
quantizes keeps the file's scale, zero point and codes; the float points get hwvit's calibration
and arithmetic. The file's own execution is qonnx's (``qonnx.core.onnx_exec``; the tests compare
against it); nothing of qonnx is needed to read the file.

A QDQ file quantized as Brevitas quantizes (its ``export_onnx_qcdq``: the GEMMs' inputs and weights
alone, a narrow weight quantizer as a Clip of its codes) takes the same road: ``as_qdq`` folds the
Clips and quantizes its float points at hwvit's calibration. A file that stores its weights float
and quantizes them in the graph (TensorRT Model Optimizer's ONNX PTQ) has each such QuantizeLinear
folded into the codes onnxruntime computes. A file onnxruntime's quantizer writes leaves no float
point, no Clip and no quantizer of a constant, and is read as it is.
"""

from __future__ import annotations

import numpy as np

from hwvit.onnx.graph import ELEMENTWISE, LINEAR, MOVES, GraphError, node_label

DOMAINS = ("qonnx.custom_op.general", "onnx.brevitas", "finn.custom_op.general")
CALIBRATED = "hwvit.calibrated"  # metadata key: the quantized tensors whose quantizer is hwvit's
QUANT_OPS = {"Quant"}
SHAPE_OPS = {"Shape", "ConstantOfShape", "Equal", "Where", "Range"}  # shape arithmetic, not data


def is_qonnx(model) -> bool:
    """Whether a model holds QONNX ``Quant`` nodes."""
    return any(n.op_type in QUANT_OPS and n.domain in DOMAINS for n in model.graph.node)


def _attrs(node) -> dict:
    import onnx

    out = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    return {k: v.decode() if isinstance(v, bytes) else v for k, v in out.items()}


class _Converter:
    def __init__(self, model):
        import onnx
        from onnx import numpy_helper

        self.onnx, self.nh = onnx, numpy_helper
        self.model = onnx.ModelProto()
        self.model.CopyFrom(model)
        g = self.model.graph
        self.consts = {i.name: numpy_helper.to_array(i) for i in g.initializer}
        for node in g.node:
            if node.op_type == "Constant":
                self.consts[node.output[0]] = numpy_helper.to_array(_attrs(node)["value"])
        self.new_inits: list = []
        self.count = 0
        self.hwvit_weights: list[str] = []  # dequantized weights whose quantizer is hwvit's (_float_weights)

    def name(self, base: str) -> str:
        self.count += 1
        return f"{base}_hwvit{self.count}"

    def const(self, name: str, node) -> np.ndarray:
        if name not in self.consts:
            raise GraphError(
                f"node {node_label(node)}: its {name!r} is not a constant; hwvit reads constant quantizers"
            )
        return self.consts[name]

    def init(self, value: np.ndarray, base: str) -> str:
        name = self.name(base)
        self.new_inits.append(self.nh.from_array(np.asarray(value), name))
        return name

    def quant(self, node) -> list:
        """QuantizeLinear/DequantizeLinear nodes in place of one Quant node."""
        helper = self.onnx.helper
        x, s_name, z_name, b_name = (list(node.input) + ["", "", "", ""])[:4]
        a = _attrs(node)
        scale = np.asarray(self.const(s_name, node), np.float32)
        zero = np.asarray(self.const(z_name, node), np.float64)
        bits = float(np.asarray(self.const(b_name, node)).reshape(-1)[0])
        signed, narrow = bool(a.get("signed", 1)), bool(a.get("narrow", 0))
        rounding = str(a.get("rounding_mode", "ROUND")).upper()
        where = node_label(node)
        if rounding not in ("ROUND", "ROUND_TO_EVEN"):
            raise GraphError(f"node {where}: rounding_mode {rounding}; hwvit reads ROUND (Brevitas' default)")
        if bits != int(bits) or not 2 <= bits <= 8:
            raise GraphError(f"node {where}: {bits:g}-bit quantizer; hwvit reads 2 to 8 bits (bit_width=8)")
        if np.any(zero != np.round(zero)):
            raise GraphError(f"node {where}: a zero point that is not an integer")
        bits = int(bits)
        dtype = np.int8 if signed else np.uint8
        lo = -(1 << (bits - 1)) + int(narrow) if signed else 0
        hi = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1 - int(narrow)
        scale_1d, axis = scale.reshape(-1), None
        if scale_1d.size > 1:
            axis = next((i for i, d in enumerate(scale.shape) if d == scale_1d.size), None)
        zero_1d = np.broadcast_to(zero.reshape(-1), scale_1d.shape) if zero.size > 1 else zero.reshape(-1)[:1]
        zp = self.init(zero_1d.astype(dtype) if zero.size > 1 else zero_1d.astype(dtype).reshape(()), f"{x}_zero")
        sc = self.init(scale_1d if scale_1d.size > 1 else scale_1d.reshape(()), f"{x}_scale")
        extra = {"axis": int(axis)} if axis is not None else {}
        if x in self.consts:  # weights: their integer codes, exactly as the Quant node rounds them
            v = np.asarray(self.consts[x], np.float32)
            codes = np.clip(np.rint(v / scale + zero), lo, hi).astype(dtype)
            ins = [self.init(codes, f"{x}_codes"), sc, zp]
            return [helper.make_node("DequantizeLinear", ins, [node.output[0]], name=f"{node.name}_dq", **extra)]
        if narrow or bits != 8:
            option = "narrow_range=False" if narrow else "bit_width=8"
            what = f"{bits}-bit{' narrow' if narrow else ''}"
            raise GraphError(
                f"node {where}: a {what} activation quantizer; hwvit reads 8-bit activations over the whole range "
                f"({option})"
            )
        if axis is not None:
            raise GraphError(f"node {where}: a per-channel activation quantizer; hwvit reads one scale per tensor")
        codes = self.name(f"{x}_codes")
        return [
            helper.make_node("QuantizeLinear", [x, sc, zp], [codes], name=f"{node.name}_q"),
            helper.make_node("DequantizeLinear", [codes, sc, zp], [node.output[0]], name=f"{node.name}_dq"),
        ]


def to_qdq(model, calib: np.ndarray, batch: int = 64):
    """The QDQ model of QONNX ``model`` (module docstring), calibrated on float inputs ``calib``; its
    metadata ``CALIBRATED`` names the quantized tensors of hwvit's calibration."""
    conv = _Converter(model)
    nodes = []
    for node in conv.model.graph.node:
        if node.op_type in QUANT_OPS and node.domain in DOMAINS:
            nodes += conv.quant(node)
        elif node.domain not in ("", "ai.onnx"):
            raise GraphError(
                f"node {node_label(node)} ({node.domain}): hwvit reads QONNX Quant nodes and standard ONNX"
            )
        else:
            nodes.append(node)
    del conv.model.graph.node[:]
    conv.model.graph.node.extend(_float_weights(conv, nodes))
    return _complete(conv, calib, batch)


def _plain(model) -> _Converter:
    """A QDQ model's converter, its graph's every quantized constant's codes an initializer of its own,
    a QuantizeLinear of a float constant folded into its codes (``_quantized_constant``) and each
    Clip of codes folded: QCDQ (Brevitas' ``export_onnx_qcdq``: QuantizeLinear, Clip,
    DequantizeLinear) writes a narrow or sub-8-bit quantizer as a Clip of its codes. A Clip of
    constant codes (weights) clips them; of an activation's codes it must keep the whole 8-bit range
    (hwvit's activations), else one line names it."""
    conv = _Converter(model)
    producer = {o: n for n in conv.model.graph.node for o in n.output}
    renamed: dict[str, str] = {}
    nodes = []
    for node in conv.model.graph.node:
        for k, i in enumerate(node.input):
            node.input[k] = renamed.get(i, i)
        src = node.input[0] if node.input else ""
        if node.op_type == "QuantizeLinear" and src in conv.consts and conv.consts[src].dtype.kind == "f":
            codes = _quantized_constant(conv, node)
            renamed[node.output[0]] = own = conv.init(codes, f"{src}_codes")
            conv.consts[own] = codes
        elif node.op_type == "Clip" and src in conv.consts and conv.consts[src].dtype.kind in "iu":
            info = np.iinfo(conv.consts[src].dtype)
            lo, hi = (conv.const(i, node) if i else d for i, d in zip([*node.input[1:3], "", ""], (info.min, info.max)))
            codes = np.clip(conv.consts[src], lo, hi).astype(conv.consts[src].dtype)
            renamed[node.output[0]] = conv.init(codes, f"{src}_codes")
        elif node.op_type == "Clip" and src in producer and producer[src].op_type == "QuantizeLinear":
            q = producer[src]
            dtype = np.asarray(conv.const(q.input[2], q)).dtype if len(q.input) > 2 and q.input[2] else np.uint8
            info = np.iinfo(dtype)
            bounds = [int(np.asarray(conv.const(i, node)).reshape(-1)[0]) for i in node.input[1:3] if i]
            if bounds != [info.min, info.max][: len(bounds)]:
                raise GraphError(
                    f"node {node_label(node)}: an activation quantizer clipped to {bounds} of its {info.bits}-bit "
                    "codes; hwvit reads 8-bit activations over the whole range (narrow_range=False, bit_width=8)"
                )
            renamed[node.output[0]] = src
        elif node.op_type == "DequantizeLinear" and src in conv.consts and src not in renamed.values():
            node.input[0] = conv.init(conv.consts[src], f"{src}_codes")
            nodes.append(node)
        else:
            nodes.append(node)
    for out in conv.model.graph.output:
        if out.name in renamed:
            raise GraphError(f"graph output {out.name!r} is codes; hwvit reads a dequantized output")
    nodes, shared = _share_quantizers(conv, _float_weights(conv, nodes))
    del conv.model.graph.node[:]
    conv.model.graph.node.extend(nodes)
    conv.folded = bool(renamed or shared or conv.hwvit_weights)
    return conv


def _share_quantizers(conv: _Converter, nodes: list) -> tuple[list, list[str]]:
    """A float tensor that the file quantizes for some of its readers and passes float to others (the
    residual stream of TensorRT Model Optimizer's files: quantized into each LayerNorm, float along
    the skip) read quantized by all: the others read the file's DequantizeLinear, moved to just after
    the tensor's producer. hwvit's datapath carries the stream as codes; the difference from the
    file's float skip is hwvit's arithmetic, and ``hwvit compare`` measures it. Returns the nodes
    and the tensors so shared."""
    consumers: dict[str, list] = {}
    for node in nodes:
        for i in node.input:
            consumers.setdefault(i, []).append(node)
    outputs = {o.name for o in conv.model.graph.output}
    produced = {o for n in nodes for o in n.output}
    moved: dict[str, list] = {}  # tensor -> its QuantizeLinear and DequantizeLinear
    for t, readers in consumers.items():
        if t in conv.consts or t in outputs:
            continue
        qs = [r for r in readers if r.op_type == "QuantizeLinear"]
        others = [r for r in readers if r.op_type != "QuantizeLinear" and r.op_type not in SHAPE_OPS]
        if not qs or not others:
            continue
        q = qs[0]
        dq = next((d for d in consumers.get(q.output[0], []) if d.op_type == "DequantizeLinear"
                   and list(d.input[1:]) == list(q.input[1:])), None)  # fmt: skip
        if dq is None:
            continue
        for r in others:
            r.input[:] = [dq.output[0] if i == t else i for i in r.input]
        moved[t] = [q, dq]
    if not moved:
        return nodes, []
    placed = {id(n) for pair in moved.values() for n in pair}
    out = [n for t, pair in moved.items() if t not in produced for n in pair]  # a graph input's: first
    for node in nodes:
        if id(node) in placed:
            continue
        out.append(node)
        for t in node.output:
            out.extend(moved.get(t, []))
    return out, list(moved)


def _quantized_constant(conv: _Converter, node) -> np.ndarray:
    """The codes of a QuantizeLinear of a float constant (TensorRT Model Optimizer stores weights
    float and quantizes them in the graph), as onnxruntime computes them: float32 ``x / scale``,
    round half to even, plus the zero point, saturated; per tensor or along ``axis``."""
    x = np.asarray(conv.consts[node.input[0]], np.float32)
    scale = np.asarray(conv.const(node.input[1], node), np.float32)
    if _attrs(node).get("block_size", 0) or (scale.ndim > 1 and scale.size > 1):
        raise GraphError(f"node {node_label(node)}: blocked quantization; hwvit reads one scale per tensor or channel")
    zero = conv.const(node.input[2], node) if len(node.input) > 2 and node.input[2] else np.zeros((), np.uint8)
    zero = np.asarray(zero)
    if zero.dtype not in (np.int8, np.uint8):
        raise GraphError(f"node {node_label(node)}: {zero.dtype} codes; hwvit reads int8 and uint8")
    shape = [1] * x.ndim
    if scale.size > 1:
        axis = int(_attrs(node).get("axis", 1)) % x.ndim
        shape[axis] = -1
    info = np.iinfo(zero.dtype)
    v = np.rint(x / scale.reshape(shape)).astype(np.int64) + zero.astype(np.int64).reshape(shape)
    return np.clip(v, info.min, info.max).astype(zero.dtype)


def _leaves_gemm_float(conv: _Converter) -> bool:
    """Whether ``_plain``'s graph leaves a GEMM's output float (its bias add's, where one follows), as
    a file quantized at its GEMMs' inputs alone does (Brevitas' QCDQ export, TensorRT's explicit
    quantization). A file whose GEMM outputs are all quantized is read as it is, so a node hwvit
    cannot map is named as such."""
    producer = {o: n for n in conv.model.graph.node for o in n.output}

    def of_gemm(t: str) -> bool:
        node = producer.get(t)
        if node is not None and node.op_type == "Add":
            node = next((producer[i] for i in node.input if i in producer and producer[i].op_type in LINEAR), node)
        return node is not None and node.op_type in LINEAR

    return any(of_gemm(t) for t, _ in _float_points(conv)[0])


def as_qdq(model, calib, batch: int = 64):
    """The QDQ model hwvit.onnx.build reads: a QONNX file's (``to_qdq``); a QDQ file that leaves a
    GEMM's output float with hwvit's quantizers at its float points, calibrated on float inputs
    ``calib``; a QCDQ file with the Clips of its codes folded; any other file as it is. ``calib``: the
    inputs, a function of ``model`` that makes them (called only for a file that needs them), or
    None."""

    def inputs() -> np.ndarray:
        got = calib(model) if callable(calib) else calib
        if got is None:
            raise GraphError("the file leaves points float that hwvit calibrates: give calibration inputs")
        return np.asarray(got, np.float32)

    if is_qonnx(model):
        return to_qdq(model, inputs(), batch)
    conv = _plain(model)
    if _leaves_gemm_float(conv):
        return _complete(conv, inputs(), batch)
    if not conv.folded:
        return model
    conv.model.graph.initializer.extend(conv.new_inits)
    conv.model.metadata_props.add(key=CALIBRATED, value=" ".join(conv.hwvit_weights))
    conv.onnx.checker.check_model(conv.model)
    return conv.model


def _complete(conv: _Converter, calib: np.ndarray, batch: int):
    """The QDQ model of ``conv`` (its quantized constants initializers of their own), each float point
    quantized at hwvit's calibration on ``calib``."""
    helper = conv.onnx.helper
    g = conv.model.graph
    nodes = _transposed_weights(conv, list(g.node))
    del g.node[:]
    g.node.extend(nodes)
    g.initializer.extend(conv.new_inits)
    conv.new_inits = []
    keep = [(o.domain, o.version) for o in conv.model.opset_import if o.domain in ("", "ai.onnx")]
    del conv.model.opset_import[:]
    conv.model.opset_import.extend(helper.make_opsetid(d, v) for d, v in keep)
    points, data = _float_points(conv)
    absmax = _calibrate(conv.model, [t for t, _ in points], calib, batch)
    calibrated = _insert(conv, points, absmax, data)
    g.initializer.extend(conv.new_inits)
    conv.model.metadata_props.add(key=CALIBRATED, value=" ".join(calibrated + conv.hwvit_weights))
    conv.onnx.checker.check_model(conv.model)
    return conv.model


def _transposed_weights(conv: _Converter, nodes: list) -> list:
    """A Transpose of a weight's DequantizeLinear (how torch exports a Linear's x @ W^T) folded into
    the codes, so the GEMM reads a dequantized constant as a quantized graph writes it."""
    from onnx import numpy_helper

    inits = {i.name: i for i in conv.new_inits}
    readers: dict[str, list] = {}
    for node in nodes:
        for i in node.input:
            readers.setdefault(i, []).append(node)
    out, dropped = [], set()
    for node in nodes:
        if id(node) in dropped:
            continue
        nxt = readers.get(node.output[0], []) if node.op_type == "DequantizeLinear" else []
        if node.input and node.input[0] in inits and len(nxt) == 1 and nxt[0].op_type == "Transpose":
            perm = list(_attrs(nxt[0]).get("perm", []))
            codes = numpy_helper.to_array(inits[node.input[0]])
            perm = perm or list(range(codes.ndim))[::-1]
            inits[node.input[0]].CopyFrom(numpy_helper.from_array(codes.transpose(perm), node.input[0]))
            axis = _attrs(node).get("axis")
            attrs = {} if axis is None else {"axis": perm.index(axis % codes.ndim)}
            out.append(conv.onnx.helper.make_node("DequantizeLinear", list(node.input), [nxt[0].output[0]],
                                                  name=node.name, **attrs))  # fmt: skip
            dropped.add(id(nxt[0]))
            continue
        out.append(node)
    return out


def _float_weights(conv: _Converter, nodes: list) -> list:
    """A GEMM the file leaves float (a weight that is a float constant, such as the classifier head
    TensorRT Model Optimizer does not quantize) given hwvit's weight quantizer: symmetric int8, one
    scale ``max |w| / 127``, its codes and a DequantizeLinear before the GEMM (named in metadata
    ``CALIBRATED``, so the layer's origin says hwvit's)."""
    helper, out = conv.onnx.helper, []
    for node in nodes:
        w = node.input[1] if node.op_type in LINEAR and len(node.input) > 1 else ""
        value = conv.consts.get(w)
        if value is not None and value.dtype.kind == "f" and value.size > 1:
            scale = np.float32(max(float(np.abs(value).max()), 1e-12) / 127)
            codes = conv.init(np.clip(np.rint(value / scale), -127, 127).astype(np.int8), f"{w}_codes")
            sc, zero = conv.init(scale, f"{w}_scale"), conv.init(np.int8(0), f"{w}_zero")
            node.input[1] = deq = conv.name(f"{w}_dq")
            conv.hwvit_weights.append(deq)
            out.append(helper.make_node("DequantizeLinear", [codes, sc, zero], [deq], name=conv.name("dq")))
        out.append(node)
    return out


def _float_points(conv: _Converter) -> tuple[list[tuple[str, str | None]], set[str]]:
    """(tensor, shared) for each float tensor that needs a quantizer of hwvit's, and the tensors that
    depend on the input; ``shared``: the tensor whose quantizer it must share (a Concat's output
    shares its data input's, through moves: one scale for the class token and the patches)."""
    g = conv.model.graph
    consumers: dict[str, list] = {}
    producer = {o: n for n in g.node for o in n.output}
    for node in g.node:
        for i in node.input:
            consumers.setdefault(i, []).append(node)
    outputs = {o.name for o in g.output}
    data = {i.name for i in g.input if i.name not in conv.consts}
    for node in g.node:  # what depends on the input (shape arithmetic does not count)
        if node.op_type in SHAPE_OPS:
            continue
        ins = node.input[:1] if node.op_type in MOVES else node.input
        if any(i in data for i in ins):
            data.update(node.output)

    def elementwise_of_one(node) -> bool:  # a table: one data input, the others scalars
        if node.op_type not in ELEMENTWISE:
            return False
        others = [i for i in node.input if i and i not in data]
        return sum(i in data for i in node.input) == 1 and all(np.size(conv.consts.get(i, 0)) == 1 for i in others)

    def to_quantizers_only(t: str) -> bool:  # every value path through moves ends at a QuantizeLinear
        readers = consumers.get(t, [])
        if not readers or t in outputs:
            return False
        for r in readers:
            if r.op_type == "QuantizeLinear" or r.op_type in SHAPE_OPS:  # a Shape reads no value
                continue
            if r.op_type in MOVES and r.input[0] == t and all(to_quantizers_only(o) for o in r.output):
                continue
            return False
        return True

    points = []
    for node in g.node:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear", "Constant") or node.op_type in MOVES | SHAPE_OPS:
            continue
        for t in node.output:
            if t not in data or to_quantizers_only(t):
                continue
            readers = consumers.get(t, [])
            if node.op_type in LINEAR and len(readers) == 1 and _bias_add(readers[0], t, data, conv, producer):
                continue  # its bias add follows: the quantizer goes after it
            if elementwise_of_one(node) and readers and all(elementwise_of_one(r) for r in readers):
                continue  # inside a chain of one code: a table up to its end
            shared = None
            if node.op_type == "Concat":
                shared = next((i for i in node.input if i in data), None)
                while shared in producer and producer[shared].op_type in MOVES:
                    shared = producer[shared].input[0]
            points.append((t, shared))
    return points, data


def _bias_add(node, t: str, data: set, conv: _Converter, producer: dict) -> bool:
    """Whether ``node`` adds a constant vector to ``t`` (a linear layer's float bias; through the
    Identity torch's exporter writes for biases of equal values)."""
    if node.op_type != "Add":
        return False
    other = [i for i in node.input if i != t]
    return len(other) == 1 and other[0] not in data and np.size(_constant_origin(conv, other[0], producer)) > 1


def _calibrate(model, names: list[str], calib: np.ndarray, batch: int) -> dict[str, float]:
    """max |x| of each tensor over the calibration inputs (the float graph in onnxruntime)."""
    import onnx

    from hwvit.onnx.ort import run_batched, session

    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in names if n not in have)
    sess = session(m, False)
    absmax = dict.fromkeys(names, 0.0)
    out_names = [o.name for o in sess.get_outputs()]
    for start in range(0, len(calib), batch):
        got = dict(zip(out_names, run_batched(sess, np.asarray(calib[start : start + batch], np.float32))))
        for n in names:
            absmax[n] = max(absmax[n], float(np.abs(got[n]).max()))
    return absmax


def _insert(conv: _Converter, points: list[tuple[str, str | None]], absmax: dict[str, float], data: set) -> list:
    """QuantizeLinear + DequantizeLinear after each point (its producer's output renamed), and the
    constants the token stream adds or concatenates quantized at a scale of their own; returns the
    codes tensors of the points."""
    helper = conv.onnx.helper
    g = conv.model.graph
    scales = {t: np.float32(max(absmax[t], 1e-12) / 127) for t, _ in points}
    for t, shared in points:
        if shared in scales:  # a Concat's output: its data input's quantizer
            scales[t] = scales[shared]
    zero = conv.init(np.int8(0), "zero")
    new_nodes = []
    renamed = {}
    for t, _ in points:
        raw = conv.name(f"{t}_float")
        renamed[t] = raw
        sc = conv.init(np.float32(scales[t]), f"{t}_scale")
        codes = conv.name(f"{t}_codes")
        new_nodes.append((t, [
            helper.make_node("QuantizeLinear", [raw, sc, zero], [codes], name=conv.name("q")),
            helper.make_node("DequantizeLinear", [codes, sc, zero], [t], name=conv.name("dq")),
        ]))  # fmt: skip
    inserts = dict(new_nodes)
    made = set(renamed)
    out = []
    for node in g.node:
        for k, o in enumerate(node.output):
            if o in renamed:
                node.output[k] = renamed[o]
        out += _stream_constants(conv, node, zero, data, {o: n for n in out for o in n.output})
        out.append(node)
        for t in [t for t in made if renamed[t] in node.output]:
            out.extend(inserts[t])
    del g.node[:]
    g.node.extend(out)
    return [inserts[t][0].output[0] for t in made]


def _constant_origin(conv: _Converter, name: str, producer_of: dict) -> np.ndarray | None:
    """The float constant a tensor is a move of (an Expand of the class token: the token)."""
    while name not in conv.consts:
        node = producer_of.get(name)
        if node is None or node.op_type not in MOVES:
            return None
        name = node.input[0]
    return conv.consts[name]


def _stream_constants(conv: _Converter, node, zero: str, data: set, producer_of: dict) -> list:
    """A float constant the token stream adds (the position table) or concatenates (the class
    token), quantized at scale ``max |c| / 127``: its codes and a DequantizeLinear (Add), or a
    QuantizeLinear pair (Concat, as onnxruntime's quantizer writes a quantized constant). Returns
    the nodes to place before ``node``, whose input now reads them."""
    if node.op_type not in ("Add", "Concat") or not any(i in data for i in node.input):
        return []
    src = producer_of.get(next(i for i in node.input if i in data))
    if node.op_type == "Add" and src is not None and src.op_type in LINEAR:
        return []  # a GEMM's float bias: hwvit.onnx.build puts it on the accumulator's int32 grid
    helper, made = conv.onnx.helper, []
    for k, name in enumerate(node.input):
        value = None if name in data else _constant_origin(conv, name, producer_of)
        if value is None or np.size(value) <= 1 or value.dtype.kind != "f":
            continue
        scale = np.float32(max(float(np.abs(value).max()), 1e-12) / 127)
        sc = conv.init(scale, f"{name}_scale")
        deq = conv.name(f"{name}_dq")
        if node.op_type == "Add":
            codes = conv.init(np.clip(np.rint(value / scale), -127, 127).astype(np.int8), f"{name}_codes")
            made.append(helper.make_node("DequantizeLinear", [codes, sc, zero], [deq], name=conv.name("dq")))
        else:
            codes = conv.name(f"{name}_codes")
            made.append(helper.make_node("QuantizeLinear", [name, sc, zero], [codes], name=conv.name("q")))
            made.append(helper.make_node("DequantizeLinear", [codes, sc, zero], [deq], name=conv.name("dq")))
        node.input[k] = deq
    return made


__all__ = ["DOMAINS", "as_qdq", "is_qonnx", "to_qdq"]
