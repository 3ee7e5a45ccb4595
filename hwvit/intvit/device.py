"""The integer ViT forward on a torch device (CUDA), through hwvit.ops.torch_kernels.

It walks the same IntViT layers as ``IntViT.forward`` in the same order with the same integer
formulas, on int64 tensors that stay on the device; tests hold every traced value equal to the
numpy/numba forward. Block records (vector sets) are the CPU path's job: this path records only
values (``Trace(values=True)``), copied back to numpy.
"""

from __future__ import annotations

import numpy as np
import torch

from hwvit.intvit.layers import (
    IntGelu,
    IntLayerNorm,
    IntLinear,
    IntResidual,
    IntSoftmax,
)
from hwvit.intvit.trace import NO_TRACE, Trace
from hwvit.ops import torch_kernels as tk


def resolve_device(device) -> torch.device:
    """A torch device, refusing CUDA where there is none (ValueError, one line)."""
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device cuda: no CUDA GPU is available here (torch.cuda.is_available() is False)")
    return dev


class _Params:
    """Each layer's integer parameters as int64 tensors on the device, made once per model and device."""

    def __init__(self, device: torch.device):
        self.device = device
        self._cache: dict[int, torch.Tensor] = {}
        self._keep: list = []  # the source arrays, so their ids stay unique while cached

    def __call__(self, arr, dtype=torch.int64) -> torch.Tensor:
        hit = self._cache.get(id(arr))
        if hit is None:
            hit = torch.from_numpy(np.array(arr)).to(self.device, dtype)  # a copy: weights are read-only
            self._cache[id(arr)] = hit
            self._keep.append(arr)
        return hit


