"""Integer layers: quantized parameters plus a forward made of hwvit.ops kernels only.

Every layer takes and returns int64 numpy arrays; each knows its input and output scales
(real value = int * scale) and adds one BlockRecord per block it runs to the trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hwvit import ops
from hwvit.intvit.trace import Trace, t_in, t_out, t_par
from hwvit.quant import params as qp

GEMM_IN_BITS = 8  # a and w operands of the GEMM engine are 8 bit (activations of ACT_BITS <= 8 fit)
SHIFT_BITS = 6


def qmax(bits: int) -> int:
    return (1 << (bits - 1)) - 1


def scale_of(absmax: float, bits: int) -> float:
    """Symmetric per-tensor scale; an all-zero tensor gets a tiny positive scale."""
    return max(float(absmax), 1e-8) / qmax(bits)


def multipliers(reals) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (M, s) for an array of real multipliers."""
    pairs = [qp.quantize_multiplier(float(r)) for r in np.atleast_1d(np.asarray(reals, dtype=np.float64))]
    return (np.array([m for m, _ in pairs], dtype=np.int64), np.array([s for _, s in pairs], dtype=np.int64))


def matmul(a: np.ndarray, w: np.ndarray, bias: np.ndarray | None, mult, shift, out_bits: int, a_signed: bool,
           scales: tuple, tr: Trace, path: str) -> np.ndarray:
    """requant(gemm(a, w) + bias): one GEMM-engine pass, recorded as a `gemm` block."""
    acc = ops.gemm(a, w, bias, a_signed=a_signed)
    y = ops.requant(acc, mult, shift, out_bits)
    if tr.keep_records:
        record_gemm(tr, path, a, w, bias, mult, shift, acc, y, out_bits, a_signed, scales)
    return y


def record_gemm(tr: Trace, path: str, a, w, bias, mult, shift, acc, y, out_bits: int, a_signed: bool,
                scales: tuple) -> None:
    """Add the BlockRecord of one GEMM-engine pass (2-D a, w, acc, y)."""
    s_a, s_out = scales
    n = w.shape[0]
    bias_n = np.zeros(n, dtype=np.int64) if bias is None else bias
    tr.add("gemm", path, {"m": a.shape[0], "k": a.shape[1], "n": n, "a_signed": bool(a_signed),
                          "out_bits": out_bits},
           a=t_in(a, GEMM_IN_BITS, a_signed, s_a), w=t_par(w, 8, True), bias=t_par(bias_n, 32, True),
           multiplier=t_par(np.broadcast_to(mult, (n,)), 32, False),
           shift=t_par(np.broadcast_to(shift, (n,)), SHIFT_BITS, False),
           acc=t_out(acc, 32, True), y=t_out(y, out_bits, True, s_out))


@dataclass
class IntLinear:
    """y = requant(x @ w^T + bias), weights int8 per output channel."""

    w: np.ndarray  # (N, K) int8
    bias: np.ndarray  # (N,) int32 values
    mult: np.ndarray  # (N,)
    shift: np.ndarray  # (N,)
    s_in: float
    s_out: float
    out_bits: int

    @classmethod
    def from_float(cls, weight, bias, s_in: float, s_out: float, out_bits: int) -> "IntLinear":
        if hasattr(weight, "detach"):  # a torch parameter
            weight = weight.detach().double().numpy()
        w_f = np.asarray(weight, dtype=np.float64).reshape(weight.shape[0], -1)
        w_q, s_w = qp.quantize_weights(w_f)
        b_q = (qp.bias_int(np.asarray(bias, dtype=np.float64), s_in, s_w) if bias is not None
               else np.zeros(w_q.shape[0], dtype=np.int64))
        mult, shift = multipliers(s_in * np.asarray(s_w) / s_out)
        # int8 storage: the GEMM takes it as is (no range check or narrowing per call); read-only, so
        # a float GEMM backend may convert it once and keep the copy (hwvit.ops.gemm_backends)
        w8 = np.array(w_q, np.int8)
        w8.flags.writeable = False
        return cls(w8, np.asarray(b_q, np.int64), mult, shift, s_in, s_out, out_bits)

    def __call__(self, x: np.ndarray, tr: Trace, path: str) -> np.ndarray:
        lead = x.shape[:-1]
        y = matmul(x.reshape(-1, x.shape[-1]), self.w, self.bias, self.mult, self.shift, self.out_bits, True,
                   (self.s_in, self.s_out), tr, path)
        return y.reshape(*lead, self.w.shape[0])


