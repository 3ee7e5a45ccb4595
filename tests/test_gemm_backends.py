"""Every GEMM backend equals plain-Python sums; the float32 K-block bound at its extremes; the probe."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import torch

from hwvit import ops
from hwvit.ops import frozen
from hwvit.ops import gemm_backends as gb
from hwvit.ops.records import Strided
from hwvit.ops.reference import gemm_ref

EXACT = list(gb.BACKENDS)
pytestmark = pytest.mark.usefixtures("vnni_here")  # int8_vnni runs here (emulated where the CPU has no VNNI)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A fresh probe cache and no choice made yet in this process."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(gb.ENV, raising=False)
    monkeypatch.setattr(gb, "_probe_result", None)
    monkeypatch.setattr(gb, "_chosen", None)
    return tmp_path


def _i8(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int8)


@pytest.mark.parametrize("name", EXACT)
def test_backend_matches_reference_on_random_shapes(name):
    rng = np.random.default_rng(20)
    for m, k, n in [
        (1, 1, 1),
        (3, 1, 5),
        (7, 2, 3),
        (17, 64, 9),
        (5, 1024, 4),
        (4, 1025, 6),
        (2, 2100, 3),
    ]:
        a, w = rng.integers(-128, 128, (m, k)), rng.integers(-128, 128, (n, k))
        got = gb.matmul(_i8(a), _i8(w), name)
        assert got.dtype == np.int64
        assert got.tolist() == gemm_ref(a.tolist(), w.tolist()), (name, m, k, n)


@pytest.mark.parametrize("name", EXACT)
def test_backend_batched_entries(name):
    rng = np.random.default_rng(21)
    a, w = rng.integers(-128, 128, (3, 6, 1030)), rng.integers(-128, 128, (3, 4, 1030))
    got = gb.matmul(_i8(a), _i8(w), name)
    for i in range(3):
        assert got[i].tolist() == gemm_ref(a[i].tolist(), w[i].tolist())


@pytest.mark.parametrize("name", EXACT)
@pytest.mark.parametrize("k", [gb.F32_BLOCK, gb.F32_BLOCK + 1, 3 * gb.F32_BLOCK])
def test_backend_extremes(name, k):
    """All -128 times all -128 is the largest product sum: 2^24 exactly at K = 1024."""
    neg, pos = np.full((2, k), -128, np.int8), np.full((3, k), 127, np.int8)
    assert np.array_equal(gb.matmul(neg, neg, name), np.full((2, 2), k << 14))
    assert np.array_equal(gb.matmul(pos, neg, name), np.full((3, 2), -127 * 128 * k))
    assert np.array_equal(gb.matmul(pos, pos, name), np.full((3, 3), 127 * 127 * k))
    mixed = np.where(np.arange(k) % 2 == 0, -128, 127).astype(np.int8)[None, :]  # mixed signs
    assert gb.matmul(mixed, mixed, name).tolist() == gemm_ref(mixed.tolist(), mixed.tolist())


def test_float32_block_is_the_limit():
    """2^24 + 1 (1024 products of 2^14 and one of 1) is no float32: one unsplit BLAS call loses it,
    the K-blocked backend (1024 + 1) gets it."""
    k = gb.F32_BLOCK + 1
    a = np.full((1, k), -128, np.int8)
    a[0, -1] = 1
    want = (1 << 24) + 1
    unsplit = int((a.astype(np.float32) @ a.astype(np.float32).T)[0, 0])
    assert unsplit != want  # the hazard is real: this test would catch a missing split
    for name in EXACT:
        assert int(gb.matmul(a, a, name)[0, 0]) == want, name
    # at the limit itself every partial sum is <= 2^24: exact in one block
    b = np.full((1, gb.F32_BLOCK), -128, np.int8)
    assert int((b.astype(np.float32) @ b.astype(np.float32).T)[0, 0]) == 1 << 24
    assert gb.F32_BLOCK * 128 * 128 == 1 << 24 and gb.F64_BLOCK * 128 * 128 == 1 << 53


@pytest.mark.parametrize("name", EXACT)
def test_ops_gemm_through_each_backend(name, monkeypatch):
    """Signed and unsigned a (offset by -128), bias, 2-D and batched, with HWVIT_GEMM naming the backend."""
    monkeypatch.setenv(gb.ENV, name)
    rng = np.random.default_rng(22)
    for a_signed in (True, False):
        lo, hi = (-128, 127) if a_signed else (0, 255)
        a = rng.integers(lo, hi + 1, (5, 1100))
        a[0] = hi
        a[1] = lo
        w = rng.integers(-128, 128, (4, 1100))
        w[0] = -128
        bias = rng.integers(-(2**20), 2**20, 4)
        got = ops.gemm(a, w, bias, a_signed=a_signed)
        assert got.tolist() == gemm_ref(a.tolist(), w.tolist(), bias.tolist())
        ab, wb = (
            rng.integers(lo, hi + 1, (2, 3, 70)),
            rng.integers(-128, 128, (2, 4, 70)),
        )
        got = ops.gemm(ab, wb, a_signed=a_signed)
        for i in range(2):
            assert got[i].tolist() == gemm_ref(ab[i].tolist(), wb[i].tolist())


def test_read_only_weights_are_converted_once_and_writable_ones_each_call():
    rng = np.random.default_rng(23)
    a = _i8(rng.integers(-128, 128, (4, 40)))
    w = _i8(rng.integers(-128, 128, (3, 40)))
    first = gb.matmul(a, w, "float_blocked")
    w[0] = 5  # a writable weight may change between calls: never served from a stale copy
    assert gb.matmul(a, w, "float_blocked").tolist() == gemm_ref(a.tolist(), w.tolist())
    assert not np.array_equal(first, gb.matmul(a, w, "float_blocked"))
    w.flags.writeable = False
    gb.matmul(a, w, "float_blocked")
    assert frozen.held(w)
    view = np.ones((3, 40), np.int8)
    ro = view[:]
    ro.flags.writeable = False  # read-only view of writable memory: not frozen
    assert not frozen.frozen(ro)


def test_probe_picks_an_exact_backend_and_caches_it(cache_dir, monkeypatch):
    res = gb.probe()
    assert res["backend"] in gb.BACKENDS and res["exact"][res["backend"]]
    assert set(res["times_ms"]) <= set(gb.BACKENDS) - {"int64"}
    stored = json.loads((cache_dir / "hwvit" / "gemm-probe.json").read_text())
    assert list(stored.values()) == [res]
    # A new process reads the cache instead of probing again.
    monkeypatch.setattr(gb, "_probe_result", None)
    monkeypatch.setattr(gb, "run_probe", lambda: pytest.fail("probed again"))
    assert gb.probe() == res
    assert gb.backend() == res["backend"]


def test_probe_times_the_forward_shapes_interleaved(cache_dir, monkeypatch):
    """The probe times one ViT-B/16 layer's products (linear and attention shapes), every backend once
    per round in a rotating order, and keeps each one's best round."""
    order = []
    monkeypatch.setattr(gb, "_layer_step", lambda name, case: order.append(name))
    small = (("a", (4, 8, 8)), ("b", (2, 4, 8, 4)))
    timed = gb.time_layer(["int64", "float64", "int16_avx2"], rounds=3, shapes=small, screen=float("inf"))
    warm, rounds = order[:6], order[6:]
    assert warm == ["int64"] * 2 + ["float64"] * 2 + ["int16_avx2"] * 2
    firsts = [rounds[i] for i in range(0, len(rounds), 2)]
    assert firsts == [
        "int64",
        "float64",
        "int16_avx2",
        "float64",
        "int16_avx2",
        "int64",
        "int16_avx2",
        "int64",
        "float64",
    ]
    assert set(timed["best"]) == {"int64", "float64", "int16_avx2"} and timed["rounds"] == 3
    assert all(timed["best"][n] <= timed["median"][n] for n in timed["best"])
    assert [name for name, _ in gb.FORWARD_SHAPES] == ["qkv", "proj", "fc1", "fc2", "q.k^T", "p.v"]


