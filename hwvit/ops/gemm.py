"""int8 GEMM with exact int32 accumulation (``rtl/gemm.v``) and the requantized linear layer.

``acc[m, n] = bias[n] + sum_k a[m, k] * w[n, k]``. The int8 x int8 product runs on the
backend ``hwvit.ops.gemm_backends`` picks for this machine by measurement (``torch._int_mm``
where the CPU has int8 dot products, exact float32 BLAS over K-blocks of <= 1024 on AVX2-only
CPUs, int64 as the exact fallback); every backend is exact.
Unsigned ``a`` (softmax probabilities in P.V) is offset into int8:
``a*w = (a-128)*w + 128*w``, except on hwvit's own kernels, which take uint8 as it is (the quad
instruction multiplies unsigned bytes; the int16 kernel widens them to 0..255).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hwvit.formats import ACC, MULT_MAX, OUT_BITS, SHIFT_MAX, signed
from hwvit.ops import frozen, gemm_backends
from hwvit.ops._lazyjit import jit as _jit
from hwvit.ops.checks import as_int_array, channel_param, check_bits, per_channel
from hwvit.ops.requant import requant

A_MAX_ABS = 255  # worst-case |a| (unsigned a); the bound below uses it for both signednesses
W_MAX_ABS = 128


def _int8_matmul(a8: np.ndarray, w8: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """bias + (M, K) int8 @ (N, K)^T int8 -> (M, N) int64, exact (|sum| < 2^31 is checked by callers)."""
    if a8.shape[0] == 0 or w8.shape[0] == 0:
        out = np.zeros((a8.shape[0], w8.shape[0]), dtype=np.int64)
        return out if bias is None else out + bias
    return gemm_backends.matmul(a8, w8, bias=bias)


def int8_operand(x: Any, name: str, lo: int, hi: int, offset: int = 0, contiguous: bool = True) -> np.ndarray:
    """``x - offset`` as a contiguous int8 array, refusing values outside ``[lo, hi]``.

    An int8 array needs no check (and with ``contiguous=False`` comes back in its own layout, for a
    kernel that packs any strides); anything else is checked and narrowed in one pass.
    """
    if type(x).__module__.split(".")[0] == "torch":
        x = x.detach().cpu().numpy()
    arr = np.asarray(x)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{name}: expected an integer array, got dtype {arr.dtype}")
    if arr.dtype == np.int8 and offset == 0 and lo <= -128 and hi >= 127:
        return np.ascontiguousarray(arr) if contiguous else arr
    flat = np.ascontiguousarray(arr).reshape(-1)
    if flat.dtype == np.uint64:
        flat = as_int_array(flat, name)  # refuses values past int64
    out, ok = _jit.narrow_int8(flat, offset, lo, hi)
    if not ok:
        raise ValueError(f"{name}: values must lie in [{lo}, {hi}], got [{int(flat.min())}, {int(flat.max())}]")
    return out.reshape(arr.shape)


def _a_operand(a: Any, a_signed: bool, keep_uint8: bool = False, contiguous: bool = True) -> tuple[np.ndarray, int]:
    """Checked int8 ``a8`` (unsigned a offset by -128: a*w = (a-128)*w + 128*w) and the offset.
    ``keep_uint8``: an unsigned ``a`` that is a uint8 array (its dtype is its range) comes back as it
    is, the offset form ``(a - 128) + 128`` that the quad kernels pack directly."""
    offset = 0 if a_signed else 128
    if keep_uint8 and not a_signed and isinstance(a, np.ndarray) and a.dtype == np.uint8:
        return a, offset
    bounds = (-128, 127) if a_signed else (0, 255)
    return int8_operand(a, "a", *bounds, offset=offset, contiguous=contiguous), offset


def _w8(w: Any, contiguous: bool = True) -> np.ndarray:
    """Checked int8 ``w8``: (N, K) or (B, N, K), K >= 1."""
    w8 = int8_operand(w, "w", -128, 127, contiguous=contiguous)
    if w8.ndim not in (2, 3):
        raise ValueError(f"w: expected shape (N, K) or (B, N, K), got {w8.shape}")
    if w8.shape[-1] == 0:
        raise ValueError("gemm: K must be >= 1")
    return w8


def _bias(bias: Any, n_out: int, k: int) -> np.ndarray:
    """The checked int64 bias of ``n_out`` channels (zeros for None); OverflowError unless the int32
    accumulator bound holds for any ``a`` (it depends on K and the bias alone)."""
    if bias is None:
        b = np.zeros(n_out, dtype=np.int64)
    else:
        b = as_int_array(bias, "bias", *ACC.range)
        if b.shape != (n_out,):
            raise ValueError(f"bias: expected shape ({n_out},), got {b.shape}")
    bound = k * A_MAX_ABS * W_MAX_ABS + (int(np.abs(b).max()) if n_out else 0)
    if bound >= 1 << 31:
        raise OverflowError(
            f"gemm: K*255*128 + max|bias| = {bound} >= 2^31 (K={k}); the int32 accumulator could overflow"
        )
    return b


def _weights(w: Any, bias: Any) -> tuple[np.ndarray, np.ndarray]:
    """Checked int8 ``w8`` and the int64 bias (``_w8``, ``_bias``)."""
    w8 = _w8(w)
    return w8, _bias(bias, *w8.shape[-2:])


def _match(a8: np.ndarray, w8: np.ndarray) -> None:
    """ValueError unless ``a8``'s shape fits ``w8``'s: (..., M, K) for (N, K), (B, M, K) for (B, N, K)."""
    k = w8.shape[-1]
    if w8.ndim == 3 and (a8.ndim != 3 or a8.shape[0] != w8.shape[0] or a8.shape[-1] != k):
        raise ValueError(f"a: expected shape ({w8.shape[0]}, M, {k}) to match batched w {w8.shape}, got {a8.shape}")
    if a8.ndim < 2 or a8.shape[-1] != k:
        raise ValueError(f"a: expected shape (..., M, {k}) to match w {w8.shape}, got {a8.shape}")


def _operands(
    a: Any, w: Any, bias: Any, a_signed: bool, keep_uint8: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Checked ``a8``, ``w8``, the int64 bias and a's offset (``_a_operand``, ``_weights``)."""
    a8, offset = _a_operand(a, a_signed, keep_uint8)
    w8, b = _weights(w, bias)
    _match(a8, w8)
    return a8, w8, b, offset