@dataclass
class IntLayerNorm:
    gamma: np.ndarray  # (C,) 15-bit
    beta: np.ndarray  # (C,) 31-bit
    eps_int: int
    mult: int
    shift: int
    s_in: float
    s_out: float
    out_bits: int

    @classmethod
    def from_float(cls, ln, s_in: float, s_out: float, out_bits: int) -> "IntLayerNorm":
        c = ln.normalized_shape[-1]
        gamma = ln.weight.detach().double().numpy() if ln.weight is not None else np.ones(c)
        beta = ln.bias.detach().double().numpy() if ln.bias is not None else np.zeros(c)
        p = qp.layernorm_params(gamma, beta, float(ln.eps), c, s_in, s_out, out_bits)
        return cls(np.asarray(p["gamma"], np.int64), np.asarray(p["beta"], np.int64), int(p["eps_int"]),
                   int(p["multiplier"]), int(p["shift"]), s_in, s_out, out_bits)

    def __call__(self, x: np.ndarray, tr: Trace, path: str) -> np.ndarray:
        rows = x.reshape(-1, x.shape[-1])
        y = ops.layernorm(rows, self.gamma, self.beta, self.eps_int, self.mult, self.shift, self.out_bits)
        if tr.keep_records:
            tr.add("layernorm", path, {"rows": rows.shape[0], "c": rows.shape[1], "out_bits": self.out_bits,
                                       "eps_int": self.eps_int, "multiplier": self.mult, "shift": self.shift},
                   x=t_in(rows, 8, True, self.s_in), gamma=t_par(self.gamma, 15, True),
                   beta=t_par(self.beta, 31, True), y=t_out(y, self.out_bits, True, self.s_out))
        return y.reshape(x.shape)


@dataclass
class IntGelu:
    table: np.ndarray
    in_bits: int
    out_bits: int
    s_in: float
    s_out: float

    @classmethod
    def build(cls, s_in: float, s_out: float, bits: int) -> "IntGelu":
        return cls(np.asarray(qp.gelu_table(s_in, s_out, bits, bits), np.int64), bits, bits, s_in, s_out)

    def __call__(self, x: np.ndarray, tr: Trace, path: str) -> np.ndarray:
        y = ops.gelu(x, self.table, self.in_bits)
        if tr.keep_records:
            tr.add("gelu", path, {"in_bits": self.in_bits, "out_bits": self.out_bits},
                   x=t_in(x.reshape(-1), self.in_bits, True, self.s_in),
                   table=t_par(self.table, self.out_bits, True),
                   y=t_out(y.reshape(-1), self.out_bits, True, self.s_out))
        return y


@dataclass
class IntSoftmax:
    exp_table: np.ndarray  # (entries,) unsigned 24 bit, T[0] = 2^23
    in_bits: int
    out_bits: int
    s_in: float
    exp: str = "table"  # "table" (the RTL twin) or "shift" (shift-and-add, Python only)
    exp_mult: int | None = None

    @classmethod
    def build(cls, s_in: float, in_bits: int, out_bits: int, exp: str = "table", entries: int = 256
              ) -> "IntSoftmax":
        if exp not in ("table", "shift"):
            raise ValueError(f"unknown exp approximation {exp!r}; choose table or shift")
        entries = min(entries, 1 << in_bits)
        table = np.asarray(qp.exp_table(s_in, entries), np.int64)
        mult = int(qp.exp_shift_mult(s_in)) if exp == "shift" else None
        return cls(table, in_bits, out_bits, s_in, exp, mult)

    @property
    def s_out(self) -> float:
        return 1.0 / ((1 << self.out_bits) - 1)

    def __call__(self, x: np.ndarray, tr: Trace, path: str) -> np.ndarray:
        rows = x.reshape(-1, x.shape[-1])
        p = ops.softmax(rows, self.exp_table, out_bits=self.out_bits, in_bits=self.in_bits, exp=self.exp,
                        exp_mult=self.exp_mult)
        if tr.keep_records and self.exp == "table":  # only the table form has a Verilog twin
            tr.add("softmax", path, {"in_bits": self.in_bits, "out_bits": self.out_bits,
                                     "entries": len(self.exp_table), "rows": rows.shape[0],
                                     "row_len": rows.shape[1]},
                   x=t_in(rows, self.in_bits, True, self.s_in), exp_table=t_par(self.exp_table, 24, False),
                   p=t_out(p, self.out_bits, False, self.s_out))
        return p.reshape(x.shape)


@dataclass
class IntResidual:
    """y = a + b, both rescaled to the output scale (ops.residual_add)."""

    mult_a: int
    mult_b: int
    shift: int
    s_a: float
    s_b: float
    s_out: float
    out_bits: int

    @classmethod
    def build(cls, s_a: float, s_b: float, s_out: float, out_bits: int) -> "IntResidual":
        ma, mb, s = qp.residual_params(s_a, s_b, s_out)
        return cls(int(ma), int(mb), int(s), s_a, s_b, s_out, out_bits)

    def __call__(self, a: np.ndarray, b: np.ndarray, tr: Trace, path: str) -> np.ndarray:
        y = ops.residual_add(a, b, self.mult_a, self.mult_b, self.shift, self.out_bits)
        if tr.keep_records:
            tr.add("residual_add", path, {"out_bits": self.out_bits, "mult_a": self.mult_a,
                                          "mult_b": self.mult_b, "shift": self.shift},
                   a=t_in(a.reshape(-1), 8, True, self.s_a), b=t_in(b.reshape(-1), 8, True, self.s_b),
                   y=t_out(y.reshape(-1), self.out_bits, True, self.s_out))
        return y
