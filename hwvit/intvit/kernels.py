"""The arithmetic an integer forward runs on: one small provider per array library.

The integer layers (``hwvit.intvit.layers``, ``hwvit.intvit.model``) are written once; every
kernel call, array rearrangement and trace step goes through a provider passed down the forward
as ``k``. ``NUMPY`` runs the hwvit.ops kernels on numpy arrays in their narrowest dtypes (the CPU
forward); ``hwvit.intvit.device.TorchKernels`` runs hwvit.ops.torch_kernels on int64 tensors that
stay on a torch device. Both compute the same integers (tests/test_device_forward.py).

A provider takes the layers' parameters as they are stored (numpy arrays, Python ints) and turns
them into what its kernels want. Block records and traced values are host numpy arrays:
``host`` copies a tensor back, ``value`` traces an output and returns what the forward goes on with.
"""

from __future__ import annotations

import numpy as np

from hwvit import ops
from hwvit.intvit.trace import Trace
from hwvit.ops.checks import narrow_dtype


class NumpyKernels:
    """hwvit.ops on numpy arrays: the CPU forward. Activations travel in their narrowest dtype
    (``narrow=True``). Kernels are looked up on ``hwvit.ops`` at each call, so a wrapper set
    there (``hwvit bench``'s GEMM timer) sees every call."""

    def gemm(self, a, w, bias, a_signed: bool = True):
        """``bias + a @ w^T``, int64 accumulators; a (M, K) or (B, M, K), w (N, K) or (B, N, K)."""
        return ops.gemm(a, w, bias, a_signed=a_signed)

    def requant(self, acc, mult, shift, out_bits: int):
        return ops.requant(acc, mult, shift, out_bits, narrow=True)

    def linear(self, a, w, bias, mult, shift, out_bits: int, a_signed: bool = True):
        """requant(gemm(...)): the same integers; a backend that can requantizes inside its tile."""
        return ops.linear(a, w, bias, mult, shift, out_bits, a_signed=a_signed, narrow=True)

    def layernorm(self, rows, gamma, beta, eps_int: int, mult: int, shift: int, out_bits: int):
        return ops.layernorm(rows, gamma, beta, eps_int, mult, shift, out_bits, narrow=True)

    def gelu(self, x, table, in_bits: int):
        return ops.gelu(x, table, in_bits, narrow=True)

    def softmax(self, rows, table, out_bits: int, in_bits: int, exp: str, exp_mult):
        return ops.softmax(rows, table, out_bits=out_bits, in_bits=in_bits, exp=exp, exp_mult=exp_mult, narrow=True)

    def residual_add(self, a, b, mult_a: int, mult_b: int, shift: int, out_bits: int):
        return ops.residual_add(a, b, mult_a, mult_b, shift, out_bits, narrow=True)

    def variant(self, v, x, params):
        """An arithmetic variant's exact kernel (hwvit.variants) on ``x``."""
        return v.kernel(np.asarray(x).astype(np.int64, copy=False), params)

    def mean_pool(self, x, mult: int, shift: int, out_bits: int):
        """Mean over the tokens (axis 1)."""
        return ops.mean_pool(x, mult, shift, out_bits, axis=1)

    def quantize(self, x, scale: float, bits: int):
        """Float inputs -> ints at ``scale`` (ValueError on NaN or infinity)."""
        return ops.quantize(x, scale, bits, narrow=True)

    def int_input(self, x):
        """Integers from the host as the forward takes them: already quantized inputs, or what a layer
        worked out on the host (an imported model's zero-point arithmetic)."""
        xq = np.asarray(x)
        return xq if xq.dtype.kind in "iu" else xq.astype(np.int64)

    def const(self, a: np.ndarray):
        """A small parameter (cls token, position table) in the narrowest dtype holding its values, so
        the kernel it joins takes it without a range scan."""
        return a.astype(narrow_dtype(int(a.min()), int(a.max()))) if a.size else a

    def expand(self, a, shape):
        return np.broadcast_to(a, shape)

    def cat(self, parts, axis: int):
        return np.concatenate(parts, axis=axis)

    def permute(self, x, axes):
        return x.transpose(axes)

    def host(self, x) -> np.ndarray:
        return x

    def value(self, tr: Trace, path: str, q, scale: float):
        return tr.value(path, q, scale)

    def logits(self, x) -> np.ndarray:
        """The forward's result: int64 on the host."""
        return x.astype(np.int64)


NUMPY = NumpyKernels()

__all__ = ["NUMPY", "NumpyKernels"]