def _bias_for(b: np.ndarray, offset: int, w2: np.ndarray) -> np.ndarray:
    """The bias of the offset product: the unsigned offset's ``128 * rowsum(w)`` joins it."""
    return b + offset * w2.sum(axis=1, dtype=np.int64) if offset else b


def _product(a8: np.ndarray, w8: np.ndarray, b: np.ndarray, offset: int) -> np.ndarray:
    n_out, k = w8.shape[-2:]
    if w8.ndim == 2:
        acc = _int8_matmul(a8.reshape(-1, k), w8, _bias_for(b, offset, w8))
        return acc.reshape(*a8.shape[:-1], n_out)
    if a8.shape[1] == 0 or n_out == 0 or a8.shape[0] == 0:
        return np.zeros((*a8.shape[:-1], n_out), dtype=np.int64) + b
    acc = gemm_backends.matmul(a8, w8)  # one call for every entry (attention: all heads and images)
    if offset:
        acc += offset * w8.sum(axis=2, dtype=np.int64)[:, None, :]
    if b.any():
        acc += b
    return acc


def gemm(a: Any, w: Any, bias: Any = None, a_signed: bool = True) -> np.ndarray:
    """Exact ``bias + a @ w^T`` as int64 values in int32 range.

    a: (..., M, K) signed 8 ``[-128, 127]`` (or unsigned 8 ``[0, 255]`` when ``a_signed=False``);
    w: (N, K) int8, or (B, N, K) with a (B, M, K): one product per batch entry; bias: (N,) int32
    or None. Returns (..., M, N). Raises OverflowError unless
    ``K * 255 * 128 + max|bias| < 2^31`` (the RTL's 32-bit accumulator can then never overflow).
    """
    return _product(*_operands(a, w, bias, a_signed))


