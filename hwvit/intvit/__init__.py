"""The bit-accurate integer ViT: layers, forward, trace (``hwvit.quant.quantize_model`` builds one)."""

from hwvit.intvit.model import IntViT
from hwvit.intvit.trace import Trace


def trace_model(int_model: IntViT, inputs, quantized: bool = False):
    """Run ``inputs`` through the integer model; return (int logits, block records, int values)."""
    tr = Trace(records=True, values=True)
    logits = int_model.forward(inputs, trace=tr, quantized=quantized)
    return logits, tr.records, tr.values


__all__ = ["IntViT", "Trace", "trace_model"]
