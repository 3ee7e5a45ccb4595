"""Exact int8 x int8 -> integer matrix products, several ways; one is chosen per machine by measurement.

Every backend computes ``a @ w^T`` for int8 ``a`` (M, K) and int8 ``w`` (N, K) exactly and returns
int64 (M, N); ``batched`` does the same per entry of (B, M, K) and (B, N, K). Each is exact by
construction (docs/arithmetic.md, "GEMM backends") and tests hold it equal to plain-Python sums:

- ``int_mm``: ``torch._int_mm`` (int32 accumulation). Fast where the CPU has int8 dot products
  (VNNI/AMX); on AVX2 alone torch 2.13 runs a scalar kernel, 28x slower than fp32 BLAS.
- ``float_blocked``: the int8 values in float32 BLAS (numpy's OpenBLAS) over K-blocks of at most
  1024: ``|a*w| <= 2^14``, so every partial sum of a block is an integer of magnitude <= 2^24,
  which float32 holds exactly; each block's result is converted to int64 and the blocks added.
- ``float_blocked_torch``: the same K-blocks through torch's float32 matmul (its BLAS and thread
  pool, the ones the float model uses), refused unless torch's float32 precision is "highest".
- ``float64``: the same in float64 BLAS, bound 2^53: K up to 2^39 in one block (never splits).
- ``int16_avx2``: hwvit's own AVX2 kernel (``csrc/gemm_kernels.c``, built on first use by
  ``hwvit.ops.native``): operands widened to int16, ``vpmaddwd`` pairs summed in int32, all integer.
  On an AVX2-only CPU it is faster than fp32 BLAS (16 multiply-adds per instruction, not 8).
- ``int8_vnni``: the same kernel with ``vpdpbusd`` (AVX-VNNI, or AVX512-VNNI at 256 bits): uint8
  ``a + 128`` times int8 ``w`` in quads summed in int32, the offset taken off with each column's sum
  of ``w``: 32 multiply-adds per instruction. Only where /proc/cpuinfo lists ``avx_vnni`` or
  ``avx512_vnni`` + ``avx512vl``; elsewhere it refuses and the probe passes it over.
- ``int8_avx2``: the same kernel with AVX2's ``vpmaddubsw`` on uint8/int8 quads (32 multiply-adds an
  instruction, then ``vpmaddwd`` by ones and ``vpaddd``), exact because each activation is split:
  ``clamp(a, -64, 63) + 64`` (7 bits: no int16 pair sum can saturate) in the quads, the column sums
  taking the 64 off, and the rare ``|a| > 63`` remainders listed per row and added to the int32 sums
  in the tile (docs/arithmetic.md). Any AVX2 CPU; its speed depends on how many outliers a has.
- ``int64``: numpy int64 matmul, no BLAS: exact and slow, the reference the probe checks against.

``matmul``/``batched`` use the backend that ``HWVIT_GEMM`` names, else the one ``set_backend``
chose, else the fastest exact one found by ``probe`` (run once per process; its result is cached
per machine in ``$XDG_CACHE_HOME/hwvit``, keyed by CPU model, flags and library versions).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np

from hwvit.ops import cpu, frozen

F32_BLOCK = 1024  # 1024 * 2^14 = 2^24: every partial sum of int8 products fits float32's 24-bit significand
F64_BLOCK = 1 << 39  # 2^39 * 2^14 = 2^53
BACKENDS = (
    "int_mm",
    "int8_vnni",
    "int8_avx2",
    "int16_avx2",
    "float_blocked",
    "float_blocked_torch",
    "float64",
    "int64",
)
ENV = "HWVIT_GEMM"

_chosen: str | None = None  # set_backend() or the probe's pick, for this process
_probe_result: dict | None = None


# ---------------------------------------------------------------- the backends


def _int64(a8: np.ndarray, w8: np.ndarray) -> np.ndarray:
    return a8.astype(np.int64) @ w8.astype(np.int64).swapaxes(-1, -2)


def canonical(x: np.ndarray) -> np.ndarray:
    """``x`` with C-order strides on every dimension, size-1 ones included: ``x`` itself when it has
    them, else a fresh copy.

    numpy (and torch) call an array contiguous whatever the stride of a size-1 dimension, so
    ``np.ascontiguousarray(x[None, :])`` keeps its stride of 0 and ``torch.from_numpy`` hands it on.
    ``torch._int_mm`` of torch 2.13 on an AVX-512 Zen 4 returns wrong values, different on every call,
    for such an operand (docs/arithmetic.md, "GEMM backends"); with the strides it expects it is right.
    """
    step, want = x.itemsize, []
    for size in reversed(x.shape):
        want.append(step)
        step *= size
    if x.strides == tuple(reversed(want)):
        return x
    out = np.empty(x.shape, x.dtype)  # a new array's strides are the C-order ones
    np.copyto(out, x)
    return out


def _int_mm(a8: np.ndarray, w8: np.ndarray) -> np.ndarray:
    import torch

    if a8.shape[-1] < 2:  # torch 2.13 CPU returns garbage for K = 1
        return _int64(a8, w8)
    with warnings.catch_warnings():  # read-only weights: torch warns, but _int_mm only reads them
        warnings.simplefilter("ignore", UserWarning)
        at, wt = torch.from_numpy(canonical(a8)), torch.from_numpy(canonical(w8))
    if at.ndim == 2:
        return torch._int_mm(at, wt.t()).numpy().astype(np.int64)
    return np.stack([torch._int_mm(at[i], wt[i].t()).numpy() for i in range(at.shape[0])]).astype(np.int64)


def _derived(x: np.ndarray, tag: str, make) -> np.ndarray:
    """``make(x)``; for a read-only array it is made once and kept while the array lives (it cannot change)."""
    return frozen.derived((x,), ("gemm_backends", tag), lambda: make(x))


def _as_float(x: np.ndarray, dtype) -> np.ndarray:
    """``x`` as ``dtype``, converted once for a read-only array."""
    return _derived(x, np.dtype(dtype).str, lambda v: v.astype(dtype))


def _float_blocks(a8: np.ndarray, w8: np.ndarray, dtype, block: int) -> np.ndarray:
    """sum over K-blocks of float BLAS products, each converted to int64 (exact: see the bounds above)."""
    k = a8.shape[-1]
    af = a8.astype(dtype)
    wt = _as_float(w8, dtype).swapaxes(-1, -2)  # (..., K, N) view: BLAS takes the transpose flag
    if k <= block:
        return (af @ wt).astype(np.int64)
    out = None
    for k0 in range(0, k, block):
        part = (af[..., k0 : k0 + block] @ wt[..., k0 : k0 + block, :]).astype(np.int64)
        out = part if out is None else out + part
    return out


def _native(kind: int, tag: str, a8: np.ndarray, w8: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """hwvit's C kernel ``kind`` (``hwvit.ops.native``), K longer than one call takes in blocks added in int64."""
    native = _native_module()
    k = a8.shape[-1]
    if k <= native.k_limit(kind):
        packed = _derived(w8, tag, lambda w: native.pack_w(w, kind))
        return native.matmul_packed(a8, w8, packed, bias, kind)
    out = None
    for k0 in range(0, k, native.K_MAX):
        part = native.matmul_packed(a8[..., k0 : k0 + native.K_MAX], w8[..., k0 : k0 + native.K_MAX], kind=kind)
        out = part if out is None else out + part
    return out if bias is None else out + bias


