"""The ViT in a QDQ graph's steps (hwvit.onnx.graph), as hwvit's IntViT and float ViT.

Recognized (a pre-norm ViT as hwvit's float model and torch.onnx.export write it): a Conv patch
embedding; a class token concatenated before the patches; a learned position table added; per
block LayerNorm, one fused q/k/v projection, Q.K^T (optionally a scaling of its own quantizer),
softmax, P.V, the output projection, the residual add, LayerNorm, fc1, GELU (any elementwise
chain: a table), fc2, the residual add; a final LayerNorm, the class token, the classifier.
Anything else gets one line naming the first node that does not fit.

What comes from the file: every weight, bias, scale, zero point and width; the requant
multipliers (``s_in * s_w / s_out`` to 31 bits) with the file's rounding, round half to even;
every elementwise chain between two quantized tensors as its table, computed by running the file's
own nodes on all 256 codes in onnxruntime. hwvit's arithmetic (its variants) only where the file
computes in float between two quantizers: LayerNorm and softmax (at the file's output scale and zero
point). uint8 tensors become int8 codes ``c - 128`` with zero point ``z - 128`` (the same reals).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from hwvit.onnx.graph import GraphError, QGraph, Quant, Step, dequantize_f32, quantize_f32, table_of
from hwvit.onnx.ort import probe_shapes
from hwvit.onnx.parts import split_shared

ROUNDING = "half_even"  # ONNX QuantizeLinear rounds half to even
# The GEMMs' requant: the file's meaning (its real multiplier ``s_a * s_w / s_out``, ROUNDING), or
# onnxruntime's fused kernels (requant=onnxruntime: their binary32 multiplier and product).
REQUANTS = (ROUNDING, "onnxruntime")


@dataclass
class Imported:
    """What an ONNX file gives: the float model of its dequantized weights, its IntViT, and where each
    traced point of the IntViT is in the file (``points``: point path -> quantized tensor name,
    ``offsets``: the code offset, -128 for a uint8 tensor)."""

    model: object  # hwvit.float.model.ViT
    int_model: object  # hwvit.intvit.IntViT
    graph: QGraph
    path: Path
    points: dict[str, str] = field(default_factory=dict)
    offsets: dict[str, int] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)  # point -> "file" | "hwvit arithmetic"
    # linear layer (its path in hwvit.analysis.sensitivity.linear_paths) -> its dequantized weight tensor
    weights: dict[str, str] = field(default_factory=dict)


def _off(q: Quant) -> int:
    """Offset that maps the file's codes to int8: -128 for uint8."""
    if q.dtype == np.uint8:
        return -128
    if q.dtype != np.int8:
        raise GraphError(f"{q.dtype} activations: hwvit takes int8 or uint8 (use QuantType.QInt8 or QUInt8)")
    return 0


def ratio(s_a, s_b, s_out, requant: str = ROUNDING) -> np.ndarray:
    """The requant multiplier of the file's float32 scales: the real ``s_a * s_b / s_out`` (float64),
    or for requant=onnxruntime the binary32 one its QLinearMatMul, QGemm and QLinearConv compute,
    ``f32(f32(s_a * s_b) / s_out)``."""
    if requant == "onnxruntime":
        product = np.float32(s_a) * np.asarray(s_b, np.float32)
        return (product / np.float32(s_out)).astype(np.float32).astype(np.float64)
    return np.float64(s_a) * np.asarray(s_b, np.float64) / np.float64(s_out)


def _z(q: Quant) -> int:
    """The zero point in hwvit's int8 codes."""
    return q.z + _off(q)