def requant_vectors(multiplier: Any, shift: Any, out_bits: int, n_out: int) -> tuple:
    """Checked (multipliers, shifts) as (n_out,) int64 vectors (per tensor or per output channel) and
    the output's (lo, hi); made once for immutable parameters (``hwvit.ops.frozen``)."""

    def make():
        bits = check_bits(out_bits, "out_bits", *OUT_BITS)
        m = channel_param(multiplier, "multiplier", 0, MULT_MAX, (n_out,))
        s = channel_param(shift, "shift", 0, SHIFT_MAX, (n_out,))
        ref = np.empty((0, n_out))  # per_channel only reads the channel count
        return (per_channel(m, ref), per_channel(s, ref), *signed(bits).range)

    return frozen.derived((multiplier, shift, out_bits, n_out), "linear-requant", make)


def _linear_params(
    w: Any, bias: Any, multiplier: Any, shift: Any, out_bits: int, offset: int, name: str, kind: int | None
) -> tuple:
    """What ``linear`` derives from its weights and parameters alone, checked: (w8 in its own layout,
    b, the bias with an offset a's ``128 * rowsum(w)`` for 2-D w, (N,) int64 multipliers and shifts,
    lo, hi, and for 2-D w on backend ``name``'s fused C kernel ``kind`` its
    ``gemm_backends.linear_plan``, else None). The checks of the bias, the bound and the requant
    parameters are made once for immutable ones (read-only arrays, ints, None: ``hwvit.ops.frozen``),
    whatever ``w`` is (attention passes fresh K and V^T with the same scalar parameters at every
    call); ``linear`` keeps the whole result for a layer's read-only w."""
    w8 = _w8(w, contiguous=False)  # int8 w in its own layout: the fused kernel packs any strides
    n_out, k = w8.shape[-2:]
    b = frozen.derived((bias, n_out, k), "linear-bias", lambda: _bias(bias, n_out, k))
    rq = requant_vectors(multiplier, shift, out_bits, n_out)
    fused_bias = b
    if offset and w8.ndim == 2:
        fused_bias = _bias_for(b, offset, w8)  # kept with the rest by linear's lookup where w and bias are
    return (w8, b, fused_bias, *rq, gemm_backends.linear_plan(w8, fused_bias, rq[0], rq[1], name, kind))


def layer_params(
    w: Any, bias: Any, multiplier: Any, shift: Any, out_bits: int, offset: int, name: str, kind: int | None
) -> tuple:
    """``_linear_params``, kept whole for a layer's read-only weights and parameters (one lookup a
    call): (w8, b, the fused kernel's bias, multipliers, shifts, lo, hi, its plan or None)."""
    return frozen.derived(
        (w, bias, multiplier, shift, out_bits, offset, name, kind),
        "linear-params",
        lambda: _linear_params(w, bias, multiplier, shift, out_bits, offset, name, kind),
    )


