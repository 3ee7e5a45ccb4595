"""gemm / linear: the chosen backend vs plain-Python sums, unsigned offset path, bound checks.

Every backend on its own: test_gemm_backends.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hwvit import ops
from hwvit.ops.reference import gemm_ref, requant_ref


def _operands(rng, m, k, n, a_signed, edge):
    lo, hi = (-128, 127) if a_signed else (0, 255)
    a = rng.integers(lo, hi + 1, (m, k))
    w = rng.integers(-128, 128, (n, k))
    if edge:  # rows and columns pinned at the extremes
        a[0, :] = lo
        a[-1, :] = hi
        w[0, :] = -128
        w[-1, :] = 127
    return a, w


def test_gemm_matches_reference_on_random_shapes():
    rng = np.random.default_rng(10)
    outputs = 0
    for trial in range(90):
        m, k, n = (int(v) for v in rng.integers(1, 24, 3))
        a_signed = trial % 2 == 0
        a, w = _operands(rng, m, k, n, a_signed, edge=trial % 3 == 0)
        bias = None if trial % 4 == 1 else rng.integers(-(2**30), 2**30, n)
        got = ops.gemm(a, w, bias, a_signed=a_signed)
        assert got.dtype == np.int64 and got.shape == (m, n)
        want = gemm_ref(a.tolist(), w.tolist(), None if bias is None else bias.tolist())
        assert got.tolist() == want
        outputs += m * n
    # A few ViT-sized shapes, fewer rows so the Python reference stays fast.
    for m, k, n in [(3, 768, 64), (5, 192, 197), (2, 3072, 16)]:
        a, w = _operands(rng, m, k, n, True, edge=True)
        bias = rng.integers(-(2**20), 2**20, n)
        assert ops.gemm(a, w, bias).tolist() == gemm_ref(a.tolist(), w.tolist(), bias.tolist())
        outputs += m * n
    assert outputs >= 10_000


def test_gemm_extremes_many_outputs():
    """10k outputs at the worst-case magnitudes, checked against closed-form sums."""
    k = 4096
    for a_val, w_val in [(-128, -128), (127, -128), (-128, 127), (127, 127)]:
        a = np.full((50, k), a_val)
        w = np.full((50, k), w_val)
        bias = np.arange(50) * 1000 - 25_000
        got = ops.gemm(a, w, bias)
        assert np.array_equal(got, np.broadcast_to(k * a_val * w_val + bias, (50, 50)))
    a = np.full((20, k), 255)
    w = np.full((60, k), -128)
    assert np.array_equal(ops.gemm(a, w, a_signed=False), np.full((20, 60), k * 255 * -128))


def test_unsigned_path_equals_signed_reference():
    """a in [0, 255] through the (a - 128) offset equals the plain sum over the raw values."""
    rng = np.random.default_rng(11)
    for trial in range(20):
        m, k, n = (int(v) for v in rng.integers(1, 40, 3))
        a, w = _operands(rng, m, k, n, False, edge=trial % 2 == 0)
        bias = rng.integers(-(2**20), 2**20, n)
        got = ops.gemm(a, w, bias, a_signed=False)
        assert got.tolist() == gemm_ref(a.tolist(), w.tolist(), bias.tolist())


def test_batched_a_and_torch_inputs():
    rng = np.random.default_rng(12)
    a = rng.integers(-128, 128, (2, 3, 7, 16))
    w = rng.integers(-128, 128, (5, 16))
    got = ops.gemm(torch.from_numpy(a).to(torch.int8), torch.from_numpy(w).to(torch.int8))
    assert got.shape == (2, 3, 7, 5)
    for i in range(2):
        for j in range(3):
            assert got[i, j].tolist() == gemm_ref(a[i, j].tolist(), w.tolist())


def test_k_equal_one():
    """K = 1 (the ECG model's Linear(1 -> D)): torch 2.13's _int_mm is wrong there; gemm is not."""
    rng = np.random.default_rng(15)
    for m, n in [(3, 3), (20, 13), (1, 64), (197, 1)]:
        a = rng.integers(-128, 128, (m, 1))
        w = rng.integers(-128, 128, (n, 1))
        bias = rng.integers(-1000, 1000, n)
        assert ops.gemm(a, w, bias).tolist() == gemm_ref(a.tolist(), w.tolist(), bias.tolist())
        au = rng.integers(0, 256, (m, 1))
        assert ops.gemm(au, w, a_signed=False).tolist() == gemm_ref(au.tolist(), w.tolist())


def test_linear_is_requant_of_gemm():
    rng = np.random.default_rng(14)
    a, w = _operands(rng, 6, 40, 12, True, edge=True)
    bias = rng.integers(-(2**16), 2**16, 12)
    mult = rng.integers(2**30, 2**31, 12)
    shift = rng.integers(10, 30, 12)
    got = ops.linear(a, w, bias, mult, shift, out_bits=8)
    acc = gemm_ref(a.tolist(), w.tolist(), bias.tolist())
    assert got.tolist() == [requant_ref(row, mult.tolist(), shift.tolist(), 8) for row in acc]


def test_overflow_bound():
    # K * 255 * 128 + max|bias| < 2^31: K = 65 793 fits without bias, 65 794 does not.
    ok = ops.gemm(np.ones((1, 65_793), np.int64), np.ones((1, 65_793), np.int64))
    assert ok.tolist() == [[65_793]]
    with pytest.raises(OverflowError, match="2\\^31"):
        ops.gemm(np.ones((1, 65_794), np.int64), np.ones((1, 65_794), np.int64))
    # K = 32 896 with |bias| up to 2^30 - 1 is safe; a bias that crosses the bound is refused.
    k = 32_896
    ops.gemm(np.ones((1, k), np.int64), np.ones((1, k), np.int64), np.array([-(2**30) + 1]))
    with pytest.raises(OverflowError):
        ops.gemm(np.ones((1, k), np.int64), np.ones((1, k), np.int64), np.array([2**31 - k * 255 * 128]))


@pytest.mark.parametrize(
    "a, w, bias, a_signed",
    [
        (np.array([[128]]), np.array([[1]]), None, True),  # a outside signed 8
        (np.array([[-1]]), np.array([[1]]), None, False),  # a outside unsigned 8
        (np.array([[256]]), np.array([[1]]), None, False),
        (np.array([[1]]), np.array([[128]]), None, True),  # w outside int8
        (np.array([[1.0]]), np.array([[1]]), None, True),  # float a
        (np.array([[1, 2]]), np.array([[1]]), None, True),  # K mismatch
        (np.array([1]), np.array([[1]]), None, True),  # a must be at least 2-D
        (np.array([[1]]), np.array([1]), None, True),  # w must be 2-D
        (np.array([[1]]), np.array([[1]]), np.array([1, 2]), True),  # bias shape
        (np.array([[1]]), np.array([[1]]), np.array([2**31]), True),  # bias beyond int32
    ],
)
def test_gemm_rejects_bad_input(a, w, bias, a_signed):
    with pytest.raises(ValueError):
        ops.gemm(a, w, bias, a_signed=a_signed)


def test_batched_weights_equal_one_gemm_per_entry():
    """w of shape (B, N, K): attention's per-head Q.K^T and P.V in one call."""
    rng = np.random.default_rng(21)
    for a_signed in (True, False):
        lo, hi = (-128, 127) if a_signed else (0, 255)
        a = rng.integers(lo, hi, (3, 5, 16), endpoint=True)
        w = rng.integers(-128, 127, (3, 4, 16), endpoint=True)
        acc = ops.gemm(a, w, a_signed=a_signed)
        assert acc.shape == (3, 5, 4)
        for i in range(3):
            assert np.array_equal(acc[i], np.array(gemm_ref(a[i].tolist(), w[i].tolist())))
    with pytest.raises(ValueError, match="batched w"):
        ops.gemm(np.zeros((2, 5, 16), np.int64), np.zeros((3, 4, 16), np.int64))


def test_int8_operands_are_range_checked_in_one_pass():
    with pytest.raises(ValueError, match=r"a: values must lie in \[-128, 127\]"):
        ops.gemm(np.array([[128, 0]]), np.zeros((1, 2), np.int8))
    with pytest.raises(ValueError, match=r"a: values must lie in \[0, 255\]"):
        ops.gemm(np.array([[-1, 0]]), np.zeros((1, 2), np.int8), a_signed=False)
    with pytest.raises(ValueError, match="integer"):
        ops.gemm(np.zeros((1, 2), np.float32), np.zeros((1, 2), np.int8))