_native_mod = None  # hwvit.ops.native once imported: it loads numba, so not at hwvit's import


def _native_module():
    """hwvit.ops.native, imported on first use and kept (the kernel calls ask for it every time)."""
    global _native_mod
    if _native_mod is None:
        from hwvit.ops import native

        _native_mod = native
    return _native_mod


def _kind_of(name: str) -> int:
    """The C kernel kind (``native.KINDS``) that backend ``name`` runs: int8_vnni the VNNI kind of this
    CPU (one packing for every group-4 kind), int8_avx2 the 7-bit split, int16_avx2 the int16 one."""
    native = _native_module()
    if name == "int8_vnni":
        return native.vnni_kind()
    return native.KINDS["split7" if name == "int8_avx2" else "int16"]


def _int16_avx2(a8: np.ndarray, w8: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    return _native(_kind_of("int16_avx2"), "int16_avx2", a8, w8, bias)


def _int8_avx2(a8: np.ndarray, w8: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    return _native(_kind_of("int8_avx2"), "int8_avx2", a8, w8, bias)


def _int8_vnni(a8: np.ndarray, w8: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    return _native(_kind_of("int8_vnni"), "int8_vnni", a8, w8, bias)


def _float_blocked(a8: np.ndarray, w8: np.ndarray) -> np.ndarray:
    return _float_blocks(a8, w8, np.float32, F32_BLOCK)


def _float64(a8: np.ndarray, w8: np.ndarray) -> np.ndarray:
    return _float_blocks(a8, w8, np.float64, F64_BLOCK)


def _float_blocked_torch(a8: np.ndarray, w8: np.ndarray) -> np.ndarray:
    """float32 K-blocks through torch's BLAS (MKL/oneDNN, torch's thread pool) instead of numpy's."""
    import torch

    if torch.get_float32_matmul_precision() != "highest":  # bf16/tf32 inner products would break the bound
        raise RuntimeError("torch float32 matmul precision is not 'highest'")
    k = a8.shape[-1]
    af = torch.from_numpy(a8.astype(np.float32))
    wt = torch.from_numpy(_as_float(w8, np.float32)).transpose(-1, -2)
    out = None
    for k0 in range(0, k, F32_BLOCK):
        part = torch.matmul(af[..., k0 : k0 + F32_BLOCK], wt[..., k0 : k0 + F32_BLOCK, :]).to(torch.int64)
        out = part if out is None else out + part
    return out.numpy()


_IMPL = {
    "int_mm": _int_mm,
    "int8_vnni": _int8_vnni,
    "int8_avx2": _int8_avx2,
    "int16_avx2": _int16_avx2,
    "float_blocked": _float_blocked,
    "float_blocked_torch": _float_blocked_torch,
    "float64": _float64,
    "int64": _int64,
}


# ---------------------------------------------------------------- selection


def check_name(name: str) -> str:
    if name not in BACKENDS and name != "auto":
        raise ValueError(f"unknown GEMM backend {name!r}; choose one of {', '.join(BACKENDS)} or auto")
    return name


def set_backend(name: str | None) -> None:
    """Use ``name`` for this process (``None`` or ``auto``: the probe's choice)."""
    global _chosen
    _chosen = None if name in (None, "auto") else check_name(name)


@contextlib.contextmanager
def using(name: str | None):
    """Run the block on backend ``name`` (as ``set_backend``), then restore the earlier choice."""
    global _chosen
    old = _chosen
    set_backend(name)
    try:
        yield
    finally:
        _chosen = old


def named() -> str | None:
    """The backend named by ``HWVIT_GEMM`` (if set and not ``auto``) or ``set_backend``, else None."""
    env = os.environ.get(ENV, "").strip()
    if env and env != "auto":
        return check_name(env)
    return _chosen


def backend() -> str:
    """The backend in use: ``HWVIT_GEMM`` if set (and not ``auto``), else set_backend's, else the probe's."""
    return named() or probe()["backend"]


_FUSED_BIAS = {"int16_avx2", "int8_avx2", "int8_vnni"}  # backends that add the bias while writing their output


def why_unavailable(name: str) -> str | None:
    """One line saying why backend ``name`` cannot run on this machine, or None (int16_avx2 needs AVX2
    and a C compiler, int8_vnni VNNI as well; the others fail, if at all, on their first call)."""
    native = _native_module()
    if name in ("int16_avx2", "int8_avx2"):
        why = native.unavailable()
        return f"{name} GEMM unavailable: {why}" if why else None
    if name == "int8_vnni":
        try:
            native.vnni_kind()
        except RuntimeError as exc:
            return str(exc)
    return None


def why_not_here(name: str) -> str | None:
    """None where backend ``name`` runs here and is exact at the extremes, else the one reason (without the
    backend's name): what the CPU or toolchain lacks, or that it failed or was wrong on the extreme cases."""
    why = why_unavailable(name)
    if why:
        return why.split("unavailable: ", 1)[-1]
    try:
        ok = all(np.array_equal(_IMPL[name](a, w), _int64(a, w)) for a, w in _exact_cases())
    except (RuntimeError, AttributeError, NotImplementedError, TypeError) as exc:
        return f"failed on the extreme cases: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    return None if ok else "wrong on the extreme cases (not exact on this machine)"


def matmul(a8: np.ndarray, w8: np.ndarray, name: str | None = None, bias: np.ndarray | None = None) -> np.ndarray:
    """Exact ``bias + a8 @ w8^T`` (int8 (M, K), (N, K), int64 (N,) or None) as int64 (M, N), or
    ``a8 @ w8^T`` per entry of (B, M, K), (B, N, K)."""
    name = name or backend()
    if name in _FUSED_BIAS:
        return _IMPL[name](a8, w8, bias)
    out = _IMPL[name](a8, w8)
    return out if bias is None else out + bias


def takes_offset_uint8(name: str | None = None) -> bool:
    """Whether ``matmul_requant`` on backend ``name`` takes an unsigned uint8 ``a8`` as it is (the quad
    instruction multiplies unsigned bytes, int8 a is XORed with 0x80 into a + 128 and corrected; the
    int16 kernel widens uint8 to 0..255 as it packs)."""
    return (name or backend()) in _FUSED_BIAS


def matmul_requant(
    a8: np.ndarray,
    w8: np.ndarray,
    bias: np.ndarray,
    mult: np.ndarray,
    shift: np.ndarray,
    lo: int,
    hi: int,
    name: str | None = None,
) -> np.ndarray | None:
    """``requant(bias + a8 @ w8^T)`` in one pass where the backend can (int16_avx2 and int8_vnni, K
    that one call takes): int8 or int16 (M, N), or per entry of (B, M, K) x (B, N, K) with a (B, N)
    bias or an (N,) one every entry shares; else None and the caller requantizes. Arguments checked
    by ``hwvit.ops.gemm.linear``. A uint8 ``a8`` (only where ``takes_offset_uint8``) is multiplied as
    it is: unsigned bytes, no offset."""
    name = name or backend()
    kind = fused_kind(name)
    if kind is None:
        return None
    native = _native_module()
    if a8.shape[-1] > native.k_limit(kind):
        return None
    packed = _derived(w8, name, lambda w: native.pack_w(w, kind)) if w8.ndim == 2 else None
    return native.linear_packed(a8, w8, packed, bias, mult, shift, lo, hi, kind)


def fused_kind(name: str) -> int | None:
    """The C kernel kind backend ``name`` runs where it requantizes in its tile (``matmul_requant``), else None."""
    return _kind_of(name) if name in _FUSED_BIAS else None


def linear_plan(
    w8: np.ndarray, bias: np.ndarray, mult: np.ndarray, shift: np.ndarray, name: str, kind: int | None
) -> tuple | None:
    """A layer's ``native.plan_linear`` for 2-D ``w8`` on backend ``name``'s fused kind ``kind``
    (``fused_kind``), or None where there is none (another backend, batched w, K past one call):
    ``hwvit.ops.gemm.linear`` keeps it with the layer's other derived parameters. Its packed W is
    the one ``matmul_requant`` and the plain product keep for ``w8`` on this backend: one copy."""
    if kind is None or w8.ndim != 2:
        return None
    native = _native_module()
    if w8.shape[-1] > native.k_limit(kind):
        return None
    packed = _derived(w8, name, lambda w: native.pack_w(w, kind))
    return native.plan_linear(w8, packed, bias, mult, shift, kind)


def linear_planned(a8: np.ndarray, plan: tuple, lo: int, hi: int) -> np.ndarray:
    """``native.linear_planned``: the requantized product of 2-D ``a8`` with a ``linear_plan``."""
    return _native_module().linear_planned(a8, plan, lo, hi)


def cpu_info() -> dict:
    """CPU model, the int8-relevant flags it has, torch's capability, core count (``hwvit.ops.cpu``)."""
    feats = cpu.features()
    return {
        "model": feats.model,
        "family": feats.family,
        "model_number": feats.model_number,
        "flags": feats.int8_flags,
        "capability": feats.torch_capability,
        "torch_disagrees": feats.disagreements,
        "cores": feats.cores,
        "all_flags_sha": feats.flags_sha,
    }


def _cache_file() -> Path:
    from hwvit import toolchain

    return toolchain.cache_dir() / "gemm-probe.json"


PROBE_VERSION = "probe-v4"  # bump when what the probe measures changes: old entries are then ignored
RECHECK_S = 7 * 24 * 3600  # a cached choice older than this is measured again, not trusted forever


def _machine_key() -> str:
    """What the choice depends on: the CPU (model, family, every flag), the threads the kernels run
    on, the libraries, hwvit and its C kernel source, and what the probe measures."""
    import numba
    import torch

    from hwvit import __version__

    native = _native_module()
    feats = cpu.features()
    parts = [
        feats.model,
        f"{feats.family}/{feats.model_number}",
        feats.flags_sha,
        str(feats.cores),
        f"numba-threads={numba.get_num_threads()}",
        f"torch-threads={torch.get_num_threads()}",
        torch.__version__,
        np.__version__,
        __version__,
        native.source_digest()[:12],
        ",".join(BACKENDS),
        PROBE_VERSION,
    ]
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]


def _exact_cases() -> list[tuple[np.ndarray, np.ndarray]]:
    """Small operands at the extremes, one K past the float32 block (so it splits), one row a
    broadcast (a size-1 dimension of stride 0, the layout torch._int_mm got wrong on a Zen 4)."""
    rng = np.random.default_rng(0)
    k = F32_BLOCK + 1
    cases = [
        (rng.integers(-128, 128, (9, k)), rng.integers(-128, 128, (7, k))),
        (np.full((3, k), -128), np.full((5, k), -128)),
        (np.full((3, k), 127), np.full((5, k), -128)),
    ]
    odd = np.full((2, k), -128)
    odd[:, -1] = 1  # 1024 * 2^14 + 1 = 2^24 + 1: not a float32; right only if the K-blocks split
    cases.append((odd, odd))
    cases = [(a.astype(np.int8), w.astype(np.int8)) for a, w in cases]
    row = rng.integers(-128, 128, 64).astype(np.int8)
    cases.append((row[None, :], rng.integers(-128, 128, (5, 64)).astype(np.int8)))
    return cases


def is_exact(name: str) -> bool:
    """Whether backend ``name`` runs here and equals int64 on the extreme cases."""
    return why_not_here(name) is None


# The products of one ViT-B/16 encoder layer at batch 1 (197 tokens, width 768, MLP 3072, 12 heads
# of 64), each requantized to int8 as the layer does: (name, (M, K, N)) or (name, (B, M, K, N)).
FORWARD_SHAPES = (
    ("qkv", (197, 768, 2304)),
    ("proj", (197, 768, 768)),
    ("fc1", (197, 768, 3072)),
    ("fc2", (197, 3072, 768)),
    ("q.k^T", (12, 197, 64, 197)),
    ("p.v", (12, 197, 197, 64)),
)


def _forward_case(shape: tuple, rng: np.random.Generator) -> tuple:
    """int8 operands (read-only weights, as a layer's), bias and requant parameters of one product.

    The activations are drawn as a calibrated layer's: normal with sigma = 127 / 5, rounded and
    clipped to int8, so about 1.2% lie outside [-64, 63] (ViT-B/16's forward measured 0.2-2.6% at its
    qkv, fc1, fc2 and Q.K^T inputs, 1-10% at proj's, 0% of P.V's probabilities past 127): the values
    matter to ``int8_avx2`` alone, whose outliers cost extra; uniform bytes (50% outliers) would time a
    case no forward has."""
    *b, m, k, n = shape
    a8 = np.clip(np.rint(rng.normal(0.0, 127 / 5, (*b, m, k))), -128, 127).astype(np.int8)
    w8 = rng.integers(-128, 128, (*b, n, k)).astype(np.int8)
    w8.flags.writeable = False
    bias = np.zeros((*b, n), np.int64)
    mult, shift = np.full(n, 1 << 16, np.int64), np.full(n, 24, np.int64)  # |acc| * 2^16 < 2^62
    return a8, w8, bias, mult, shift


def _layer_step(name: str, case: tuple) -> None:
    """One product as the forward runs it on backend ``name`` (``ops.gemm.linear``'s two ways): the
    requant in the GEMM tile where the backend has it, else the product, then the requant.

    Timing the product alone misses what a backend does to the numba kernels after it: OpenBLAS's
    threads spin for a while after each call, and on 2 cores that made the requant after
    ``float_blocked`` 20x slower and the whole ViT-B/16 forward 3x slower than its GEMM time said.
    """
    from hwvit.ops.requant import requant

    a8, w8, bias, mult, shift = case
    if matmul_requant(a8, w8, bias, mult, shift, -128, 127, name) is None:
        acc = matmul(a8, w8, name, bias=bias if w8.ndim == 2 else None)
        requant(acc, mult, shift, 8, narrow=True)


def time_layer(names: list[str], rounds: int = 5, shapes: tuple = FORWARD_SHAPES, screen: float = 3.0) -> dict:
    """Milliseconds of one encoder layer's products (``shapes``) on each backend of ``names``.

    Interleaved: every round times each backend once, in an order rotated round by round, so a load
    that comes and goes falls on all of them alike; each backend's figure is its best round (a busy
    core only ever adds time). After two rounds a backend whose best is more than ``screen`` times the
    fastest's is dropped (it cannot win, and int_mm on an AVX2-only CPU takes a second a round).
    Returns {"best": {name: ms}, "median": {name: ms}, "rounds": n, "dropped": [...]}.
    """
    import statistics

    rng = np.random.default_rng(1)
    cases = [_forward_case(shape, rng) for _, shape in shapes]
    for name in names:  # warm up: packed weights, numba's threads, BLAS
        for case in cases:
            _layer_step(name, case)
    seen: dict[str, list[float]] = {name: [] for name in names}
    alive, dropped = list(names), []
    for r in range(rounds):
        order = alive[r % len(alive) :] + alive[: r % len(alive)] if alive else []
        for name in order:
            t0 = time.perf_counter()
            for case in cases:
                _layer_step(name, case)
            seen[name].append(1e3 * (time.perf_counter() - t0))
        if r == min(1, rounds - 1) and alive:  # screen on the best of two rounds: one stall drops nothing
            fastest = min(min(seen[n]) for n in alive)
            dropped = [n for n in alive if min(seen[n]) > screen * fastest]
            alive = [n for n in alive if n not in dropped]
    return {
        "best": {n: min(v) for n, v in seen.items() if v},
        "median": {n: statistics.median(v) for n, v in seen.items() if v},
        "rounds": rounds,
        "dropped": dropped,
    }


def run_probe(rounds: int = 5, shapes: tuple = FORWARD_SHAPES) -> dict:
    """Exactness (against int64, at the extremes) of every backend but int64, then the time of one
    ViT-B/16 layer's products on each exact one (``time_layer``); the fastest is chosen."""
    native = _native_module()
    exact = {name: is_exact(name) for name in BACKENDS}
    # the tests' VNNI emulation (AVX2 instructions standing in for vpdpbusd) checks exactness, never speed
    emulated = {"int8_vnni"} if native.EMULATE_VNNI else set()
    candidates = [name for name in BACKENDS if name != "int64" and exact[name] and name not in emulated]
    timed = time_layer(candidates, rounds, shapes) if candidates else {"best": {}, "median": {}, "dropped": []}
    times = timed["best"]
    survivors = {n: t for n, t in times.items() if n not in timed["dropped"]}
    best = min(survivors, key=survivors.get) if survivors else "int64"
    return {
        "backend": best,
        "times_ms": times,
        "median_ms": timed["median"],
        "dropped": timed["dropped"],
        "exact": exact,
        "shapes": {name: list(shape) for name, shape in shapes},
        "rounds": rounds,
        "made": time.time(),
        "cpu": cpu.features().describe(),
    }


def _still_good(entry: object) -> bool:
    """A cached entry is used while it is recent, its backend still runs here and is still exact, and
    every backend it passed over as not exact still is not: one that failed then (a kernel that did not
    build, a bug since fixed) and runs exactly now gets a new probe instead of seven days' exclusion."""
    if not isinstance(entry, dict) or entry.get("backend") not in BACKENDS:
        return False
    made = entry.get("made")
    if not isinstance(made, (int, float)) or not 0 <= time.time() - made < RECHECK_S:
        return False
    exact = entry.get("exact")
    passed_over = [n for n, ok in exact.items() if ok is False and n in BACKENDS] if isinstance(exact, dict) else []
    if any(is_exact(name) for name in passed_over):
        return False
    return entry["backend"] == "int64" or is_exact(entry["backend"])


def probe(refresh: bool = False) -> dict:
    """The probe's result for this machine: from this process, the cache file (rechecked), or a fresh run."""
    global _probe_result
    if _probe_result is not None and not refresh:
        return _probe_result
    path, key = _cache_file(), _machine_key()
    cached: dict = {}
    try:
        cached = json.loads(path.read_text())
        if not isinstance(cached, dict):
            cached = {}
    except (OSError, ValueError):
        pass
    entry = cached.get(key)
    if refresh or not _still_good(entry):
        entry = run_probe()
        cached[key] = entry
        try:  # temp + rename: a concurrent reader never sees half a file
            from hwvit.atomic import write_atomic

            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, json.dumps(cached, indent=1))
        except OSError:
            pass  # an unwritable cache only costs a probe per process
    _probe_result = entry
    return entry


def describe() -> str:
    """One line: the backend in use, how it was chosen, and the CPU."""
    env = os.environ.get(ENV, "").strip()
    how = f"{ENV}={env}" if env and env != "auto" else ("set" if _chosen else "probe")
    cpu = cpu_info()
    return (
        f"{backend()} ({how}); CPU {cpu['model']}, {cpu['cores']} cores, capability {cpu['capability']}, "
        f"flags {' '.join(cpu['flags']) or 'none'}"
    )
