"""Compile an IntViT into a program for rtl/vit_core.v, its memory images and a manifest.

The program is array-size independent (the GEMM engine tiles any M x K x N), so one compiled
directory runs on any ROWS x COLS. Layout (docs/core.md): the scratchpad holds the input image,
the constants (cls token, position embeddings, a row of ones for mean pooling) and one buffer
per intermediate tensor; weights are packed int8 row-major (N, K) per layer; the parameter
memory holds the per-channel GEMM words, per-tensor requant words and the tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hwvit.core import isa
from hwvit.core.isa import Gen, Instr
from hwvit.float.config import Embed
from hwvit.formats import ExpMode

SUPPORTED = (
    "conv patch embedding (2-D images), cls or mean pooling, no pre-head layers, 8-bit activations, "
    "hwvit's softmax (probabilities of one width, 1-8 bits) and LayerNorm, every GEMM's requant rounded "
    "one way and every residual and bias add one way (half_up or half_even, or onnxruntime's: requant=onnxruntime), "
    "an imported model's zero points, "
    "int8 bias adds and table after Q.K^T (any elementwise GELU variant: a table)"
)
# The roundings the core's GEMM engine and residual_add unit take (rtl/vit_core.v GEMM_ROUNDING,
# ADD_ROUNDING: rtl/requant.v's and rtl/residual_add.v's ROUNDING values)
ROUNDINGS = {"half_up": 0, "half_even": 2, "onnxruntime": 5, "onnxruntime_u8": 6}
SOFTMAX_POINTS = (".attn.softmax", ".attn.probs")  # the traced points of the softmax's probabilities


class CoreCompileError(ValueError):
    """The model uses something the core does not run; the message is one line."""


@dataclass
class Compiled:
    program: list[Instr]
    act: np.ndarray  # initial scratchpad image (uint8 values 0..255)
    wgt: np.ndarray
    prm: list[int]
    regions: dict[str, tuple[int, int]]  # name -> (base, size) in the scratchpad
    input_shape: tuple[int, ...]
    out_region: str
    out_count: int
    sizes: dict[str, int] = field(default_factory=dict)  # the core parameters this program needs


class _Alloc:
    def __init__(self, start: int = 0):
        self.top = start
        self.regions: dict[str, tuple[int, int]] = {}

    def __call__(self, name: str, size: int) -> int:
        base = self.top
        self.regions[name] = (base, int(size))
        self.top += int(size)
        return base


def _u8(a) -> np.ndarray:
    return np.asarray(a, dtype=np.int64).reshape(-1) & 0xFF


def _round_up(v: int, q: int) -> int:
    return max(q, -(-v // q) * q)


class _Builder:
    def __init__(self, model, images: bool = True, act_base: int = 0):
        self.m = model
        self.images = images  # False: the program and layout only (estimates of large models)
        self.prog: list[Instr] = []
        self.act = _Alloc(act_base)
        self.act_init: dict[int, np.ndarray] = {}
        self.wgt: list[np.ndarray] = []
        self.wgt_top = 0
        self.prm: list[int] = []

    # ---- memories
    def const(self, name: str, values) -> int:
        v = _u8(values)
        base = self.act(name, v.size)
        self.act_init[base] = v
        return base

    def weights(self, w) -> int:
        base = self.wgt_top
        self.wgt_top += int(np.prod(np.shape(w)))
        if self.images:
            self.wgt.append(_u8(w))
        return base

    def prm_words(self, words) -> int:
        base = len(self.prm)
        words = [int(x) for x in words]
        if any(not 0 <= x < (1 << isa.PRM_BITS) for x in words):
            raise CoreCompileError("a parameter word does not fit 72 bits")
        self.prm.extend(words)
        return base

    # ---- instructions
    def gemm(
        self, name, m, k, n, a: Gen, w: Gen, d: Gen, p_base, p_stride, *, a_signed=True, w_act=False, check=None,
        zeros=(0, 0, 0),
    ):  # fmt: skip
        self.prog.append(
            Instr(
                op=isa.OP_GEMM,
                a_signed=a_signed,
                w_act=w_act,
                n=(m, k, n, 1),
                a=a,
                b=w,
                d=d,
                p_base=p_base,
                p_stride=p_stride,
                zeros=tuple(int(z) for z in zeros),
                name=name,
                check=check,
            )
        )

    def linear(self, name, lin, a_base, rows, d_base, d_rs, d_off=0, check=None):
        """The GEMM of a linear layer; an imported model's int8 bias added after its requant (a 3-D
        linear's MatMul then Add) is a residual_add STREAM over the GEMM's output, in place, with the
        bias codes (a scratchpad constant) read again for every row."""
        n, k = lin.w.shape
        check = check or {"value": name, "index": [0]}
        add = getattr(lin, "bias_add", None)
        wb = self.weights(lin.w)
        pb = self.prm_words(
            isa.gemm_prm_word(b, mu, s)
            for b, mu, s in zip(
                np.broadcast_to(lin.bias, (n,)), np.broadcast_to(lin.mult, (n,)), np.broadcast_to(lin.shift, (n,))
            )
        )
        self.gemm(
            name,
            rows,
            k,
            n,
            Gen(a_base, (k, 1, 0, 0)),
            Gen(wb, (k, 1, 0, 0)),
            Gen(d_base + d_off, (d_rs, 1, 0, 0)),
            pb,
            1,
            check=None if add is not None else check,  # the trace holds the output after the bias add
            zeros=(0, 0, _zero(lin)),  # the input's zero point is folded into the bias (hwvit.onnx.build)
        )
        if add is not None:
            out = Gen(d_base + d_off, (1, d_rs, 0, 0))
            self.stream(isa.U_ADD, f"{name}.bias", (n, rows, 1, 1), out, out,
                        b=Gen(self.const(f"{name}.bias", lin.post_bias), (1, 0, 0, 0)), check=check,
                        mult_a=int(add.mult_a), mult_b=int(add.mult_b), shift=int(add.shift),
                        zeros=_zeros(add))  # fmt: skip

    def stream(self, unit, name, n, a: Gen, d: Gen, b: Gen | None = None, check=None, **cfg):
        self.prog.append(
            Instr(op=isa.OP_STREAM, unit=unit, n=tuple(n), a=a, b=b or Gen(), d=d, name=name, check=check, **cfg)
        )

    def load(self, unit, name, words):
        words = list(words)
        pb = self.prm_words(words)
        self.prog.append(Instr(op=isa.OP_LOAD, unit=unit, n=(len(words), 1, 1, 1), p_base=pb, name=name))

    def layernorm(self, name, ln, src, dst, rows, c):
        self.load(isa.U_LAYERNORM, f"{name}.gamma_beta", (isa.ln_prm_word(g, b) for g, b in zip(ln.gamma, ln.beta)))
        if not 0 <= int(ln.eps_int) < (1 << 62):
            raise CoreCompileError(f"{name}: eps_int {ln.eps_int} does not fit 62 bits")
        self.stream(
            isa.U_LAYERNORM,
            name,
            (c, rows, 1, 1),
            Gen(src, (1, c, 0, 0)),
            Gen(dst, (1, c, 0, 0)),
            check={"value": name, "index": [0]},
            mult_a=int(ln.mult),
            shift=int(ln.shift),
            eps=int(ln.eps_int),
        )

    def residual(self, name, res, a, b, dst, count):
        self.stream(
            isa.U_ADD,
            name,
            (count, 1, 1, 1),
            Gen(a, (1, 0, 0, 0)),
            Gen(dst, (1, 0, 0, 0)),
            b=Gen(b, (1, 0, 0, 0)),
            check={"value": name, "index": [0]},
            mult_a=int(res.mult_a),
            mult_b=int(res.mult_b),
            shift=int(res.shift),
            zeros=_zeros(res),
        )


def _zero(layer) -> int:
    """The output zero point of a layer's requant (0 for hwvit's own, and core estimate's stand-in)."""
    return int(getattr(getattr(layer, "requant", layer), "zero", 0))


