"""The bit-accurate integer ViT, the golden model: layers, forward, trace (``hwvit.quant.quantize_model``
builds one; ``hwvit.engine`` runs one fast)."""

from hwvit.intvit.model import IntViT
from hwvit.intvit.trace import Trace


def int_forward(int_model: IntViT, device="cpu"):
    """The golden forward to call on ``device``: ``cpu`` the numpy forward, any other torch device
    the same forward on torch tensors there (``hwvit.intvit.device``; one-line ValueError without
    CUDA)."""
    if str(device) == "cpu":
        return int_model.forward
    from hwvit.intvit.device import DeviceForward

    return DeviceForward(int_model, device)


def trace_model(int_model: IntViT, inputs, quantized: bool = False, device="cpu"):
    """Run ``inputs`` through the golden forward (on ``device``: ``int_forward``); return
    (int logits, block records, int values)."""
    tr = Trace(records=True, values=True)
    logits = int_forward(int_model, device)(inputs, trace=tr, quantized=quantized)
    return logits, tr.records, tr.values


__all__ = ["IntViT", "Trace", "int_forward", "trace_model"]
