"""Block records take every width and role from the contract; IntPool records its requant."""

from __future__ import annotations

import numpy as np
import pytest

from hwvit import ops
from hwvit.intvit.layers import IntPool
from hwvit.intvit.qparams import Requant
from hwvit.intvit.trace import Trace
from hwvit.ops.reference import mean_pool_ref, requant_ref
from hwvit.record import CONTRACT, KINDS, PARAMS, make_record


def test_contract_covers_every_kind():
    assert set(CONTRACT) == set(PARAMS) == set(KINDS)
    for kind, specs in CONTRACT.items():
        for spec in specs.values():
            names = [v for v in (spec.bits, spec.signed) if isinstance(v, str)]
            assert set(names) <= set(PARAMS[kind]), f"{kind}: format names an unknown parameter"


def test_make_record_takes_formats_from_the_contract():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 255, (3, 4), endpoint=True)
    w = rng.integers(-128, 127, (5, 4), endpoint=True)
    acc = ops.gemm(a, w, None, a_signed=False)
    y = ops.requant(acc, 1 << 30, 20, 6)
    params = {"m": 3, "k": 4, "n": 5, "a_signed": False, "out_bits": 6}
    rec = make_record(
        "gemm",
        "x.fc",
        params,
        {"a": 0.5, "y": 0.25},
        a=a,
        w=w,
        bias=np.zeros(5, int),
        multiplier=np.full(5, 1 << 30),
        shift=np.full(5, 20),
        acc=acc,
        y=y,
    )
    got = {n: (t.role, t.bits, t.signed, t.scale) for n, t in rec.tensors.items()}
    assert got == {
        "a": ("input", 8, False, 0.5),
        "w": ("parameter", 8, True, None),
        "bias": ("parameter", 32, True, None),
        "multiplier": ("parameter", 32, False, None),
        "shift": ("parameter", 6, False, None),
        "acc": ("output", 32, True, None),
        "y": ("output", 6, True, 0.25),
    }
    assert list(rec.tensors) == list(CONTRACT["gemm"])  # manifest order is the contract's
    assert rec.params == {**params, "rounding": "half_up"}
    assert all(t.data.dtype == np.int64 and t.data.flags.c_contiguous for t in rec.tensors.values())


def test_make_record_refuses_a_tensor_set_that_is_not_the_contract():
    with pytest.raises(AssertionError, match="contract"):
        make_record(
            "residual_add",
            "p",
            {"out_bits": 8, "mult_a": 1, "mult_b": 1, "shift": 1},
            a=np.zeros(2, int),
            y=np.zeros(2, int),
        )


def test_int_pool_records_a_requant_of_the_token_sums():
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 127, (2, 7, 5), endpoint=True)  # (B, T, D)
    pool = IntPool(s_in=0.1, requant=Requant(mult=1_234_567_890, shift=34, out_bits=8, s_out=0.02))
    tr = Trace(records=True, values=True)
    y = pool(x, tr, "pool")
    want = [mean_pool_ref(x[b].tolist(), pool.mult, pool.shift) for b in range(2)]
    assert y.tolist() == want
    (rec,) = tr.records
    assert rec.kind == "requant" and rec.path == "pool" and rec.params["out_bits"] == 8
    acc = rec.tensors["acc"].data
    assert acc.tolist() == x.sum(axis=1).reshape(-1).tolist()
    assert rec.tensors["y"].data.tolist() == requant_ref(acc.tolist(), pool.mult, pool.shift)
    assert rec.tensors["y"].scale == 0.02 and tr.values["pool"][1] == 0.02
    assert np.array_equal(tr.values["pool"][0], y)
