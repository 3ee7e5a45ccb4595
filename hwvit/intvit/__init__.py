"""The bit-accurate integer ViT: layers, forward, trace (``hwvit.quant.quantize_model`` builds one)."""

from hwvit.intvit.model import IntViT
from hwvit.intvit.trace import Trace


def trace_model(int_model: IntViT, inputs, quantized: bool = False, device: str | None = None):
    """Run ``inputs`` through the integer model; return (int logits, block records, int values).

    ``device`` (``"cuda"``, ``"cpu"``): the torch forward of hwvit.intvit.device on that device,
    bit-identical to the numpy forward (the default, ``None``), records included."""
    tr = Trace(records=True, values=True)
    if device is None:
        logits = int_model.forward(inputs, trace=tr, quantized=quantized)
    else:
        from hwvit.intvit.device import DeviceForward

        logits = DeviceForward(int_model, device)(inputs, trace=tr, quantized=quantized)
    return logits, tr.records, tr.values


__all__ = ["IntViT", "Trace", "trace_model"]
