"""Integer layers: quantized parameters plus a forward made of hwvit.ops kernels only.

Each layer's forward is written once, over a kernels provider ``k`` (``hwvit.intvit.kernels``):
``NUMPY`` by default, on integer numpy arrays, each output in the narrowest integer dtype that holds
its width (int8 for 8 bits: the kernels' ``narrow=True``, an eighth of int64's memory traffic);
``hwvit.intvit.device`` passes its torch provider. The trace keeps int64 copies. Each layer knows
its input and output scales (real value = int * scale), adds one BlockRecord per block it runs to
the trace (made by the block kind's ``traced``, hwvit.blocks) and records its output value under its
own path. ``hwvit.quant`` builds these from a float model. A layer is immutable once built (a frozen
dataclass with read-only arrays): ``dataclasses.replace`` makes an edited copy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hwvit.blocks import gelu as gelu_block
from hwvit.blocks import gemm as gemm_block
from hwvit.blocks import layernorm as layernorm_block
from hwvit.blocks import requant as requant_block
from hwvit.blocks import residual_add as residual_block
from hwvit.blocks import softmax as softmax_block
from hwvit.intvit.kernels import NUMPY
from hwvit.intvit.qparams import Arith, Layer, Requant, RequantOut, read_only
from hwvit.intvit.trace import Trace


@dataclass(frozen=True, kw_only=True, eq=False)
class IntLinear(RequantOut):
    """y = requant(x @ w^T + bias), weights int8 per output channel."""

    w: np.ndarray  # (N, K) int8 storage: the GEMM takes it as is (no range check per call)
    bias: np.ndarray  # (N,) int32 values
    s_in: float
    requant: Requant  # per output channel: (N,) multipliers and shifts
    # an imported model's bias added after the GEMM's requant, as a quantized graph does it (MatMul,
    # quantize, Add of an int8 bias, quantize): the (N,) codes and the add that rescales both
    post_bias: np.ndarray | None = None
    bias_add: IntResidual | None = None

    def __post_init__(self):
        # read-only, so the kernels check them and pack w once, not at every call (hwvit.ops.frozen)
        read_only(self, "w", "bias", "post_bias")

    @property
    def s_out(self) -> float:
        return self.bias_add.s_out if self.bias_add is not None else self.requant.s_out

    @property
    def out_bits(self) -> int:
        return self.bias_add.out_bits if self.bias_add is not None else self.requant.out_bits

    def __call__(self, x, tr: Trace, path: str, value: bool = True, k=NUMPY):
        """requant(gemm(x, w) + bias): one GEMM-engine pass, recorded as a `gemm` block. ``value``:
        trace the output under ``path``; False when the caller traces it in another layout (the
        separate q/k/v of attention: (B, N, H*hd) here, (B, H, N, hd) at the traced point)."""
        x2d = x.reshape(-1, x.shape[-1])
        if tr.keep_records:  # the record holds the accumulators
            acc = k.gemm(x2d, self.w, self.bias)
            y = self.requant.apply(k, acc)
            self.record(tr, path, k.host(x2d), k.host(acc), k.host(y))
        else:  # the same integers; a backend that can requantizes inside the GEMM
            y = self.requant.linear(k, x2d, self.w, self.bias)
        if self.bias_add is not None:
            y = k.int_input(self.bias_add.add(k.host(y), np.broadcast_to(self.post_bias, y.shape), tr, f"{path}.bias"))
        y = y.reshape(*x.shape[:-1], self.w.shape[0])
        return k.value(tr, path, y, self.s_out) if value else y

    def record(self, tr: Trace, path: str, x2d: np.ndarray, acc: np.ndarray, y2d: np.ndarray) -> None:
        """The `gemm` record of one call (2-D host arrays x, acc, y)."""
        rq = self.requant
        scales = (self.s_in, rq.s_out)
        tr.keep(
            gemm_block.traced(
                path, x2d, self.w, self.bias, rq.mult, rq.shift, acc, y2d, rq.out_bits, True, scales, rq.rounding,
                rq.zero,
            )
        )  # fmt: skip


@dataclass(frozen=True, kw_only=True, eq=False)
class IntLayerNorm(RequantOut):
    gamma: np.ndarray  # (C,) 15-bit
    beta: np.ndarray  # (C,) 31-bit
    eps_int: int
    s_in: float
    requant: Requant  # of y*G + B to the output
    arith: Arith | None = None  # another arithmetic (hwvit.variants) in place of hwvit's

    def __post_init__(self):
        # read-only, so the kernel checks them once, not at every call (hwvit.ops.frozen)
        read_only(self, "gamma", "beta")

    def __call__(self, x, tr: Trace, path: str, k=NUMPY):
        rows = x.reshape(-1, x.shape[-1])
        if self.arith is not None:
            y = k.variant(self.arith.impl, rows, self.arith.params)
        else:
            y = k.layernorm(rows, self.gamma, self.beta, self.eps_int, self.mult, self.shift, self.out_bits)
        if tr.keep_records:
            self.record(tr, path, k.host(rows), k.host(y))
        y = y.reshape(x.shape)
        return k.value(tr, path, y, self.s_out)

    def record(self, tr: Trace, path: str, rows: np.ndarray, y: np.ndarray) -> None:
        """The `layernorm` record of one call (2-D rows in and out); a variant's own kind
        (``layernorm_<variant>``) for a variant."""
        if self.arith is not None:
            from hwvit.blocks import variant_kinds

            scales = {"x": self.s_in, "y": self.s_out}
            tr.keep(variant_kinds.traced(self.arith, path, rows, y, 8, self.out_bits, scales))
            return
        scales = {"x": self.s_in, "y": self.s_out}
        tr.keep(
            layernorm_block.traced(
                path, rows, self.gamma, self.beta, y, self.eps_int, self.mult, self.shift, self.out_bits, scales
            )
        )


@dataclass(frozen=True, kw_only=True, eq=False)
class IntGelu(Layer):
    """y = table[x]: any arithmetic of an in_bits input is a table of its 2^in_bits results, so a
    GELU variant (hwvit.variants) is its table, made once by that variant's kernel. A variant that
    works on rows (``Variant.row``: I-ViT's released ShiftGELU) runs its kernel on the last axis
    instead (``arith``; ``table`` then empty)."""

    table: np.ndarray
    in_bits: int
    out_bits: int
    s_in: float
    s_out: float
    variant: str = "lut"
    arith: Arith | None = None

    def __post_init__(self):
        # read-only, so the kernel checks it once, not at every call (hwvit.ops.frozen)
        read_only(self, "table")

    def __call__(self, x, tr: Trace, path: str, k=NUMPY):
        if self.arith is not None:
            y = k.variant(self.arith.impl, x, self.arith.params)
        else:
            y = k.gelu(x, self.table, self.in_bits)
        if tr.keep_records:
            self.record(tr, path, k.host(x), k.host(y))
        return k.value(tr, path, y, self.s_out)

    def record(self, tr: Trace, path: str, x: np.ndarray, y: np.ndarray) -> None:
        """The `gelu` record of one call (flattened); a row variant's own kind (``gelu_<variant>``,
        2-D rows)."""
        scales = {"x": self.s_in, "y": self.s_out}
        if self.arith is not None:
            from hwvit.blocks import variant_kinds

            rows, out = x.reshape(-1, x.shape[-1]), y.reshape(-1, y.shape[-1])
            tr.keep(variant_kinds.traced(self.arith, path, rows, out, self.in_bits, self.out_bits, scales))
            return
        tr.keep(gelu_block.traced(path, x, self.table, y, self.in_bits, self.out_bits, scales, self.variant))


@dataclass(frozen=True, kw_only=True, eq=False)
class IntSoftmax(Layer):
    exp_table: np.ndarray  # (entries,) unsigned 24 bit, T[0] = 2^23
    in_bits: int
    out_bits: int
    s_in: float
    exp: str = "table"  # "table" (the RTL twin) or "shift" (shift-and-add, Python only)
    exp_mult: int | None = None
    arith: Arith | None = None  # another arithmetic (hwvit.variants) in place of hwvit's

    def __post_init__(self):
        # read-only, so the kernel checks it once, not at every call (hwvit.ops.frozen)
        read_only(self, "exp_table")

    @property
    def s_out(self) -> float:
        return self.arith.s_out if self.arith is not None else 1.0 / ((1 << self.out_bits) - 1)

    def __call__(self, x, tr: Trace, path: str, k=NUMPY):
        rows = x.reshape(-1, x.shape[-1])
        if self.arith is not None:
            p = k.variant(self.arith.impl, rows, self.arith.params)
        else:
            p = k.softmax(rows, self.exp_table, self.out_bits, self.in_bits, self.exp, self.exp_mult)
        if tr.keep_records:
            self.record(tr, path, k.host(rows), k.host(p))
        p = p.reshape(x.shape)
        return k.value(tr, path, p, self.s_out)

    def record(self, tr: Trace, path: str, rows: np.ndarray, p: np.ndarray) -> None:
        """The `softmax` record of one call (2-D rows in and out); none for the shift form; a
        variant's own kind (``softmax_<variant>``) for a variant."""
        if self.arith is not None:
            from hwvit.blocks import variant_kinds

            scales = {"x": self.s_in, "y": self.s_out}
            kind = variant_kinds.traced(self.arith, path, rows, p, self.in_bits, self.out_bits, scales)
            tr.keep(kind)
        elif self.exp == "table":  # only the table form has a Verilog twin
            scales = {"x": self.s_in, "p": self.s_out}
            tr.keep(softmax_block.traced(path, rows, self.exp_table, p, self.in_bits, self.out_bits, scales))


