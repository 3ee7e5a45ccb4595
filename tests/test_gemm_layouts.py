"""Every GEMM backend is exact for every memory layout it can be handed, on the real CPU.

A grid of operand layouts (contiguous, Fortran order, transposed views, slices with gaps, negative
strides, broadcast rows of stride 0, size-1 dimensions of stride 0 as numpy's ``x[None, :]`` makes
them, read-only, batched with each) x shapes (M, K, N of 1, tails off every tile and quad, the float32
block limit) x values at the extremes, each against numpy int64 sums (which a plain-Python sum checks
on the small cases). torch 2.13's ``_int_mm`` on a Zen 4 was wrong for the stride-0 size-1 layout;
``gemm_backends.canonical`` hands it fresh strides. hwvit's C kernels run here for real where the
CPU has their flags and through the AVX2 emulation of ``vpdpbusd`` for the tile it lacks.
"""

from __future__ import annotations

import numpy as np
import pytest

from hwvit import ops
from hwvit.ops import cpu, native
from hwvit.ops import gemm_backends as gb
from hwvit.ops.reference import gemm_ref

pytestmark = pytest.mark.usefixtures("vnni_here")

SHAPES = [  # (M, K, N)
    (1, 1, 1),
    (1, 2, 1),
    (1, 5, 3),
    (3, 1, 1),
    (1, 64, 1),
    (5, 7, 29),
    (4, 24, 24),
    (9, 25, 23),
    (2, gb.F32_BLOCK, 3),
    (3, gb.F32_BLOCK + 1, 2),
    (1, 2 * gb.F32_BLOCK + 3, 25),
]


def _values(kind: str, rows: int, k: int, rng, role: str) -> np.ndarray:
    if kind == "random":
        return rng.integers(-128, 128, (rows, k)).astype(np.int8)
    if kind == "min":  # -128 x -128: the largest positive sums (2^24 at K = 1024)
        return np.full((rows, k), -128, np.int8)
    if kind == "max-min":  # 127 x -128: the most negative
        return np.full((rows, k), 127 if role == "a" else -128, np.int8)
    alt = np.where(np.arange(k) % 2 == 0, -128, 127).astype(np.int8)  # mixed signs
    return np.tile(alt, (rows, 1))


def _layout(x: np.ndarray, how: str) -> np.ndarray:
    """The values of ``x`` (R, K) in memory laid out as ``how``; broadcast layouts repeat row 0."""
    r, k = x.shape
    if how == "contiguous":
        return x
    if how == "fortran":
        return np.asfortranarray(x)
    if how == "transposed-view":
        return np.ascontiguousarray(x.T).T
    if how == "sliced":
        big = np.zeros((2 * r, k + 3), np.int8)
        big[::2, 1 : k + 1] = x
        return big[::2, 1 : k + 1]
    if how == "reversed":
        return np.ascontiguousarray(x[::-1, ::-1])[::-1, ::-1]
    if how == "broadcast-row":
        return np.broadcast_to(x[0], (r, k))
    if how == "size1-stride0":  # a size-1 dimension with stride 0, as x[None, :] or x[:, None] make it
        return x[0][None, :] if r == 1 else (x[:, 0][:, None] if k == 1 else x)
    if how == "read-only":
        y = x.copy()
        y.flags.writeable = False
        return y
    raise AssertionError(how)


LAYOUTS = [
    "contiguous",
    "fortran",
    "transposed-view",
    "sliced",
    "reversed",
    "broadcast-row",
    "size1-stride0",
    "read-only",
]
PAIRS = (
    [(la, "contiguous") for la in LAYOUTS] + [("contiguous", lw) for lw in LAYOUTS[1:]] + [(x, x) for x in LAYOUTS[1:]]
)


def _runs_here(name: str) -> str:
    why = gb.why_not_here(name)
    assert why is None, f"{name} does not run on this machine: {why}"
    return name


@pytest.mark.parametrize("name", gb.BACKENDS)
def test_every_layout_shape_and_extreme(name):
    _runs_here(name)
    rng = np.random.default_rng(7)
    checked = 0
    for m, k, n in SHAPES:
        for values in ("random", "min", "max-min", "alternating"):
            a, w = _values(values, m, k, rng, "a"), _values(values, n, k, rng, "w")
            for la, lw in PAIRS:
                av, wv = _layout(a, la), _layout(w, lw)
                want = np.asarray(av, np.int64) @ np.asarray(wv, np.int64).T
                got = gb.matmul(av, wv, name)
                assert got.dtype == np.int64 and np.array_equal(got, want), (name, (m, k, n), values, la, lw)
                checked += 1
    assert checked == len(SHAPES) * 4 * len(PAIRS)


def test_the_int64_reference_is_plain_python_sums():
    rng = np.random.default_rng(8)
    for m, k, n in SHAPES[:8]:
        a, w = rng.integers(-128, 128, (m, k)), rng.integers(-128, 128, (n, k))
        assert (a @ w.T).tolist() == gemm_ref(a.tolist(), w.tolist())


def _batched(x: np.ndarray, how: str) -> np.ndarray:
    """(B, R, K) values in a batched layout; broadcast ones repeat entry 0."""
    b = x.shape[0]
    if how == "contiguous":
        return x
    if how == "transposed-view":
        return np.ascontiguousarray(x.swapaxes(1, 2)).swapaxes(1, 2)
    if how == "broadcast-entry":
        return np.broadcast_to(x[0], x.shape)
    if how == "size1-stride0":
        return x[0][None] if b == 1 else x
    if how == "sliced":
        big = np.zeros((2 * b, *x.shape[1:]), np.int8)
        big[::2] = x
        return big[::2]
    raise AssertionError(how)