def _zeros(add) -> tuple[int, int, int]:
    """(za, zb, zy) of a residual add."""
    return tuple(int(getattr(add, f"zero_{n}", 0)) for n in ("a", "b", "out"))


def _requants(m):
    """Every Requant of the model (hwvit.intvit.qparams), wherever a layer holds one."""
    from dataclasses import fields, is_dataclass

    from hwvit.intvit.qparams import Requant

    seen, todo = set(), [m]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, Requant):
            yield obj
        elif is_dataclass(obj):
            todo.extend(getattr(obj, f.name) for f in fields(obj))
        elif isinstance(obj, (list, tuple)):
            todo.extend(obj)


def _linears(m) -> dict[str, object]:
    """The model's GEMM layers with weights, by trace path."""
    out = {"embed.proj": m.embed.patch_embed.proj}
    for i, blk in enumerate(m.blocks):
        at = blk.attn
        names = ("qkv",) if at.qkv is not None else ("q", "k", "v")
        out.update({f"layers.{i}.attn.{n}": getattr(at, n) for n in (*names, "proj")})
        out.update({f"layers.{i}.mlp.fc1": blk.fc1, f"layers.{i}.mlp.fc2": blk.fc2})
    if m.readout.head is not None:
        out["head"] = m.readout.head
    return out


