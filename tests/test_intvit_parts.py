"""The integer model's parts: one forward over a kernels provider, quantization parameters as values."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
from test_intvit import inputs_for, small_model

from hwvit import bench
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
    assert np_calls.count("const") == 1 + (int_model.cls_q is not None)  # the position table narrowed once
    # qkv, qk, av, proj, fc1, fc2; separate q, k, v run as one joined call unless records keep theirs
    per_block = (1 if int_model.blocks[0].attn.qkv is not None or not records else 3) + 5
    products = 1 + depth * per_block + 2  # embed.proj ... pre_head.fc, head
    product = "gemm" if records else "linear"  # with records the accumulators are kept: gemm, then requant
    assert np_calls.count(product) == products and np_calls.count("layernorm") == 2 * depth + 2


def test_joined_qkv_gives_the_separate_projections_integers(ecg):
    """Without records the separate q, k, v projections run as one GEMM over stacked weights; with
    records each keeps its own call. Every traced value and the logits agree; a writable weight
    (which could change between calls) is never joined."""
    model, int_model = ecg
    attn = int_model.blocks[0].attn
    assert attn.qkv is None and attn._joined_qkv() is attn._joined_qkv()  # made once
    x = inputs_for(model, 2, 5).numpy()
    runs = {}
    for records in (True, False):
        tr = Trace(records=records, values=True)
        runs[records] = (int_model.run(x, tr, False, NUMPY), tr.values)
    (sep_logits, sep_values), (joined_logits, joined_values) = runs[True], runs[False]
    assert np.array_equal(sep_logits, joined_logits)
    assert {p for p in sep_values if p.endswith((".q", ".k", ".v"))} == {
        f"layers.{i}.attn.{n}" for i in range(len(int_model.blocks)) for n in "qkv"
    }
    assert sep_values.keys() == joined_values.keys()
    for path, (q, scale) in sep_values.items():
        assert np.array_equal(q, joined_values[path][0]), path
        assert np.array_equal(np.asarray(scale), np.asarray(joined_values[path][1])), path
    writable = copy.copy(attn.k)
    writable.w = np.array(attn.k.w)  # assigned after construction: writable
    assert dataclasses.replace(attn, k=writable)._joined_qkv() is None


def test_bench_gemm_timer_sees_the_forward_gemms(ecg):
    model, int_model = ecg
    x = inputs_for(model, 1, 4).numpy()
    box = [0.0]
    with bench._gemm_timer(box):
        int_model.forward(x)
    assert box[0] > 0.0


def test_attention_requants_are_values_and_keep_their_old_names(ecg):
    _, int_model = ecg
    at = int_model.blocks[0].attn
    assert isinstance(at.scores, Requant) and isinstance(at.context, Requant)
    assert (at.scores_mult, at.scores_shift, at.scores_bits, at.s_scores) == (
        at.scores.mult,
        at.scores.shift,
        at.scores.out_bits,
        at.scores.s_out,
    )
    assert (at.ctx_mult, at.ctx_shift, at.ctx_bits, at.s_ctx) == (
        at.context.mult,
        at.context.shift,
        at.context.out_bits,
        at.context.s_out,
    )
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
    assert m.patch_embed is m.embed.patch_embed and m.pos_add is m.embed.pos_add and m.pos_q is m.embed.pos_q
    assert m.head is m.readout.head and m.pre_head_fc is m.readout.pre_head_fc and m.pool is m.readout.pool
    assert m.norm is None  # ECG: the tokens the readout takes are the last block's output
    assert m.s_tokens == m.readout.s_in == m.blocks[-1].add2.s_out
    assert m.s_logits == m.head.s_out and m.s_features == m.pre_head_norm.s_out
    assert m.embed.s_tokens == m.embed.pos_add.s_out
    assert m.layer_pos_adds[0] is None and m.layer_pos_adds[1].s_b == m.embed.s_pos


def test_requant_checks_its_widths():
    with pytest.raises(AssertionError, match="out_bits 1"):
        Requant(mult=1 << 30, shift=31, out_bits=1, s_out=1.0)
    with pytest.raises(AssertionError, match="one shift per multiplier"):
        Requant(mult=np.ones(3, np.int64), shift=np.ones(2, np.int64), out_bits=8, s_out=1.0)
