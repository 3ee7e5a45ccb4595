"""The integer model of an attention-only checkpoint (hwvit.float.attention_blocks: MONAI's SABlock,
fused qkv; the cookbook's separate query/key/value, sequence first).

``quantize_attention`` calibrates the block and builds its IntAttention with the same builder as a
ViT's (``hwvit.quant.convert.build_attention``), so its arithmetic is the ViT attention's, block
for block. ``IntAttentionBlock`` has what ``hwvit.analysis.compare`` asks of an integer model
(``forward`` with a trace, ``bits_at``, ``dequantize_logits``), so float vs fixed error, accumulated
and isolated, is measured on these checkpoints as on a ViT (the block's output stands in for logits).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from hwvit import ops
from hwvit.intvit.model import IntAttention
from hwvit.intvit.trace import NO_TRACE, Trace
from hwvit.quant.calibrate import calibrate, on_grid
from hwvit.quant.config import QuantConfig
from hwvit.quant.convert import _Scales, build_attention


@dataclass(kw_only=True)
class IntAttentionBlock:
    """Integer attention on (B, N, C) int inputs at scale ``s_input`` ((N, B, C) when ``seq_first``)."""

    attn: IntAttention
    s_input: float
    act_bits: int
    seq_first: bool
    point_bits: dict[str, int] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    readout = None  # no readout, no pooling: compare's report asks

    def bits_at(self, path: str) -> int:
        return self.point_bits.get(path, self.act_bits)

    def zero_at(self, path: str) -> int:
        """Zero point at a traced point: 0 everywhere (symmetric quantization, as the block is built)."""
        return 0

    def forward(self, x, trace: Trace | None = None, quantized: bool = False) -> np.ndarray:
        """The block's int output (int64, scale ``attn.proj.s_out``), in the input's layout."""
        tr = trace or NO_TRACE
        x = np.asarray(x)
        if x.ndim != 3:
            raise ValueError(f"attention block takes a 3-D input, got shape {x.shape}")
        xq = x if quantized else ops.quantize(x, self.s_input, self.bits_at("input"), narrow=True)
        if self.seq_first:
            xq = xq.transpose(1, 0, 2)  # (N, B, C) -> (B, N, C)
        xq = tr.value("input", np.ascontiguousarray(xq), self.s_input)
        y = np.asarray(self.attn(xq, tr, "attn")).astype(np.int64)
        return y.transpose(1, 0, 2) if self.seq_first else y

    __call__ = forward

    def dequantize_logits(self, y: np.ndarray) -> np.ndarray:
        return y.astype(np.float64) * self.attn.proj.s_out


def quantize_attention(block, calib_inputs, qconfig: QuantConfig | None = None) -> IntAttentionBlock:
    """Calibrate ``block`` (an AttentionBlock) on ``calib_inputs`` and build its integer model."""
    qc = qconfig or QuantConfig()
    x = torch.as_tensor(calib_inputs, dtype=torch.float32)
    ranges = calibrate(block, x, qc.calibration, qc.percentile, bits=qc.act_bits)
    ranges["input"] = on_grid(float(x.abs().max()))  # the block records no input: its range, whole (as min/max)
    scale = _Scales(block, ranges, qc.act_bits)
    s_input, _ = scale.point("input")
    attn = build_attention(block.attn, "attn", s_input, scale, qc, block.dim)
    return IntAttentionBlock(
        attn=attn,
        s_input=s_input,
        act_bits=qc.act_bits,
        seq_first=block.seq_first,
        point_bits=dict(scale.widths),
        meta={"quant": qc.to_dict()},
    )


__all__ = ["IntAttentionBlock", "quantize_attention"]
