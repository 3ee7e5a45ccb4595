"""ops.linear: the requant inside the GEMM tile of int16_avx2 and int8_vnni (vectorized, hw_linear) equals
requant(gemm) and the plain-Python reference: ties on both signs, shifts 0 and 62, multipliers 0
and 2^31 - 1, accumulators at the int32 bound, widths 2 to 16, tails off the 4 x 24 tile, threads."""

from __future__ import annotations

import numpy as np
import pytest

from hwvit import ops
from hwvit.formats import MULT_MAX, SHIFT_MAX
from hwvit.ops import gemm_backends as gb
from hwvit.ops.records import Strided
from hwvit.ops.reference import gemm_ref, requant_ref


@pytest.fixture
def backend(monkeypatch):
    """Run with HWVIT_GEMM naming a backend (int16_avx2 fuses the requant, float64 does not)."""

    def use(name: str) -> None:
        monkeypatch.setenv(gb.ENV, name)

    return use


@pytest.fixture(params=["int16_avx2", "int8_vnni"])
def fused(request, backend, vnni_here) -> str:
    """HWVIT_GEMM naming each backend that requantizes in its tile (int8_vnni emulated without VNNI)."""
    backend(request.param)
    return request.param


def _reference(a, w, bias, mult, shift, bits):
    acc = gemm_ref(a.tolist(), w.tolist(), bias.tolist())
    return [requant_ref(row, mult.tolist(), shift.tolist(), bits) for row in acc]


def _fused(a, w, bias, mult, shift, bits, a_signed=True):
    """ops.linear's fused path itself (gemm_backends.matmul_requant must not decline)."""
    y = ops.linear(a, w, bias, mult, shift, bits, a_signed=a_signed, narrow=True)
    assert y.dtype == (np.int8 if bits <= 8 else np.int16)
    return y


def test_the_fused_path_is_taken(backend, fused):
    a8, w8 = np.ones((2, 3), np.int8), np.ones((4, 3), np.int8)
    one = np.ones(4, np.int64)
    assert gb.matmul_requant(a8, w8, np.zeros(4, np.int64), one, one, -128, 127) is not None
    batched = gb.matmul_requant(a8[None], w8[None], np.zeros((1, 4), np.int64), one, one, -128, 127)
    assert batched is not None and batched.shape == (1, 2, 4)
    backend("float64")
    assert gb.matmul_requant(a8, w8, np.zeros(4, np.int64), one, one, -128, 127) is None


def test_ties_both_signs_every_shift(fused):
    """K = 1, a = 1, w = 1: acc = bias + 1 set exactly. acc * M = (2t + 1) 2^(s-1) are the ties of
    round half up (toward +inf on both signs), for every shift 1..62 and M = 1."""
    accs, shifts = [], []
    for s in range(0, SHIFT_MAX + 1):
        for t in (0, 1, 2, 5, -1, -2, -3, -6):
            v = (2 * t + 1) << (s - 1) if s else t
            if abs(v) < (1 << 31) - 40_000:
                accs.append(v)
                shifts.append(s)
        for v in ((1 << 31) - 40_000, -(1 << 31) + 40_000):  # the accumulator bound, both ends
            accs.append(v)
            shifts.append(s)
    n = len(accs)
    bias = np.array(accs, np.int64) - 1
    a, w = np.ones((1, 1), np.int64), np.ones((n, 1), np.int64)
    for mult in (np.ones(n, np.int64), np.full(n, MULT_MAX), np.zeros(n, np.int64)):
        for bits in (2, 8, 16):
            got = _fused(a, w, bias, mult, np.array(shifts), bits)
            assert got.tolist() == _reference(a, w, bias, mult, np.array(shifts), bits), (bits, int(mult[0]))


@pytest.mark.parametrize("bits", [2, 8, 9, 16])
@pytest.mark.parametrize("a_signed", [True, False])
def test_random_against_reference(fused, bits, a_signed):
    rng = np.random.default_rng(bits + 100 * a_signed)
    lo, hi = (-128, 127) if a_signed else (0, 255)
    for m, k, n in [(1, 1, 1), (5, 3, 25), (4, 2, 24), (7, 33, 49), (3, 200, 8), (9, 17, 23)]:
        a = rng.integers(lo, hi + 1, (m, k))
        a[0] = hi
        w = rng.integers(-128, 128, (n, k))
        w[0] = -128
        bias = rng.integers(-(2**24), 2**24, n)
        mult = rng.integers(0, MULT_MAX + 1, n)
        mult[0] = MULT_MAX
        shift = rng.integers(0, SHIFT_MAX + 1, n)
        got = _fused(a, w, bias, mult, shift, bits, a_signed)
        assert got.tolist() == _reference(a, w, bias, mult, shift, bits), (m, k, n)


