"""An ONNX QDQ graph cut at its quantizers: the steps between one quantized tensor and the next.

A quantized tensor is the output of a QuantizeLinear node: integer codes ``c`` with a scale ``s``
and a zero point ``z`` (real value ``s * (c - z)``). Every other float tensor of a QDQ graph is
computed from the dequantized codes of some quantized tensors and from constants, so the graph is
a chain of ``Step``s, one per QuantizeLinear: its float nodes (the "cone" between the DequantizeLinear
outputs it reads and the QuantizeLinear it ends in), the quantized tensors it reads and the
quantizer of what it writes. ``kind`` says what the step computes:

- ``linear``: MatMul / Gemm / Conv of one quantized tensor by a constant weight (``weight``, its
  quantizer and ``bias``, if any);
- ``matmul``: MatMul of two quantized tensors (attention's Q.K^T and P.V);
- ``add``: Add of two quantized tensors; ``bias``: Add of a quantized tensor and a constant;
- ``layernorm``, ``softmax``: the node of that name;
- ``concat``: Concat of quantized tensors (the class token before the patches);
- ``move``: codes moved, not changed (Reshape, Transpose, Split, ...: same quantizer in and out);
- ``table``: anything else of one quantized tensor made only of elementwise nodes (GELU's erf chain,
  a scaling Mul, a requantization to another scale): a function of one code, so its table of every
  code is exact;
- ``const``: a quantized constant (the class token).

Shape arithmetic (Shape, Gather of a shape, Concat of sizes, ...) feeds only the shape inputs of
movement nodes and is not followed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Nodes that move elements without changing them; only their first input is data.
MOVES = {"Reshape", "Transpose", "Split", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Expand", "Slice", "Gather"}
# Elementwise nodes a table may hold (one output element from the same element of each input).
ELEMENTWISE = {
    "Add", "Sub", "Mul", "Div", "Erf", "Tanh", "Sigmoid", "Relu", "Pow", "Sqrt", "Exp", "Neg", "Abs",
    "Gelu", "Clip", "Max", "Min", "Cast", "HardSigmoid", "HardSwish", "LeakyRelu", "Identity",
}  # fmt: skip
LINEAR = {"MatMul", "Gemm", "Conv"}


@dataclass(frozen=True)
class Quant:
    """One quantizer: scale and zero point, per tensor or along ``axis``; the codes' dtype."""

    scale: np.ndarray  # float32, () or (C,)
    zero: np.ndarray  # int64, () or (C,)
    axis: int | None
    dtype: np.dtype

    @property
    def per_tensor(self) -> bool:
        return self.scale.ndim == 0 or self.scale.size == 1

    def same(self, other: Quant) -> bool:
        return (
            self.dtype == other.dtype
            and self.scale.shape == other.scale.shape
            and bool(np.all(self.scale == other.scale))
            and bool(np.all(self.zero == other.zero))
        )

    @property
    def s(self) -> float:
        """The per-tensor scale (float64 of the file's float32)."""
        return float(self.scale.reshape(-1)[0])

    @property
    def z(self) -> int:
        return int(self.zero.reshape(-1)[0])

    @property
    def range(self) -> tuple[int, int]:
        info = np.iinfo(self.dtype)
        return int(info.min), int(info.max)


@dataclass
class Step:
    kind: str
    name: str  # the main node's name (or op type), for messages
    op: str  # the main node's op type
    out: str  # the QuantizeLinear output (codes) it writes
    out_q: Quant
    inputs: list[str]  # the quantized tensors it reads, in the main node's input order
    nodes: list = field(default_factory=list)  # its float nodes, in graph order
    weight: np.ndarray | None = None  # linear: integer weight codes as the file stores them
    weight_q: Quant | None = None
    bias: np.ndarray | None = None  # linear: float bias (dequantized), or a bias step's constant
    bias_codes: np.ndarray | None = None  # the constant's integer codes, when the file quantizes it
    bias_q: Quant | None = None
    attrs: dict = field(default_factory=dict)
    consts: dict = field(default_factory=dict)  # other float constants of its nodes (LayerNorm's gamma, beta)


def quantize_f32(x, q: Quant) -> np.ndarray:
    """QuantizeLinear as onnxruntime computes it (per tensor): float32 x / s, round half to even,
    plus the zero point, saturated to the codes' dtype."""
    lo, hi = q.range
    v = np.rint(np.asarray(x, np.float32) / np.float32(q.s)).astype(np.int64) + q.z
    return np.clip(v, lo, hi)


