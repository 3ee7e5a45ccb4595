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
- ``int64``: numpy int64 matmul, no BLAS: exact and slow, the reference the probe checks against.

``matmul``/``batched`` use the backend that ``HWVIT_GEMM`` names, else the one ``set_backend``
chose, else the fastest exact one found by ``probe`` (run once per process; its result is cached
per machine in ``$XDG_CACHE_HOME/hwvit``, keyed by CPU model, flags and library versions).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
import warnings
import weakref
from pathlib import Path

import numpy as np

F32_BLOCK = 1024  # 1024 * 2^14 = 2^24: every partial sum of int8 products fits float32's 24-bit significand
F64_BLOCK = 1 << 39  # 2^39 * 2^14 = 2^53
BACKENDS = ("int_mm", "int8_vnni", "int16_avx2", "float_blocked", "float_blocked_torch", "float64", "int64")
ENV = "HWVIT_GEMM"

_chosen: str | None = None  # set_backend() or the probe's pick, for this process
_probe_result: dict | None = None


# ---------------------------------------------------------------- the backends


def _int64(a8: np.ndarray, w8: np.ndarray) -> np.ndarray:
    return a8.astype(np.int64) @ w8.astype(np.int64).swapaxes(-1, -2)


def _int_mm(a8: np.ndarray, w8: np.ndarray) -> np.ndarray:
    import torch

    if a8.shape[-1] < 2:  # torch 2.13 CPU returns garbage for K = 1
        return _int64(a8, w8)
    with warnings.catch_warnings():  # read-only weights: torch warns, but _int_mm only reads them
        warnings.simplefilter("ignore", UserWarning)
        at, wt = (
            torch.from_numpy(np.ascontiguousarray(a8)),
            torch.from_numpy(np.ascontiguousarray(w8)),
        )
    if at.ndim == 2:
        return torch._int_mm(at, wt.t()).numpy().astype(np.int64)
    return np.stack([torch._int_mm(at[i], wt[i].t()).numpy() for i in range(at.shape[0])]).astype(np.int64)


# float copies of read-only weight matrices (a layer's weights are converted once, not per call)
_float_cache: dict[tuple, tuple[weakref.ref, np.ndarray]] = {}


def _frozen(x) -> bool:
    """Whether no one can write ``x``'s memory: read-only all along its chain of bases."""
    while isinstance(x, np.ndarray):
        if x.flags.writeable:
            return False
        x = x.base
    return x is None or isinstance(x, bytes)


def _derived(x: np.ndarray, tag: str, make) -> np.ndarray:
    """``make(x)``; for a read-only array it is made once and kept while the array lives (it cannot change)."""
    if not _frozen(x):
        return make(x)
    key = (id(x), tag, x.shape)
    hit = _float_cache.get(key)
    if hit is not None and hit[0]() is x:
        return hit[1]
    out = make(x)
    try:
        ref = weakref.ref(x, lambda _r, k=key: _float_cache.pop(k, None))
    except TypeError:
        return out
    _float_cache[key] = (ref, out)
    return out


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
    from hwvit.ops import native

    k = a8.shape[-1]
    if k <= native.k_limit(kind):
        packed = _derived(w8, tag, lambda w: native.pack_w(w, kind))
        return native.matmul_packed(a8, w8, packed, bias, kind)
    out = None
    for k0 in range(0, k, native.K_MAX):
        part = native.matmul_packed(a8[..., k0 : k0 + native.K_MAX], w8[..., k0 : k0 + native.K_MAX], kind=kind)
        out = part if out is None else out + part
    return out if bias is None else out + bias


