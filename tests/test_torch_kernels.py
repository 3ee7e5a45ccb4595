"""hwvit.ops.torch_kernels equals the numba/numpy kernels: on CPU always, on CUDA under -m gpu.

The CUDA cases are marked ``gpu`` and deselected by default (pyproject addopts): without a GPU
they are not run at all, never counted as passes; run with ``-m gpu`` on a machine with one (they
fail there if CUDA is missing).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hwvit import ops
from hwvit.ops import torch_kernels as tk
from hwvit.quant import exp_shift_mult, exp_table

DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda", id="cuda", marks=pytest.mark.gpu),
]


def _on(device):
    from hwvit.intvit.device import resolve_device

    dev = resolve_device(device)
    return lambda x: torch.as_tensor(np.asarray(x, dtype=np.int64)).to(dev)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.cpu().numpy()


@pytest.mark.parametrize("device", DEVICES)
def test_requant_and_residual(device):
    t = _on(device)
    rng = np.random.default_rng(40)
    n = 0
    for trial in range(40):
        ch = int(rng.integers(1, 40))
        acc = rng.integers(-(2**31), 2**31, (300, ch))
        acc[0] = -(2**31)
        acc[1] = 2**31 - 1
        mult = rng.integers(0, 2**31, ch)
        shift = rng.choice([0, 1, 2, 31, 40, 62], ch) if trial % 2 else rng.integers(0, 63, ch)
        bits = int(rng.choice([2, 4, 8, 16]))
        assert np.array_equal(
            _np(tk.requant(t(acc), t(mult), t(shift), bits)),
            ops.requant(acc, mult, shift, bits),
        )
        m0, s0 = int(mult[0]), int(shift[0])
        assert np.array_equal(_np(tk.requant(t(acc), m0, s0, bits)), ops.requant(acc, m0, s0, bits))
        a, b = rng.integers(-128, 128, (300, ch)), rng.integers(-128, 128, (300, ch))
        ma, mb, s = (
            int(rng.integers(0, 2**31)),
            int(rng.integers(0, 2**31)),
            int(rng.integers(1, 63)),
        )
        assert np.array_equal(
            _np(tk.residual_add(t(a), t(b), ma, mb, s, bits)),
            ops.residual_add(a, b, ma, mb, s, bits),
        )
        n += acc.size
    assert n >= 10_000
    with pytest.raises(ValueError, match="acc"):
        tk.requant(t([2**31]), 1, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_gelu(device):
    t = _on(device)
    rng = np.random.default_rng(41)
    for bits in (8, 4, 12):
        table = rng.integers(-(2**15), 2**15, 1 << bits)
        x = rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), 12_000)
        assert np.array_equal(_np(tk.gelu(t(x), t(table), bits)), ops.gelu(x, table, bits))


@pytest.mark.parametrize("device", DEVICES)
def test_softmax(device):
    t = _on(device)
    rng = np.random.default_rng(42)
    rows = 0
    for n in (1, 2, 3, 7, 16, 64, 197):
        for s_in in (0.01, 0.04, 0.3):
            x = rng.integers(-128, 128, (500, n))
            x[0] = -128
            x[1] = 127
            x[2, :] = -128
            x[2, -1] = 127
            x[3] = rng.integers(-128, -120, n)
            for bits in (8, 4, 16):
                table = exp_table(s_in, int(rng.choice([256, 64, 1])))
                got = tk.softmax(t(x), t(table), bits)
                assert np.array_equal(_np(got), ops.softmax(x, table, out_bits=bits)), (
                    n,
                    s_in,
                    bits,
                )
            mult = exp_shift_mult(s_in)
            got = tk.softmax(t(x), None, 8, exp="shift", exp_mult=mult)
            assert np.array_equal(_np(got), ops.softmax(x, None, exp="shift", exp_mult=mult)), (n, s_in)
            rows += x.shape[0]
    assert rows >= 10_000


@pytest.mark.parametrize("device", DEVICES)
def test_layernorm_and_isqrt(device):
    t = _on(device)
    rng = np.random.default_rng(43)
    rows = 0
    for _trial in range(60):
        c = int(rng.choice([1, 2, 3, 16, 17, 64, 768]))
        spread = int(rng.choice([0, 1, 2, 10, 255]))
        lo = rng.integers(-128, 128 - spread, (200, 1))
        x = lo + rng.integers(0, spread + 1, (200, c))
        x[0] = -128
        x[1, :] = 127
        x[1, 0] = -128
        g = rng.integers(-(2**14) + 1, 2**14, c)
        b = rng.integers(-(2**30) + 1, 2**30, c)
        eps = int(rng.choice([0, 1, 1000, 2**61, int(rng.integers(0, 2**40))]))
        mult = int(rng.choice([0, 2**30, 2**31 - 1]))
        shift = int(rng.choice([0, 1, 31, 62, int(rng.integers(20, 45))]))
        bits = int(rng.choice([8, 4, 16]))
        got = tk.layernorm(t(x), t(g), t(b), eps, mult, shift, bits)
        assert np.array_equal(_np(got), ops.layernorm(x, g, b, eps, mult, shift, bits)), (c, eps, mult, shift)
        rows += x.shape[0]
    assert rows >= 10_000
    n = np.concatenate(
        [
            rng.integers(0, 2**62, 10_000),
            [0, 1, 2, 3, 4, (1 << 62) - 1, (2**31 - 1) ** 2, (2**31 - 1) ** 2 - 1],
        ]
    )
    assert np.array_equal(_np(tk.isqrt(t(n))), ops.isqrt(n))


@pytest.mark.parametrize("device", DEVICES)
def test_gemm(device):
    t = _on(device)
    rng = np.random.default_rng(44)
    outputs = 0
    for m, k, n in [
        (1, 1, 1),
        (3, 1, 5),
        (7, 2, 3),
        (17, 8, 8),
        (16, 9, 7),
        (33, 64, 40),
        (5, 1025, 9),
        (197, 768, 24),
    ]:
        for a_signed in (True, False):
            lo, hi = (-128, 127) if a_signed else (0, 255)
            a, w = rng.integers(lo, hi + 1, (m, k)), rng.integers(-128, 128, (n, k))
            a[0], w[0] = hi, -128
            bias = rng.integers(-(2**20), 2**20, n)
            got = tk.gemm(t(a), t(w), t(bias), a_signed=a_signed)
            assert np.array_equal(_np(got), ops.gemm(a, w, bias, a_signed=a_signed)), (
                m,
                k,
                n,
                a_signed,
            )
            ab, wb = (
                rng.integers(lo, hi + 1, (4, m, k)),
                rng.integers(-128, 128, (4, n, k)),
            )
            got = tk.gemm(t(ab), t(wb), a_signed=a_signed)
            assert np.array_equal(_np(got), ops.gemm(ab, wb, a_signed=a_signed)), (
                m,
                k,
                n,
                a_signed,
            )
            outputs += got.numel() + m * n
    assert outputs >= 10_000
    neg = np.full((20, 1024), -128)
    assert np.array_equal(_np(tk.gemm(t(neg), t(neg[:8]))), np.full((20, 8), 1 << 24))


@pytest.mark.parametrize("device", DEVICES)
def test_quantize_and_deferred_checks(device):
    dev = _on(device)(0).device
    rng = np.random.default_rng(45)
    for scale in (0.05, 1 / 3, 0.0123):
        x = np.concatenate(
            [
                rng.normal(0, 4, 10_000),
                np.arange(-300, 301) * scale / 2,
                [1e30, -1e30, 0.0],
            ]
        )
        x32 = x.astype(np.float32)  # the model's inputs are float32; both paths widen to float64
        for bits in (8, 4):
            got = tk.quantize(torch.from_numpy(x32).to(dev), scale, bits)
            assert np.array_equal(_np(got), ops.quantize(x32, scale, bits)), (
                scale,
                bits,
            )
    checks = tk.Checks()
    t = _on(device)
    tk.requant(t([1, 2]), 1, 0, 8, checks)
    tk.requant(t([2**31]), 1, 0, 8, checks)  # out of range: noted, not raised yet
    assert len(checks.flags) == 2
    with pytest.raises(ValueError, match="acc: values must lie"):
        checks.raise_if_any()
    checks.raise_if_any()  # cleared