def _fake_clock(monkeypatch, cost):
    """time_layer's clock advanced only by the fake steps: ``cost(name, call)`` ms per step (no sleeps,
    so a busy machine cannot change what these tests see)."""
    clock, calls = [0.0], {}

    def step(name, case):
        calls[name] = calls.get(name, 0) + 1
        clock[0] += cost(name, calls[name]) / 1e3

    monkeypatch.setattr(gb, "_layer_step", step)
    monkeypatch.setattr(gb.time, "perf_counter", lambda: clock[0])


def test_probe_drops_a_backend_far_slower_after_two_rounds(monkeypatch):
    _fake_clock(monkeypatch, lambda name, call: 20.0 if name == "float64" else 1.0)
    timed = gb.time_layer(["int64", "float64"], rounds=4, shapes=(("a", (2, 2, 2)),))
    assert timed["dropped"] == ["float64"]
    assert timed["best"] == pytest.approx({"int64": 1.0, "float64": 20.0})


def test_one_stalled_round_drops_nothing(monkeypatch):
    """A core taken away for one round (the first timed one) must not drop the backend it hit."""
    _fake_clock(monkeypatch, lambda name, call: 50.0 if (name, call) == ("int16_avx2", 2) else 2.0)
    timed = gb.time_layer(["int64", "int16_avx2"], rounds=4, shapes=(("a", (2, 2, 2)),))
    assert timed["dropped"] == [] and timed["best"]["int16_avx2"] == pytest.approx(2.0)


def test_a_cached_choice_is_rechecked_not_trusted_forever(cache_dir, monkeypatch):
    """Older than RECHECK_S, or no longer exact here: measured again; otherwise reused."""
    calls = []

    def fake_probe():
        calls.append(1)
        return {"backend": "float64", "times_ms": {}, "exact": {}, "made": time.time()}

    monkeypatch.setattr(gb, "run_probe", fake_probe)
    first = gb.probe()
    assert len(calls) == 1
    monkeypatch.setattr(gb, "_probe_result", None)
    assert gb.probe() == first and len(calls) == 1  # fresh and exact: reused
    path = cache_dir / "hwvit" / "gemm-probe.json"
    stored = json.loads(path.read_text())
    for entry in stored.values():
        entry["made"] = time.time() - gb.RECHECK_S - 1
    path.write_text(json.dumps(stored))
    monkeypatch.setattr(gb, "_probe_result", None)
    gb.probe()
    assert len(calls) == 2  # too old: measured again
    monkeypatch.setattr(gb, "_probe_result", None)
    monkeypatch.setitem(gb._IMPL, "float64", lambda a8, w8: gb._int64(a8, w8) + 1)
    gb.probe()
    assert len(calls) == 3  # its backend is no longer exact here: measured again


def test_a_backend_passed_over_then_exact_now_brings_a_new_probe(cache_dir, monkeypatch):
    """An entry that excluded a backend as not exact (it raised or was wrong when the probe ran) is
    measured again once that backend is exact here: a failure since fixed does not keep it out of the
    choice for RECHECK_S. While it still fails, the entry is reused."""
    calls = []

    def fake_probe():
        calls.append(1)
        return {"backend": "float_blocked", "times_ms": {}, "exact": {"float64": len(calls) > 1}, "made": time.time()}

    def broken(*_args):
        raise TypeError("'NoneType' object is not callable")

    monkeypatch.setattr(gb, "run_probe", fake_probe)
    monkeypatch.setitem(gb._IMPL, "float64", broken)
    gb.probe()
    monkeypatch.setattr(gb, "_probe_result", None)
    assert gb.probe()["exact"] == {"float64": False} and len(calls) == 1  # still failing: reused
    monkeypatch.setitem(gb._IMPL, "float64", gb._float64)
    monkeypatch.setattr(gb, "_probe_result", None)
    assert gb.probe()["exact"] == {"float64": True} and len(calls) == 2  # exact now: measured again
    monkeypatch.setattr(gb, "_probe_result", None)
    gb.probe()
    assert len(calls) == 2


