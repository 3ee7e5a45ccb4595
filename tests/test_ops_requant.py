"""requant, quantize: fast kernels vs plain-Python references and exact rationals."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

from hwvit import ops
from hwvit.ops.reference import requant_ref
from hwvit.quant import quantize_multiplier

EDGE_ACC = [-(2**31), -(2**31) + 1, -1, 0, 1, 2**30, 2**31 - 1]
EDGE_M = [0, 1, 2**30, 2**31 - 1]
EDGE_S = [0, 1, 31, 62]


def _random_acc(rng, shape):
    """Mix of full-range, small and edge accumulators."""
    full = rng.integers(-(2**31), 2**31, shape)
    small = rng.integers(-5000, 5000, shape)
    edge = rng.choice(EDGE_ACC, shape)
    pick = rng.integers(0, 3, shape)
    return np.where(pick == 0, full, np.where(pick == 1, small, edge))


def test_requant_per_tensor_matches_reference():
    rng = np.random.default_rng(1)
    cases = 0
    for out_bits in (2, 4, 8, 12, 16):
        for m in EDGE_M + [int(rng.integers(2**30, 2**31))]:
            for s in EDGE_S + [int(rng.integers(0, 63))]:
                acc = _random_acc(rng, 100)
                got = ops.requant(acc, m, s, out_bits)
                assert got.dtype == np.int64
                assert got.tolist() == requant_ref(acc.tolist(), m, s, out_bits), (m, s, out_bits)
                cases += acc.size
    assert cases >= 10_000


def test_requant_per_channel_matches_reference():
    rng = np.random.default_rng(2)
    cases = 0
    for _ in range(60):
        rows, chans = int(rng.integers(1, 8)), int(rng.integers(1, 40))
        acc = _random_acc(rng, (rows, chans))
        m = rng.choice(EDGE_M + list(rng.integers(2**30, 2**31, 4)), chans)
        s = rng.choice(EDGE_S + list(rng.integers(0, 63, 4)), chans)
        out_bits = int(rng.integers(2, 17))
        got = ops.requant(acc, m, s, out_bits)
        for r in range(rows):
            assert got[r].tolist() == requant_ref(acc[r].tolist(), m.tolist(), s.tolist(), out_bits)
        cases += acc.size
    # Also through torch tensors and int32 numpy inputs.
    acc = torch.tensor([[-(2**31), 2**31 - 1, 77]], dtype=torch.int64)
    assert ops.requant(acc, np.array([2**31 - 1, 2**31 - 1, 2**30], np.int32), 31, 16).tolist() == [
        requant_ref([-(2**31), 2**31 - 1, 77], [2**31 - 1, 2**31 - 1, 2**30], 31, 16)
    ]
    assert cases >= 1_000


def test_requant_equals_exact_rational_rounding():
    """y = sat(floor(acc * M / 2^s + 1/2)) computed in exact rationals, independently of shifts."""
    rng = np.random.default_rng(3)
    acc = _random_acc(rng, 4000)
    m = rng.integers(0, 2**31, 4000)
    s = rng.integers(0, 63, 4000)
    got = ops.requant(acc, m[0], s[0], 16)
    for a, y in zip(acc.tolist(), got.tolist()):
        q = Fraction(a * int(m[0]), 2 ** int(s[0]))
        want = max(-(2**15), min(2**15 - 1, int(np.floor(q + Fraction(1, 2)))))
        assert y == want
    # every element with its own M and s: per-channel multipliers over a (4000,) row
    per = ops.requant(acc, m, s, 16)
    for a, mm, ss, y in zip(acc.tolist(), m.tolist(), s.tolist(), per.tolist()):
        exact = Fraction(a * mm, 2**ss) + Fraction(1, 2)
        want = max(-(2**15), min(2**15 - 1, exact.numerator // exact.denominator))
        assert y == want


def test_requant_tracks_the_real_multiplier():
    """requant(acc, quantize_multiplier(m)) = round(acc * m) up to the 2^-31 multiplier error."""
    rng = np.random.default_rng(4)
    worst = 0.0
    for real in np.exp(rng.uniform(np.log(1e-6), np.log(4.0), 200)):
        mult, shift = quantize_multiplier(float(real))
        lim = int(2**15 / max(real, 1.0))
        acc = rng.integers(-lim, lim, 50)
        y = ops.requant(acc, mult, shift, 16)
        exact = acc * float(real)
        inside = np.abs(exact) < 2**15 - 1
        err = np.abs(y - exact)[inside]
        allowed = 0.5 + np.abs(exact[inside]) * 2.0**-30 + 1e-9
        assert np.all(err <= allowed), real
        worst = max(worst, float(err.max(initial=0)))
    assert worst <= 0.5 + 2**-14


@pytest.mark.parametrize(
    "args, error",
    [
        ((np.array([1.0]), 1, 0), ValueError),  # float accumulator
        ((np.array([2**31]), 1, 0), ValueError),  # outside signed 32
        ((np.array([1]), 2**31, 0), ValueError),  # multiplier beyond unsigned 31
        ((np.array([1]), -1, 0), ValueError),
        ((np.array([1]), 1, 63), ValueError),  # shift beyond 62
        ((np.array([[1, 2]]), np.array([1, 2, 3]), 0), ValueError),  # per-channel length
        ((np.array([[1, 2]]), np.array([[1, 2]]), 0), ValueError),  # 2-D multiplier
        ((np.array([True]), 1, 0), ValueError),  # bool is not an integer width
    ],
)
def test_requant_rejects_bad_input(args, error):
    with pytest.raises(error):
        ops.requant(*args)


@pytest.mark.parametrize("out_bits", [1, 17, 8.0])
def test_requant_rejects_bad_width(out_bits):
    with pytest.raises(ValueError, match="out_bits"):
        ops.requant(np.array([1]), 1, 0, out_bits)


def _quantize_ref(x: float, scale: float, bits: int) -> int:
    q = Fraction(x) / Fraction(scale)
    mag = abs(q) + Fraction(1, 2)
    r = (mag.numerator // mag.denominator) * (1 if q >= 0 else -1)
    return max(-(2 ** (bits - 1)), min(2 ** (bits - 1) - 1, r))


def test_quantize_rounds_half_away_and_saturates():
    x = np.array([0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999999999999994, -0.49999999999999994, 1e9, -1e9, 0.0])
    assert ops.quantize(x, 1.0).tolist() == [1, -1, 2, -2, 3, -3, 0, 0, 127, -128, 0]
    assert ops.quantize(torch.tensor([0.25, -0.75]), 0.5, bits=4).tolist() == [1, -2]
    rng = np.random.default_rng(5)
    for bits in (4, 8, 16):
        scale = float(rng.uniform(0.001, 0.1))
        vals = rng.normal(0, 2 ** (bits - 1) * scale * 0.6, 2000)
        vals[:50] = (rng.integers(-(2 ** (bits - 1)), 2 ** (bits - 1), 50) + 0.5) * scale  # near-ties
        got = ops.quantize(vals, scale, bits)
        assert got.dtype == np.int64
        want = [_quantize_ref(float(v), scale, bits) for v in vals]
        # x / scale is one float division: a value within an ulp of a tie may land either side.
        ties = np.abs(np.abs(vals / scale) % 1 - 0.5) < 1e-9
        assert np.array_equal(got[~ties], np.array(want)[~ties])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bits", [2, 8, 16, 32])
def test_quantize_kernel_equals_the_numpy_steps(dtype, bits, monkeypatch):
    """A scalar scale and a float32/float64 input take the one-pass numba kernel; a (1,) scale takes the
    numpy steps. The same integers for ties of both signs, values an ulp beside a tie, -0.0,
    subnormals, the saturation bounds and far past them, in a strided 3-D view, narrow or not."""
    rng = np.random.default_rng(bits)
    scale = float(rng.uniform(1e-3, 0.2))
    top = 2.0 ** (bits - 1)
    ties = ((rng.integers(-int(top), int(top), 300) + 0.5) * scale).astype(dtype)
    big, tiny = np.finfo(np.float32).max, np.finfo(dtype).smallest_subnormal  # x / scale stays finite
    edges = [0.0, -0.0, tiny, -tiny, top * scale, -top * scale, (top - 0.5) * scale, -(top + 0.5) * scale, big, -big]
    parts = [rng.normal(0, top * scale * 0.6, 3000), ties, np.nextafter(ties, big), np.nextafter(ties, -big), edges]
    vals = np.concatenate([np.asarray(p).astype(dtype) for p in parts])
    import importlib

    from hwvit.ops import _jit

    requant_module = importlib.import_module("hwvit.ops.requant")  # the module, not ops.requant the function
    calls = []
    spy = lambda *args: calls.append(args[1]) or _jit.quantize_flat(*args)  # noqa: E731
    monkeypatch.setattr(requant_module._jit, "quantize_flat", spy, raising=False)
    x = np.zeros((2, vals.size, 3), dtype)[1, :, ::2]  # strided view
    x[:, 0], x[:, 1] = vals, -vals
    for narrow in (False, True):
        fast = ops.quantize(x, scale, bits, narrow=narrow)
        steps = ops.quantize(x, np.array([scale]), bits, narrow=narrow)
        assert fast.dtype == steps.dtype and fast.shape == x.shape
        assert np.array_equal(fast, steps)
    assert int(fast.min()) == -int(top) and int(fast.max()) == int(top) - 1
    assert calls == [scale, scale]  # the scalar scale took the kernel, the (1,) scale the steps
    ops.quantize(vals[:100], scale, bits)  # a small array: the numpy steps, no numba import for it
    assert calls == [scale, scale]


def test_quantizing_parameters_imports_no_numba():
    """A testbench process quantizes a few parameters (LayerNorm's gamma and beta): the numpy steps,
    without importing numba (its import and kernel load cost seconds in every simulation)."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "from hwvit.quant import params\n"
        "p = params.layernorm_params(np.linspace(0.5, 2, 64), np.zeros(64), 1e-6, 64, 0.05, 0.1, 8)\n"
        "assert p['gamma'].shape == (64,)\n"
        "print('numba' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize(
    "x, scale",
    [(np.array([np.nan]), 1.0), (np.array([np.inf]), 1.0), (np.array([1.0]), 0.0), (np.array([1.0]), -1.0)],
)
def test_quantize_rejects_bad_input(x, scale):
    with pytest.raises(ValueError):
        ops.quantize(x, scale)
