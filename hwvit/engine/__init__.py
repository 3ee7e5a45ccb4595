"""The fast engine: runs an integer model (``hwvit.intvit.IntViT``) for speed, to its integers.

The golden model's ``forward`` goes layer by layer, as the paper writes the model; the engine takes
the model and runs it fast, on the same hwvit.ops arithmetic: where nothing is traced, a block of
hwvit's own arithmetic is one compiled call (``blocks.encoder_block``) and a model's stack of them
one ``blocks.encoder_blocks`` call whose plans it keeps; a block that is not (a variant, an imported
model's zero points) runs its layers as the golden model does, with attention's q, k and v in one
GEMM call and its heads in one ``heads.attention_heads`` call where they are hwvit's own. With
records, traced values or forced values the engine runs the golden forward itself. On a torch device
(``device``: ``cuda``) it runs the golden forward on torch tensors (``hwvit.intvit.device``).

``Engine(model)(x)`` equals ``model.forward(x)`` bit for bit: tests/test_engine_golden.py holds every
family, variant, provider and GEMM backend to it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hwvit.engine import blocks
from hwvit.engine.plan import block_params, fast_block
from hwvit.intvit.kernels import NUMPY, NumpyKernels
from hwvit.intvit.model import IntViT
from hwvit.intvit.trace import NO_TRACE, Trace
from hwvit.ops import frozen


class _Kernels(NumpyKernels):
    """The golden model's numpy provider, with the model's small parameters (cls token, position
    table) narrowed once, when the engine makes its plan, not at every forward."""

    def __init__(self, consts: dict[int, tuple[np.ndarray, np.ndarray]]):
        self._consts = consts

    def const(self, a: np.ndarray):
        hit = self._consts.get(id(a))
        return hit[1] if hit is not None and hit[0] is a else super().const(a)


def _arrays(obj):
    """Every numpy array a layer (or a model) holds: its fields', its parts', recursively."""
    if isinstance(obj, np.ndarray):
        yield obj
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from _arrays(getattr(obj, f.name))
    elif isinstance(obj, (tuple, list)):
        for v in obj:
            yield from _arrays(v)
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _arrays(v)


class Engine:
    """``Engine(model)(x, trace=None, quantized=False)``: ``model.forward``'s logits, computed fast.

    The plan (each block as one compiled call takes it, or its layers with attention at once, the
    stack of blocks with its kept per-shape plans) is made from the model given, at the first call
    that runs fast. A model is immutable once built (frozen layers, read-only arrays); at each call
    the engine checks that no array of the model has been made writable since (one flag each) and
    makes its plan again where one has. ``device``: a torch device (``cuda``) runs the golden forward
    there instead."""

    def __init__(self, model: IntViT, device="cpu"):
        self.model = model
        self._device = None
        if str(device) != "cpu":
            from hwvit.intvit.device import DeviceForward

            self._device = DeviceForward(model, device)
        self._linked = None  # the plan is made at the first call that runs fast

    def _plan(self) -> None:
        m = self.model
        self._linked = frozen.links(_arrays(m))
        small = (m.embed.cls_q, m.embed.pos_q)
        self._k = _Kernels({id(a): (a, NUMPY.const(a)) for a in small if a is not None})
        params = [block_params(block) for block in m.blocks]
        pos_adds = any(a is not None for a in m.layer_pos_adds)
        # the whole stack in one call where every block is one call and nothing comes between them
        self._stack = None if pos_adds or any(p is None for p in params) else blocks.Stack(params)
        self._blocks = [fast_block(b) if p is None else blocks.Stack([p]) for b, p in zip(m.blocks, params)]

    def __call__(self, x, trace: Trace | None = None, quantized: bool = False) -> np.ndarray:
        tr = trace or NO_TRACE
        if self._device is not None:
            return self._device(x, tr, quantized)
        if not tr.quiet or not isinstance(self.model, IntViT):
            # records, values or forcing, or a model that is not a ViT (an attention block): the golden
            # forward, layer by layer
            return self.model.forward(x, tr, quantized)
        if self._linked is None or not frozen.still(self._linked):  # none yet, or an array made writable
            self._plan()
        m, k = self.model, self._k
        pos = k.const(m.embed.pos_q) if m.embed.pos_q is not None else None
        h = m.embed(m.input(x, tr, quantized, k), pos, tr, k=k)
        if self._stack is not None:  # the last block gives only the tokens the readout reads
            h = blocks.encoder_blocks(h, self._stack, narrow=True, tokens=m.readout.tokens_read)
        else:
            for i, block in enumerate(self._blocks):
                if m.layer_pos_adds[i] is not None:  # ECG: the position table again before the block
                    h = m.embed.add_position(m.layer_pos_adds[i], h, pos, tr, f"layers.{i}.pos_add", k)
                if isinstance(block, blocks.Stack):
                    h = blocks.encoder_blocks(h, block, narrow=True)
                else:
                    h = block(h, tr, f"layers.{i}", k=k)
        return k.logits(m.readout(h, tr, k=k))


def run(model: IntViT, x, trace: Trace | None = None, quantized: bool = False, device="cpu") -> np.ndarray:
    """``Engine(model, device)(x, trace, quantized)`` once: for one call; a caller that runs a model many
    times keeps its Engine (the plan is made at construction)."""
    return Engine(model, device)(x, trace, quantized)


__all__ = ["Engine", "run"]