@pytest.mark.parametrize("bits", [4, 8, 16])
def test_shifts_from_32_up_take_the_high_half_path(fused, backend, bits):
    """A panel whose every shift is >= 32 is requantized from the products' high halves (requant8_high:
    even and odd columns multiplied apart, then gathered): per-column multipliers and shifts, all
    different, catch a column taking another's; a panel with one shift of 31 takes the other path."""
    rng = np.random.default_rng(32 + bits)
    for m, k, n in [(5, 40, 24), (9, 33, 49), (4, 7, 73), (3, 300, 8)]:
        a = rng.integers(-128, 128, (m, k))
        a[0] = 127
        w = rng.integers(-128, 128, (n, k))
        w[0] = -128
        bias = rng.integers(-(2**24), 2**24, n)
        mult = rng.integers(0, MULT_MAX + 1, n)
        mult[:2] = MULT_MAX, 0
        shift = rng.integers(32, SHIFT_MAX + 1, n)
        shift[:2] = 32, SHIFT_MAX
        if n > 24:
            shift[30] = 31  # the second panel: the general path
        want = _reference(a, w, bias, mult, shift, bits)
        for name in (fused, "int8_avx2"):
            backend(name)
            assert _fused(a, w, bias, mult, shift, bits).tolist() == want, (name, m, k, n)


def test_large_threaded_equals_requant_of_gemm(fused):
    """Several row blocks and panel groups over the threads; per-tensor and per-channel parameters."""
    rng = np.random.default_rng(5)
    for m, k, n in [(601, 2001, 50), (1576, 768, 100), (197, 3072, 77)]:
        a = rng.integers(-128, 128, (m, k))
        w = rng.integers(-128, 128, (n, k)).astype(np.int8)
        bias = rng.integers(-(2**20), 2**20, n)
        for mult, shift in ((rng.integers(2**30, 2**31, n), rng.integers(20, 40, n)), (1 << 30, 33)):
            want = ops.requant(ops.gemm(a, w, bias), mult, shift, 8)
            got = ops.linear(a, w, bias, mult, shift, 8, narrow=True)
            assert got.dtype == np.int8 and np.array_equal(got, want), (m, k, n)
            wide = ops.linear(a, w, bias, mult, shift, 8)
            assert wide.dtype == np.int64 and np.array_equal(wide, want)


def test_every_backend_gives_the_same_integers(backend, vnni_here):
    rng = np.random.default_rng(8)
    a = rng.integers(-128, 128, (2, 37, 300))  # leading batch axes are kept
    w = rng.integers(-128, 128, (45, 300))
    bias = rng.integers(-(2**20), 2**20, 45)
    mult, shift = rng.integers(2**30, 2**31, 45), rng.integers(25, 35, 45)
    results = {}
    for name in ("int16_avx2", "int8_vnni", "float64", "int64"):
        backend(name)
        results[name] = ops.linear(a, w, bias, mult, shift, 8, narrow=True)
        assert results[name].shape == (2, 37, 45)
    assert np.array_equal(results["int16_avx2"], results["float64"])
    assert np.array_equal(results["int16_avx2"], results["int64"])
    assert np.array_equal(results["int8_vnni"], results["int64"])


def test_bad_parameters_are_refused_before_the_kernel(fused):
    a, w = np.ones((2, 3), np.int64), np.ones((4, 3), np.int64)
    with pytest.raises(ValueError, match="shift"):
        ops.linear(a, w, None, 1, SHIFT_MAX + 1)
    with pytest.raises(ValueError, match="multiplier"):
        ops.linear(a, w, None, MULT_MAX + 1, 1)
    with pytest.raises(ValueError, match="out_bits"):
        ops.linear(a, w, None, 1, 1, out_bits=17)
    with pytest.raises(OverflowError, match="int32 accumulator could overflow"):
        ops.linear(a, w, np.full(4, (1 << 31) - 1000), 1, 1)


@pytest.mark.parametrize("a_signed", [True, False])
@pytest.mark.parametrize("bits", [8, 12])
def test_batched_entries(backend, fused, a_signed, bits):
    """One product per entry (attention's Q.K^T and P.V): hw_linear per entry, with each entry's offset
    term; the bias, when given, applies to every entry (in ops.gemm as in ops.linear)."""
    rng = np.random.default_rng(40 + bits)
    lo, hi = (-128, 127) if a_signed else (0, 255)
    for entries, m, k, n in [(1, 1, 1, 1), (3, 5, 7, 25), (24, 197, 64, 197), (24, 197, 197, 64)]:
        a = rng.integers(lo, hi + 1, (entries, m, k))
        w = rng.integers(-128, 128, (entries, n, k))
        bias = rng.integers(-(2**20), 2**20, n)
        mult, shift = int(rng.integers(2**30, 2**31)), int(rng.integers(20, 30))
        for b in (None, bias):
            backend(fused)
            got = _fused(a, w, b, mult, shift, bits, a_signed)
            backend("int64")
            acc = ops.gemm(a, w, b, a_signed=a_signed)
            assert np.array_equal(got, ops.requant(acc, mult, shift, bits)), (entries, m, k, n)
            for e in (0, entries - 1):
                want = gemm_ref(a[e].tolist(), w[e].tolist(), None if b is None else b.tolist())
                assert acc[e].tolist() == want