def _gemm_requants(m) -> dict[str, object]:
    """Every requant the core's GEMM engine applies: the linear layers', Q.K^T's, P.V's, mean pooling's."""
    # (core estimate's stand-in model, hwvit.core.shapes, has layers without a Requant: half_up)
    gemms = {p: getattr(lin, "requant", lin) for p, lin in _linears(m).items()}
    for i, blk in enumerate(m.blocks):
        gemms.update({f"layers.{i}.attn.scores": blk.attn.scores, f"layers.{i}.attn.context": blk.attn.context})
    if m.readout.pool is not None:
        gemms["pool"] = getattr(m.readout.pool, "requant", m.readout.pool)
    return gemms


def core_roundings(m) -> dict[str, int]:
    """The core parameters of the model's roundings: GEMM_ROUNDING (every GEMM's requant) and
    ADD_ROUNDING (every residual add), each only where it is not hwvit's half_up (0, the core's
    default). CoreCompileError if a class is rounded two ways or a way the core does not take."""
    gemms = _gemm_requants(m)
    adds = {f"layers.{i}.{n}": getattr(blk, n) for i, blk in enumerate(m.blocks) for n in ("add1", "add2")}
    if m.embed.pos_add is not None:
        adds["pos_add"] = m.embed.pos_add
    # an imported 3-D linear's int8 bias add runs on the same residual_add unit
    adds.update({f"{p}.bias": lin.bias_add for p, lin in _linears(m).items() if getattr(lin, "bias_add", None)})
    out = {}
    for key, layers in (("GEMM_ROUNDING", gemms), ("ADD_ROUNDING", adds)):
        ways = {}
        for path, layer in layers.items():
            ways.setdefault(getattr(layer, "rounding", "half_up"), path)
        unknown = [(r, p) for r, p in ways.items() if r not in ROUNDINGS]
        if unknown or len(ways) > 1:
            (r, p), *_ = unknown or list(ways.items())[1:]
            raise CoreCompileError(
                f"model {m.config.name!r}: {p} rounds requant={r}, " + ("which the core does not take" if unknown
                else f"{next(iter(ways.values()))} requant={next(iter(ways))}") + f"; the core runs {SUPPORTED}"
            )  # fmt: skip
        if ROUNDINGS.get(next(iter(ways), "half_up")):
            out[key] = ROUNDINGS[next(iter(ways))]
    return out


def _softmax_bits(m) -> int:
    """The probabilities' width, one for every layer (the core's SOFTMAX_BITS); 8 without layers."""
    widths = sorted({blk.attn.softmax.out_bits for blk in m.blocks} or {8})
    if len(widths) > 1:
        raise CoreCompileError(f"model {m.config.name!r}: softmax probabilities of {widths[0]} and {widths[1]} bits; "
                               f"the core's softmax has one width")  # fmt: skip
    return widths[0]


