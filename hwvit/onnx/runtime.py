"""The file in onnxruntime beside hwvit's integer model of it: codes at every quantized point.

``Observer`` runs the file and returns its codes at the IntViT's traced points (graph
optimizations off: the file's meaning; or on: what onnxruntime deploys, each point read in the graph
onnxruntime deploys for the whole file). ``side_by_side`` runs both on the same images and
counts, per point, the integers that differ and by how much: accumulated (hwvit from the image on)
and isolated (each hwvit layer given onnxruntime's codes at its inputs, so the count is that layer's
own). ``FileFloat`` runs hwvit's model with the points it computes by its own arithmetic (what the
file leaves float: LayerNorm, softmax) computed as the file computes them instead: the top-1
agreement left then is the part of the parting that is not hwvit's arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from hwvit.onnx.ort import run_batched, session

LEVELS = ("off", "on")


# The zero point's input of each node that writes a quantized tensor in onnxruntime's deployed graph
# (onnxruntime's QuantizeLinear and its fused integer kernels; com.microsoft's operator schemas).
_OUT_ZERO = {"QuantizeLinear": 2, "QLinearMatMul": 7, "QLinearConv": 7, "QLinearAdd": 7, "QLinearMul": 7,
             "QLinearSoftmax": 4, "QLinearConcat": 1, "QGemm": 8, "QLinearSigmoid": 4, "QLinearLeakyRelu": 4,
             "QLinearAveragePool": 4, "QLinearGlobalAveragePool": 4, "QLinearReduceMean": 4}  # fmt: skip


def deployed(model):
    """The graph onnxruntime deploys for ``model`` on this machine (graph optimizations on, as
    onnxruntime writes it out): its fused integer kernels as nodes, named after the node each replaces."""
    import tempfile
    from pathlib import Path

    import onnx

    with tempfile.TemporaryDirectory() as d:
        path = str(Path(d) / "deployed.onnx")
        session(model, True, save_to=path)
        return onnx.load(path)


def qlinear_adds(model) -> dict[str, int]:
    """Node name -> code offset (128 on uint8 codes, else 0) of every Add of ``model`` that onnxruntime
    deploys as its QLinearAdd on this machine (hwvit.onnx.runtime.deployed names it after the node)."""
    from onnx import numpy_helper

    dep = deployed(model)
    consts = {i.name: i for i in dep.graph.initializer}
    out = {}
    for node in dep.graph.node:
        if node.op_type == "QLinearAdd" and node.input[7] in consts:
            out[node.name] = 128 if numpy_helper.to_array(consts[node.input[7]]).dtype == np.uint8 else 0
    return out


def _deployed_tensors(model, dep, names) -> dict[str, tuple[str, int, bool]]:
    """Quantized tensor of the file -> (the tensor of ``dep``, onnxruntime's deployed graph, that holds
    its codes, that tensor's zero point, whether its channels are last): the file's quantizer where
    onnxruntime keeps it, else the output of the integer kernel it fused from the node the quantizer
    reads (onnxruntime names a fused kernel after that node). Tensors a fused kernel keeps inside are
    left out."""
    import re

    from onnx import numpy_helper

    from hwvit.onnx.graph import MOVES

    producer = {o: n for n in model.graph.node for o in n.output}
    dep_producer = {o: n for n in dep.graph.node for o in n.output}
    by_name = {}
    for n in dep.graph.node:
        by_name.setdefault(re.sub(r"_token_\d+$", "", n.name), n)
    consts = {i.name: numpy_helper.to_array(i) for i in dep.graph.initializer}
    out = {}
    for name in names:
        q = producer.get(name)
        if q is None or q.op_type != "QuantizeLinear":
            continue
        node, tensor = by_name.get(q.name), None
        if node is None or node.op_type != "QuantizeLinear":
            src = producer.get(q.input[0])
            node = by_name.get(src.name) if src is not None else None
            if node is not None and node.op_type in MOVES and node.op_type == src.op_type:
                # onnxruntime moved the quantizer up, before the moves: they move its codes
                tensor = node.output[list(src.output).index(q.input[0])]
                while node is not None and node.op_type in MOVES:
                    node = dep_producer.get(node.input[0])
        if node is None or node.op_type not in _OUT_ZERO:
            continue
        at = _OUT_ZERO[node.op_type]
        zero = consts.get(node.input[at]) if len(node.input) > at else np.zeros((), np.int64)
        last = any(a.name == "channels_last" and a.i for a in node.attribute)  # its NHWC kernel
        if zero is not None and zero.size == 1:
            out[name] = (tensor or node.output[0], int(zero.reshape(-1)[0]), last)
    return out


class Observer:
    """onnxruntime's codes at every traced point of an imported model and its logits.

    Graph optimizations off (the file's meaning: each node as written, nothing fused): one session of
    the file with every point's codes an extra output. On (what onnxruntime deploys): an output
    changes what it fuses (on x86 onnxruntime turns an int8 quantizer and its DequantizeLinear into
    uint8 ones, and then a QDQ GEMM into its integer kernel, only where that DequantizeLinear alone
    reads the codes). So onnxruntime writes out the graph it deploys for the whole file
    (``deployed``), and that graph runs with optimizations off, each point's tensor in it an extra
    output (``_deployed_tensors``): the kernels are the ones the whole file runs, and every point is
    read where the whole file computes it, in onnxruntime's codes turned back to the file's (the
    deployed tensor's zero point off, the file's on; an NHWC kernel's channels moved back). A point a
    fused kernel keeps inside is not observed at "on".
    """

    def __init__(self, imported, optimize: bool = False):
        import onnx

        self.imported, self.optimize = imported, optimize
        model = imported.graph.model
        self.logits_name = model.graph.output[0].name
        names = sorted(set(imported.points.values()) - {self.logits_name})
        self.quants = {n: imported.graph.quant_of(n) for n in names}
        m = onnx.ModelProto()
        self.renamed: dict[str, tuple[str, int, bool]] = {}
        if optimize:
            m.CopyFrom(deployed(model))
            self.renamed = _deployed_tensors(model, m, names)
            wanted = [t for t, _, _ in self.renamed.values()]
        else:
            m.CopyFrom(model)
            wanted = names
        outs = {o.name for o in m.graph.output}
        for name in dict.fromkeys(wanted):
            if name not in outs:
                m.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
        self.session = session(m, False)

    def run(self, x: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """(point -> onnxruntime's codes in hwvit's int8 domain (the file's code plus its offset), the
        logits) for float inputs ``x``."""
        x = np.asarray(x, np.float32)
        sess = self.session
        by_name = dict(zip([o.name for o in sess.get_outputs()], run_batched(sess, x)))
        for name, (tensor, zero, last) in self.renamed.items():  # onnxruntime's codes, back in the file's
            codes = by_name[tensor].astype(np.int64) - zero + self.quants[name].z
            by_name[name] = np.moveaxis(codes, -1, 1) if last else codes
        codes = {}
        for point, name in self.imported.points.items():
            if name in by_name:
                codes[point] = by_name[name].astype(np.int64) + self.imported.offsets.get(point, 0)
        return codes, np.asarray(by_name[self.logits_name], np.float64)


def run_codes(imported, x: np.ndarray, optimize: bool = False) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(point -> onnxruntime's codes in hwvit's int8 domain, the logits) for float inputs ``x``,
    graph optimizations off or on (``Observer``; keep one Observer for many batches)."""
    return Observer(imported, optimize).run(x)


def hwvit_codes(imported, x_codes: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """hwvit's codes at every traced point and its integer logits, from the input codes."""
    from hwvit.intvit import Trace

    tr = Trace(values=True)
    logits = imported.int_model.forward(x_codes, trace=tr, quantized=True)
    return {p: v for p, (v, _) in tr.values.items()}, logits


def _cls_only(theirs: np.ndarray, like: np.ndarray) -> bool:
    """The file quantizes only the class token of hwvit's (B, N, D) point (its quantizer after the
    token's selection, as a QONNX file's classifier input)."""
    return like.ndim == 3 and theirs.shape == (like.shape[0], like.shape[2])


def _to_ours(point: str, theirs: np.ndarray, like: np.ndarray) -> np.ndarray:
    """onnxruntime's array at ``point`` in hwvit's layout (the inverse of ``_layout``)."""
    if theirs.shape == like.shape:
        return theirs
    if _cls_only(theirs, like):  # the other tokens are read by nothing after: hwvit's stay
        out = np.array(like, copy=True)
        out[:, 0] = theirs
        return out
    if point.endswith(".attn.context") and like.ndim == 3 and theirs.ndim == 4:
        return theirs.transpose(0, 2, 1, 3).reshape(like.shape)
    if point.endswith((".attn.q", ".attn.k", ".attn.v")) and like.ndim == 4 and theirs.ndim == 3:
        b, h, n, hd = like.shape  # (B, N, H*hd) -> (B, H, N, hd)
        return theirs.reshape(b, n, h, hd).transpose(0, 2, 1, 3)
    if point.endswith((".attn.k", ".attn.k_scaled")) and theirs.shape == like.shape[:2] + like.shape[:1:-1]:
        return theirs.transpose(0, 1, 3, 2)  # K^T (scaled): (B, H, hd, N)
    if point == "embed" and theirs.ndim == 4:
        return theirs.reshape(theirs.shape[0], theirs.shape[1], -1).transpose(0, 2, 1)
    return theirs.reshape(like.shape)


def isolated(imported, x_codes: np.ndarray, theirs: dict[str, np.ndarray]) -> dict[str, tuple]:
    """Each hwvit layer on onnxruntime's codes at its inputs: (hwvit's output, onnxruntime's) per point."""
    from hwvit.intvit import Trace

    def force(path, q, scale):
        if path in theirs:
            t = _to_ours(path, theirs[path], np.asarray(q))
            return t.astype(np.asarray(q).dtype) if np.asarray(q).dtype.kind in "iu" else t
        return q

    tr = Trace(values=True, force=force)
    imported.int_model.forward(x_codes, trace=tr, quantized=True)
    return {p: (v, theirs[p]) for p, (v, _) in tr.values.items() if p in theirs}


def _layout(point: str, ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """hwvit's array in onnxruntime's layout at ``point`` (the same elements, maybe another shape)."""
    if ours.shape == theirs.shape:
        return ours
    if _cls_only(theirs, ours):
        return ours[:, 0]
    if ours.size == theirs.size:
        if point.endswith(".attn.context") and ours.ndim == 3 and theirs.ndim == 4:  # (B, N, H*hd) vs (B, H, N, hd)
            b, h, n, hd = theirs.shape
            return ours.reshape(b, n, h, hd).transpose(0, 2, 1, 3)
        if point == "embed" and theirs.ndim == 4:  # (B, N, D) vs (B, D, h, w)
            b, d = theirs.shape[:2]
            return ours.transpose(0, 2, 1).reshape(theirs.shape)
        if point.endswith((".attn.q", ".attn.k", ".attn.v")) and ours.ndim == 4 and theirs.ndim == 3:
            return ours.transpose(0, 2, 1, 3).reshape(theirs.shape)  # (B, H, N, hd) vs (B, N, H*hd)
        if point.endswith((".attn.k", ".attn.k_scaled")) and theirs.shape == ours.shape[:2] + ours.shape[:1:-1]:
            return ours.transpose(0, 1, 3, 2)
        return ours.reshape(theirs.shape)
    return ours


class FileFloat:
    """hwvit's integer model with each point of origin "hwvit arithmetic" computed by the file's own
    nodes in onnxruntime (graph optimizations off) on hwvit's codes at the point's input."""

    def __init__(self, imported):
        from hwvit.onnx.graph import sub_model

        self.imported = imported
        g = imported.graph
        point_of = {}
        for point, codes in imported.points.items():
            point_of.setdefault(codes, point)
        self.subs = {}
        for point, origin in imported.origin.items():
            if origin != "hwvit arithmetic":
                continue
            step = g.by_out[imported.points[point]]
            src = g.source(step.inputs[0])
            sess = session(sub_model(g, src, step.out), False)
            self.subs[point] = (point_of[src], sess, src, g.quant_of(src).dtype)

    def logits(self, x_codes: np.ndarray) -> np.ndarray:
        """The dequantized logits of the model so run, from hwvit's input codes."""
        from hwvit.intvit import Trace

        offsets, last = self.imported.offsets, {}

        def force(path, q, scale):
            if path in self.subs:
                src_point, sess, src, dtype = self.subs[path]
                codes = (np.asarray(last[src_point], np.int64) - offsets[src_point]).astype(dtype)
                out = sess.run(None, {src: codes})[0].astype(np.int64) + offsets[path]
                q = _to_ours(path, out, np.asarray(q)).reshape(np.shape(q)).astype(np.asarray(q).dtype)
            last[path] = q
            return q

        lg = self.imported.int_model.forward(x_codes, trace=Trace(force=force), quantized=True)
        return self.imported.int_model.dequantize_logits(lg)


@dataclass
class PointDiff:
    point: str
    origin: str  # "file": every parameter from the file; "hwvit arithmetic": hwvit computes what the file leaves float
    elements: int
    differ: int  # integers that differ from onnxruntime's
    max_lsb: int
    hist: dict[int, int] = field(default_factory=dict)  # |difference| -> count

    @property
    def per_million(self) -> float:
        return 1e6 * self.differ / max(self.elements, 1)


def diff(point: str, origin: str, ours: np.ndarray, theirs: np.ndarray) -> PointDiff:
    ours = _layout(point, np.asarray(ours, np.int64), np.asarray(theirs, np.int64))
    d = np.abs(ours.reshape(-1) - np.asarray(theirs, np.int64).reshape(-1))
    vals, counts = np.unique(d[d > 0], return_counts=True)
    return PointDiff(point, origin, int(d.size), int((d > 0).sum()), int(d.max(initial=0)),
                     {int(v): int(c) for v, c in zip(vals, counts)})  # fmt: skip


def input_codes(imported, x: np.ndarray) -> np.ndarray:
    """The file's quantization of the input (float32 x / s, half to even, + z), in hwvit's domain."""
    from hwvit.onnx.graph import quantize_f32

    inp = imported.graph.by_out[imported.points["input"]]
    return quantize_f32(x, inp.out_q) + imported.offsets["input"]


@dataclass
class SideBySide:
    images: int
    levels: dict[str, list[PointDiff]]  # "off" / "on" -> accumulated differences per point
    # "off" / "on" -> each hwvit layer on onnxruntime's codes at its inputs: with optimizations off
    # the file's float path (dequantize, float op, quantize), on its fused integer kernels
    isolated: dict[str, list[PointDiff]]
    first_part: dict[str, str | None]  # per level: the first point whose integers differ
    agreement: dict[str, float]  # per level: top-1 agreement of hwvit with onnxruntime
    logits_sqnr_db: dict[str, float]
    top1: dict[str, float | None] = field(default_factory=dict)
    # top-1 agreement with onnxruntime (optimizations off) of hwvit's model with its own arithmetic
    # points computed as the file does (FileFloat): 100% when every parting is hwvit's arithmetic
    file_float_agreement: float | None = None

    def to_dict(self) -> dict:
        def rows(items):
            return [{**d.__dict__, "per_million": d.per_million} for d in items]

        return {
            "images": self.images,
            "agreement": self.agreement,
            "logits_sqnr_db": self.logits_sqnr_db,
            "first_part": self.first_part,
            "top1": self.top1,
            "file_float_agreement": self.file_float_agreement,
            "points": {level: rows(items) for level, items in self.levels.items()},
            "isolated": {level: rows(items) for level, items in self.isolated.items()},
        }


def _sqnr(ref: np.ndarray, test: np.ndarray) -> float:
    noise = float(np.sum((ref - test) ** 2))
    signal = float(np.sum(ref**2))
    return math.inf if noise == 0 else 10 * math.log10(signal / noise) if signal else -math.inf


def _rows(imported, order: list[str], pairs: dict[str, list]) -> list[PointDiff]:
    """One PointDiff per point, in ``order``, of the (hwvit, onnxruntime) batches in ``pairs``."""
    rows = []
    for p in order:
        if p in pairs:
            o = np.concatenate([_layout(p, a, b).reshape(-1) for a, b in pairs[p]])
            t = np.concatenate([b.reshape(-1) for _, b in pairs[p]])
            rows.append(diff(p, imported.origin.get(p, "file"), o, t))
    return rows


def side_by_side(imported, x, labels=None, batch: int = 64, levels: tuple[str, ...] = LEVELS) -> SideBySide:
    """hwvit's integer model beside onnxruntime on float inputs ``x`` at graph optimizations ``levels``
    ("off" always among them: the file's meaning, against which the file-float agreement is counted;
    "on": the graph onnxruntime deploys, ``Observer``)."""
    if "off" not in levels or not set(levels) <= set(LEVELS):
        raise ValueError(f"levels {levels}: 'off' and optionally 'on'")
    x = np.asarray(x, np.float32)
    order = list(imported.points)
    acc = {level: {} for level in levels}
    iso = {level: {} for level in levels}
    logits = {level: [] for level in levels}
    ours_logits, file_float = [], []
    floats = FileFloat(imported)
    observers = {level: Observer(imported, level == "on") for level in levels}
    for start in range(0, len(x), batch):
        xb = x[start : start + batch]
        xq = input_codes(imported, xb)
        ours, lg = hwvit_codes(imported, xq)
        ours_logits.append(imported.int_model.dequantize_logits(lg))
        file_float.append(floats.logits(xq))
        for level in levels:
            theirs, lt = observers[level].run(xb)
            logits[level].append(lt)
            for p in order:
                if p in theirs and p in ours:
                    acc[level].setdefault(p, []).append((ours[p], theirs[p]))
            for p, (o, t) in isolated(imported, xq, theirs).items():
                iso[level].setdefault(p, []).append((o, t))
    ours_l = np.concatenate(ours_logits)
    rows, isolated_rows, first, agree, sq, top1 = {}, {}, {}, {}, {}, {}
    for level in levels:
        rows[level] = _rows(imported, order, acc[level])
        isolated_rows[level] = _rows(imported, order, iso[level])
        first[level] = next((r.point for r in rows[level] if r.differ), None)
        theirs_l = np.concatenate(logits[level])
        agree[level] = float(np.mean(theirs_l.argmax(1) == ours_l.argmax(1)))
        sq[level] = _sqnr(theirs_l, ours_l)
        top1[level] = None if labels is None else float(np.mean(theirs_l.argmax(1) == np.asarray(labels)))
    top1["hwvit"] = None if labels is None else float(np.mean(ours_l.argmax(1) == np.asarray(labels)))
    off = np.concatenate(logits["off"]).argmax(1)
    ff = float(np.mean(np.concatenate(file_float).argmax(1) == off))
    return SideBySide(len(x), rows, isolated_rows, first, agree, sq, top1, ff)


__all__ = [
    "LEVELS",
    "qlinear_adds",
    "Observer",
    "PointDiff",
    "SideBySide",
    "diff",
    "hwvit_codes",
    "input_codes",
    "run_codes",
    "side_by_side",
]
