"""The integer ViT forward on a torch device (CUDA), through hwvit.ops.torch_kernels.

It walks the same IntViT layers as ``IntViT.forward`` in the same order with the same integer
formulas, on int64 tensors that stay on the device; tests hold every traced value equal to the
numpy/numba forward. With ``Trace(records=True)`` it also keeps the block records (vector sets),
made by the same layer methods as the CPU path's from the device tensors copied back; values
(``Trace(values=True)``) are copied back too. Forcing values (``Trace(force=...)``) is CPU only.
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


def _np(t: torch.Tensor) -> np.ndarray:
    """A device tensor as a numpy array on the host (what records and values keep)."""
    return t.cpu().numpy()


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
            tr.value(path, _np(t), scale)

    def linear(self, lin: IntLinear, x: torch.Tensor, tr: Trace, path: str, value: bool = True) -> torch.Tensor:
        acc = tk.gemm(x, self.p(lin.w, torch.int8), self.p(lin.bias))
        y = tk.requant(acc, self.p(lin.mult), self.p(lin.shift), lin.out_bits, self.checks)
        if tr.keep_records:
            n = acc.shape[-1]
            lin.record(tr, path, _np(x).reshape(-1, x.shape[-1]), _np(acc).reshape(-1, n), _np(y).reshape(-1, n))
        if value:
            self._value(tr, path, y, lin.s_out)
        return y

    def layernorm(self, ln: IntLayerNorm, x: torch.Tensor, tr: Trace, path: str) -> torch.Tensor:
        y = tk.layernorm(
            x,
            self.p(ln.gamma),
            self.p(ln.beta),
            ln.eps_int,
            ln.mult,
            ln.shift,
            ln.out_bits,
            checks=self.checks,
        )
        if tr.keep_records:
            c = x.shape[-1]
            ln.record(tr, path, _np(x).reshape(-1, c), _np(y).reshape(-1, c))
        self._value(tr, path, y, ln.s_out)
        return y

    def gelu(self, g: IntGelu, x: torch.Tensor, tr: Trace, path: str) -> torch.Tensor:
        y = tk.gelu(x, self.p(g.table), g.in_bits)
        if tr.keep_records:
            g.record(tr, path, _np(x), _np(y))
        self._value(tr, path, y, g.s_out)
        return y

    def residual(self, r: IntResidual, a: torch.Tensor, b: torch.Tensor, tr: Trace, path: str) -> torch.Tensor:
        y = tk.residual_add(a, b, r.mult_a, r.mult_b, r.shift, r.out_bits)
        if tr.keep_records:
            r.record(tr, path, _np(a), _np(b), _np(y))
        self._value(tr, path, y, r.s_out)
        return y

    def softmax(self, s: IntSoftmax, x: torch.Tensor, tr: Trace, path: str) -> torch.Tensor:
        p = tk.softmax(x, self.p(s.exp_table), s.out_bits, s.exp, s.exp_mult)
        if tr.keep_records:
            n = x.shape[-1]
            s.record(tr, path, _np(x).reshape(-1, n), _np(p).reshape(-1, n))
        self._value(tr, path, p, s.s_out)
        return p

    def attention(self, at, x: torch.Tensor, tr: Trace, path: str) -> torch.Tensor:
        b, n, _ = x.shape
        h, hd = at.heads, at.head_dim
        if at.qkv is not None:
            y = self.linear(at.qkv, x, tr, f"{path}.qkv").reshape(b, n, 3, h, hd)
            q, k, v = (y[:, :, i].transpose(1, 2) for i in range(3))  # (B, H, N, hd)
        else:
            q, k, v = (
                self.linear(lin, x, tr, f"{path}.{name}", value=False).reshape(b, n, h, hd).transpose(1, 2)
                for name, lin in (("q", at.q), ("k", at.k), ("v", at.v))
            )
        self._value(tr, f"{path}.q", q, at.s_q)
        self._value(tr, f"{path}.k", k, at.s_k)
        self._value(tr, f"{path}.v", v, at.s_v)
        qs, ks, vs = (t.reshape(b * h, n, hd) for t in (q, k, v))
        acc = tk.gemm(qs, ks)
        scores = tk.requant(acc, at.scores_mult, at.scores_shift, at.scores_bits, self.checks)
        if tr.keep_records:
            at.record_heads(tr, path, b, "qk", _np(qs), _np(ks), _np(acc), _np(scores))
        scores = scores.reshape(b, h, n, n)
        self._value(tr, f"{path}.scores", scores, at.s_scores)
        probs = self.softmax(at.softmax, scores, tr, f"{path}.softmax")
        self._value(tr, f"{path}.probs", probs, at.softmax.s_out)
        ps, vt = probs.reshape(b * h, n, n), vs.transpose(1, 2)
        acc = tk.gemm(ps, vt, a_signed=False)
        ctx = tk.requant(acc, at.ctx_mult, at.ctx_shift, at.ctx_bits, self.checks)
        if tr.keep_records:
            at.record_heads(tr, path, b, "av", _np(ps), _np(vt), _np(acc), _np(ctx))
        ctx = ctx.reshape(b, h, n, hd).transpose(1, 2).reshape(b, n, h * hd)
        self._value(tr, f"{path}.context", ctx, at.s_ctx)
        return self.linear(at.proj, ctx, tr, f"{path}.proj")

    def block(self, blk, x: torch.Tensor, tr: Trace, path: str) -> torch.Tensor:
        h = self.layernorm(blk.norm1, x, tr, f"{path}.norm1")
        x = self.residual(blk.add1, x, self.attention(blk.attn, h, tr, f"{path}.attn"), tr, f"{path}.add1")
        h = self.layernorm(blk.norm2, x, tr, f"{path}.norm2")
        h = self.linear(blk.fc1, h, tr, f"{path}.mlp.fc1")
        h = self.gelu(blk.gelu, h, tr, f"{path}.mlp.gelu")
        h = self.linear(blk.fc2, h, tr, f"{path}.mlp.fc2")
        return self.residual(blk.add2, x, h, tr, f"{path}.add2")

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
            h = self.layernorm(pe.norm_in, h, tr, "embed.norm_in")
        h = self.linear(pe.proj, h, tr, "embed.proj")
        if pe.norm_out is not None:
            h = self.layernorm(pe.norm_out, h, tr, "embed.norm_out")
        if pe.gelu is not None:
            h = self.gelu(pe.gelu, h, tr, "embed.gelu")
        return h

    @torch.no_grad()
    def __call__(self, x, trace: Trace | None = None, quantized: bool = False) -> np.ndarray:
        m, tr = self.model, trace or NO_TRACE
        if tr.force is not None:
            raise ValueError("forcing traced values (Trace(force=...)) runs on the CPU forward only")
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
            h = self.residual(m.pos_add, h, self.p(m.pos_q).expand(h.shape), tr, "pos_add")
            s_tokens = m.pos_add.s_out
        self._value(tr, "tokens", h, s_tokens)
        for i, blk in enumerate(m.blocks):
            pos_add = m.layer_pos_adds[i] if m.layer_pos_adds else None
            if pos_add is not None:
                h = self.residual(pos_add, h, self.p(m.pos_q).expand(h.shape), tr, f"layers.{i}.pos_add")
            h = self.block(blk, h, tr, f"layers.{i}")
        if m.norm is not None:
            h = self.layernorm(m.norm, h, tr, "norm")
        if m.pool is None:
            pooled = h[:, 0]
        else:
            pooled = tk.mean_pool(h, m.pool.mult, m.pool.shift, m.pool.out_bits, checks=self.checks)
            if tr.keep_records:
                m.pool.record(tr, "pool", _np(h), _np(pooled))
        self._value(tr, "pool", pooled, m.s_pool)
        if m.pre_head_fc is not None:
            pooled = self.linear(m.pre_head_fc, pooled, tr, "pre_head.fc")
        if m.pre_head_norm is not None:
            pooled = self.layernorm(m.pre_head_norm, pooled, tr, "pre_head.norm")
        if m.head is not None:
            pooled = self.linear(m.head, pooled, tr, "head")
            self._value(tr, "logits", pooled, m.head.s_out)
        self.checks.raise_if_any()
        return _np(pooled)