class DeviceForward:
    """``DeviceForward(int_model, 'cuda')(x)``: integer logits as a numpy array, like ``IntViT.forward``."""

    def __init__(self, model, device="cuda"):
        self.model = model
        self.device = resolve_device(device)
        self.p = _Params(self.device)
        self.checks: tk.Checks | None = None  # one per forward

    def _value(self, tr: Trace, path: str, t: torch.Tensor, scale: float) -> None:
        if tr.keep_values:
            tr.value(path, t.cpu().numpy(), scale)

    def linear(self, lin: IntLinear, x: torch.Tensor) -> torch.Tensor:
        acc = tk.gemm(x, self.p(lin.w, torch.int8), self.p(lin.bias))
        return tk.requant(acc, self.p(lin.mult), self.p(lin.shift), lin.out_bits, self.checks)

    def layernorm(self, ln: IntLayerNorm, x: torch.Tensor) -> torch.Tensor:
        return tk.layernorm(
            x,
            self.p(ln.gamma),
            self.p(ln.beta),
            ln.eps_int,
            ln.mult,
            ln.shift,
            ln.out_bits,
            checks=self.checks,
        )

    def gelu(self, g: IntGelu, x: torch.Tensor) -> torch.Tensor:
        return tk.gelu(x, self.p(g.table), g.in_bits)

    def residual(self, r: IntResidual, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return tk.residual_add(a, b, r.mult_a, r.mult_b, r.shift, r.out_bits)

    def softmax(self, s: IntSoftmax, x: torch.Tensor) -> torch.Tensor:
        return tk.softmax(x, self.p(s.exp_table), s.out_bits, s.exp, s.exp_mult)

    def attention(self, at, x: torch.Tensor, tr: Trace, path: str) -> torch.Tensor:
        b, n, _ = x.shape
        h, hd = at.heads, at.head_dim
        if at.qkv is not None:
            y = self.linear(at.qkv, x)
            self._value(tr, f"{path}.qkv", y, at.qkv.s_out)
            y = y.reshape(b, n, 3, h, hd)
            q, k, v = (y[:, :, i].transpose(1, 2) for i in range(3))  # (B, H, N, hd)
        else:
            q, k, v = (self.linear(lin, x).reshape(b, n, h, hd).transpose(1, 2) for lin in (at.q, at.k, at.v))
        self._value(tr, f"{path}.q", q, at.s_q)
        self._value(tr, f"{path}.k", k, at.s_k)
        self._value(tr, f"{path}.v", v, at.s_v)
        qs, ks, vs = (t.reshape(b * h, n, hd) for t in (q, k, v))
        scores = tk.requant(tk.gemm(qs, ks), at.scores_mult, at.scores_shift, at.scores_bits, self.checks).reshape(
            b, h, n, n
        )
        self._value(tr, f"{path}.scores", scores, at.s_scores)
        probs = self.softmax(at.softmax, scores)
        self._value(tr, f"{path}.softmax", probs, at.softmax.s_out)
        self._value(tr, f"{path}.probs", probs, at.softmax.s_out)
        acc = tk.gemm(probs.reshape(b * h, n, n), vs.transpose(1, 2), a_signed=False)
        ctx = tk.requant(acc, at.ctx_mult, at.ctx_shift, at.ctx_bits, self.checks)
        ctx = ctx.reshape(b, h, n, hd).transpose(1, 2).reshape(b, n, h * hd)
        self._value(tr, f"{path}.context", ctx, at.s_ctx)
        out = self.linear(at.proj, ctx)
        self._value(tr, f"{path}.proj", out, at.proj.s_out)
        return out

    def block(self, blk, x: torch.Tensor, tr: Trace, path: str) -> torch.Tensor:
        h = self.layernorm(blk.norm1, x)
        self._value(tr, f"{path}.norm1", h, blk.norm1.s_out)
        x = self.residual(blk.add1, x, self.attention(blk.attn, h, tr, f"{path}.attn"))
        self._value(tr, f"{path}.add1", x, blk.add1.s_out)
        h = self.layernorm(blk.norm2, x)
        self._value(tr, f"{path}.norm2", h, blk.norm2.s_out)
        h = self.linear(blk.fc1, h)
        self._value(tr, f"{path}.mlp.fc1", h, blk.fc1.s_out)
        h = self.gelu(blk.gelu, h)
        self._value(tr, f"{path}.mlp.gelu", h, blk.gelu.s_out)
        h = self.linear(blk.fc2, h)
        self._value(tr, f"{path}.mlp.fc2", h, blk.fc2.s_out)
        x = self.residual(blk.add2, x, h)
        self._value(tr, f"{path}.add2", x, blk.add2.s_out)
        return x

    @staticmethod
    def patches(pe, x: torch.Tensor) -> torch.Tensor:
        """IntPatchEmbed.patches on a tensor: (B, C, H, W) -> (B, N, patch_dim), same feature order."""
        if pe.kind == "linear1d":
            return x.reshape(x.shape[0], -1, pe.patch_size * (x.shape[2] if x.ndim == 3 else 1))
        b, c, hh, ww = x.shape
        p = pe.patch_size
        g = x.reshape(b, c, hh // p, p, ww // p, p)
        g = g.permute(0, 2, 4, 1, 3, 5) if pe.kind == "conv" else g.permute(0, 2, 4, 3, 5, 1)
        return g.reshape(b, (hh // p) * (ww // p), -1)

    def patch_embed(self, pe, x: torch.Tensor, tr: Trace) -> torch.Tensor:
        h = self.patches(pe, x)
        if pe.norm_in is not None:
            h = self.layernorm(pe.norm_in, h)
            self._value(tr, "embed.norm_in", h, pe.norm_in.s_out)
        h = self.linear(pe.proj, h)
        self._value(tr, "embed.proj", h, pe.proj.s_out)
        if pe.norm_out is not None:
            h = self.layernorm(pe.norm_out, h)
            self._value(tr, "embed.norm_out", h, pe.norm_out.s_out)
        if pe.gelu is not None:
            h = self.gelu(pe.gelu, h)
            self._value(tr, "embed.gelu", h, pe.gelu.s_out)
        return h

    @torch.no_grad()
    def __call__(self, x, trace: Trace | None = None, quantized: bool = False) -> np.ndarray:
        m, tr = self.model, trace or NO_TRACE
        m.check_input(x)
        self.checks = tk.Checks()  # range checks stay on the device; read once, at the end
        if quantized:
            xq = torch.as_tensor(np.asarray(x, dtype=np.int64)).to(self.device)
        else:  # float -> int on the device: the same float64 operations as ops.quantize
            xf = torch.as_tensor(np.asarray(x)).to(self.device)
            self.checks.add(~torch.isfinite(xf).all(), "quantize: input holds NaN or infinity")
            xq = tk.quantize(xf, m.s_input, m.input_bits)
        self._value(tr, "input", xq, m.s_input)
        h = self.patch_embed(m.patch_embed, xq, tr)
        self._value(tr, "embed", h, m.s_embed)
        b = h.shape[0]
        if m.cls_q is not None:
            h = torch.cat([self.p(m.cls_q).expand(b, 1, h.shape[-1]), h], dim=1)
        s_tokens = m.s_embed
        if m.pos_add is not None:
            h = self.residual(m.pos_add, h, self.p(m.pos_q).expand(h.shape))
            s_tokens = m.pos_add.s_out
            self._value(tr, "pos_add", h, s_tokens)
        self._value(tr, "tokens", h, s_tokens)
        for i, blk in enumerate(m.blocks):
            pos_add = m.layer_pos_adds[i] if m.layer_pos_adds else None
            if pos_add is not None:
                h = self.residual(pos_add, h, self.p(m.pos_q).expand(h.shape))
                self._value(tr, f"layers.{i}.pos_add", h, pos_add.s_out)
            h = self.block(blk, h, tr, f"layers.{i}")
        if m.norm is not None:
            h = self.layernorm(m.norm, h)
            self._value(tr, "norm", h, m.norm.s_out)
        pooled = (
            h[:, 0]
            if m.pool is None
            else tk.mean_pool(h, m.pool.mult, m.pool.shift, m.pool.out_bits, checks=self.checks)
        )
        self._value(tr, "pool", pooled, m.s_pool)
        if m.pre_head_fc is not None:
            pooled = self.linear(m.pre_head_fc, pooled)
            self._value(tr, "pre_head.fc", pooled, m.pre_head_fc.s_out)
        if m.pre_head_norm is not None:
            pooled = self.layernorm(m.pre_head_norm, pooled)
            self._value(tr, "pre_head.norm", pooled, m.pre_head_norm.s_out)
        if m.head is not None:
            pooled = self.linear(m.head, pooled)
            self._value(tr, "head", pooled, m.head.s_out)
            self._value(tr, "logits", pooled, m.head.s_out)
        self.checks.raise_if_any()
        return pooled.cpu().numpy()