def test_probe_refuses_an_inexact_backend(cache_dir, monkeypatch):
    def off_by_one(a8, w8):
        return gb._int64(a8, w8) + 1

    monkeypatch.setitem(gb._IMPL, "float_blocked", off_by_one)
    monkeypatch.setitem(gb._IMPL, "float64", off_by_one)
    monkeypatch.setitem(gb._IMPL, "float_blocked_torch", off_by_one)
    monkeypatch.setitem(gb._IMPL, "int16_avx2", off_by_one)
    monkeypatch.setitem(gb._IMPL, "int8_avx2", off_by_one)
    monkeypatch.setitem(gb._IMPL, "int8_vnni", off_by_one)

    def broken(*_args):
        raise RuntimeError("no int8 kernel")

    monkeypatch.setattr(torch, "_int_mm", broken)
    res = gb.probe(refresh=True)
    assert res["exact"] == {
        "int_mm": False,
        "int8_vnni": False,
        "int8_avx2": False,
        "int16_avx2": False,
        "float_blocked": False,
        "float_blocked_torch": False,
        "float64": False,
        "int64": True,
    }
    assert res["backend"] == "int64"


def test_override_by_env_and_set_backend(cache_dir, monkeypatch):
    gb.set_backend("int64")
    assert gb.backend() == "int64"
    monkeypatch.setenv(gb.ENV, "float64")
    assert gb.backend() == "float64"
    assert gb.describe().startswith("float64 (HWVIT_GEMM=float64); CPU ")
    monkeypatch.setenv(gb.ENV, "fastest")
    with pytest.raises(ValueError, match="unknown GEMM backend 'fastest'"):
        gb.backend()
    with pytest.raises(ValueError, match="unknown GEMM backend"):
        gb.set_backend("blas")


def test_torch_float_backend_refuses_reduced_precision():
    a = np.ones((2, 8), np.int8)
    old = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("medium")
        with pytest.raises(RuntimeError, match="highest"):
            gb.matmul(a, a, "float_blocked_torch")
    finally:
        torch.set_float32_matmul_precision(old)
    assert gb.matmul(a, a, "float_blocked_torch").tolist() == [[8, 8], [8, 8]]


def test_cpu_info_names_model_and_capability():
    info = gb.cpu_info()
    assert info["model"] and info["capability"] == torch.backends.cpu.get_cpu_capability()


# ---------------------------------------------------------------- hwvit's C kernels (int16 pairs, int8 quads)


@pytest.fixture
def fresh_native(tmp_path, monkeypatch):
    """The native module as in a new process, building into an empty cache."""
    from hwvit.ops import native

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "_why", None)
    monkeypatch.setattr(native, "_cpu_vnni", None)
    return native


def test_kernels_build_here():
    """This project's machines are x86-64 with AVX2 and gcc (Verilator needs it): the kernels must build."""
    from hwvit.ops import native

    assert native.unavailable() is None
    assert native._load().hw_vnni_built() == 1  # gcc 12 knows the VNNI targets


@pytest.mark.parametrize("bias", [False, True])
def test_kernel_tiles_tails_and_threads(bias, kind):
    """Row counts off the 4-row tile, columns off the 24-column panel, K off the pair and the quad, one
    thread and several."""
    from hwvit.ops import native

    rng = np.random.default_rng(30)
    shapes = [(1, 1, 1), (5, 3, 25), (4, 2, 24), (3, 5, 7), (7, 33, 49), (197, 65, 200), (130, 385, 100)]
    for m, k, n in [*shapes, (2, 6, 3), (601, 2001, 50)]:
        a = _i8(rng.integers(-128, 128, (m, k)))
        a[0, 0] = -128
        w = _i8(rng.integers(-128, 128, (n, k)))
        w[0, -1] = -128
        b = rng.integers(-(2**30), 2**30, n) if bias else None
        got = native.matmul_packed(a, w, bias=b, kind=kind)
        want = gb._int64(a, w) + (0 if b is None else b)
        assert got.dtype == np.int64 and np.array_equal(got, want), (m, k, n)
    assert 130 * 385 * 100 >= native._SMALL  # the last two shapes are split over the threads
    assert native._load().hw_row_block(kind, 601, 2001) < 601  # and the last into several row blocks