@pytest.mark.parametrize("name", gb.BACKENDS)
def test_batched_layouts(name):
    _runs_here(name)
    rng = np.random.default_rng(9)
    for b, m, k, n in [(1, 1, 1, 1), (1, 1, 64, 1), (3, 5, 7, 9), (2, 4, 1025, 25), (12, 1, 64, 3)]:
        a = rng.integers(-128, 128, (b, m, k)).astype(np.int8)
        w = rng.integers(-128, 128, (b, n, k)).astype(np.int8)
        for how in ("contiguous", "transposed-view", "broadcast-entry", "size1-stride0", "sliced"):
            for av, wv in ((_batched(a, how), w), (a, _batched(w, how)), (_batched(a, how), _batched(w, how))):
                want = np.asarray(av, np.int64) @ np.asarray(wv, np.int64).swapaxes(1, 2)
                assert np.array_equal(gb.matmul(av, wv, name), want), (name, (b, m, k, n), how)


@pytest.mark.parametrize("name", gb.BACKENDS)
def test_public_gemm_and_linear_take_any_layout(name, monkeypatch):
    """ops.gemm / ops.linear (the checked entry points the model uses) on the layouts that reached
    torch._int_mm wrong: a broadcast row and a size-1 dimension of stride 0."""
    _runs_here(name)
    monkeypatch.setenv(gb.ENV, name)
    rng = np.random.default_rng(10)
    row = rng.integers(-128, 128, 48)
    w = rng.integers(-128, 128, (5, 48))
    bias = rng.integers(-1000, 1000, 5)
    for a in (row[None, :], np.broadcast_to(row, (3, 48)), row[None, None, :]):
        want = np.asarray(a, np.int64) @ w.T + bias
        assert np.array_equal(ops.gemm(a, w, bias), want), (name, a.strides)
        y = ops.linear(a, w, bias, 1 << 20, 24)
        assert np.array_equal(y, ops.requant(want, 1 << 20, 24)), (name, a.strides)


def _native_kinds() -> list[str]:
    """The C tiles: each that this CPU runs, and the emulation standing in for the VNNI tile it lacks."""
    kinds = ["int16", "split7", "emulated", "amx_emulated"]
    kinds += [k for k in ("avxvnni", "avx512vnni") if not cpu.missing(k)]
    kinds += ["amx"] if native.amx_why() is None else []
    return kinds


@pytest.mark.parametrize("kind", ["int16", "split7", "avxvnni", "avx512vnni", "emulated", "amx", "amx_emulated"])
def test_native_tiles_every_layout(kind):
    """Each C tile directly (matmul_packed and the requantizing linear_packed): the real instruction
    where this CPU has it, else the emulation of the group-4 tile, which shares its packing and loop."""
    if kind not in _native_kinds():  # this CPU lacks the tile: its packing, offset and loop run emulated
        kind = "amx_emulated" if kind.startswith("amx") else "emulated"
    code = native.KINDS[kind]
    rng = np.random.default_rng(11)
    for m, k, n in SHAPES:
        a = rng.integers(-128, 128, (m, k)).astype(np.int8)
        w = rng.integers(-128, 128, (n, k)).astype(np.int8)
        bias = rng.integers(-(1 << 20), 1 << 20, n)
        for la, lw in PAIRS:
            av, wv = _layout(a, la), _layout(w, lw)
            want = np.asarray(av, np.int64) @ np.asarray(wv, np.int64).T + bias
            assert np.array_equal(native.matmul_packed(av, wv, bias=bias, kind=code), want), (kind, (m, k, n), la, lw)
            mult, shift = np.full(n, 1 << 20, np.int64), np.full(n, 26, np.int64)
            y = native.linear_packed(av, wv, None, bias, mult, shift, -128, 127, code)
            assert np.array_equal(y, ops.requant(want, 1 << 20, 26)), (kind, (m, k, n), la, lw)


def test_torch_kernels_int8_matmul_takes_any_layout():
    """The device path's GEMM (hwvit.ops.torch_kernels, here on CPU tensors): broadcast rows (stride 0),
    size-1 dimensions, transposed views and the padded shapes themselves, against int64 sums."""
    import torch

    from hwvit.ops import torch_kernels as tk

    rng = np.random.default_rng(12)
    for m, k, n in [(1, 8, 8), (17, 8, 8), (3, 5, 1), (24, 64, 16)]:
        a = torch.from_numpy(rng.integers(-128, 128, (m, k)).astype(np.int8))
        w = torch.from_numpy(rng.integers(-128, 128, (n, k)).astype(np.int8))
        cases = [
            (a, w),
            (a[:1].expand(m, k), w),  # every row the same memory: stride 0
            (a, w[:1].expand(n, k)),
            (a.t().contiguous().t(), w.t().contiguous().t()),
            (a[0][None, :].expand(1, k), w),
        ]
        for av, wv in cases:
            want = av.to(torch.int64) @ wv.to(torch.int64).t()
            for _ in range(3):  # the fault changed from call to call
                assert torch.equal(tk.int8_matmul(av, wv), want), ((m, k, n), av.stride(), wv.stride())
