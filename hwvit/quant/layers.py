"""Float layer + scales -> integer layer: the builders of every hwvit.intvit layer.

Each takes the float parameters and the input/output scales the calibration chose, turns the
real multipliers into integer (M, s) pairs and tables (``hwvit.quant.params``) and returns the
integer layer. Scales are symmetric per tensor: ``s = max|x| / (2^(bits-1) - 1)``.
"""

from __future__ import annotations

import numpy as np

from hwvit.formats import signed
from hwvit.intvit.layers import IntGelu, IntLayerNorm, IntLinear, IntPool, IntResidual, IntSoftmax
from hwvit.intvit.qparams import Arith, Requant
from hwvit.ops.requant import quantize as ops_quantize
from hwvit.quant import params as qp


def scale_of(absmax: float, bits: int) -> float:
    """Symmetric per-tensor scale; an all-zero tensor gets a tiny positive scale."""
    return max(float(absmax), 1e-8) / signed(bits).hi


def multipliers(reals) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (M, s) for an array of real multipliers."""
    pairs = [qp.quantize_multiplier(float(r)) for r in np.atleast_1d(np.asarray(reals, dtype=np.float64))]
    return (np.array([m for m, _ in pairs], dtype=np.int64), np.array([s for _, s in pairs], dtype=np.int64))


def multiplier(real: float) -> tuple[int, int]:
    """One (M, s) as Python ints."""
    (m,), (s,) = multipliers(real)
    return int(m), int(s)


def requant_of(reals, out_bits: int, s_out: float, rounding: str = "half_up", per_channel: bool = True) -> Requant:
    """The Requant of real multipliers ``reals`` (per channel, or one): hwvit's (M, s), or those the
    requant variant ``rounding`` prepares (hwvit.variants) for each."""
    if rounding == "half_up":
        mult, shift = multipliers(reals)
    else:
        from hwvit import variants
        from hwvit.variants.base import RequantContext

        v = variants.resolve("requant", rounding)
        pairs = [v.prepare(RequantContext(float(r), out_bits)) for r in np.atleast_1d(np.asarray(reals, np.float64))]
        if any("multiplier" not in p or "shift" not in p for p in pairs):
            raise ValueError(f"requant variant {rounding}: a team's requant takes hwvit's multiplier and shift")
        mult = np.array([int(p["multiplier"]) for p in pairs], dtype=np.int64)
        shift = np.array([int(p["shift"]) for p in pairs], dtype=np.int64)
    if not per_channel:
        mult, shift = int(mult[0]), int(shift[0])
    return Requant(mult=mult, shift=shift, out_bits=out_bits, s_out=s_out, rounding=rounding)


def int_linear(
    weight,
    bias,
    s_in: float,
    s_out: float,
    out_bits: int,
    weight_bits: int = 8,
    per_tensor: bool = False,
    rounding: str = "half_up",
) -> IntLinear:
    """Weights per output channel (or one scale for all: ``per_tensor``) in ``weight_bits`` bits,
    stored int8; bias int32 at scale ``s_in * s_w``; ``rounding``: the requant variant."""
    if hasattr(weight, "detach"):  # a torch parameter
        weight = weight.detach().double().numpy()
    w_f = np.asarray(weight, dtype=np.float64).reshape(weight.shape[0], -1)
    if weight_bits == 8 and not per_tensor:
        w_q, s_w = qp.quantize_weights(w_f)
    else:
        s_w = qp.weight_scales(w_f, weight_bits)
        if per_tensor:
            s_w = np.full_like(s_w, s_w.max())
        top = signed(weight_bits).hi  # symmetric: [-(2^(b-1)-1), 2^(b-1)-1]; clip: float ulps at the bound
        w_q = np.clip(ops_quantize(w_f, s_w.reshape(-1, 1), 8), -top, top)
    b_q = (
        qp.bias_int(np.asarray(bias, dtype=np.float64), s_in, s_w)
        if bias is not None
        else np.zeros(w_q.shape[0], dtype=np.int64)
    )
    # int8 storage: the GEMM takes it as is (no range check or narrowing per call); read-only, so
    # a float GEMM backend may convert it once and keep the copy (hwvit.ops.gemm_backends)
    w8 = np.array(w_q, np.int8)
    w8.flags.writeable = False
    return IntLinear(
        w=w8,
        bias=np.asarray(b_q, np.int64),
        s_in=s_in,
        requant=requant_of(s_in * np.asarray(s_w) / s_out, out_bits, s_out, rounding),
    )


def int_layernorm(
    ln, s_in: float, s_out: float, out_bits: int, variant: str = "hwvit", channel_absmax: np.ndarray | None = None
) -> IntLayerNorm:
    """From a torch LayerNorm (missing affine parameters are 1 and 0); ``variant``: its arithmetic
    (hwvit.variants). ``channel_absmax``: the input's range per channel, from which FQ-ViT's
    power-of-two factors are chosen (``variant="ptf"``; ``s_in`` is then its base scale)."""
    c = ln.normalized_shape[-1]
    gamma = ln.weight.detach().double().numpy() if ln.weight is not None else np.ones(c)
    beta = ln.bias.detach().double().numpy() if ln.bias is not None else np.zeros(c)
    p = qp.layernorm_params(gamma, beta, float(ln.eps), c, s_in, s_out, out_bits)
    arith = None
    if variant != "hwvit":
        from hwvit import variants
        from hwvit.variants.base import LayerNormContext

        v = variants.resolve("layernorm", variant)
        ctx = LayerNormContext(gamma, beta, float(ln.eps), s_in, s_out, out_bits)
        if channel_absmax is not None:
            from hwvit.variants.layernorm_forms import PtfContext

            ctx = PtfContext(gamma, beta, float(ln.eps), s_in, s_out, out_bits, channel_absmax=channel_absmax)
        vp = v.prepare(ctx)
        arith = Arith(family="layernorm", name=variant, params=vp, s_out=s_out)
    return IntLayerNorm(
        gamma=np.asarray(p["gamma"], np.int64),
        beta=np.asarray(p["beta"], np.int64),
        eps_int=int(p["eps_int"]),
        s_in=s_in,
        requant=Requant(mult=int(p["multiplier"]), shift=int(p["shift"]), out_bits=out_bits, s_out=s_out),
        arith=arith,
    )


def int_gelu(s_in: float, s_out: float, out_bits: int, in_bits: int | None = None, variant: str = "lut") -> IntGelu:
    """``in_bits`` (default ``out_bits``): the width of the producer's output, which indexes the table;
    ``variant``: the arithmetic (hwvit.variants) whose results at every input code fill the table."""
    in_bits = out_bits if in_bits is None else in_bits
    if variant == "lut":
        table = qp.gelu_table(s_in, s_out, in_bits, out_bits)
    else:
        from hwvit import variants
        from hwvit.variants.base import GeluContext

        v = variants.resolve("gelu", variant)
        vp = v.prepare(GeluContext(s_in, in_bits, s_out, out_bits))
        if v.row:  # its value depends on the row (the last axis): the kernel runs on rows, no table
            arith = Arith(family="gelu", name=variant, params=vp, s_out=s_out)
            empty = np.zeros(0, np.int64)
            return IntGelu(
                variant=variant, table=empty, in_bits=in_bits, out_bits=out_bits, s_in=s_in, s_out=s_out, arith=arith
            )
        half = 1 << (in_bits - 1)
        table = v.kernel(np.arange(-half, half, dtype=np.int64), vp)
    return IntGelu(
        variant=variant,
        table=np.asarray(table, np.int64),
        in_bits=in_bits,
        out_bits=out_bits,
        s_in=s_in,
        s_out=s_out,
    )


def int_softmax(
    s_in: float, in_bits: int, out_bits: int, exp: str = "table", entries: int = 256, variant: str = "hwvit"
) -> IntSoftmax:
    """hwvit's softmax (exp ``table`` or ``shift``), or the arithmetic ``variant`` (hwvit.variants)."""
    if exp not in ("table", "shift"):
        raise ValueError(f"unknown exp approximation {exp!r}; choose table or shift")
    entries = min(entries, 1 << in_bits)
    table = np.asarray(qp.exp_table(s_in, entries), np.int64)
    mult = int(qp.exp_shift_mult(s_in)) if exp == "shift" else None
    arith = None
    if variant != "hwvit":
        from hwvit import variants
        from hwvit.variants.base import SoftmaxContext

        v = variants.resolve("softmax", variant)
        ctx = SoftmaxContext(s_in, in_bits, out_bits, entries)
        vp = v.prepare(ctx)
        arith = Arith(family="softmax", name=variant, params=vp, s_out=float(v.out_scale(ctx, vp)))
    return IntSoftmax(
        exp_table=table, in_bits=in_bits, out_bits=out_bits, s_in=s_in, exp=exp, exp_mult=mult, arith=arith
    )