class _Builder:
    def __init__(self, g: QGraph, path: Path, softmax: str, layernorm: str, requant: str = ROUNDING):
        if requant not in REQUANTS:
            raise GraphError(f"requant {requant!r}: a quantized file's GEMMs round as {' or '.join(REQUANTS)}")
        self.g, self.path, self.requant = g, path, requant
        # requant=onnxruntime: the adds onnxruntime fuses into its QLinearAdd, with their codes' offset
        # (128: it runs that one on uint8 codes); it computes the others in float32, as the file says
        from hwvit.onnx.runtime import qlinear_adds

        self.qlinear_adds = qlinear_adds(g.model) if requant == "onnxruntime" else {}
        self.softmax_variant, self.layernorm_variant = softmax, layernorm
        self.consumers: dict[str, list[Step]] = {}
        for step in g.steps:
            if step.kind in ("move", "const", "input"):
                continue
            for src in step.inputs:
                self.consumers.setdefault(g.source(src), []).append(step)
        self.points: dict[str, str] = {}
        self.offsets: dict[str, int] = {}
        self.origin: dict[str, str] = {}
        self.shapes = _shapes(g.model)
        split_shared(g, self.shapes.get(g.inputs[0]) if g.inputs else None)
        self.float_weights: dict[str, np.ndarray] = {}
        self.weights: dict[str, str] = {}
        # the points and weights of a file whose quantizers hwvit chose (hwvit.onnx.qonnx)
        meta = {p.key: p.value for p in g.model.metadata_props}
        self.calibrated = set(meta.get("hwvit.calibrated", "").split())

    # ------------------------------------------------------------------ graph walking
    def next(self, codes: str, kind: str, where: str, optional: bool = False) -> Step | None:
        found = [s for s in self.consumers.get(codes, []) if s.kind == kind]
        if not found:
            if optional:
                return None
            have = self.consumers.get(codes, [])
            what = f"{have[0].name} ({have[0].op}, a {have[0].kind} step)" if have else "nothing"
            raise GraphError(f"{where}: expected a {kind} after {codes!r}, found {what}")
        return found[0]

    def mark(self, point: str, step: Step, origin: str = "file") -> None:
        self.points[point] = step.out
        self.offsets[point] = _off(step.out_q)
        if origin == "file" and step.out in self.calibrated:
            origin = "hwvit calibration"
        self.origin[point] = origin

    def q(self, codes: str) -> Quant:
        return self.g.quant_of(self.g.source(codes))

    # ------------------------------------------------------------------ layers
    def linear(self, step: Step, point: str, name: str):
        from hwvit.intvit.layers import IntLinear
        from hwvit.quant.layers import requant_of

        q_in = self.q(step.inputs[0])
        w = step.weight.astype(np.int64)
        wq = step.weight_q
        if wq.dtype != np.int8 or np.any(wq.zero != 0):
            raise GraphError(
                f"node {step.name} ({step.op}): its weights have a zero point or are not int8; quantize weights "
                f"symmetric int8 (onnxruntime: weight_type=QuantType.QInt8, WeightSymmetric=True)"
            )
        if step.op == "MatMul":
            w = w.T
            axis_n = 1
        elif step.op == "Gemm":
            if not step.attrs.get("transB", 0):
                w = w.T
            axis_n = 0 if step.attrs.get("transB", 0) else 1
        else:  # Conv (D, C, kh, kw): features ordered (c, kh, kw), as IntPatchEmbed's conv patches
            w = w.reshape(w.shape[0], -1)
            axis_n = 0
        n = w.shape[0]
        s_w = np.broadcast_to(wq.scale.astype(np.float64), (n,)).copy()
        if not wq.per_tensor and wq.axis not in (axis_n, axis_n - step.weight.ndim):
            raise GraphError(f"node {step.name}: weight scales along axis {wq.axis}, not the output channels")
        s_in, z_in = q_in.s, _z(q_in)
        bias = np.zeros(n, np.int64)
        if step.bias is not None:
            acc_scale = (np.float32(s_in) * s_w.astype(np.float32)).astype(np.float64)
            bq = step.bias_q
            if (
                bq is not None
                and bq.dtype == np.int32
                and np.all(bq.zero == 0)
                and np.allclose(np.broadcast_to(bq.scale, (n,)), acc_scale, rtol=1e-6, atol=0)
            ):
                bias = step.bias_codes.astype(np.int64).reshape(n)  # the file's int32 bias, as it is
            else:
                bias = np.rint(np.asarray(step.bias, np.float64).reshape(n) / acc_scale).astype(np.int64)
        bias = bias - z_in * w.sum(axis=1)  # the input's zero point: sum (x - z) w = sum x w - z rowsum(w)
        if np.abs(bias).max(initial=0) >= 1 << 31:
            raise GraphError(f"node {step.name}: its bias with the input's zero point folded in leaves int32")
        q_out = step.out_q
        rq = requant_of(ratio(s_in, s_w, q_out.s, self.requant), 8, q_out.s, self.requant)
        rq = replace(rq, zero=_z(q_out))
        node = next(n for n in step.nodes if n.op_type == step.op)
        origin = "hwvit calibration" if node.input[1] in self.calibrated else "file"  # its weights' quantizer
        self.weights["embed.proj" if name == "patch_embed.proj" else name] = node.input[1]
        w8 = np.array(w, np.int8)
        w8.flags.writeable = False
        lin = IntLinear(w=w8, bias=bias, s_in=s_in, requant=rq)
        self.float_weights[f"{name}.weight"] = (w * s_w[:, None]).astype(np.float32)
        fb = (bias + z_in * w.sum(axis=1)).astype(np.float64) * s_in * s_w
        self.float_weights[f"{name}.bias"] = fb.astype(np.float32)
        bstep = self.next(step.out, "bias", step.name, optional=True)
        if bstep is not None and step.op == "MatMul":
            lin = self.bias_add(lin, bstep, name)
            self.mark(point, bstep, origin)
        else:
            self.mark(point, step, origin)
        return lin, (bstep if bstep is not None and step.op == "MatMul" else step)

    def bias_add(self, lin, bstep: Step, name: str):
        from hwvit.intvit.layers import IntResidual

        q_a, q_out = lin.requant, bstep.out_q
        bq = bstep.bias_q
        if bq is None and not np.any(bstep.bias):  # a float all-zero bias the quantizer left alone
            bq = Quant(np.asarray(1.0, np.float32), np.zeros((), np.int64), None, np.dtype(np.int8))
            bstep.bias_codes = np.zeros(np.shape(bstep.bias), np.int8)
        if bq is None or bstep.bias_codes is None:
            raise GraphError(f"node {bstep.name}: a bias hwvit reads is a quantized constant")
        if bq.dtype not in (np.int8, np.uint8):
            raise GraphError(f"node {bstep.name}: a {bq.dtype} bias; hwvit takes an 8-bit bias after a MatMul")
        codes = bstep.bias_codes.astype(np.int64).reshape(-1) + _off(bq)
        ma, mb, s, rounding = self.add_params(bstep, q_a.s_out, bq.s, q_out)
        add = IntResidual(
            mult_a=int(ma), mult_b=int(mb), shift=int(s), s_a=q_a.s_out, s_b=bq.s, s_out=q_out.s, out_bits=8,
            rounding=rounding, zero_a=q_a.zero, zero_b=_z(bq), zero_out=_z(q_out),
        )  # fmt: skip
        self.float_weights[f"{name}.bias"] = dequantize_f32(bstep.bias_codes, bq)
        return replace(lin, post_bias=codes, bias_add=add)

    def residual(self, step: Step, a_codes: str, b_codes: str):
        from hwvit.intvit.layers import IntResidual

        qa, qo = self.q(a_codes), step.out_q
        qb = b_codes if isinstance(b_codes, Quant) else self.q(b_codes)  # a constant's quantizer
        ma, mb, s, rounding = self.add_params(step, qa.s, qb.s, qo)
        return IntResidual(
            mult_a=int(ma), mult_b=int(mb), shift=int(s), s_a=qa.s, s_b=qb.s, s_out=qo.s, out_bits=8,
            rounding=rounding, zero_a=_z(qa), zero_b=_z(qb), zero_out=_z(qo),
        )  # fmt: skip

    def add_params(self, step: Step, s_a, s_b, q_out: Quant) -> tuple[int, int, int, str]:
        """(Ma, Mb, s, rounding) of an add of two quantized tensors: the file's meaning (the real ratios,
        ROUNDING), or with requant=onnxruntime what its QLinearAdd computes (binary32 ratios and
        arithmetic on the file's int8 or uint8 codes: hwvit.ops.residual_add.qlinear_add)."""
        from hwvit.quant.params import residual_params

        if step.name not in self.qlinear_adds:
            return (*residual_params(s_a, s_b, q_out.s), ROUNDING)
        from hwvit.ops.residual_add import f32_ratios

        try:
            ma, mb, s = f32_ratios(s_a, s_b, q_out.s)
        except ValueError as exc:
            raise GraphError(f"node {step.name}: {exc}") from None
        return ma, mb, s, "onnxruntime_u8" if self.qlinear_adds[step.name] else "onnxruntime"

    def layernorm(self, step: Step, name: str):
        import torch

        from hwvit.quant.layers import int_layernorm

        q_in, q_out = self.q(step.inputs[0]), step.out_q
        gamma = np.asarray(step.consts["gamma"], np.float64).reshape(-1)
        beta = step.consts["beta"]
        beta = np.zeros_like(gamma) if beta is None else np.asarray(beta, np.float64).reshape(-1)
        if step.attrs.get("axis", -1) not in (-1, len(self.shapes.get(step.inputs[0], [0, 0, 0])) - 1):
            raise GraphError(f"node {step.name}: LayerNormalization over more than the last axis")
        eps = float(step.attrs.get("epsilon", 1e-5))
        self.float_weights[f"{name}.weight"] = gamma.astype(np.float32)
        self.float_weights[f"{name}.bias"] = beta.astype(np.float32)
        ln = torch.nn.LayerNorm(gamma.size, eps=eps)
        with torch.no_grad():
            ln.weight.copy_(torch.as_tensor(gamma))
            # the output's zero point joins beta: LN / s + z = (LN + z s) / s, rounded once by hwvit's
            # LayerNorm (the file's LayerNorm is float; its input's zero point cancels in x - mean)
            ln.bias.copy_(torch.as_tensor(beta + _z(q_out) * q_out.s))
        return int_layernorm(ln, q_in.s, q_out.s, 8, self.layernorm_variant)

    def table(self, step: Step, s_in: float):
        from hwvit.intvit.layers import IntGelu

        src = step.inputs[0]  # its own input codes (a move of the source's: the same quantizer)
        codes = table_of(self.g, src, step.out)
        q_in, q_out = self.q(src), step.out_q
        # index by the int8 code c' = c + off_in; entry = the file's output code + off_out
        order = np.argsort(np.arange(q_in.range[0], q_in.range[1] + 1) + _off(q_in))
        table = codes[order] + _off(q_out)
        return IntGelu(table=table.astype(np.int64), in_bits=8, out_bits=8, s_in=s_in, s_out=q_out.s, variant="lut")

    def softmax(self, step: Step, s_in: float):
        from hwvit.quant.layers import int_softmax
        from hwvit.variants.base import SoftmaxContext

        q = step.out_q
        top = q.range[1] - q.z  # probabilities are c - z >= 0: unsigned, below 2^bits
        bits = max(1, int(top).bit_length())
        variant = self.softmax_variant
        sm = int_softmax(s_in, 8, bits, "table", 256, "hwvit" if variant == "round_each" else variant)
        if variant == "round_each":
            from hwvit import variants
            from hwvit.intvit.qparams import Arith

            v = variants.get("softmax", "round_each")
            ctx = SoftmaxContext(s_in, 8, bits, 256, s_out=q.s)
            vp = v.prepare(ctx)
            sm = replace(sm, arith=Arith(family="softmax", name=variant, params=vp, s_out=float(v.out_scale(ctx, vp))))
        return sm, -q.z

    # ------------------------------------------------------------------ the model
    def build(self, softmax: str) -> Imported:
        from hwvit.float.config import ViTConfig
        from hwvit.intvit.model import IntAttention, IntBlock, IntEmbed, IntPatchEmbed, IntReadout, IntViT
        from hwvit.quant.layers import requant_of

        g = self.g
        inp = next((s for s in g.steps if s.kind == "input"), None)
        if inp is None or len(g.inputs) != 1:
            raise GraphError("the model's input is not quantized by one QuantizeLinear: not a QDQ model hwvit reads")
        self.mark("input", inp)
        q_x = inp.out_q
        shape = self.shapes.get(g.inputs[0])
        if shape is None or len(shape) != 4:
            raise GraphError(f"input {g.inputs[0]!r}: hwvit reads image models with input (B, C, H, W)")
        emb = self.next(inp.out, "linear", "patch embedding")
        if emb.op != "Conv":
            raise GraphError(f"node {emb.name} ({emb.op}): hwvit reads a Conv patch embedding")
        k = emb.attrs.get("kernel_shape", [0, 0])
        if list(emb.attrs.get("strides", k)) != list(k) or k[0] != k[1] or any(emb.attrs.get("pads", [0]) or [0]):
            raise GraphError(f"node {emb.name} (Conv): not a patch embedding (stride = kernel, no padding)")
        proj, _ = self.linear(emb, "embed", "patch_embed.proj")
        dim, patch = int(proj.w.shape[0]), int(k[0])
        cur = emb.out
        cat = self.next(cur, "concat", "class token", optional=True)
        cls_q = None
        s_embed = proj.s_out
        if cat is not None:
            if len(cat.inputs) != 2 or cat.inputs[0] not in g.const_codes:
                raise GraphError(f"node {cat.name} (Concat): hwvit reads a class token concatenated before the patches")
            q_cat = cat.out_q
            if not q_cat.same(emb.out_q):
                raise GraphError(
                    f"node {cat.name} (Concat): the patches are requantized by the concat; hwvit needs one scale"
                )
            c_codes, c_q = g.const_codes[cat.inputs[0]]
            cls_f = dequantize_f32(c_codes, c_q).reshape(-1)
            cls_q = (quantize_f32(cls_f, q_cat) + _off(q_cat)).astype(np.int64)
            self.float_weights["cls_token"] = cls_f.reshape(1, 1, -1)
            cur = cat.out
        pos = self.next(cur, "bias", "position table")
        pq = pos.bias_q
        pos_codes = pos.bias_codes.astype(np.int64)[0] + _off(pq)
        self.float_weights["pos_embed"] = dequantize_f32(pos.bias_codes, pq)
        pos_add = self.residual(pos, cur, pq)
        self.mark("tokens", pos)
        embed = IntEmbed(
            patch_embed=IntPatchEmbed(kind="conv", patch_size=patch, proj=proj),
            s_embed=s_embed, cls_q=cls_q, pos_q=pos_codes, s_pos=pq.s, pos_add=pos_add,
        )  # fmt: skip
        tokens = pos.out
        blocks, heads, hidden = [], None, None
        i = 0
        while True:
            ln1 = self.next(tokens, "layernorm", f"layers.{i}.norm1", optional=True)
            if ln1 is None or not self._opens_attention(ln1):
                break
            p = f"layers.{i}"
            norm1 = self.layernorm(ln1, f"layers.{i}.norm1")
            self.mark(f"{p}.norm1", ln1, "hwvit arithmetic")
            projections, mm1 = self._projections(ln1, p, i)
            heads, n_tok, hd = self._heads(mm1)
            qq = self.q(mm1.inputs[0])
            s_k = self.q(mm1.inputs[1]).s
            scores = requant_of(ratio(qq.s, s_k, mm1.out_q.s, self.requant), 8, mm1.out_q.s, self.requant, False)
            scores = replace(scores, zero=_z(mm1.out_q))
            after = mm1
            tab = self.next(mm1.out, "table", f"{p}.attn scale", optional=True)
            scores_table = None
            if tab is not None:
                scores_table = self.table(tab, mm1.out_q.s)
                after = tab
            self.mark(f"{p}.attn.scores", after)
            sm_step = self.next(after.out, "softmax", f"{p}.attn.softmax")
            sm, p_off = self.softmax(sm_step, after.out_q.s)
            self.mark(f"{p}.attn.probs", sm_step, "hwvit arithmetic")
            self.offsets[f"{p}.attn.probs"] = p_off
            mm2 = self.next(sm_step.out, "matmul", f"{p}.attn P.V")
            qp, qv, qc = self.q(mm2.inputs[0]), self.q(mm2.inputs[1]), mm2.out_q
            # hwvit's softmax and round_each write the file's codes (their scale within 2^-24 of the
            # file's): the file's scale then; another variant writes at its own
            s_p = qp.s if abs(sm.s_out / qp.s - 1) < 1e-6 else sm.s_out
            context = requant_of(ratio(s_p, qv.s, qc.s, self.requant), 8, qc.s, self.requant, False)
            context = replace(context, zero=_z(qc))
            self.mark(f"{p}.attn.context", mm2)
            pj = self.next(mm2.out, "linear", f"{p}.attn.proj")
            proj_l, proj_last = self.linear(pj, f"{p}.attn.proj", f"layers.{i}.attn.proj")
            add1_s = self.next(proj_last.out, "add", f"{p}.add1")
            add1 = self.residual(add1_s, tokens, proj_last.out)
            self.mark(f"{p}.add1", add1_s)
            ln2 = self.next(add1_s.out, "layernorm", f"{p}.norm2")
            norm2 = self.layernorm(ln2, f"layers.{i}.norm2")
            self.mark(f"{p}.norm2", ln2, "hwvit arithmetic")
            f1 = self.next(ln2.out, "linear", f"{p}.mlp.fc1")
            fc1, fc1_last = self.linear(f1, f"{p}.mlp.fc1", f"layers.{i}.mlp.fc1")
            hidden = int(fc1.w.shape[0])
            chain = [s for s in self.consumers.get(fc1_last.out, []) if s.kind == "table"]
            gelu_s = next((s for s in chain if any(c.kind == "linear" for c in self.consumers.get(s.out, []))), None)
            if gelu_s is None:
                raise GraphError(f"node {f1.name}: no elementwise activation between fc1 and fc2 hwvit can tabulate")
            gelu = self.table(gelu_s, fc1.s_out)
            self.mark(f"{p}.mlp.gelu", gelu_s)
            f2 = self.next(gelu_s.out, "linear", f"{p}.mlp.fc2")
            fc2, fc2_last = self.linear(f2, f"{p}.mlp.fc2", f"layers.{i}.mlp.fc2")
            add2_s = self.next(fc2_last.out, "add", f"{p}.add2")
            add2 = self.residual(add2_s, add1_s.out, fc2_last.out)
            self.mark(f"{p}.add2", add2_s)
            attn = IntAttention(
                heads=heads, head_dim=hd, qkv=projections.get("qkv"), q=projections.get("q"),
                k=projections.get("k"), v=projections.get("v"), scores=scores, softmax=sm,
                context=context, proj=proj_l, scores_table=scores_table, q_table=projections.get("q_table"),
                k_table=projections.get("k_table"),
                zero_q=_z(qq), zero_k=_z(self.q(mm1.inputs[1])), zero_v=_z(qv),
            )  # fmt: skip
            blocks.append(
                IntBlock(norm1=norm1, attn=attn, add1=add1, norm2=norm2, fc1=fc1, gelu=gelu, fc2=fc2, add2=add2)
            )
            tokens = add2_s.out
            i += 1
        if not blocks:
            raise GraphError("no transformer block found after the position table: not a ViT hwvit reads")
        fin = self.next(tokens, "layernorm", "final norm")
        norm = self.layernorm(fin, "norm")
        self.mark("norm", fin, "hwvit arithmetic")
        hd_step = self.next(fin.out, "linear", "classifier")
        self._check_cls_pool(hd_step, fin.out)
        head, head_last = self.linear(hd_step, "logits", "head")
        readout = IntReadout(s_in=add2.s_out, norm=norm, pool=None, pre_head_fc=None, pre_head_norm=None, head=head)
        h_img = int(shape[2])
        cfg = ViTConfig(
            name=self.path.stem, image_size=h_img, patch_size=patch, in_chans=int(shape[1]),
            num_classes=int(head.w.shape[0]), dim=dim, depth=len(blocks), heads=heads, mlp_dim=hidden,
            embed="conv", pool="cls", pos="learned", qkv="fused" if blocks[0].attn.qkv is not None else "separate",
            qkv_bias=True, proj_bias=True, mlp_bias=True,
            norm_eps=float(fin.attrs.get("epsilon", 1e-5)), final_norm=True, attn_scale="standard",
            cls_token=cls_q is not None,
        )  # fmt: skip
        if cfg.num_tokens != n_tok:
            raise GraphError(f"node {mm1.name}: {n_tok} tokens, the embedding makes {cfg.num_tokens}")
        points_bits = {
            f"layers.{j}.attn.{n}": blocks[j].attn.softmax.out_bits
            for j in range(len(blocks))
            for n in ("softmax", "probs")
        }
        int_model = IntViT(
            config=cfg, act_bits=8, s_input=q_x.s, embed=embed, layer_pos_adds=[None] * len(blocks),
            point_zero=self._point_zeros(blocks),
            blocks=blocks, readout=readout, point_bits=points_bits,
            meta={"quant": {"source": str(self.path), "rounding": self.requant, "softmax": softmax,
                            "layernorm": self.layernorm_variant}},
            input_zero=_z(q_x),
        )  # fmt: skip
        model = self._float_model(cfg)
        return Imported(model, int_model, g, self.path, self.points, self.offsets, self.origin, self.weights)

    def _point_zeros(self, blocks) -> dict[str, int]:
        """The zero point of every traced point of the IntViT, in hwvit's int8 codes (the
        probabilities are carried as ``c - z``: none)."""
        zeros = {}
        for point, codes in self.points.items():
            zeros[point] = 0 if point.endswith(".attn.probs") else _z(self.g.quant_of(codes))
        # points the IntViT traces that are another's codes: the projection before the class token,
        # the position add's output, q/k/v split from qkv, the softmax's own name, the pooled token
        # and the classifier's output
        zeros.update({"embed.proj": zeros["embed"], "pos_add": zeros["tokens"], "pool": zeros["norm"]})
        zeros["head"] = zeros["logits"]
        for i, blk in enumerate(blocks):
            a = blk.attn
            zeros.update({f"layers.{i}.attn.q": a.zero_q, f"layers.{i}.attn.k": a.zero_k})
            zeros.update({f"layers.{i}.attn.v": a.zero_v, f"layers.{i}.attn.softmax": 0})
        return {p: z for p, z in zeros.items() if z}

    def _projections(self, ln1: Step, p: str, i: int) -> tuple[dict, Step]:
        """The attention's projections after LayerNorm ``ln1`` and its Q.K^T step: one fused ``qkv``,
        or separate ``q``, ``k``, ``v`` (HF's export) with ``q_table`` / ``k_table``, the tables of
        the quantized Muls that scale Q and K before their product (HF's SDPA: head_dim^-1/4 each)."""
        lins = [s for s in self.consumers.get(ln1.out, []) if s.kind == "linear"]
        if len(lins) == 1:
            qkv, last = self.linear(lins[0], f"{p}.attn.qkv", f"layers.{i}.attn.qkv")
            return {"qkv": qkv}, self.next(last.out, "matmul", f"{p}.attn Q.K^T")
        if len(lins) != 3:
            where = lins[0].name if lins else ln1.name
            raise GraphError(
                f"node {where}: {len(lins)} projections read the LayerNorm; hwvit reads a fused qkv or q, k, v"
            )
        ends = {}  # the codes each projection ends in (after its bias add) -> the projection
        for st in lins:
            bias = self.next(st.out, "bias", st.name, optional=True)
            ends[(bias or st).out] = st

        def origin(codes: str) -> tuple[Step | None, Step | None]:
            """(projection, table or None) behind an operand of an activation product."""
            src = self.g.source(codes)
            tab = self.g.by_out.get(src)
            if src not in ends and tab is not None and tab.kind == "table":
                return ends.get(self.g.source(tab.inputs[0])), tab
            return ends.get(src), None

        reached = []  # what reads a projection's output, directly or through a table
        for end in ends:
            for step in self.consumers.get(end, []):
                reached += [step, *(self.consumers.get(step.out, []) if step.kind == "table" else [])]
        mm1 = next((s for s in reached if s.kind == "matmul" and all(origin(c)[0] for c in s.inputs)), None)
        if mm1 is None:
            raise GraphError(f"node {lins[0].name}: no product of two of the q, k, v projections after it")
        (q_st, q_tab), (k_st, k_tab) = origin(mm1.inputs[0]), origin(mm1.inputs[1])
        v_st = next((st for st in lins if st not in (q_st, k_st)), None)
        if v_st is None:
            raise GraphError(f"node {mm1.name}: Q.K^T reads one projection twice")
        out = {}
        for role, st in (("q", q_st), ("k", k_st), ("v", v_st)):
            out[role], _ = self.linear(st, f"{p}.attn.{role}", f"layers.{i}.attn.{role}")
        for role, tab in (("q", q_tab), ("k", k_tab)):
            if tab is not None:
                out[f"{role}_table"] = self.table(tab, out[role].s_out)
                self.mark(f"{p}.attn.{role}_scaled", tab)
        return out, mm1

    def _opens_attention(self, ln: Step) -> bool:
        """Whether a LayerNorm's output goes through a projection into an activation product."""
        for lin in (s for s in self.consumers.get(ln.out, []) if s.kind == "linear"):
            outs = [lin.out] + [s.out for s in self.consumers.get(lin.out, []) if s.kind == "bias"]
            if any(s.kind == "matmul" for o in outs for s in self.consumers.get(o, [])):
                return True
        return False

    def _heads(self, mm1: Step) -> tuple[int, int, int]:
        node = next(n for n in mm1.nodes if n.op_type == "MatMul")
        shape = self.shapes.get(node.input[0])
        if shape is None or None in shape[1:]:  # dynamic sizes: one run of the file says them
            shape = probe_shapes(self.g.model, [node.input[0]], self.shapes.get(self.g.inputs[0]))[0]
        if shape is None or len(shape) != 4:
            raise GraphError(f"node {mm1.name} (MatMul): Q is not (B, heads, tokens, head_dim)")
        return int(shape[1]), int(shape[2]), int(shape[3])

    def _check_cls_pool(self, head: Step, norm_out: str) -> None:
        gathers = [n for n in head.nodes if n.op_type in ("Gather", "Slice", "ReduceMean")]
        src_nodes = [n for n in self.g.model.graph.node if n.op_type == "Gather" and n.output[0] in _inputs_of(head)]
        for n in gathers + src_nodes:
            if n.op_type == "ReduceMean":
                raise GraphError(
                    f"node {n.name} (ReduceMean): mean pooling is not read yet; hwvit reads class-token pooling"
                )
            if n.op_type == "Gather":
                idx = self.g.consts.get(n.input[1])
                axis = {a.name: a.i for a in n.attribute}.get("axis", 0)
                if idx is None or int(np.asarray(idx).reshape(-1)[0]) != 0 or axis != 1:
                    raise GraphError(f"node {n.name} (Gather): not the class token (index 0 of the tokens)")

    def _float_model(self, cfg):
        import torch

        from hwvit.float.model import ViT

        model = ViT(cfg).eval()
        sd = model.state_dict()
        fw = self.float_weights
        with torch.no_grad():
            for key, value in sd.items():
                if key not in fw:
                    raise GraphError(f"the file gives no {key} (an internal mapping gap)")
                value.copy_(torch.as_tensor(np.asarray(fw[key], np.float32)).reshape(value.shape))
        return model