def test_uint8_probabilities_are_packed_as_they_are(backend, fused):
    """P.V's a is uint8 softmax output: the quad kernel packs those bytes as they are (a - 128 + 128),
    with no pass to take 128 off; the int16 kernel widens them to 0..255. Either way the reference's
    integers, 2-D and batched, and past one call's K (the kernel declines; narrowed, then blocked)."""
    from hwvit.ops import native

    rng = np.random.default_rng(77)
    for shape_a, shape_w in [((5, 33), (25, 33)), ((12, 9, 21), (12, 7, 21)), ((2, 197, 197), (2, 64, 197))]:
        a = rng.integers(0, 256, shape_a).astype(np.uint8)
        a.reshape(-1)[:3] = (0, 255, 128)
        w = rng.integers(-128, 128, shape_w)
        mult, shift = 1 << 29, 30
        got = _fused(a, w, None, mult, shift, 8, a_signed=False)
        want = ops.requant(ops.gemm(a.astype(np.int64), w, a_signed=False), mult, shift, 8)
        assert np.array_equal(got, want), shape_a
    if fused == "int8_vnni":
        kind = native.vnni_kind()
        a = rng.integers(0, 256, (3, 10)).astype(np.uint8)
        assert np.array_equal(native._pack_a(a, kind), native._pack_a((a.astype(np.int16) - 128).astype(np.int8), kind))
    assert gb.takes_offset_uint8("int8_vnni") and gb.takes_offset_uint8("int16_avx2")
    assert not gb.takes_offset_uint8("int_mm") and not gb.takes_offset_uint8("float_blocked")
    a = rng.integers(0, 256, (5, 7)).astype(np.uint8)
    a[0, :3] = (0, 255, 128)
    packed = native._pack_a(a, native.KINDS["int16"]).view(np.int16).reshape(8, -1)  # rows to MR, K to pairs
    assert packed[:5, :7].tolist() == a.tolist() and not packed[5:].any() and not packed[:, 7:].any()
    spread = np.zeros((5, 14), np.uint8)
    spread[:, ::2] = a  # element (r, c) at r * 14 + c * 2: the strided packing path
    pa = np.empty_like(packed.view(np.int32).reshape(-1))
    native.pack_a_rows(native.KINDS["int16"], Strided(spread.ctypes.data, 0, 14, 2), 5, 7, 0, 8, pa.ctypes.data, 0)
    assert pa.view(np.int16).reshape(8, -1)[:5, :7].tolist() == a.tolist()
    k = native.K_MAX + 1  # K * 255 * 128 < 2^31 still; one call takes 2^16
    a = np.full((2, k), 255, np.uint8)
    w = np.full((3, k), -128, np.int64)
    got = ops.linear(a, w, None, 1, 16, 16, a_signed=False)
    assert np.array_equal(got, np.full((2, 3), (255 * -128 * k + (1 << 15)) >> 16))


def test_a_read_only_layer_is_planned_once_per_kernel(backend, vnni_here, monkeypatch):
    """A layer's read-only weights and parameters: W is packed once per kernel for its plans (the
    addresses of the packed W and the vectors kept with them), not at every call, and the plain
    product (ops.gemm, as traced forwards call it) uses the same packed W; a call on another fused
    backend makes that kernel's plan; every call, in any layout of a (strided, transposed, uint8), is
    the reference's."""
    from hwvit.ops import frozen, native

    packs = []
    real_pack = native.pack_w
    monkeypatch.setattr(native, "pack_w", lambda w8, kind: packs.append(kind) or real_pack(w8, kind))
    rng = np.random.default_rng(91)
    n, k = 50, 70
    w = frozen.read_only(rng.integers(-128, 128, (n, k)).astype(np.int8))
    bias = frozen.read_only(rng.integers(-(2**20), 2**20, n))
    mult = frozen.read_only(rng.integers(0, MULT_MAX + 1, n))
    shift = frozen.read_only(rng.integers(20, SHIFT_MAX + 1, n))
    wide = rng.integers(-128, 128, (9, 2 * k)).astype(np.int8)
    layouts = [wide[:, ::2], np.ascontiguousarray(wide[:, :k].T).T, wide[:, :k], wide[:1, :k]]
    for name in ("int8_avx2", "int16_avx2", "int8_vnni", "int8_avx2"):
        backend(name)
        for a in layouts:
            assert _fused(a, w, bias, mult, shift, 8).tolist() == _reference(a, w, bias, mult, shift, 8), name
        u = rng.integers(0, 256, (6, k)).astype(np.uint8)
        got = _fused(u, w, bias, mult, shift, 16, a_signed=False)
        assert got.tolist() == _reference(u, w, bias, mult, shift, 16), name
    # one packed W per kernel, shared by the plans of both out_bits and by the plain product's path
    assert sorted(packs) == sorted([native.KINDS["split7"], native.KINDS["int16"], vnni_here]), packs
    backend("int16_avx2")
    acc = ops.gemm(layouts[0], w, bias)
    assert acc.tolist() == gemm_ref(layouts[0].tolist(), w.tolist(), bias.tolist())
    assert len(packs) == 3, packs