def test_kernel_row_blocks_are_equal_tiles_within_the_cache_budget(kind):
    from hwvit.ops import native

    lib = native._load()
    amx = kind in (native.KINDS["amx"], native.KINDS["amx_emulated"])
    tile = 32 if amx else lib.hw_mr()  # the AMX block is two 16-row tiles
    for m, k in [(1, 1), (197, 768), (197, 3072), (12608, 768), (12608, 3072), (5, 200000)]:
        rows = lib.hw_row_block(kind, m, k)
        blocks = -(-m // rows)
        row_bytes = lib.hw_packed_a_size(kind, 1, k) // tile * 4  # one packed row (K padded to its group)
        if kind == native.KINDS["split7"]:  # the quads only: a row's outlier list is read once per panel
            row_bytes = -(-k // 4) * 4
        assert row_bytes >= k and (row_bytes % 64 == 0 if amx else True)
        assert rows % tile == 0 and rows >= tile
        assert rows * row_bytes <= 384 * 1024 or rows == tile
        assert (blocks - 1) * rows < m <= blocks * rows and blocks * rows - m < blocks * tile  # equal
    assert lib.hw_row_block(kind, 197, 768) >= 197  # 197 x 768 fits one block: W is read once


def test_kernel_batched_split_over_threads(kind):
    from hwvit.ops import native

    rng = np.random.default_rng(31)
    a = _i8(rng.integers(-128, 128, (24, 197, 64)))
    w = _i8(rng.integers(-128, 128, (24, 197, 64)))
    assert 197 * 197 * 64 >= native._SMALL
    assert np.array_equal(native.matmul_packed(a, w, kind=kind), gb._int64(a, w))
    odd = (a[:5, :9, :7], w[:5, :30, :7])  # K off the quad, N off the panel, per entry column sums
    assert np.array_equal(native.matmul_packed(*odd, kind=kind), gb._int64(*odd))
    with pytest.raises(ValueError, match="no bias"):
        native.matmul_packed(a, w, bias=np.zeros(197, np.int64), kind=kind)


def test_packed_a_rows_are_the_layout_in_any_row_ranges(kind):
    """hw_pack_a_rows writes rows [r0, r1) of a packed A from a matrix in any layout (element (r, c) at
    a[r * sm + c * sk]: contiguous, transposed, every other row and column reversed, a broadcast row):
    row r < M is a's row (int16 values, or the bytes a XOR 0x80) zero-padded to the packed width,
    rows past M are zeros. Packed in ranges that split the blocks anyhow (threads do that), the same
    bytes; and hw_pack_w_strided packs a strided W as the contiguous packer packs its copy."""
    from hwvit.ops import native

    lib = native._load()
    rng = np.random.default_rng(32)
    for m, k in [(1, 1), (5, 3), (33, 7), (197, 64), (65, 197)]:
        base = _i8(rng.integers(-128, 128, (2 * k, 2 * m)))
        layouts = {
            "contiguous": _i8(rng.integers(-128, 128, (m, k))),
            "transposed": base.T[:m, :k],
            "strided, reversed": base.T[::-2, ::-2],
            "broadcast row": np.broadcast_to(base.T[0, :k], (m, k)),
        }
        for layout, a in layouts.items():
            assert a.shape == (m, k), layout
            padded, words = lib.hw_rows_padded(kind, m), lib.hw_packed_a_size(kind, m, k)
            if kind == native.KINDS["split7"]:
                _check_split7_packing(lib, a, padded, words, rng)
                continue
            width = words // padded  # int32 words of one packed row
            if kind == native.KINDS["int16"]:
                want = np.zeros((padded, 2 * width), np.int16)
                want[:m, :k] = a
            else:
                want = np.zeros((padded, 4 * width), np.uint8)
                want[:m, :k] = a.view(np.uint8) ^ 0x80
            cuts = sorted({0, padded, *rng.integers(0, padded + 1, 3).tolist()})
            got = np.full(words, -1, np.int32)  # every word must be written
            for r0, r1 in zip(cuts, cuts[1:]):
                native.pack_a_rows(kind, Strided(a.ctypes.data, 0, *a.strides), m, k, r0, r1, got.ctypes.data, 0x80)
            assert got.view(want.dtype).tolist() == want.reshape(-1).tolist(), (m, k, layout)
            assert np.array_equal(got, native._pack_a(np.ascontiguousarray(a), kind))  # the serial packer
            w_got = np.full(lib.hw_packed_w_size(kind, m, k), -1, np.int32)
            lib.hw_pack_w_strided(kind, a.ctypes.data, m, k, *a.strides, w_got.ctypes.data)
            assert np.array_equal(w_got, native.pack_w(np.ascontiguousarray(a), kind)), (m, k, layout)


def _split7_rows(a: np.ndarray, signed: bool) -> tuple[np.ndarray, list[tuple[list[int], list[int]]]]:
    """What the split7 packing holds for a: the 7-bit part of each element (clamp(a, -64, 63) + 64, or
    min(a, 127) unsigned) and each row's outliers, positive and negative, as (k << 16) | |a2| in
    ascending k, a2 = a - clamp."""
    lo, hi = (-64, 63) if signed else (0, 127)
    a = np.asarray(a, np.int64)
    a1 = np.clip(a, lo, hi)
    rows = []
    for r, row in enumerate(a):
        odd = [(int(c), int(row[c] - a1[r, c])) for c in np.flatnonzero(row != a1[r])]
        rows.append(([(c << 16) | d for c, d in odd if d > 0], [(c << 16) | -d for c, d in odd if d < 0]))
    return (a1 - lo).astype(np.uint8), rows


def _split7_lists(packed: np.ndarray, padded: int, ng: int, k: int) -> list[tuple[list[int], list[int]]]:
    """Each padded row's positive and negative outlier entries from a packed split7 A, ascending k."""
    tails = packed[padded * ng :].reshape(padded, k + 2)
    out = []
    for row in tails:
        pos, neg = int(row[0]), int(row[1])
        assert pos + neg <= k
        out.append(
            (sorted(row[2 : 2 + pos].view(np.uint32).tolist()), sorted(row[k + 2 - neg :].view(np.uint32).tolist()))
        )
    return out


def _check_split7_packing(lib, a, padded, words, rng):
    """The split7 layout of a (any strides) from row ranges packed in any order: the quads, then per
    padded row its outlier counts and entries (the rest of each row's K + 2 slots is scratch)."""
    from hwvit.ops import native

    m, k = a.shape
    ng = -(-k // 4)
    assert words == padded * ng + padded * (k + 2)
    sevens, lists = _split7_rows(a, signed=True)
    cuts = sorted({0, padded, *rng.integers(0, padded + 1, 3).tolist()})
    got = np.full(words, -1, np.int32)
    a_at = Strided(a.ctypes.data, 0, *a.strides)
    for r0, r1 in zip(cuts, cuts[1:]):
        native.pack_a_rows(native_kind_split7(), a_at, m, k, r0, r1, got.ctypes.data, 0x80)
    quads = got[: padded * ng].view(np.uint8).reshape(padded, 4 * ng)
    want = np.zeros((padded, 4 * ng), np.uint8)
    want[:m, :k] = sevens
    assert quads.tolist() == want.tolist()
    assert _split7_lists(got, padded, ng, k) == lists + [([], [])] * (padded - m)


def native_kind_split7() -> int:
    from hwvit.ops import native

    return native.KINDS["split7"]


def test_split7_splits_at_the_seven_bit_edges():
    """int8 a at -128, -65, -64, 63, 64, 127 and uint8 a at 127, 128, 255: the 7-bit part and the outlier
    lists are what clamp(a, -64, 63) (min(a, 127)) says, and the product is exact at K = 2^16 of the
    worst values: all outliers (a = -128, w = -128: 2^30), a = 127 with w = -128, none (a = 63), and
    outliers of both signs in one row."""
    from hwvit.ops import native

    lib = native._load()
    split7 = native.KINDS["split7"]
    a = np.array([[-128, -65, -64, 63, 64, 127, 0, -1]], np.int8)
    packed = native._pack_a(a, split7)
    padded, ng = lib.hw_rows_padded(split7, 1), 2
    assert packed[: padded * ng].view(np.uint8)[:8].tolist() == [0, 0, 0, 127, 127, 127, 64, 63]
    pos, neg = _split7_lists(packed, padded, ng, 8)[0]
    assert pos == [(4 << 16) | 1, (5 << 16) | 64] and neg == [(0 << 16) | 64, (1 << 16) | 1]
    u = np.array([[127, 128, 255, 0]], np.uint8)
    packed = native._pack_a(u, split7)
    assert packed[:padded].view(np.uint8)[:4].tolist() == [127, 127, 127, 0]
    assert _split7_lists(packed, padded, 1, 4)[0] == ([(1 << 16) | 1, (2 << 16) | 128], [])
    k = native.K_MAX
    w = np.full((3, k), -128, np.int8)
    w[1] = 127
    cases = [
        (-128, [2**30, -128 * 127 * k]),
        (127, [-127 * 128 * k, 127 * 127 * k]),
        (63, [-63 * 128 * k, 63 * 127 * k]),
    ]
    for value, want in cases:
        got = gb.matmul(np.full((2, k), value, np.int8), w, "int8_avx2")
        assert got[:, :2].tolist() == [want] * 2 and got[:, 2].tolist() == [want[0]] * 2
    mixed = np.resize(np.array([-128, 127, 5, -70, 100], np.int8), (2, k))
    assert np.array_equal(gb.matmul(mixed, w, "int8_avx2"), gb._int64(mixed, w))
    uu = np.full((2, k), 255, np.uint8)
    y = native.linear_packed(
        uu, w, None, np.zeros(3, np.int64), np.ones(3, np.int64), np.full(3, 16), -(2**15), 2**15 - 1, split7
    )
    assert y[:, 1].tolist() == [(255 * 127 * k + (1 << 15)) >> 16] * 2


def test_linear_packed_packs_in_the_kernel(kind):
    """native.linear_packed packs A inside its parallel loop (row ranges by all threads for one product;
    each entry's A, and its W, in that entry's job for a batch): the requantized reference on every
    kernel, M off the 32-row packing step, K off the quad, int8 a and unsigned uint8 a, a batch's bias
    per entry and shared."""
    from hwvit.ops import native

    rng = np.random.default_rng(33)
    for a_shape, n in [((197, 768), 70), ((33, 5), 3), ((70, 130), 26), ((12, 197, 64), 197), ((3, 9, 21), 7)]:
        a = _i8(rng.integers(-128, 128, a_shape))
        w = _i8(rng.integers(-128, 128, (*a_shape[:-2], n, a_shape[-1])))
        bias = rng.integers(-(2**20), 2**20, (*a_shape[:-2], n))
        mult, shift = rng.integers(1 << 28, 1 << 31, n), rng.integers(24, 31, n)
        want = ops.requant(gb._int64(a, w) + (bias[:, None, :] if a.ndim == 3 else bias), mult, shift, 8)
        got = native.linear_packed(a, w, None, bias, mult, shift, -128, 127, kind)
        assert np.array_equal(got, want), a_shape
        if a.ndim == 3:  # one (N,) bias row that every entry shares (attention's, without an offset)
            shared = ops.requant(gb._int64(a, w) + bias[0], mult, shift, 8)
            assert np.array_equal(native.linear_packed(a, w, None, bias[0], mult, shift, -128, 127, kind), shared)
        # unsigned bytes (P.V's probabilities) multiplied as they are (int16: zero-extended)
        u = (a.view(np.uint8) ^ 0x80).astype(np.uint8)  # 0..255, every byte value
        acc = gb._int64(u.astype(np.int64), w) + (bias[:, None, :] if a.ndim == 3 else bias)
        got = native.linear_packed(u, w, None, bias, mult, shift, -128, 127, kind)
        assert np.array_equal(got, ops.requant(acc, mult, shift, 8)), a_shape
    # attention's operands as the forward hands them: per-head views of one (N, 3, H, hd) output
    y = _i8(rng.integers(-128, 128, (197, 3, 12, 64)))
    q, k_, v_t = y[:, 0].transpose(1, 0, 2), y[:, 1].transpose(1, 0, 2), y[:, 2].transpose(1, 2, 0)
    p = rng.integers(0, 256, (12, 197, 197)).astype(np.uint8)
    for a, w in [(q, k_), (p, v_t), (q[:, ::-3], k_[::-1, 5:])]:
        assert not (a.flags.c_contiguous and w.flags.c_contiguous)
        n = w.shape[1]
        bias = rng.integers(-(2**20), 2**20, (12, n))
        mult, shift = rng.integers(1 << 28, 1 << 31, n), rng.integers(20, 31, n)
        want = ops.requant(gb._int64(a, w) + bias[:, None, :], mult, shift, 8)
        assert np.array_equal(native.linear_packed(a, w, None, bias, mult, shift, -128, 127, kind), want)


def test_packed_operands_start_on_a_cache_line(kind):
    """W packed once per layer starts on a 64-byte line (the AMX kernel took 1.5x as long 16 bytes
    past one); a call's scratch is lined up in the compiled code, with room for all of it after the
    line-up; the products made that way are the reference's (test_linear_packed_packs_in_the_kernel)."""
    from hwvit.ops import native

    rng = np.random.default_rng(35)
    for shape in [(1, 1), (24, 64), (25, 65), (70, 768), (3, 7, 130)]:
        w = _i8(rng.integers(-128, 128, shape))
        for _ in range(4):  # numpy's own alignment is 16 bytes: several allocations, each on a line
            assert native.pack_w(w, kind).ctypes.data % 64 == 0, shape
    for count in (1, 5, 16, 17, 1000, 43008):
        x = native._words(count)
        assert x.ctypes.data % 64 == 0 and x.size == count and x.dtype == np.int32 and x.flags.writeable
        buf = native._scratch(count)
        start = native._line_up(buf.ctypes.data)
        assert start % 64 == 0 and 0 <= start - buf.ctypes.data < 64
        assert start + 4 * count <= buf.ctypes.data + buf.nbytes  # the kernel's words fit after the line-up
    assert [native._line_up(x) for x in (0, 1, 63, 64, 65, 4096 + 16)] == [0, 64, 64, 64, 128, 4096 + 64]


def test_workers_pack_a_then_wait_for_it_in_one_loop(kind):
    """One product's workers pack A in 32-row chunks, then wait for every chunk before their first
    tile (one parallel loop): the chunks cover all of A and the products are the reference's, many
    chunks and jobs, repeated, on every kernel, on one thread (its worker packs it all) and on all.
    (That a wait holds until the last chunk is counted: test_a_wait_for_jobs_ends_at_the_last_one.)"""
    import numba

    from hwvit.ops import native

    rng = np.random.default_rng(36)
    a = _i8(rng.integers(-128, 128, (389, 320)))  # 13 chunks of packed A
    w = _i8(rng.integers(-128, 128, (300, 320)))
    bias = rng.integers(-(2**20), 2**20, 300)
    mult, shift = rng.integers(1 << 28, 1 << 31, 300), rng.integers(24, 31, 300)
    want = ops.requant(gb._int64(a, w) + bias, mult, shift, 8)
    plan = native.plan_linear(w, native.pack_w(w, kind), bias, mult, shift, kind)
    threads = numba.get_num_threads()
    try:
        for t in sorted({1, threads}):
            numba.set_num_threads(t)
            for _ in range(20):
                assert np.array_equal(native.linear_planned(a, plan, -128, 127), want), t
    finally:
        numba.set_num_threads(threads)


def test_a_wait_for_jobs_ends_at_the_last_one():
    """hw_wait_jobs(done, total) returns only once hw_job_done has counted ``total`` jobs: a thread
    waiting for 3 is still waiting after 2 (ctypes lets go of the GIL during the C call)."""
    import ctypes
    import threading
    import time

    from hwvit.ops import native

    lib = native._load()
    lib.hw_wait_jobs.argtypes, lib.hw_wait_jobs.restype = [ctypes.c_void_p, ctypes.c_int64], None
    lib.hw_job_done.argtypes, lib.hw_job_done.restype = [ctypes.c_void_p], None
    done = np.zeros(8, np.int64)
    waiter = threading.Thread(target=lib.hw_wait_jobs, args=(done.ctypes.data, 3))
    waiter.start()
    for count in range(3):
        time.sleep(0.05)
        assert waiter.is_alive(), f"the wait ended after {count} of 3 jobs"
        lib.hw_job_done(done.ctypes.data)
    waiter.join(timeout=10)
    assert not waiter.is_alive() and done[0] == 3


def test_int16_kernel_unsigned_a_at_the_bound():
    """uint8 a on the int16 kernel: K * 255 * 128 < 2^31 is ops.gemm's bound (K <= 65793); at that K,
    a = 255 against w = -128 and w = 127 sums to -255 * 128 * K and 255 * 127 * K in one call, and
    a zero-extended 255 is not a sign-extended -1 (a wrong widening gives +128 * K)."""
    from hwvit.ops import native

    k = (2**31 - 1) // (255 * 128)
    assert k == 65793 and k * 255 * 128 < 2**31 <= (k + 1) * 255 * 128
    a = np.full((3, k), 255, np.uint8)
    w = np.stack([np.full(k, -128), np.full(k, 127)]).astype(np.int8)
    got = native.linear_packed(
        a, w, None, np.zeros(2, np.int64), np.ones(2, np.int64), np.full(2, 16), -(2**15), 2**15 - 1
    )
    want = [(-255 * 128 * k + (1 << 15)) >> 16, (255 * 127 * k + (1 << 15)) >> 16]
    assert got.tolist() == [want] * 3 and got.dtype == np.int16
    assert ops.linear(a, w, None, 1, 16, 16, a_signed=False).tolist() == [want] * 3


def test_int16_kernel_int32_sums_at_their_limit():
    """K * 2^14 < 2^31 is the int16 kernel's limit: K = 2^17 - 1 of (-128)^2 runs in one pass
    (2^31 - 2^14), K = 2^17 (2^31 exactly, past int32) only in K-blocks added in int64."""
    from hwvit.ops import native

    top = 2 * native.K_MAX - 1
    assert native.k_limit(native.KINDS["int16"]) == top
    a = np.full((1, top), -128, np.int8)
    assert int(native.matmul_packed(a, a)[0, 0]) == top << 14 == 2**31 - 2**14
    a = np.full((2, 2 * native.K_MAX), -128, np.int8)
    with pytest.raises(ValueError, match=f"K = {2 * native.K_MAX} > {top}"):
        native.matmul_packed(a, a)
    assert np.array_equal(gb.matmul(a, a, "int16_avx2"), np.full((2, 2), 2**31))
    b = np.array([5, -7], np.int64)
    assert np.array_equal(gb.matmul(a, a, "int16_avx2", bias=b), 2**31 + b[None, :].repeat(2, 0))


def test_vnni_kernel_offset_sums_at_their_limit(vnni_here):
    """The quad kernel sums (a + 128) * w: K * 255 * 128 < 2^31 allows K = 2^16 in one pass. a = 127,
    w = -128 puts the offset sum at -255 * 128 * 2^16 = -2^31 + 2^23 (the true sum is -127 * 2^23);
    a = -128 makes it 0 and the column sum's correction the whole 2^30. K = 2^16 + 1 runs in blocks."""
    from hwvit.ops import native

    k = native.k_limit(vnni_here)
    assert k == native.K_MAX == 1 << 16 and k * 255 * 128 < 2**31 < (k + 258) * 255 * 128
    pos, neg = np.full((2, k), 127, np.int8), np.full((3, k), -128, np.int8)
    assert np.array_equal(native.matmul_packed(pos, neg, kind=vnni_here), np.full((2, 3), -127 * 128 * k))
    assert np.array_equal(native.matmul_packed(neg, neg, kind=vnni_here), np.full((3, 3), 1 << 30))
    longer = np.full((2, k + 1), -128, np.int8)
    with pytest.raises(ValueError, match=f"K = {k + 1} > {k}"):
        native.matmul_packed(longer, longer, kind=vnni_here)
    b = np.array([5, -7], np.int64)
    want = ((k + 1) << 14) + b[None, :].repeat(2, 0)
    assert np.array_equal(gb.matmul(longer, longer, "int8_vnni", bias=b), want)


def test_vnni_kind_follows_the_cpu_flags(monkeypatch, fake_cpu):
    """AMX (with AVX512F/VL) first, then AVX-VNNI, then AVX512-VNNI with AVX512VL; none: a one-line reason, and
    the probe passes it over.
    The flag sets are whole /proc/cpuinfo lines' worth: a Zen 4's has avx512vl among twenty others."""
    from hwvit.ops import native

    monkeypatch.setattr(native, "EMULATE_VNNI", False)
    monkeypatch.setattr(native, "_amx_ok", True)  # as if Linux granted the tile state (nothing runs here)
    zen4 = "fpu sse4_1 sse4_2 avx avx2 fma avx512f avx512dq avx512cd avx512bw avx512vl avx512_bf16 avx512_vnni"
    no_vnni = "^int8_vnni GEMM unavailable: the CPU has no AVX-VNNI or AVX512-VNNI$"
    for flags, want in [
        (["avx2", "avx_vnni"], native.KINDS["avxvnni"]),
        (["avx2", "avx512f", "avx512_vnni", "avx512vl", "avx_vnni"], native.KINDS["avxvnni"]),
        (["avx2", "avx512f", "avx512_vnni", "avx512vl"], native.KINDS["avx512vnni"]),
        (zen4.split(), native.KINDS["avx512vnni"]),
        ([*zen4.split(), "avx_vnni", "amx_tile", "amx_int8"], native.KINDS["amx"]),  # a Sapphire Rapids' set
        (["avx2", "avx_vnni", "amx_tile", "amx_int8"], native.KINDS["avxvnni"]),  # no AVX-512 requantizer: no AMX
        (["avx2", "avx512f", "avx512_vnni"], "^int8_vnni GEMM unavailable: the CPU has AVX512-VNNI but not avx512vl"),
        (["avx2", "fma"], no_vnni),
        (["fma", "avx_vnni"], "^int8_vnni GEMM unavailable: the CPU has no AVX2$"),
    ]:
        fake_cpu(flags)
        monkeypatch.setattr(native, "_lib", None)
        monkeypatch.setattr(native, "_why", None)
        if isinstance(want, str):
            with pytest.raises(RuntimeError, match=want) as refused:
                native.vnni_kind()
            assert gb.why_unavailable("int8_vnni") == str(refused.value)  # one line, the same words
        else:
            assert native.vnni_kind() == want and gb.why_unavailable("int8_vnni") is None
    fake_cpu(["avx2"])
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "_why", None)
    monkeypatch.setattr(native, "EMULATE_VNNI", True)
    assert native.vnni_kind() == native.KINDS["emulated"]


def test_an_older_compiler_builds_the_library_without_the_vnni_tiles(monkeypatch, tmp_path, fake_cpu):
    """gcc < 11 / clang < 12 know no VNNI target: the file still compiles, warning-free, without those
    tiles, and int8_vnni says why it cannot run even on a CPU that has VNNI."""
    import ctypes
    import subprocess

    from hwvit.ops import native

    out = tmp_path / "lib.so"
    cc = [native._compiler(), *native.FLAGS, "-Wall", "-Wextra", "-Werror", "-DHW_CAN_VNNI=0"]
    res = subprocess.run([*cc, "-o", str(out), *map(str, native.SOURCES)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    ctypes_lib = ctypes.CDLL(str(out))
    assert ctypes_lib.hw_vnni_built() == 0
    monkeypatch.setattr(native, "EMULATE_VNNI", False)
    monkeypatch.setattr(native, "_load", lambda: ctypes_lib)
    fake_cpu(["avx2", "avx_vnni"])
    with pytest.raises(RuntimeError, match=r"^int8_vnni GEMM unavailable: the C compiler is older than gcc 11"):
        native.vnni_kind()


def test_vnni_unavailable_is_passed_over_by_the_probe(cache_dir, monkeypatch, fake_cpu):
    from hwvit.ops import native

    monkeypatch.setattr(native, "EMULATE_VNNI", False)
    fake_cpu(["avx2"])
    a = np.ones((2, 3), np.int8)
    with pytest.raises(RuntimeError, match="int8_vnni GEMM unavailable"):
        gb.matmul(a, a, "int8_vnni")
    assert gb.run_probe()["exact"]["int8_vnni"] is False


def test_the_probe_never_times_the_emulated_vnni(cache_dir, monkeypatch, vnni_here):
    """The tests' AVX2 stand-in for vpdpbusd is exact and checked as such, but it is not the CPU's
    VNNI: the probe times int8_vnni only where the real instruction runs (a probe made during an
    emulated test once chose it, and every later forward in that process failed)."""
    from hwvit.ops import native

    seen = []

    def fake_time_layer(names, rounds, shapes):
        seen.extend(names)
        return {"best": {n: 1.0 for n in names}, "median": {n: 1.0 for n in names}, "dropped": []}

    monkeypatch.setattr(gb, "time_layer", fake_time_layer)
    result = gb.run_probe()
    assert result["exact"]["int8_vnni"] is True
    assert ("int8_vnni" in seen) is (not native.EMULATE_VNNI) and "int16_avx2" in seen
    assert result["backend"] != "int8_vnni" or not native.EMULATE_VNNI


def test_vnni_tiles_are_compiled_with_vpdpbusd():
    """The two VNNI tiles really use the instruction: VEX-encoded (AVX-VNNI) in one, EVEX (AVX512-VNNI)
    in the other, twelve each (one per register of the 4 x 24 tile)."""
    import shutil
    import subprocess

    from hwvit.ops import native

    objdump = shutil.which("objdump")
    assert objdump, "objdump is missing: sudo apt-get install -y binutils"
    text = subprocess.run([objdump, "-d", native._load()._name], capture_output=True, text=True, check=True).stdout
    bodies = {}
    for block in text.split("\n\n"):
        head = block.strip().splitlines()[0] if block.strip() else ""
        for name in ("tile_avxvnni", "tile_avx512vnni", "tile_amx", "amx_config"):
            if head.endswith(f"<{name}>:"):
                bodies[name] = block
    assert set(bodies) == {"tile_avxvnni", "tile_avx512vnni", "tile_amx", "amx_config"}
    assert bodies["tile_avxvnni"].count("{vex} vpdpbusd") == 12
    assert bodies["tile_avx512vnni"].count("vpdpbusd") == 12 and "{vex}" not in bodies["tile_avx512vnni"]
    # the AMX block: four tdpbusd (2 A tiles x 2 W tiles) and four tile loads a step of 64 K-bytes
    assert bodies["tile_amx"].count("tdpbusd") == 4 and bodies["tile_amx"].count("tileloadd") == 4
    assert bodies["tile_amx"].count("tilestored") == 4 and bodies["tile_amx"].count("tilezero") == 4
    assert "ldtilecfg" in bodies["amx_config"]


def test_amx_tile_configuration_bytes():
    """The configuration ldtilecfg reads (palette 1; bytes per row and rows of tiles 0-7) as the C
    file spells it: a wrong width here would make tdpbusd fault or sum the wrong columns."""
    import re

    from hwvit.ops import native

    text = native.SOURCE.read_text()
    init = re.search(r"AMX_CFG\[64\][^=]*= \{([^}]*)\}", text).group(1)
    cfg = [0] * 64
    at = 0
    for item in (x.strip() for x in init.split(",")):
        if item.startswith("["):
            index, value = item.split("=")
            at = int(index.strip("[] "))
            item = value
        cfg[at] = int(item)
        at += 1
    assert cfg[0] == 1
    colsb = [cfg[16 + 2 * t] + 256 * cfg[17 + 2 * t] for t in range(8)]
    assert colsb == [64, 32, 64, 32, 64, 64, 64, 32]  # sums 16|8 columns, A 64 K-bytes, W 16|8 columns
    assert cfg[48:56] == [16] * 8 and cfg[56:] == [0] * 8 and all(v == 0 for v in cfg[1:16] + cfg[32:48])


def test_kernels_are_built_once_into_the_cache(fresh_native, tmp_path):
    assert fresh_native.unavailable() is None
    libs = list((tmp_path / "hwvit" / "native").glob("*/libhwvit_gemm.so"))
    assert len(libs) == 1
    stamp = libs[0].stat().st_mtime_ns
    assert fresh_native._build(fresh_native._compiler()) == libs[0]
    assert libs[0].stat().st_mtime_ns == stamp  # reused, not rebuilt
    assert not list(libs[0].parent.glob(".build.*"))  # no temporary left behind


def test_kernels_say_why_they_cannot_run(fresh_native, monkeypatch, cache_dir):
    monkeypatch.setattr(fresh_native, "_has_avx2", lambda: False)
    assert fresh_native.unavailable() == "the CPU has no AVX2"
    a = np.ones((2, 3), np.int8)
    with pytest.raises(RuntimeError, match="int16_avx2 GEMM unavailable: the CPU has no AVX2"):
        gb.matmul(a, a, "int16_avx2")
    with pytest.raises(RuntimeError, match="int8_vnni GEMM unavailable: the CPU has no AVX2"):
        gb.matmul(a, a, "int8_vnni")
    exact = gb.run_probe()["exact"]
    assert exact["int16_avx2"] is False and exact["int8_vnni"] is False  # the probe passes them over

    monkeypatch.setattr(fresh_native, "_has_avx2", lambda: True)
    monkeypatch.setattr(fresh_native, "_why", None)
    monkeypatch.setenv("CC", "no-such-compiler-hwvit")
    assert fresh_native.unavailable().startswith("no C compiler (set CC, or install gcc")

    monkeypatch.setattr(fresh_native, "_why", None)
    monkeypatch.setenv("CC", "false")  # a "compiler" that fails
    assert (
        fresh_native.unavailable()
        == "could not build or load the kernel: false failed on gemm_pack.c and gemm_kernels.c: no message"
    )
