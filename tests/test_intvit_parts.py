"""The golden model's parts: one forward over a kernels provider, quantization parameters as values."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_intvit import inputs_for, small_model

from hwvit import bench
from hwvit.engine import Engine
from hwvit.intvit import Trace
from hwvit.intvit.device import TorchKernels
from hwvit.intvit.kernels import NUMPY
from hwvit.intvit.qparams import Requant
from hwvit.quant import quantize_model


class Logged:
    """A kernels provider that notes the name of every call and hands it to ``inner``."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def __getattr__(self, name):
        fn = getattr(self.inner, name)

        def call(*args, **kwargs):
            self.calls.append(name)
            return fn(*args, **kwargs)

        return call


@pytest.fixture(scope="module")
def ecg():
    model = small_model("ecg1d")  # no final norm, position added before every block, pre-head
    return model, quantize_model(model, inputs_for(model, 8, 1))


@pytest.mark.parametrize("records", [False, True])
def test_numpy_and_torch_run_the_same_kernel_calls_in_the_same_order(ecg, records):
    import torch

    model, int_model = ecg
    x = inputs_for(model, 2, 3).numpy()
    runs = {}
    for name, inner in (("numpy", NUMPY), ("torch", TorchKernels(torch.device("cpu")))):
        k = Logged(inner)
        with torch.no_grad():
            logits = int_model.run(x, Trace(records=records, values=True), False, k)
        runs[name] = (k.calls, logits)
    (np_calls, np_logits), (t_calls, t_logits) = runs["numpy"], runs["torch"]
    assert np_calls == t_calls
    assert np.array_equal(np_logits, t_logits) and np_logits.dtype == np.int64
    depth = len(int_model.blocks)
    pos_adds = 1 + sum(p is not None for p in int_model.layer_pos_adds)
    assert pos_adds == depth  # ECG: after the embedding and before every later block
    assert np_calls.count("softmax") == depth and np_calls.count("residual_add") == 2 * depth + pos_adds
    assert np_calls.count("const") == 1 + (int_model.embed.cls_q is not None)  # the position table narrowed once
    # q, k, v (or one qkv), qk, av, proj, fc1, fc2
    per_block = (1 if int_model.blocks[0].attn.qkv is not None else 3) + 5
    products = 1 + depth * per_block + 2  # embed.proj ... pre_head.fc, head
    product = "gemm" if records else "linear"  # with records the accumulators are kept: gemm, then requant
    assert np_calls.count(product) == products and np_calls.count("layernorm") == 2 * depth + 2


def test_bench_gemm_timer_sees_the_forward_gemms(ecg):
    model, int_model = ecg
    x = inputs_for(model, 1, 4).numpy()
    box = [0.0]
    with bench._gemm_timer(box):
        int_model.forward(x)
    assert box[0] > 0.0
    box = [0.0]
    with bench._gemm_timer(box):
        Engine(int_model)(x)  # one compiled call a block: its projections' time
    assert box[0] > 0.0


def test_attention_requants_are_values(ecg):
    _, int_model = ecg
    at = int_model.blocks[0].attn
    assert isinstance(at.scores, Requant) and isinstance(at.context, Requant)
    proj = at.qkv or at.q
    assert at.s_q == proj.s_out and at.s_k == (at.qkv or at.k).s_out and at.s_v == (at.qkv or at.v).s_out
    with pytest.raises(dataclasses.FrozenInstanceError):
        at.scores.mult = 1
    with pytest.raises(AssertionError, match="either a fused qkv"):
        dataclasses.replace(at, q=proj, qkv=proj)


def test_records_carry_the_requant_values(ecg):
    model, int_model = ecg
    tr = Trace(records=True)
    int_model.forward(inputs_for(model, 1, 5).numpy(), trace=tr)
    by_path = {r.path: r for r in tr.records}
    at = int_model.blocks[1].attn
    qk = by_path["layers.1.attn.h0.qk"]
    assert set(qk.tensors["multiplier"].data.tolist()) == {at.scores.mult}
    assert qk.params["out_bits"] == at.scores.out_bits and qk.tensors["y"].scale == at.scores.s_out
    av = by_path["layers.1.attn.h1.av"]
    assert set(av.tensors["shift"].data.tolist()) == {at.context.shift}
    fc1 = int_model.blocks[1].fc1
    rec = by_path["layers.1.mlp.fc1"]
    assert np.array_equal(rec.tensors["multiplier"].data, fc1.requant.mult) and fc1.mult is fc1.requant.mult
    assert rec.params["out_bits"] == fc1.out_bits == fc1.requant.out_bits


def test_embedding_and_readout_parts_answer_for_the_model(ecg):
    _, m = ecg
    e, r = m.embed, m.readout
    assert r.norm is None  # ECG: the tokens the readout takes are the last block's output
    assert r.s_tokens == r.s_in == m.blocks[-1].add2.s_out
    assert r.s_logits == r.head.s_out and r.s_features == r.pre_head_norm.s_out
    assert e.s_tokens == e.pos_add.s_out
    assert m.layer_pos_adds[0] is None and m.layer_pos_adds[1].s_b == e.s_pos


def test_requant_checks_its_widths():
    with pytest.raises(AssertionError, match="out_bits 1"):
        Requant(mult=1 << 30, shift=31, out_bits=1, s_out=1.0)
    with pytest.raises(AssertionError, match="one shift per multiplier"):
        Requant(mult=np.ones(3, np.int64), shift=np.ones(2, np.int64), out_bits=8, s_out=1.0)