def dequantize_f32(codes, q: Quant) -> np.ndarray:
    """DequantizeLinear (per tensor): float32 (c - z) * s."""
    return ((np.asarray(codes, np.int64) - q.z).astype(np.float32) * np.float32(q.s)).astype(np.float32)


class GraphError(ValueError):
    """A graph hwvit cannot cut into steps: one line naming the node."""


def _attrs(node) -> dict:
    import onnx

    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def node_label(node) -> str:
    return f"{node.name or node.output[0]} ({node.op_type})"


class QGraph:
    """The steps of a QDQ model, in graph order, and what they read."""

    def __init__(self, model):
        from onnx import numpy_helper

        self.model = model
        g = model.graph
        self.consts: dict[str, np.ndarray] = {i.name: numpy_helper.to_array(i) for i in g.initializer}
        for node in g.node:
            if node.op_type == "Constant":
                value = _attrs(node).get("value")
                if value is not None:
                    self.consts[node.output[0]] = numpy_helper.to_array(value)
        self.producer = {o: n for n in g.node for o in n.output}
        self.inputs = [i.name for i in g.input if i.name not in self.consts]
        self.outputs = [o.name for o in g.output]
        self.dq: dict[str, tuple[str, Quant]] = {}  # float tensor -> (codes tensor, quantizer)
        self.const_dq: dict[str, tuple[np.ndarray, Quant]] = {}  # float tensor of a quantized constant
        self.q_nodes = [n for n in g.node if n.op_type == "QuantizeLinear"]
        self.const_codes: dict[str, tuple[np.ndarray, Quant]] = {}  # quantized constants (codes, quantizer)
        self.root: dict[str, str] = {}  # a table's output -> the one quantized tensor it is a function of
        for node in g.node:
            if node.op_type == "DequantizeLinear":
                codes, quant = node.input[0], self._quant(node)
                if codes in self.consts:
                    self.const_dq[node.output[0]] = (self.consts[codes], quant)
                else:
                    self.dq[node.output[0]] = (codes, quant)
        self.steps: list[Step] = [self._step(n) for n in self.q_nodes]
        self.by_out = {s.out: s for s in self.steps}

    def _quant(self, node) -> Quant:
        scale = self.consts.get(node.input[1])
        if scale is None:
            raise GraphError(f"quantizer {node_label(node)}: its scale is not a constant")
        zero = self.consts.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        dtype = np.dtype(zero.dtype) if zero is not None else np.dtype(np.uint8)
        if node.op_type == "DequantizeLinear" and node.input[0] in self.consts:
            dtype = np.dtype(self.consts[node.input[0]].dtype)
        zero = np.zeros(scale.shape, np.int64) if zero is None else zero.astype(np.int64)
        axis = _attrs(node).get("axis", 1) if np.ndim(scale) and scale.size > 1 else None
        return Quant(np.asarray(scale, np.float32), zero, axis, dtype)

    def const_value(self, name: str) -> np.ndarray | None:
        """A float constant: an initializer, a Constant node or a dequantized constant."""
        if name in self.dq and self.dq[name][0] in self.const_codes:
            codes, q = self.const_codes[self.dq[name][0]]
            return dequantize_f32(codes, q)
        if name in self.const_dq:
            codes, q = self.const_dq[name]
            shape = [1] * codes.ndim
            if q.axis is not None:
                shape[q.axis] = -1
            s = q.scale.astype(np.float32).reshape(shape if q.axis is not None else ())
            z = q.zero.reshape(shape if q.axis is not None else ())
            return ((codes.astype(np.int64) - z).astype(np.float32) * s).astype(np.float32)
        node = self.producer.get(name)
        if (
            name not in self.consts and node is not None and node.op_type == "Identity"
        ):  # torch's export of a shared weight
            return self.const_value(node.input[0])
        return self.consts.get(name)

    def _cone(self, start: str, q_node) -> tuple[list, list[str]]:
        """The float nodes between the quantized tensors and ``start`` (graph order) and the
        quantized tensors they read (first-seen order)."""
        nodes, reads, seen = [], [], set()
        stack = [start]
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in self.dq:
                codes = self.dq[name][0]
                if codes in self.const_codes:
                    continue
                if codes not in reads:
                    reads.append(codes)
                continue
            if name in self.const_dq or name in self.consts or name in self.inputs or not name:
                continue
            node = self.producer.get(name)
            if node is None:
                raise GraphError(f"tensor {name!r} has no producer")
            if node.op_type in ("QuantizeLinear", "DequantizeLinear"):
                raise GraphError(f"{node_label(node)} feeds {node_label(q_node)} in a form hwvit does not read")
            if node.op_type == "Shape":
                continue
            nodes.append(node)
            data = node.input[:1] if node.op_type in MOVES else node.input
            stack.extend(reversed(list(data)))
        order = {id(n): i for i, n in enumerate(self.model.graph.node)}
        nodes = sorted({id(n): n for n in nodes}.values(), key=lambda n: order[id(n)])
        return nodes, reads

    def _step(self, q_node) -> Step:
        out_q = self._quant(q_node)
        src = q_node.input[0]
        nodes, reads = self._cone(src, q_node)
        compute = [n for n in nodes if n.op_type not in MOVES]
        main = compute[-1] if compute else (nodes[-1] if nodes else q_node)
        step = Step("table", main.name or main.op_type, main.op_type, q_node.output[0], out_q, reads, nodes)
        ops = [n.op_type for n in compute]
        if src in self.inputs and not nodes:
            step.kind, step.inputs = "input", [src]
            return step
        if not reads:
            step.kind = "const"
            self.const_codes[step.out] = (quantize_f32(self._origin(src), out_q), out_q)
            return step
        if not compute:
            step.kind = "move"
            return step
        if self._linear_then_bias(step, compute, reads):
            return step
        if len(compute) == 1:
            node = compute[0]
            op = node.op_type
            ins = list(node.input)
            if op in LINEAR and len(reads) == 1 and self._weight(step, node):
                step.kind = "linear"
            elif op == "MatMul" and len(reads) in (1, 2) and not any(self._is_const(i) for i in ins):
                # two activations; one quantized tensor moved two ways (q and k split from qkv) too
                step.kind = "matmul"
                step.inputs = [self._codes_of(ins[0]), self._codes_of(ins[1])]
            elif op == "Add" and len(reads) == 2:
                step.kind = "add"
                step.inputs = [self._codes_of(ins[0]), self._codes_of(ins[1])]
            elif op == "Add" and len(reads) == 1:
                const = next((i for i in ins if self._is_const(i)), None)
                if const is not None and np.size(self.const_value(const)) > 1:  # a scalar: a table
                    step.kind = "bias"
                    step.bias = self.const_value(const)
                    if const in self.const_dq:
                        step.bias_codes, step.bias_q = self.const_dq[const]
            elif op == "LayerNormalization" and len(reads) == 1:
                step.kind = "layernorm"
                step.consts = {
                    "gamma": self.const_value(ins[1]),
                    "beta": self.const_value(ins[2]) if len(ins) > 2 else None,
                }
            elif op == "Softmax" and len(reads) == 1:
                step.kind = "softmax"
            elif op == "Concat":
                step.kind = "concat"
                step.inputs = [self._codes_of(i) for i in ins]
            step.attrs = _attrs(node)
            if step.kind != "table":
                return step
        roots = {self.root.get(r, r) for r in reads}
        if len(roots) == 1 and all(op in ELEMENTWISE for op in ops):
            # elementwise of one code, maybe through other tables of it (GELU's x * (1 + erf(...)))
            step.kind, step.inputs = "table", [roots.pop()]
            self.root[step.out] = step.inputs[0]
            return step
        bad = next((n for n in compute if n.op_type not in ELEMENTWISE), compute[-1])
        raise GraphError(
            f"node {node_label(bad)}: hwvit cannot map {'+'.join(ops)} of {len(reads)} quantized tensor(s) "
            f"to one of its blocks"
        )

    def _linear_then_bias(self, step: Step, compute: list, reads: list) -> bool:
        """A GEMM by constant weights then the Add of a float constant vector (a QONNX file's linear
        layer, whose bias the file leaves float): one ``linear`` step with that float bias."""
        if len(compute) != 2 or len(reads) != 1 or compute[0].op_type not in LINEAR or compute[1].op_type != "Add":
            return False
        other = [i for i in compute[1].input if i != compute[0].output[0]]
        bias = self.const_value(other[0]) if len(other) == 1 else None
        if bias is None or np.size(bias) <= 1 or not self._weight(step, compute[0]) or step.bias is not None:
            return False
        step.kind, step.name, step.op = "linear", compute[0].name or compute[0].op_type, compute[0].op_type
        step.bias, step.attrs = np.asarray(bias, np.float32), _attrs(compute[0])
        return True

    def _is_const(self, name: str) -> bool:
        return self.const_value(name) is not None

    def _origin(self, name: str) -> np.ndarray:
        """The float constant a constant tensor moves (an Expand of the class token: the token)."""
        while self.const_value(name) is None:
            node = self.producer.get(name)
            if node is None or node.op_type not in MOVES:
                raise GraphError(f"tensor {name!r}: a constant hwvit cannot follow")
            name = node.input[0]
        return self.const_value(name)

    def _codes_of(self, name: str) -> str:
        """The quantized tensor a float input of a step's main node comes from (through moves)."""
        while name not in self.dq:
            node = self.producer.get(name)
            if node is None or node.op_type not in MOVES:
                raise GraphError(f"tensor {name!r} is not a moved quantized tensor")
            name = node.input[0]
        return self.dq[name][0]

    def _weight(self, step: Step, node) -> bool:
        ins = list(node.input)
        w_name = ins[1] if len(ins) > 1 else ""
        if w_name not in self.const_dq:
            return False
        step.weight, step.weight_q = self.const_dq[w_name]
        if len(ins) > 2 and ins[2]:
            step.bias = self.const_value(ins[2])
            if ins[2] in self.const_dq:
                step.bias_codes, step.bias_q = self.const_dq[ins[2]]
        return True

    def quant_of(self, codes: str) -> Quant:
        """The quantizer of a quantized tensor."""
        return self.by_out[codes].out_q

    def source(self, codes: str) -> str:
        """The quantized tensor ``codes`` is a move of (through every move step), or itself."""
        while codes in self.by_out and self.by_out[codes].kind == "move":
            codes = self.by_out[codes].inputs[0]
        return codes