def _check_model(m) -> None:
    cfg = m.config
    problems = []
    if m.act_bits != 8:
        problems.append(f"act_bits={m.act_bits}")
    # the core's requant saturates every result to int8 (no per-instruction clamp): a recipe's
    # narrower per-layer activations (IntViT.point_bits) cannot run on it
    # (the softmax's probabilities have the core's SOFTMAX_BITS, below)
    narrow = [(p, b) for p, b in getattr(m, "point_bits", {}).items() if b != 8 and not p.endswith(SOFTMAX_POINTS)]
    if narrow:
        problems.append(f"{narrow[0][1]}-bit activations at {narrow[0][0]} (recipe act_bits)")
    if m.embed.patch_embed.kind != Embed.CONV or cfg.ndim != 2:
        problems.append(f"patch embedding {m.embed.patch_embed.kind!r}")
    if m.readout.pre_head_fc is not None or m.readout.pre_head_norm is not None:
        problems.append("pre-head layers")
    if any(p is not None for p in (m.layer_pos_adds or [])):
        problems.append("position added in every layer")
    for i, blk in enumerate(m.blocks):
        sm = blk.attn.softmax
        if sm.exp != ExpMode.TABLE or sm.in_bits != 8 or not 1 <= sm.out_bits <= 8:
            problems.append(f"layers.{i} softmax exp={sm.exp} {sm.in_bits}->{sm.out_bits} bits")
        if blk.gelu.in_bits != 8 or blk.gelu.out_bits != 8:
            problems.append(f"layers.{i} gelu {blk.gelu.in_bits}->{blk.gelu.out_bits} bits")
        # another block arithmetic (hwvit.variants): a GELU variant is a table, which the core loads
        if getattr(sm, "arith", None) is not None:  # (core estimate's skeleton model has none)
            problems.append(f"layers.{i} softmax={sm.arith.name}")
        for name in ("norm1", "norm2"):
            if getattr(getattr(blk, name, None), "arith", None) is not None:
                problems.append(f"layers.{i}.{name} layernorm={getattr(blk, name).arith.name}")
        if getattr(blk.gelu, "arith", None) is not None:  # a GELU on rows: no table to load
            problems.append(f"layers.{i} gelu={blk.gelu.arith.name}")
    # the GEMMs' and residual adds' roundings are core parameters (core_roundings); any other
    # requant (LayerNorm's) is its unit's, hwvit's half_up
    gemm_rqs = {id(rq) for rq in _gemm_requants(m).values()}
    rounding = sorted({rq.rounding for rq in _requants(m) if rq.rounding != "half_up" and id(rq) not in gemm_rqs})
    if rounding:
        problems.append(f"requant={rounding[0]}")
    if problems:
        hint = ""
        if str(getattr(m, "meta", {}).get("quant", {}).get("source", "")).lower().endswith(".onnx"):
            hint = "; a quantized ONNX file's blocks run through `hwvit vectors --checkpoint` and `hwvit sim`"
        raise CoreCompileError(f"model {cfg.name!r} uses {problems[0]}; the core runs {SUPPORTED}{hint}")
    core_roundings(m)
    _softmax_bits(m)