def _int16_avx2(a8: np.ndarray, w8: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    from hwvit.ops import native

    return _native(native.KINDS["int16"], "int16_avx2", a8, w8, bias)


def _int8_vnni(a8: np.ndarray, w8: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    from hwvit.ops import native

    return _native(native.vnni_kind(), "int8_vnni", a8, w8, bias)  # one packing for every group-4 kind


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


def named() -> str | None:
    """The backend named by ``HWVIT_GEMM`` (if set and not ``auto``) or ``set_backend``, else None."""
    env = os.environ.get(ENV, "").strip()
    if env and env != "auto":
        return check_name(env)
    return _chosen


def backend() -> str:
    """The backend in use: ``HWVIT_GEMM`` if set (and not ``auto``), else set_backend's, else the probe's."""
    return named() or probe()["backend"]


_FUSED_BIAS = {"int16_avx2", "int8_vnni"}  # backends that add the bias while writing their output


def why_unavailable(name: str) -> str | None:
    """One line saying why backend ``name`` cannot run on this machine, or None (int16_avx2 needs AVX2
    and a C compiler, int8_vnni VNNI as well; the others fail, if at all, on their first call)."""
    from hwvit.ops import native

    if name == "int16_avx2":
        why = native.unavailable()
        return f"int16_avx2 GEMM unavailable: {why}" if why else None
    if name == "int8_vnni":
        try:
            native.vnni_kind()
        except RuntimeError as exc:
            return str(exc)
    return None


def matmul(a8: np.ndarray, w8: np.ndarray, name: str | None = None, bias: np.ndarray | None = None) -> np.ndarray:
    """Exact ``bias + a8 @ w8^T`` (int8 (M, K), (N, K), int64 (N,) or None) as int64 (M, N), or
    ``a8 @ w8^T`` per entry of (B, M, K), (B, N, K)."""
    name = name or backend()
    if name in _FUSED_BIAS:
        return _IMPL[name](a8, w8, bias)
    out = _IMPL[name](a8, w8)
    return out if bias is None else out + bias


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
    bias; else None and the caller requantizes. Arguments checked by ``hwvit.ops.gemm.linear``."""
    name = name or backend()
    if name not in _FUSED_BIAS:
        return None
    from hwvit.ops import native

    kind = native.vnni_kind() if name == "int8_vnni" else native.KINDS["int16"]
    if a8.shape[-1] > native.k_limit(kind):
        return None
    packed = _derived(w8, name, lambda w: native.pack_w(w, kind)) if w8.ndim == 2 else None
    return native.linear_packed(a8, w8, packed, bias, mult, shift, lo, hi, kind)


def cpu_info() -> dict:
    """CPU model, SIMD flags that matter for GEMM, torch's capability, core count."""
    model, flags = platform.processor() or platform.machine(), []
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() in ("flags", "Features") and not flags:
                flags = value.split()
    except OSError:
        pass
    wanted = (
        "avx2",
        "fma",
        "avx512f",
        "avx512_vnni",
        "avx_vnni",
        "amx_int8",
        "asimddp",
        "i8mm",
    )
    try:
        import torch

        capability = torch.backends.cpu.get_cpu_capability()
    except (ImportError, AttributeError):
        capability = "unknown"
    return {
        "model": model,
        "flags": [f for f in wanted if f in flags],
        "capability": capability,
        "cores": os.cpu_count(),
        "all_flags_sha": hashlib.sha1(" ".join(sorted(flags)).encode()).hexdigest()[:12],
    }


def _cache_file() -> Path:
    from hwvit import toolchain

    return toolchain.cache_dir() / "gemm-probe.json"


def _machine_key() -> str:
    import torch

    cpu = cpu_info()
    parts = [
        cpu["model"],
        cpu["all_flags_sha"],
        str(cpu["cores"]),
        torch.__version__,
        np.__version__,
        ",".join(BACKENDS),
        "probe-v2",
    ]
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]


def _exact_cases() -> list[tuple[np.ndarray, np.ndarray]]:
    """Small operands at the extremes, one K past the float32 block (so it splits)."""
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
    return [(a.astype(np.int8), w.astype(np.int8)) for a, w in cases]


def _measure(name: str, a8: np.ndarray, w8: np.ndarray, repeats: int = 5) -> float:
    """Best time of the product followed by a requant of its result, the way a layer runs them.

    Timing the product alone misses what a backend does to the numba kernels after it: OpenBLAS's
    threads spin for a while after each call, and on 2 cores that made the requant after
    ``float_blocked`` 20x slower and the whole ViT-B/16 forward 3x slower than its GEMM time said.
    """
    from hwvit.ops.requant import requant

    fn = _IMPL[name]

    def step() -> None:
        requant(fn(a8, w8), 1 << 16, 24)  # |acc| <= 768 * 2^14 < 2^24: |acc * 2^16| < 2^62

    step()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - t0)
    return 1e3 * best


def run_probe() -> dict:
    """Exactness (against int64) and speed on (197, 768) x (768, 768), with the requant after it, of every
    backend but int64."""
    exact = {}
    for name in BACKENDS:
        try:
            exact[name] = all(np.array_equal(_IMPL[name](a, w), _int64(a, w)) for a, w in _exact_cases())
        except (RuntimeError, AttributeError, NotImplementedError, TypeError):
            exact[name] = False
    rng = np.random.default_rng(1)
    a8 = rng.integers(-128, 128, (197, 768)).astype(np.int8)
    w8 = rng.integers(-128, 128, (768, 768)).astype(np.int8)
    w8.flags.writeable = False  # like a layer's weights
    times = {name: _measure(name, a8, w8) for name in BACKENDS if name != "int64" and exact[name]}
    best = min(times, key=times.get) if times else "int64"
    return {
        "backend": best,
        "times_ms": times,
        "exact": exact,
        "shape": [197, 768, 768],
    }


def probe(refresh: bool = False) -> dict:
    """The probe's result for this machine: from this process, the cache file, or a fresh run."""
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
    if refresh or not (isinstance(entry, dict) and entry.get("backend") in BACKENDS):
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
