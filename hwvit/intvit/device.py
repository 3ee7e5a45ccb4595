"""The integer ViT forward on a torch device (CUDA), through hwvit.ops.torch_kernels.

``DeviceForward`` runs the golden forward (``IntViT.run``: the same layers, order, formulas and trace
steps as ``IntViT.forward``) on ``TorchKernels``, a kernels provider whose int64 tensors stay on the
device (``hwvit.engine.Engine(model, "cuda")`` runs it); tests hold every traced value equal to the
numpy forward's. With
``Trace(records=True)`` the layers keep their block records (vector sets) from the device tensors
copied back; values (``Trace(values=True)``) are copied back too. Forcing values
(``Trace(force=...)``) is CPU only.
"""

from __future__ import annotations

import numpy as np
import torch

from hwvit.intvit.trace import NO_TRACE, Trace
from hwvit.ops import torch_kernels as tk


def _np(t: torch.Tensor) -> np.ndarray:
    """A device tensor as a numpy array on the host (what records and values keep)."""
    return t.cpu().numpy()


def resolve_device(device) -> torch.device:
    """A torch device, refusing CUDA where there is none (ValueError, one line)."""
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device cuda: no CUDA GPU is available here (torch.cuda.is_available() is False)")
    return dev


class TorchKernels:
    """hwvit.ops.torch_kernels on int64 tensors on ``device``: the kernels provider of the device
    forward (``hwvit.intvit.kernels`` says what a provider is). The layers' numpy parameters become
    device tensors once per model and device (weights int8, the rest int64); Python ints stay ints.
    Data-dependent range checks stay on the device and are read once per forward (``checks``)."""

    def __init__(self, device: torch.device):
        self.device = device
        self._cache: dict[int, torch.Tensor] = {}
        self._keep: list = []  # the source arrays, so their ids stay unique while cached
        self.checks = tk.Checks()

    def param(self, arr, dtype=torch.int64):
        """A stored parameter on the device: numpy arrays converted (and cached), tensors, ints and
        None as they are."""
        if not isinstance(arr, np.ndarray):
            return arr
        hit = self._cache.get(id(arr))
        if hit is None:
            hit = torch.from_numpy(np.array(arr)).to(self.device, dtype)  # a copy: weights are read-only
            self._cache[id(arr)] = hit
            self._keep.append(arr)
        return hit

    def gemm(self, a, w, bias, a_signed: bool = True):
        return tk.gemm(a, self.param(w, torch.int8), self.param(bias), a_signed=a_signed)

    def requant(self, acc, mult, shift, out_bits: int):
        return tk.requant(acc, self.param(mult), self.param(shift), out_bits, self.checks)

    def linear(self, a, w, bias, mult, shift, out_bits: int, a_signed: bool = True):
        return self.requant(self.gemm(a, w, bias, a_signed), mult, shift, out_bits)

    def layernorm(self, rows, gamma, beta, eps_int: int, mult: int, shift: int, out_bits: int):
        g, b = self.param(gamma), self.param(beta)
        return tk.layernorm(rows, g, b, eps_int, mult, shift, out_bits, checks=self.checks)

    def gelu(self, x, table, in_bits: int):
        return tk.gelu(x, self.param(table), in_bits)

    def softmax(self, rows, table, out_bits: int, in_bits: int, exp: str, exp_mult):
        return tk.softmax(rows, self.param(table), out_bits, exp, exp_mult)  # in_bits: a range check on the CPU

    def residual_add(self, a, b, mult_a: int, mult_b: int, shift: int, out_bits: int):
        return tk.residual_add(a, b, mult_a, mult_b, shift, out_bits)

    def mean_pool(self, x, mult: int, shift: int, out_bits: int):
        return tk.mean_pool(x, mult, shift, out_bits, checks=self.checks)

    def quantize(self, x, scale: float, bits: int):
        """float -> int on the device: the same float64 operations as ops.quantize."""
        xf = torch.as_tensor(np.asarray(x)).to(self.device)
        self.checks.add(~torch.isfinite(xf).all(), "quantize: input holds NaN or infinity")
        return tk.quantize(xf, scale, bits)

    def int_input(self, x):
        return torch.as_tensor(np.asarray(x, dtype=np.int64)).to(self.device)

    def variant(self, v, x, params):
        """An arithmetic variant's kernel (hwvit.variants: numpy) on the host, the result back here."""
        return self.int_input(v.kernel(_np(x).astype(np.int64, copy=False), params))

    def const(self, a: np.ndarray):
        return self.param(a)

    def expand(self, a, shape):
        return a.expand(shape)

    def cat(self, parts, axis: int):
        return torch.cat(parts, dim=axis)

    def permute(self, x, axes):
        return x.permute(axes)

    def host(self, x) -> np.ndarray:
        return _np(x)

    def value(self, tr: Trace, path: str, q, scale: float):
        if tr.keep_values:
            tr.value(path, _np(q), scale)
        return q

    def logits(self, x) -> np.ndarray:
        return _np(x)


class DeviceForward:
    """``DeviceForward(int_model, 'cuda')(x)``: integer logits as a numpy array, like ``IntViT.forward``."""

    def __init__(self, model, device="cuda"):
        self.model = model
        self.device = resolve_device(device)
        self.kernels = TorchKernels(self.device)

    @torch.no_grad()
    def __call__(self, x, trace: Trace | None = None, quantized: bool = False) -> np.ndarray:
        tr = trace or NO_TRACE
        if tr.force is not None:
            raise ValueError("forcing traced values (Trace(force=...)) runs on the CPU forward only")
        self.kernels.checks = tk.Checks()  # range checks stay on the device; read once, at the end
        logits = self.model.run(x, tr, quantized, self.kernels)
        self.kernels.checks.raise_if_any()
        return logits
