"""hwvit.onnx: a quantized model the ML team made, as hwvit's integer model of that very model.

An ONNX QDQ file (QuantizeLinear / DequantizeLinear pairs: onnxruntime's static quantization and
the tools that write the same form) holds a float graph whose every tensor between two quantizers
is a function of integer codes. ``read`` loads such a file safely, ``graph`` cuts it at its
quantizers into steps (a GEMM, an add, a LayerNorm, a softmax, a table of one code, a move of
codes), ``build`` recognizes the ViT in those steps and builds an ``IntViT`` from the file's
weights, scales and zero points, and ``runtime`` runs the file in onnxruntime beside it
(``hwvit compare``). docs/onnx.md says what maps to what and what cannot.
"""

from __future__ import annotations

SUFFIXES = (".onnx",)


def is_onnx(path) -> bool:
    """Whether a ``--checkpoint`` path names an ONNX file (by its suffix)."""
    return str(path).lower().endswith(SUFFIXES)


__all__ = ["SUFFIXES", "is_onnx"]