def sub_model(g: QGraph, src: str, out: str, moves: bool = True):
    """The file's own nodes from quantized tensor ``src`` to quantized tensor ``out`` as a model of its
    own (input ``src``, any shape; output ``out``), with the constants they read. ``moves=False``
    leaves the moves on the way out (each reads as its data input), for a chain that maps codes
    element by element (a table of one code), whose Reshape may take its sizes from elsewhere in the
    graph."""
    import onnx
    from onnx import helper

    nodes, seen, stack, inits, alias = [], set(), [out], set(), {}
    while stack:
        name = stack.pop()
        if name in seen or name == src or not name:
            continue
        seen.add(name)
        if name in g.consts and g.producer.get(name) is None:
            inits.add(name)
            continue
        node = g.producer.get(name)
        if node is None:
            raise GraphError(f"tensor {name!r}: the nodes to {out!r} read something besides {src!r}")
        if node.op_type in MOVES and not moves:
            alias.update((o, node.input[0]) for o in node.output)
            stack.append(node.input[0])
            continue
        nodes.append(node)
        stack.extend(node.input)

    def through(name: str) -> str:
        while name in alias:
            name = alias[name]
        return name

    order = {id(n): i for i, n in enumerate(g.model.graph.node)}
    kept = []
    for node in sorted({id(n): n for n in nodes}.values(), key=lambda n: order[id(n)]):
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        copy.input[:] = [through(i) for i in node.input]
        kept.append(copy)
    if out in alias:  # the chain ends in a move
        kept.append(helper.make_node("Identity", [through(out)], [out]))
    elem = onnx.helper.np_dtype_to_tensor_dtype(g.quant_of(src).dtype)
    out_elem = onnx.helper.np_dtype_to_tensor_dtype(g.quant_of(out).dtype)
    initializers = [i for i in g.model.graph.initializer if i.name in inits]
    graph = helper.make_graph(
        kept, "sub", [helper.make_tensor_value_info(src, elem, None)],
        [helper.make_tensor_value_info(out, out_elem, None)], initializers,
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=list(g.model.opset_import), ir_version=g.model.ir_version)


def table_of(g: QGraph, src: str, out: str) -> np.ndarray:
    """The codes of ``out`` for every code of ``src`` (in the dtype's order), by running the file's
    own nodes between them in onnxruntime (graph optimizations off: the file's meaning)."""
    from hwvit.onnx.ort import session

    q_in = g.quant_of(src)
    model = sub_model(g, src, out, moves=False)
    for init in model.graph.initializer:  # a constant of many values: not a function of one code
        if int(np.prod(init.dims)) > 1:
            node = next(n for n in model.graph.node if init.name in n.input)
            raise GraphError(
                f"node {node_label(node)}: reads {init.name!r} ({int(np.prod(init.dims))} values) between two "
                "quantized tensors; hwvit reads such a chain as a table of one code, which takes scalar constants"
            )
    sess = session(model, False)
    lo, hi = q_in.range
    codes = np.arange(lo, hi + 1).astype(q_in.dtype)
    return sess.run([out], {src: codes})[0].astype(np.int64).reshape(-1)


__all__ = [
    "ELEMENTWISE",
    "LINEAR",
    "MOVES",
    "GraphError",
    "QGraph",
    "Quant",
    "Step",
    "node_label",
    "sub_model",
    "table_of",
]
