"""hwvit.engine.Engine: how it runs a model (the stack in one call, block by block, attention's heads at
once, the golden forward where anything is traced) and how it stays right when a model could change.
That its integers are the golden forward's on every family, variant, provider and backend is
tests/test_engine_golden.py."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import numpy as np
import pytest
from test_intvit import SMALL, inputs_for, small_model

import hwvit.engine
from hwvit.engine import Engine, blocks, heads
from hwvit.intvit.model import IntReadout
from hwvit.intvit.trace import Trace
from hwvit.quant import QuantConfig, quantize_model


def _model(preset: str, **qconfig):
    model = small_model(preset)
    return quantize_model(model, inputs_for(model, 8, 1), QuantConfig(**qconfig)), inputs_for(model, 3, 2).numpy()


@pytest.mark.parametrize("preset", sorted(SMALL))
def test_the_engine_asks_the_last_block_for_the_tokens_its_readout_reads(preset, monkeypatch):
    """A class-token readout reads token 0 alone: the engine asks the stack for 1 token an image, a
    pooled one for all; the logits are those of the stack giving every token."""
    int_model, x = _model(preset)
    want = 1 if int_model.readout.pool is None else None
    assert int_model.readout.tokens_read == want
    asked = []
    real = blocks.encoder_blocks
    spy = lambda h, stack, narrow=False, tokens=None: asked.append(tokens) or real(h, stack, narrow, tokens)  # noqa: E731
    monkeypatch.setattr(blocks, "encoder_blocks", spy)
    out = Engine(int_model)(x)
    depth = len(int_model.blocks)  # ECG goes block by block (a position add between), each block all tokens
    assert asked == ([None] * depth if preset == "ecg1d" else [want])
    monkeypatch.setattr(IntReadout, "tokens_read", None)
    assert np.array_equal(Engine(int_model)(x), out)
    assert asked[-1:] == [None]


@pytest.mark.parametrize(
    "preset, qconfig, calls",
    [
        ("vit-b16", {}, "stack"),  # every block one call, the stack in one encoder_blocks call
        ("ecg1d", {}, "blocks"),  # a position add before every later block: one call a block
        ("vit-b16", {"gelu": "shiftgelu"}, "heads"),  # a row GELU: layer by layer, attention's heads at once
        ("vit-b16", {"softmax": "ibert"}, "layers"),  # another softmax: the golden layers
    ],
)
def test_the_engine_runs_fast_only_where_nothing_is_traced(preset, qconfig, calls, counted):
    """Untraced, the engine runs what the model's arithmetic allows (counted); with values or records
    it runs the golden forward (no fast call); the logits are the golden forward's in all."""
    int_model, x = _model(preset, **qconfig)
    depth = len(int_model.blocks)
    seen = {"stacks": counted(blocks, "encoder_blocks"), "heads": counted(heads, "attention_heads")}
    engine = Engine(int_model)

    def run(trace=None):
        before = {name: len(v) for name, v in seen.items()}
        out = engine(x, trace=trace)
        return out, tuple(len(v) - before[name] for name, v in seen.items())

    want = {"stack": (1, 0), "blocks": (depth, 0), "heads": (0, depth), "layers": (0, 0)}[calls]
    out, counts = run()
    assert counts == want and np.array_equal(out, int_model.forward(x))
    for trace in (Trace(values=True), Trace(records=True)):
        traced, counts = run(trace)
        assert counts == (0, 0) and np.array_equal(traced, out)


def test_a_model_is_immutable_once_built():
    """Its layers are frozen and its arrays read-only; dataclasses.replace makes an edited copy, which a
    new engine runs; copies of a model (deepcopy, pickle) are read-only models like it."""
    int_model, x = _model("vit-b16")
    fc2 = int_model.blocks[1].fc2
    with pytest.raises(dataclasses.FrozenInstanceError):
        fc2.bias = fc2.bias[::-1].copy()
    with pytest.raises(dataclasses.FrozenInstanceError):
        int_model.blocks = ()
    with pytest.raises(TypeError):
        int_model.blocks[0] = int_model.blocks[1]  # a tuple
    with pytest.raises(ValueError, match="read-only"):
        fc2.w[0, 0] = 1
    block = dataclasses.replace(int_model.blocks[1], fc2=dataclasses.replace(fc2, bias=fc2.bias[::-1].copy()))
    edited = dataclasses.replace(int_model, blocks=(int_model.blocks[0], block))
    assert not edited.blocks[1].fc2.bias.flags.writeable  # the copy's new array made read-only too
    out, changed = Engine(int_model)(x), Engine(edited)(x)
    assert not np.array_equal(changed, out) and np.array_equal(changed, edited.forward(x))
    for twin in (copy.deepcopy(int_model), pickle.loads(pickle.dumps(int_model))):
        assert not twin.blocks[0].fc1.w.flags.writeable and not twin.embed.pos_q.flags.writeable
        mult = twin.blocks[0].fc1.requant.mult  # per output channel: an array
        assert isinstance(mult, np.ndarray) and not mult.flags.writeable
        assert np.array_equal(Engine(twin)(x), out)


def test_the_engine_makes_its_plan_again_when_an_array_is_made_writable(counted):
    """The plan is made at the first untraced call and kept; an array of the model made writable (numpy
    lets an owner of its memory be written again) and written is seen at the next call, whose plan
    is made afresh: the logits are the golden forward's on the edited values. Quantized inputs too."""
    int_model, x = _model("ecg1d")  # separate q, k, v (joined by the plan) and a position table
    made = counted(hwvit.engine, "block_params")
    engine = Engine(int_model)
    first = engine(x)
    assert len(made) == len(int_model.blocks) and np.array_equal(first, int_model.forward(x))
    assert np.array_equal(engine(x), first) and len(made) == len(int_model.blocks)  # kept
    attn = int_model.blocks[0].attn
    assert attn.qkv is None  # the plan holds a joined copy of q, k, v
    w = attn.q.w
    w.flags.writeable = True
    w[:] = w[:, ::-1]
    edited = engine(x)
    assert len(made) == 2 * len(int_model.blocks)
    assert not np.array_equal(edited, first) and np.array_equal(edited, int_model.forward(x))
    pos = int_model.embed.pos_q  # narrowed once by the plan: narrowed again once writable
    pos.flags.writeable = True
    pos[:] = pos[::-1]
    assert np.array_equal(engine(x), int_model.forward(x))
    xq = int_model.quantize_input(x)
    assert np.array_equal(engine(xq, quantized=True), int_model.forward(xq, quantized=True))