def int_residual(
    s_a: float,
    s_b: float,
    s_out: float,
    out_bits: int,
    alpha_a: np.ndarray | None = None,
    alpha_out: np.ndarray | None = None,
) -> IntResidual:
    """``alpha_a`` / ``alpha_out``: FQ-ViT's power-of-two factors of a per-channel stream (channel c of
    ``a`` at ``s_a * 2^alpha_a[c]``, of the output at ``s_out * 2^alpha_out[c]``); then every channel
    has its own (Ma, Mb, s) from ``residual_params``."""
    if alpha_a is None and alpha_out is None:
        ma, mb, s = qp.residual_params(s_a, s_b, s_out)
        return IntResidual(
            mult_a=int(ma), mult_b=int(mb), shift=int(s), s_a=s_a, s_b=s_b, s_out=s_out, out_bits=out_bits
        )
    c = len(alpha_a if alpha_a is not None else alpha_out)
    ea = np.zeros(c, np.int64) if alpha_a is None else np.asarray(alpha_a, np.int64)
    eo = np.zeros(c, np.int64) if alpha_out is None else np.asarray(alpha_out, np.int64)
    trip = [qp.residual_params(s_a * 2.0 ** int(ea[j]), s_b, s_out * 2.0 ** int(eo[j])) for j in range(c)]
    ma, mb, sh = (np.array([t[i] for t in trip], dtype=np.int64) for i in range(3))
    return IntResidual(
        mult_a=ma,
        mult_b=mb,
        shift=sh,
        s_a=s_a,
        s_b=s_b,
        s_out=s_out,
        out_bits=out_bits,
        alpha_a=None if alpha_a is None else ea,
        alpha_out=None if alpha_out is None else eo,
    )


def int_pool(s_in: float, s_out: float, tokens: int, out_bits: int) -> IntPool:
    """Mean of ``tokens`` tokens: ``M * 2^-s = s_in / (tokens * s_out)``."""
    mult, shift = multiplier(s_in / (tokens * s_out))
    return IntPool(s_in=s_in, requant=Requant(mult=mult, shift=shift, out_bits=out_bits, s_out=s_out))