def compile_model(m, images: bool = True, act_base: int = 0) -> Compiled:
    """IntViT -> Compiled (program, memory images, layout). Deterministic.

    ``images=False`` skips the weight image (the program and sizes are the same).
    ``act_base``: the scratchpad address of the first region (the input, IN_BASE); the words below
    it are left to the host (0 in the act image) and ACT_DEPTH covers them.
    """
    _check_model(m)
    if isinstance(act_base, bool) or not isinstance(act_base, int) or not 0 <= act_base < 2**30:
        raise CoreCompileError(f"act_base must be an integer in [0, 2^30), got {act_base!r}")
    cfg = m.config
    c_in, hh, ww = tuple(cfg.input_shape)
    p = m.embed.patch_embed.patch_size
    gh, gw = hh // p, ww // p
    npatch, pd = gh * gw, c_in * p * p
    dim = cfg.dim
    has_cls = m.embed.cls_q is not None
    t = npatch + int(has_cls)
    heads, hd = m.blocks[0].attn.heads if m.blocks else cfg.heads, cfg.head_dim
    inner = heads * hd  # width of q, k, v and the context (SimpleViT's dim_head may make it != dim)
    mlp = m.blocks[0].fc1.w.shape[0] if m.blocks else 1
    bld = _Builder(m, images, act_base)
    act = bld.act

    # ---- scratchpad layout: input, constants, buffers
    x_in = act("input", c_in * hh * ww)
    cls_c = bld.const("cls", m.embed.cls_q) if has_cls else None
    pos_c = bld.const("pos", m.embed.pos_q) if m.embed.pos_add is not None else None
    ones_c = bld.const("ones", np.ones(t)) if m.readout.pool is not None else None
    patches = act("patches", npatch * pd)
    x0 = act("embed", t * dim)
    x = act("x", t * dim) if m.embed.pos_add is not None else x0
    h = act("h", t * dim)
    qkv = act("qkv", t * 3 * inner)
    s_buf = act("scores", heads * t * t)
    p_buf = act("probs", heads * t * t)
    ctx = act("context", t * inner)
    y = act("y", t * dim)
    f1 = act("fc1", t * mlp)
    g = act("gelu", t * mlp)
    feat = act("pooled", dim) if m.readout.pool is not None else None
    n_out = m.readout.head.w.shape[0] if m.readout.head is not None else dim
    out = act("logits", n_out)

    # ---- patch embedding: im2col (one copy per patch row), GEMM, cls, position
    for r in range(gh):
        # features ordered (c, p1, p2) as Conv2d weights are; loops p2, p1, c, patch column
        bld.stream(
            isa.U_COPY,
            f"embed.patches.row{r}",
            (p, p, c_in, gw),
            Gen(x_in + r * p * ww, (1, ww, hh * ww, p)),
            Gen(patches + r * gw * pd, (1, p, p * p, pd)),
        )
    bld.linear("embed.proj", m.embed.patch_embed.proj, patches, npatch, x0, dim, d_off=dim if has_cls else 0)
    if has_cls:
        bld.stream(isa.U_COPY, "embed.cls", (dim, 1, 1, 1), Gen(cls_c, (1, 0, 0, 0)), Gen(x0, (1, 0, 0, 0)))
    if m.embed.pos_add is not None:
        bld.residual("pos_add", m.embed.pos_add, x0, pos_c, x, t * dim)

    # ---- blocks
    for i, blk in enumerate(m.blocks):
        pre = f"layers.{i}"
        at = blk.attn
        bld.layernorm(f"{pre}.norm1", blk.norm1, x, h, t, dim)
        if at.qkv is not None:
            bld.linear(f"{pre}.attn.qkv", at.qkv, h, t, qkv, 3 * inner)
        else:
            for j, name in enumerate("qkv"):
                bld.linear(f"{pre}.attn.{name}", getattr(at, name), h, t, qkv, 3 * inner, d_off=j * inner)
        for j, name in enumerate(("q_table", "k_table")):  # an imported model's scaling of Q and of K (HF's)
            if getattr(at, name, None) is not None:  # a GELU STREAM over their columns of the qkv buffer
                cols = Gen(qkv + j * inner, (1, 3 * inner, 0, 0))  # (traced per head: checked at the scores)
                bld.load(isa.U_GELU, f"{pre}.attn.{name}.table", _u8(getattr(at, name).table))
                bld.stream(isa.U_GELU, f"{pre}.attn.{name}", (inner, t, 1, 1), cols, cols)
        sc = bld.prm_words([isa.gemm_prm_word(0, at.scores.mult, at.scores.shift)])
        for k in range(heads):
            bld.gemm(
                f"{pre}.attn.h{k}.qk",
                t,
                hd,
                t,
                Gen(qkv + k * hd, (3 * inner, 1, 0, 0)),
                Gen(qkv + inner + k * hd, (3 * inner, 1, 0, 0)),
                Gen(s_buf + k * t * t, (t, 1, 0, 0)),
                sc,
                0,
                w_act=True,
                # the trace holds the scores after an imported model's table (below) only
                check=None if getattr(at, "scores_table", None) is not None else {
                    "value": f"{pre}.attn.scores", "index": [0, k]},
                zeros=(getattr(at, "zero_q", 0), getattr(at, "zero_k", 0), _zero(at.scores)),
            )  # fmt: skip
        if getattr(at, "scores_table", None) is not None:  # an imported model's 1/sqrt(d) Mul: a table
            bld.load(isa.U_GELU, f"{pre}.attn.scores_table.table", _u8(at.scores_table.table))
            bld.stream(isa.U_GELU, f"{pre}.attn.scores_table", (heads * t * t, 1, 1, 1), Gen(s_buf, (1, 0, 0, 0)),
                       Gen(s_buf, (1, 0, 0, 0)), check={"value": f"{pre}.attn.scores", "index": [0]})  # fmt: skip
        table = np.zeros(256, dtype=np.int64)
        table[: len(at.softmax.exp_table)] = at.softmax.exp_table
        bld.load(isa.U_SOFTMAX, f"{pre}.attn.softmax.table", table)
        bld.stream(
            isa.U_SOFTMAX,
            f"{pre}.attn.softmax",
            (t, heads * t, 1, 1),
            Gen(s_buf, (1, t, 0, 0)),
            Gen(p_buf, (1, t, 0, 0)),
            check={"value": f"{pre}.attn.softmax", "index": [0]},
        )
        cx = bld.prm_words([isa.gemm_prm_word(0, at.context.mult, at.context.shift)])
        for k in range(heads):
            # P.V: w[n, k'] = V^T[n, k'] = v[k', n]: n stride 1, k stride 3*inner
            bld.gemm(
                f"{pre}.attn.h{k}.av",
                t,
                t,
                hd,
                Gen(p_buf + k * t * t, (t, 1, 0, 0)),
                Gen(qkv + 2 * inner + k * hd, (1, 3 * inner, 0, 0)),
                Gen(ctx + k * hd, (inner, 1, 0, 0)),
                cx,
                0,
                a_signed=False,
                w_act=True,
                check={"value": f"{pre}.attn.context", "index": [0, None, [k * hd, (k + 1) * hd]]},
                zeros=(0, getattr(at, "zero_v", 0), _zero(at.context)),  # the probabilities have none
            )
        bld.linear(f"{pre}.attn.proj", at.proj, ctx, t, y, dim)
        bld.residual(f"{pre}.add1", blk.add1, x, y, x, t * dim)
        bld.layernorm(f"{pre}.norm2", blk.norm2, x, h, t, dim)
        bld.linear(f"{pre}.mlp.fc1", blk.fc1, h, t, f1, mlp)
        bld.load(isa.U_GELU, f"{pre}.mlp.gelu.table", _u8(blk.gelu.table))
        bld.stream(
            isa.U_GELU,
            f"{pre}.mlp.gelu",
            (t * mlp, 1, 1, 1),
            Gen(f1, (1, 0, 0, 0)),
            Gen(g, (1, 0, 0, 0)),
            check={"value": f"{pre}.mlp.gelu", "index": [0]},
        )
        bld.linear(f"{pre}.mlp.fc2", blk.fc2, g, t, y, dim)
        bld.residual(f"{pre}.add2", blk.add2, x, y, x, t * dim)

    # ---- final norm, pool, head
    tokens = x
    if m.readout.norm is not None:
        bld.layernorm("norm", m.readout.norm, x, h, t, dim)
        tokens = h
    if m.readout.pool is not None:  # mean: ones(1, T) . tokens -> token sums, requant by the pool's (M, s)
        pw = bld.prm_words([isa.gemm_prm_word(0, m.readout.pool.mult, m.readout.pool.shift)])
        bld.gemm(
            "pool",
            1,
            t,
            dim,
            Gen(ones_c, (t, 1, 0, 0)),
            Gen(tokens, (1, dim, 0, 0)),
            Gen(feat, (dim, 1, 0, 0)),
            pw,
            0,
            w_act=True,
            check={"value": "pool", "index": [0]},
        )
        pooled = feat
    else:
        pooled = tokens  # the cls token's row
    if m.readout.head is not None:
        bld.linear("head", m.readout.head, pooled, 1, out, n_out, check={"value": "logits", "index": [0]})
    else:
        bld.stream(isa.U_COPY, "features", (dim, 1, 1, 1), Gen(pooled, (1, 0, 0, 0)), Gen(out, (1, 0, 0, 0)))
    bld.prog.append(isa.end())

    act_img = np.zeros(act.top, dtype=np.int64)
    for base, v in bld.act_init.items():
        act_img[base : base + v.size] = v
    wgt = np.concatenate(bld.wgt) if bld.wgt else np.zeros(1, dtype=np.int64)
    gemms = [ins for ins in bld.prog if ins.op == isa.OP_GEMM]
    sizes = {
        "ACT_DEPTH": _round_up(act.top, 1024),
        "WGT_DEPTH": _round_up(bld.wgt_top, 1024),
        "PRM_DEPTH": _round_up(len(bld.prm), 256),
        "PROG_DEPTH": _round_up(len(bld.prog), 64),
        "MAX_M": 1 << max(ins.n[0] for ins in gemms).bit_length(),
        "MAX_K": 1 << max(ins.n[1] for ins in gemms).bit_length(),
        "MAX_N": 1 << max(ins.n[2] for ins in gemms).bit_length(),
        "MAX_ROW": max(4, 1 << t.bit_length()),
        "MAX_C": max(4, 1 << dim.bit_length()),
        "IN_BASE": x_in,
        "IN_LEN": c_in * hh * ww,
        # only where not hwvit's (half up, 8-bit probabilities): a plain model's sizes stay as they were
        **core_roundings(m),
        **({"SOFTMAX_BITS": _softmax_bits(m)} if _softmax_bits(m) != 8 else {}),
        **({"ZERO_POINTS": 1} if any(any(ins.zeros) for ins in bld.prog) else {}),
    }
    return Compiled(bld.prog, act_img, wgt, bld.prm, dict(act.regions), (c_in, hh, ww), "logits", n_out, sizes)