def linear(
    a: Any,
    w: Any,
    bias: Any,
    multiplier: Any,
    shift: Any,
    out_bits: int = 8,
    a_signed: bool = True,
    narrow: bool = False,
) -> np.ndarray:
    """``requant(gemm(a, w, bias), M, s, out_bits)``; M, s per tensor or per output channel.

    On a backend that can (``int16_avx2``, ``int8_vnni``: ``gemm_backends.matmul_requant``), the
    requant runs inside the GEMM tile as the sums are stored, vectorized, and the accumulators are
    never written out (2-D ``w``, and batched ``w`` one entry per job). The same integers either
    way; ``narrow`` as in ``requant``. A layer's read-only ``w``, bias, multipliers and shifts are
    checked once, not at every call (``hwvit.ops.frozen``); ``a`` is checked at every call.
    """
    name = gemm_backends.backend()  # asked once a call: the env, set_backend or the probe's
    kind = gemm_backends.fused_kind(name)
    keep = gemm_backends.takes_offset_uint8(name)  # P.V's uint8 probabilities packed as they are
    # int8 a and w in their own layouts (attention's per-head views): the fused kernel packs them
    a8, offset = _a_operand(a, a_signed, keep_uint8=keep, contiguous=False)
    # unsigned a kept as uint8 bytes: the quad kernel multiplies a itself and the int16 kernel widens
    # it to 0..255, no offset to correct
    kernel_offset = 0 if a8.dtype == np.uint8 else offset
    # all of it kept at once for a layer's read-only weights and parameters (one lookup a call), with
    # the 2-D product's plan for the fused kernel: W packed, the vectors and their addresses
    params = (w, bias, multiplier, shift, out_bits, kernel_offset, name, kind)
    w8, b, fused_bias, m, s, lo, hi, plan = layer_params(*params)
    _match(a8, w8)
    if a8.size and w8.shape[-2]:
        n_out, k = w8.shape[-2:]
        out_shape = (*a8.shape[:-1], n_out)
        if plan is not None:  # 2-D w on a fused kernel: the call with the layer's work done once
            y = gemm_backends.linear_planned(a8.reshape(-1, k), plan, lo, hi)
            return (y if narrow else y.astype(np.int64)).reshape(out_shape)
        if w8.ndim == 2:
            a2, bias2 = a8.reshape(-1, k), fused_bias
        else:  # one product per entry (attention); an offset a's correction differs per entry
            a2 = a8  # without one, every entry shares the (N,) bias
            bias2 = b + kernel_offset * w8.sum(axis=2, dtype=np.int64) if kernel_offset else b
        y = gemm_backends.matmul_requant(a2, w8, bias2, m, s, lo, hi, name)
        if y is not None:
            return (y if narrow else y.astype(np.int64)).reshape(out_shape)
    if a8.dtype == np.uint8:  # kept for the quad kernel, which declined (K past one call): narrow now
        a8 = int8_operand(a8, "a", 0, 255, offset=offset)
    a8, w8 = np.ascontiguousarray(a8), np.ascontiguousarray(w8)  # as ops.gemm hands them on
    return requant(_product(a8, w8, b, offset), multiplier, shift, out_bits, narrow=narrow)


def gemm_zero(a: Any, w: Any, bias: Any = None, a_signed: bool = True, zero_a: int = 0, zero_w: int = 0) -> np.ndarray:
    """Exact ``bias + (a - zero_a) @ (w - zero_w)^T`` as int64 (rtl/gemm.v with ZERO_POINTS = 1):
    an imported model's product of two activations with zero points. One ``gemm`` of the codes and
    the expansion ``sum a w - zw rowsum(a) - za rowsum(w) + K za zw``, every term exact in int64.
    Zero points signed 8; ``|acc| <= K * 383 * 255 + |bias|`` must stay below 2^31, the RTL's
    accumulator (OverflowError)."""
    za, zw = int(zero_a), int(zero_w)
    for name, z in (("zero_a", za), ("zero_w", zw)):
        if not -128 <= z <= 127:
            raise ValueError(f"gemm: {name} {z} outside [-128, 127]")
    a = np.asarray(a, np.int64)
    w = np.asarray(w, np.int64)
    acc = gemm(a, w, bias, a_signed=a_signed)
    if za or zw:
        k = a.shape[-1]
        acc = acc - zw * a.sum(-1)[..., :, None] - za * w.sum(-1)[..., None, :] + k * za * zw
        if acc.size and int(np.abs(acc).max()) >= 1 << 31:
            raise OverflowError("gemm: an accumulator with zero points leaves int32")
    return acc
