"""Narrow dtypes: kernels take int8/uint8/int16... arrays as they are and, with ``narrow=True``,
return the narrowest dtype holding their range; the values equal the int64 path's everywhere."""

from __future__ import annotations

import numpy as np
import pytest

from hwvit import ops
from hwvit.ops.checks import as_int_operand, narrow_dtype
from hwvit.quant import exp_table, gelu_table, layernorm_params

NARROWS = [np.int8, np.uint8, np.int16, np.int64]  # what the forward passes (int64: the API default)


@pytest.mark.parametrize(
    "lo, hi, want",
    [
        (-128, 127, np.int8),
        (0, 255, np.uint8),
        (0, 127, np.int8),
        (-129, 0, np.int16),
        (-1, 255, np.int16),
        (0, 65535, np.uint16),
        (-(2**15), 2**15, np.int32),
        (-(2**31), 2**31 - 1, np.int32),
        (0, 2**31, np.int64),
        (-(2**63), 2**63 - 1, np.int64),
    ],
)
def test_narrow_dtype(lo, hi, want):
    assert narrow_dtype(lo, hi) == np.dtype(want)


def test_narrow_dtype_past_int64():
    with pytest.raises(ValueError, match="no integer dtype holds"):
        narrow_dtype(0, 2**63)


def test_operand_kept_in_its_dtype_and_checked():
    x8 = np.array([-128, 0, 127], dtype=np.int8)
    assert as_int_operand(x8, "x", -128, 127) is x8  # the whole dtype is in range: as it is
    assert as_int_operand(np.array([0, 127], np.uint8), "x", -128, 127).dtype == np.uint8
    for bad in (np.array([0, 200], np.uint8), np.array([-129], np.int16), np.array([2**40])):
        with pytest.raises(ValueError, match=r"x: values must lie in \[-128, 127\]"):
            as_int_operand(bad, "x", -128, 127)
    assert as_int_operand(np.array([1], np.uint64), "x", -128, 127).dtype == np.int64
    with pytest.raises(ValueError, match="expected an integer array"):
        as_int_operand(np.array([1.0]), "x", -128, 127)


def _int8_in(rng, shape, dtype):
    lo = 0 if np.dtype(dtype).kind == "u" else -128
    return rng.integers(lo, 128, shape).astype(dtype)


@pytest.mark.parametrize("out_bits", [2, 8, 9, 16])
def test_requant_narrow(out_bits):
    rng = np.random.default_rng(out_bits)
    acc = np.concatenate([rng.integers(-(2**31), 2**31, 4000), [-(2**31), 2**31 - 1, 0, -1]])
    mult = rng.integers(1, 2**31, 4004)
    shift = rng.integers(0, 63, 4004)
    wide = ops.requant(acc, mult, shift, out_bits)
    narrow = ops.requant(acc, mult, shift, out_bits, narrow=True)
    assert wide.dtype == np.int64
    assert narrow.dtype == narrow_dtype(-(1 << (out_bits - 1)), (1 << (out_bits - 1)) - 1)
    assert narrow.tolist() == wide.tolist()
    assert wide.min() == -(1 << (out_bits - 1)) and wide.max() == (1 << (out_bits - 1)) - 1  # saturates both ways


@pytest.mark.parametrize("dtype", NARROWS)
@pytest.mark.parametrize("out_bits", [8, 12])
def test_residual_add_narrow(dtype, out_bits):
    rng = np.random.default_rng(3)
    a64 = _int8_in(rng, (37, 24), dtype).astype(np.int64)
    b64 = _int8_in(rng, (37, 24), dtype).astype(np.int64)
    want = ops.residual_add(a64, b64, 3 << 28, 5 << 27, 31, out_bits)
    got = ops.residual_add(a64.astype(dtype), b64.astype(dtype), 3 << 28, 5 << 27, 31, out_bits, narrow=True)
    assert got.dtype == narrow_dtype(-(1 << (out_bits - 1)), (1 << (out_bits - 1)) - 1)
    assert got.tolist() == want.tolist()
    bcast = ops.residual_add(a64.astype(dtype), b64[0].astype(np.int8), 3 << 28, 5 << 27, 31, out_bits, narrow=True)
    assert bcast.tolist() == ops.residual_add(a64, b64[0], 3 << 28, 5 << 27, 31, out_bits).tolist()


@pytest.mark.parametrize("dtype", NARROWS)
def test_layernorm_narrow(dtype):
    rng = np.random.default_rng(5)
    c = 48
    p = layernorm_params(rng.normal(1, 0.3, c), rng.normal(0, 0.2, c), 1e-5, c, 0.05, 0.03)
    x64 = _int8_in(rng, (3, 20, c), dtype).astype(np.int64)
    want = ops.layernorm(x64, **p)
    got = ops.layernorm(x64.astype(dtype), **p, narrow=True)
    assert got.dtype == np.int8 and got.shape == x64.shape
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize("dtype", NARROWS)
@pytest.mark.parametrize("out_bits", [8, 16])
def test_softmax_narrow(dtype, out_bits):
    rng = np.random.default_rng(7)
    x64 = _int8_in(rng, (4, 3, 50), dtype).astype(np.int64)
    table = exp_table(0.08)
    want = ops.softmax(x64, table, out_bits=out_bits)
    got = ops.softmax(x64.astype(dtype), table, out_bits=out_bits, narrow=True)
    assert got.dtype == narrow_dtype(0, (1 << out_bits) - 1)
    assert got.tolist() == want.tolist()
    assert (got.astype(np.int64).sum(-1) == (1 << out_bits) - 1).all()  # rows still sum to Q in int64


@pytest.mark.parametrize("dtype", NARROWS)
@pytest.mark.parametrize("out_bits", [8, 16])
def test_gelu_narrow(dtype, out_bits):
    rng = np.random.default_rng(9)
    table = gelu_table(0.05, 0.02 / (1 << (out_bits - 8)), 8, out_bits)
    x64 = _int8_in(rng, (6, 100), dtype).astype(np.int64)
    got = ops.gelu(x64.astype(dtype), table, narrow=True)
    assert got.dtype == narrow_dtype(int(table.min()), int(table.max()))
    assert got.tolist() == ops.gelu(x64, table).tolist()


def test_quantize_narrow():
    x = np.linspace(-10, 10, 1001)
    for bits in (4, 8, 12):
        got = ops.quantize(x, 0.05, bits, narrow=True)
        assert got.dtype == narrow_dtype(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        assert got.tolist() == ops.quantize(x, 0.05, bits).tolist()


def test_narrow_inputs_outside_the_range_are_refused():
    table = exp_table(0.08)
    with pytest.raises(ValueError, match=r"x: values must lie in \[-128, 127\]"):
        ops.softmax(np.array([[0, 200]], dtype=np.uint8), table)
    with pytest.raises(ValueError, match=r"a: values must lie in \[-128, 127\]"):
        ops.residual_add(np.array([-300], np.int16), np.array([0], np.int8), 1 << 30, 1 << 30, 31)
    with pytest.raises(ValueError, match=r"x: values must lie in \[-128, 127\]"):
        ops.gelu(np.array([128], np.int16), gelu_table(0.05, 0.02))