def _inputs_of(step: Step) -> set[str]:
    return {i for n in step.nodes for i in n.input}


def _shapes(model) -> dict[str, list]:
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    out = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        dims = vi.type.tensor_type.shape.dim
        out[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in dims]
    return out


def load(path, softmax: str = "hwvit", layernorm: str = "hwvit", calib=None, requant: str = ROUNDING) -> Imported:
    """Read ``path`` (hwvit.onnx.read) and build its models; ValueError (one line) if hwvit cannot.
    A QONNX file, or a QDQ file quantized at its GEMMs' inputs alone (hwvit.onnx.qonnx), leaves points
    float that hwvit calibrates: ``calib``, float inputs of the model's input shape (or a function of
    the read model that makes them, called only then), is then required. ``requant``: how the GEMMs
    round (``REQUANTS``): the file's meaning, or onnxruntime's fused kernels."""
    from hwvit.onnx import qonnx, read

    path = Path(path)
    model = read.load(path)
    try:
        model = qonnx.as_qdq(model, calib)
    except GraphError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return build(model, path, softmax, layernorm, requant)


def build(model, path, softmax: str = "hwvit", layernorm: str = "hwvit", requant: str = ROUNDING) -> Imported:
    """The models of a QDQ ``model`` already read (``Imported.graph.model``, a QONNX file's with
    hwvit's calibrated quantizers in it, or one edited by hwvit.onnx.requantize); ``path`` names it
    in messages. ValueError (one line) if hwvit cannot."""
    path = Path(path)
    try:
        return _Builder(QGraph(model), path, softmax, layernorm, requant).build(softmax)
    except GraphError as exc:
        raise ValueError(f"{path}: {exc}") from None


__all__ = ["REQUANTS", "ROUNDING", "Imported", "build", "load", "table_of"]