@dataclass(frozen=True, kw_only=True, eq=False)
class IntResidual(Layer):
    """y = a + b, both rescaled to the output scale (ops.residual_add)."""

    mult_a: int | np.ndarray  # per tensor, or per channel (last axis) on a stream under FQ-ViT's PTF
    mult_b: int | np.ndarray
    shift: int | np.ndarray
    s_a: float
    s_b: float
    s_out: float  # per channel: the base scale s (channel c at s * 2^alpha_out[c])
    out_bits: int
    alpha_a: np.ndarray | None = None  # power-of-two factors of input a's channels (PTF), if any
    alpha_out: np.ndarray | None = None  # ... of the output's channels: it feeds a PTF LayerNorm
    # an imported model's rounding (hwvit.variants requant names: half_even for ONNX) and zero points
    # (real a = s_a * (a - zero_a), ...; the output's is added after the rounding)
    rounding: str = "half_up"
    zero_a: int = 0
    zero_b: int = 0
    zero_out: int = 0

    def __post_init__(self):
        read_only(self, "mult_a", "mult_b", "shift", "alpha_a", "alpha_out")

    @property
    def plain(self) -> bool:
        """hwvit's own residual add: round half up, no zero point."""
        return self.rounding == "half_up" and not (self.zero_a or self.zero_b or self.zero_out)

    @property
    def per_channel(self) -> bool:
        return np.ndim(self.mult_a) > 0

    @property
    def out_scale(self):
        """The output's scale: a float, or per channel ``s_out * 2^alpha_out``."""
        return self.s_out if self.alpha_out is None else self.s_out * np.exp2(self.alpha_out.astype(np.float64))

    def __call__(self, a, b, tr: Trace, path: str, k=NUMPY):
        if not self.plain:
            return k.value(tr, path, k.int_input(self.add(k.host(a), k.host(b), tr, path)), self.out_scale)
        consts = (self.mult_a, self.mult_b, self.shift)
        if self.per_channel:
            consts = tuple(k.const(np.asarray(v, dtype=np.int64)) for v in consts)
        y = k.residual_add(a, b, *consts, self.out_bits)
        if tr.keep_records:
            self.record(tr, path, k.host(a), k.host(b), k.host(y))
        return k.value(tr, path, y, self.out_scale)

    def add(self, a, b, tr: Trace, path: str) -> np.ndarray:
        """The add on host arrays, recorded under ``path`` but not traced as a value (an imported
        linear layer's bias add, whose output is the layer's)."""
        from hwvit.ops.residual_add import residual_add_zp

        zeros = (self.zero_a, self.zero_b, self.zero_out)
        y = residual_add_zp(a, b, self.mult_a, self.mult_b, self.shift, self.out_bits, self.rounding, *zeros)
        if tr.keep_records:
            self.record(tr, path, np.asarray(a), np.asarray(b), y)
        return y

    def record(self, tr: Trace, path: str, a: np.ndarray, b: np.ndarray, y: np.ndarray) -> None:
        """The `residual_add` record of one call (flattened); per-channel constants: a
        `residual_add_channels` record (tokens x channels)."""
        scales = {"a": self.s_a, "b": self.s_b, "y": self.s_out}
        if self.per_channel:
            from hwvit.blocks import residual_add_channels as rac

            tr.keep(rac.traced(path, a, b, y, self, scales))
            return
        extra = {} if self.plain else {"rounding": self.rounding, "zeros": (self.zero_a, self.zero_b, self.zero_out)}
        tr.keep(
            residual_block.traced(path, a, b, y, self.mult_a, self.mult_b, self.shift, self.out_bits, scales, **extra)
        )


@dataclass(frozen=True, kw_only=True, eq=False)
class IntPool(RequantOut):
    """Mean over the tokens (axis 1): an exact int32 sum, then one requant (``ops.mean_pool``).

    ``M * 2^-s = s_in / (N * s_out)``; in the RTL it is a requant of the token sums, so that is
    the block it records.
    """

    s_in: float
    requant: Requant  # of the token sums to the mean

    def __call__(self, x, tr: Trace, path: str, k=NUMPY):
        y = k.mean_pool(x, self.mult, self.shift, self.out_bits)
        if tr.keep_records:
            self.record(tr, path, k.host(x), k.host(y))
        return k.value(tr, path, y, self.s_out)

    def record(self, tr: Trace, path: str, x: np.ndarray, y: np.ndarray) -> None:
        """The `requant` record of one pooling (x: the tokens, (B, N, D))."""
        if tr.keep_records:
            acc = x.sum(axis=1).reshape(-1)
            n = acc.size
            tr.keep(
                requant_block.traced(
                    path, acc, np.full(n, self.mult), np.full(n, self.shift), y.reshape(-1), self.out_bits, self.s_out
                )
            )
