"""hwvit's own GEMM kernels (``csrc/gemm_pack.c``, ``csrc/gemm_kernels.c``): built on first use, loaded with ctypes.

One library holds every kind of kernel (``KINDS``): ``int16`` (AVX2 ``vpmaddwd`` on int16 pairs, the
``int16_avx2`` backend), ``avxvnni`` and ``avx512vnni`` (``vpdpbusd`` on uint8/int8 quads, the
``int8_vnni`` backend, on CPUs whose /proc/cpuinfo flags have AVX-VNNI, or AVX512-VNNI with AVX512VL),
``amx`` (AMX ``tdpbusd`` on the same uint8/int8 quads, 32-row blocks; ``int8_vnni`` runs it first where
the CPU has AMX with AVX512F/VL and Linux grants the tile state), ``amx_emulated`` (that block in plain
C, for the tests on CPUs without AMX)
and ``emulated`` (the quads' sums formed with AVX2 instructions: the tests run the VNNI kernels'
packing, offset and tile on CPUs without VNNI; set ``EMULATE_VNNI`` to make ``int8_vnni`` use it),
and ``split7`` (the ``int8_avx2`` backend: AVX2 ``vpmaddubsw`` quads on the 7-bit part of each
activation, ``clamp(a, -64, 63) + 64``, which cannot saturate, plus each row's rare outliers
``a - clamp(a, -64, 63)`` listed at packing and added to the tile's int32 sums).
The same library holds ``hw_lookup_i8``, ``ops.gelu``'s AVX2 table lookup for int8 inputs
(``lookup_i8``: ``vpshufb`` over the table's 16-entry rows; docs/arithmetic.md).
The C source ships with the package; the first call compiles it with the system C compiler
(``$CC``, else ``cc``, ``gcc`` or ``clang``: the one Verilator already needs) into
``$XDG_CACHE_HOME/hwvit/native/<hash>/``, keyed by the source, the flags and the compiler, written to
a temporary name and renamed (a concurrent process sees the whole library or none). Where the CPU
has no AVX2, or no compiler is found, or it fails, ``unavailable()`` says why in one line and the
backends refuse to run (the GEMM probe then picks another).

``matmul_packed(a8, w8)`` runs on numba's threads: a ``prange`` loop (``_jit``'s pool, the one every
other integer kernel runs on) calls the C function once per job, handed out one at a time to the
thread that is free: a 2-D product is a grid of equal row blocks (at most 384 KiB of packed A each, so A stays in
L2 while the job's panels pass over it) by groups of 24-column panels, about 4 jobs per thread; a
batch (attention's heads) is one job per entry. Python threads of its own were slower here:
numba's OpenMP workers spin for a while after each kernel, and two pools on two cores took turns.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import llvmlite.binding
import numba
import numpy as np
from numba import njit, prange, types
from numba.extending import register_jitable

from hwvit import toolchain
from hwvit.ops import cpu
from hwvit.ops.records import Dims, Packing, Product, Scratch, Strided

_CSRC = Path(__file__).with_name("csrc")
SOURCE = _CSRC / "gemm_kernels.c"  # the tiles and products (the AMX tile configuration)
SOURCES = (_CSRC / "gemm_pack.c", SOURCE)  # compiled together into one library
HEADER = _CSRC / "gemm_kernels.h"  # what the two share: kinds, layouts, bounds


def source_digest() -> str:
    """SHA-1 of the kernel's C sources and header (a change rebuilds the library)."""
    h = hashlib.sha1()
    for path in (HEADER, *SOURCES):
        h.update(path.read_bytes())
    return h.hexdigest()


FLAGS = ("-O3", "-mavx2", "-std=c99", "-shared", "-fPIC")
_JOBS_PER_THREAD = 4  # jobs per thread of a 2-D product: a thread slowed by another process holds up less
KINDS = {"int16": 0, "avxvnni": 1, "avx512vnni": 2, "emulated": 3, "amx": 4, "amx_emulated": 5, "split7": 6}  # C KIND_*
K_MAX = 1 << 16  # K of one call: int16 sums need K * 2^14 < 2^31, int8 quads K * 255 * 128 < 2^31
EMULATE_VNNI = False  # tests: int8_vnni runs the "emulated" kind (AVX2) where the CPU has no VNNI
_SMALL = 1 << 21  # multiply-adds below which one thread does the whole product

_lib: ctypes.CDLL | None = None
_why: str | None = None  # why the kernel cannot be used here, once known
_cpu_vnni: tuple[int | None, str] | None = None  # _vnni_of_cpu's answer, once known

# The two C entry points as numba sees them: symbols resolved once _load() has loaded the library
# into the process (so the compiled callers can be cached on disk like _jit's kernels).
_P, _I = types.voidptr, types.int64
_hw_gemm_tiles = types.ExternalFunction("hw_gemm_tiles", types.void(_I, _P, _P, *[_I] * 7, _P, _P))
_hw_gemm_batch = types.ExternalFunction("hw_gemm_batch", types.void(_I, _P, _P, *[_I] * 5, _P))
_hw_linear = types.ExternalFunction("hw_linear", types.void(_I, _P, _P, *[_I] * 8, _P, _P, _P, *[_I] * 3, _P, _I))
_hw_pack_a_rows = types.ExternalFunction("hw_pack_a_rows", types.void(_I, _P, *[_I] * 6, _P, _I))
_hw_pack_w_strided = types.ExternalFunction("hw_pack_w_strided", types.void(_I, _P, *[_I] * 4, _P))
_hw_row_block = types.ExternalFunction("hw_row_block", types.int64(_I, _I, _I))
_hw_reset_jobs = types.ExternalFunction("hw_reset_jobs", types.void(_P))
_hw_next_job = types.ExternalFunction("hw_next_job", types.int64(_P))
_hw_job_done = types.ExternalFunction("hw_job_done", types.void(_P))
_hw_wait_jobs = types.ExternalFunction("hw_wait_jobs", types.void(_P, _I))
_NR = 24  # columns of a W panel (the C NR; _load checks it)
_PACK_ROWS = 32  # rows of packed A per job of the packing loop (a multiple of every kind's block rows)
_hw_lookup_i8 = types.ExternalFunction("hw_lookup_i8", types.void(_P, _I, _P, _P))
_hw_copy_rows = types.ExternalFunction("hw_copy_rows", types.void(_P, _I, _I, _P, _I))
_hw_packed_a_size = types.ExternalFunction("hw_packed_a_size", types.int64(_I, _I, _I))
_hw_packed_w_size = types.ExternalFunction("hw_packed_w_size", types.int64(_I, _I, _I))
_hw_rows_padded = types.ExternalFunction("hw_rows_padded", types.int64(_I, _I))
_hw_now_ns = types.ExternalFunction("hw_now_ns", types.int64())
_LINE = 64  # bytes: packed operands start on a cache line (_words)
_LOOKUP_CHUNK = 1 << 16  # elements per job of the lookup (a multiple of the kernel's 32)


def _compiler() -> str | None:
    cc = os.environ.get("CC", "").strip()
    if cc:
        return shutil.which(cc)
    return next((p for p in map(shutil.which, ("cc", "gcc", "clang")) if p), None)


def _has_avx2() -> bool:
    return not cpu.missing("int16")


def _build(cc: str) -> Path:
    """The compiled library for this source, flags and compiler: from the cache, else built now."""
    version = subprocess.run([cc, "--version"], capture_output=True, text=True, check=False).stdout
    key = hashlib.sha1((source_digest() + repr(FLAGS) + version).encode()).hexdigest()[:16]
    out = toolchain.cache_dir() / "native" / key / "libhwvit_gemm.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=".build.", suffix=".so")
    os.close(fd)
    try:
        res = subprocess.run([cc, *FLAGS, "-o", tmp, *map(str, SOURCES)], capture_output=True, text=True, check=False)
        if res.returncode != 0:
            first = (res.stderr.strip().splitlines() or ["no message"])[0]
            raise OSError(f"{Path(cc).name} failed on {' and '.join(p.name for p in SOURCES)}: {first}")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def _load() -> ctypes.CDLL:
    global _lib, _why
    if _lib is not None:
        return _lib
    if _why is None:
        cc = _compiler()
        if not _has_avx2():
            _why = "the CPU has no AVX2"
        elif cc is None:
            _why = "no C compiler (set CC, or install gcc: sudo apt-get install -y gcc)"
        else:
            try:
                lib = ctypes.CDLL(str(_build(cc)))
            except OSError as exc:
                _why = f"could not build or load the kernel: {exc}"
            else:
                i64, ptr = ctypes.c_int64, ctypes.c_void_p
                for name in ("hw_pack_a", "hw_pack_a_biased", "hw_pack_w"):
                    getattr(lib, name).argtypes = [i64, ptr, i64, i64, i64, ptr]
                    getattr(lib, name).restype = None
                lib.hw_rows_padded.argtypes, lib.hw_rows_padded.restype = [i64, i64], i64
                lib.hw_lookup_i8.argtypes, lib.hw_lookup_i8.restype = [ptr, i64, ptr, ptr], None
                lib.hw_pack_w_strided.argtypes, lib.hw_pack_w_strided.restype = [i64, ptr, *[i64] * 4, ptr], None
                for name in ("hw_packed_a_size", "hw_packed_w_size", "hw_row_block"):
                    getattr(lib, name).argtypes = [i64, i64, i64]
                    getattr(lib, name).restype = i64
                lib.hw_nr.restype = lib.hw_mr.restype = lib.hw_vnni_built.restype = ctypes.c_int
                lib.hw_amx_built.restype = lib.hw_amx_enable.restype = ctypes.c_int
                if lib.hw_nr() != _NR:  # the compiled callers below take the panel width as a constant
                    _why = f"the kernel's panels are {lib.hw_nr()} columns, native.py's _NR {_NR}"
                else:
                    llvmlite.binding.load_library_permanently(lib._name)  # for the numba callers below
                    _lib = lib
                    return lib
    raise RuntimeError(f"int16_avx2 GEMM unavailable: {_why}")


def unavailable() -> str | None:
    """Why the library cannot run on this machine, or None when it can (builds it if needed)."""
    try:
        _load()
    except RuntimeError:
        return _why
    return None


def _vnni_of_cpu() -> tuple[int | None, str]:
    """(the VNNI kind this CPU and library run, or None; why not), read once per process: the GEMM
    calls it on every product, and /proc/cpuinfo is long on a many-core machine."""
    global _cpu_vnni
    if _cpu_vnni is None:
        if not _load().hw_vnni_built():
            _cpu_vnni = (None, "the C compiler is older than gcc 11 / clang 12 (no VNNI target)")
        elif not cpu.missing("amx") and _amx_granted():
            _cpu_vnni = (KINDS["amx"], "")
        elif not cpu.missing("avxvnni"):
            _cpu_vnni = (KINDS["avxvnni"], "")
        elif not cpu.missing("avx512vnni"):
            _cpu_vnni = (KINDS["avx512vnni"], "")
        elif "avx512_vnni" in cpu.features().flags:
            lacks = ", ".join(cpu.missing("avx512vnni"))
            _cpu_vnni = (None, f"the CPU has AVX512-VNNI but not {lacks} (the 256-bit EVEX form needs them)")
        else:
            _cpu_vnni = (None, "the CPU has no AVX-VNNI or AVX512-VNNI")
    return _cpu_vnni


_amx_ok: bool | None = None


def _amx_granted() -> bool:
    """Whether Linux gave this process the AMX tile state (asked once; without it tile
    instructions fault) and the compiler built the AMX tile."""
    global _amx_ok
    if _amx_ok is None:
        lib = _load()
        _amx_ok = bool(lib.hw_amx_built()) and lib.hw_amx_enable() == 0
    return _amx_ok


def amx_why() -> str | None:
    """Why the AMX tile does not run here (None when it does)."""
    lacks = cpu.missing("amx")
    if lacks:
        return f"the CPU lacks {', '.join(lacks)}"
    why = unavailable()
    if why is not None:
        return why
    if not _amx_granted():
        return "Linux did not grant the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM), or the compiler is too old"
    return None


def vnni_kind() -> int:
    """The kind ``int8_vnni`` runs here: AMX (with AVX512F/VL, and Linux's permission), else AVX-VNNI,
    else AVX512-VNNI (with AVX512VL), else ``emulated`` when ``EMULATE_VNNI`` is set; RuntimeError
    with one line saying why not."""
    why = unavailable()
    if why is None:
        if EMULATE_VNNI:
            return KINDS["emulated"]
        kind, why = _vnni_of_cpu()
        if kind is not None:
            return kind
    raise RuntimeError(f"int8_vnni GEMM unavailable: {why}")


def k_limit(kind: int) -> int:
    """The longest K one call takes: int16 sums K * 2^14 < 2^31 (K < 2^17); the int8 quads' offset
    sums K * 255 * 128 < 2^31 (K <= 65793, so 2^16)."""
    return 2 * K_MAX - 1 if kind == KINDS["int16"] else K_MAX


@njit(cache=True)
def _grid(kind, m, k, n, threads):
    """(panels in all, rows per job, row jobs, panels per job, panel jobs) of a 2-D product on
    ``threads`` threads: row blocks that fit L2 (``hw_row_block``) by groups of panels, about
    _JOBS_PER_THREAD jobs a thread; one job on one thread."""
    rows = _hw_row_block(kind, m, k)
    row_jobs, n_panels = -(-m // rows), -(-n // _NR)
    panel_jobs = min(n_panels, max(1, -(-threads * _JOBS_PER_THREAD // row_jobs))) if threads > 1 else 1
    panels = -(-n_panels // panel_jobs)
    return n_panels, rows, row_jobs, panels, -(-n_panels // panels)


@register_jitable
def one_thread(m, k, n):
    """Whether an M x K x N product runs on one thread: below _SMALL multiply-adds, where forking
    costs more than it saves. The rule for Python and compiled callers alike."""
    return m * n * k < _SMALL


def _threads_for(m: int, k: int, n: int) -> int:
    """numba's threads for an M x K x N product (``one_thread``; asked in Python:
    ``numba.get_num_threads`` inside a compiled function keeps numba from caching it). A product on
    one thread does not ask (the question takes two locks, which cost most in the forward, e.g. for
    the classifier's one row an image)."""
    return 1 if one_thread(m, k, n) else numba.get_num_threads()


@njit(parallel=True, cache=True)
def _tiles_parallel(kind, product, pa, pw, bias, c, counter, threads):
    """hw_gemm_tiles of the ``product`` on ``_grid``'s jobs for ``threads`` threads, handed out by the
    job counter (a ``_scratch`` buffer's first line) to one worker a thread. The arrays (packed A,
    packed W, bias, c) by address, as in ``_linear_parallel``."""
    m, k, n = product.m, product.k, product.n
    n_panels, rows, row_jobs, panels, panel_jobs = _grid(kind, m, k, n, threads)
    jobs = row_jobs * panel_jobs
    counter = _line_up(counter)
    _hw_reset_jobs(counter)
    for _ in prange(min(threads, jobs)):
        j = _hw_next_job(counter)
        while j < jobs:
            r0, p0 = (j // panel_jobs) * rows, (j % panel_jobs) * panels
            r1, p1 = min(r0 + rows, m), min(p0 + panels, n_panels)
            _hw_gemm_tiles(kind, pa, pw, m, k, n, r0, r1, p0, p1, bias, c)
            j = _hw_next_job(counter)


@njit(parallel=True, cache=True)
def _linear_parallel(kind, a_at, w_at, at, dims, packing):
    """Pack A, then hw_linear per job, in one parallel loop of workers (one a thread) that take
    numbered jobs from counters in C (``hw_next_job``): an idle thread takes the next one, and no
    chunk size is set from Python. A batch of products (``dims.entries`` > 0): one job per entry,
    which packs its own A (and its W, where ``packing.pack_w``) and runs it whole. One product: the
    workers first pack A in chunks of _PACK_ROWS rows, each counted done when written; a worker waits
    for all of them (``hw_wait_jobs``) before its first block of ``_grid``'s jobs (one parallel loop,
    not two: each costs a fork and join). A ``lut`` (``Packing``) is looked up in place on each job's
    outputs (GELU after fc1, while the block is in cache: ``hw_lookup_i8``).

    ``a_at``, ``w_at``: A and W as ``Strided`` operands (any layout); ``at``: the ``Scratch``
    addresses; ``dims``: the ``Dims``; ``packing``: the ``Packing``. Only integers and records of
    them: one compiled signature whatever the dtypes and flags of the arrays (a read-only array is a
    type of its own to numba, and each signature costs seconds to compile)."""
    m, k, n, entries, threads = dims.m, dims.k, dims.n, dims.entries, dims.threads
    lo, hi, out_bytes = dims.lo, dims.hi, dims.out_bytes
    flip, padded, sa, sw = packing.flip, packing.padded, packing.sa, packing.sw
    bias_step, lut = packing.bias_step, packing.lut
    pa, pw, bias, mult, shift, y = at.packed_a, at.packed_w, at.bias, at.mult, at.shift, at.y
    next_chunk = _line_up(pa)  # three counters, a line each (every worker adds to them), then packed A
    chunks_done, next_job = next_chunk + _LINE, next_chunk + 2 * _LINE
    pa = next_chunk + 3 * _LINE  # the packed operands this call makes start on a cache line (_scratch)
    if packing.pack_w:
        pw = _line_up(pw)
    raw = 1 if flip == 0 else 0
    a_addr, a_se, a_sm, a_sk = a_at.addr, a_at.entry, a_at.row, a_at.k
    w_addr, w_se, w_sn, w_sk = w_at.addr, w_at.entry, w_at.row, w_at.k
    if entries > 0:  # each job packs its own entry
        n_panels, rows, row_jobs, panels, panel_jobs = -(-n // _NR), m, 1, -(-n // _NR), 1
        jobs, chunks = entries, 0
    else:  # the workers pack A in chunks of _PACK_ROWS rows first, then run the grid
        n_panels, rows, row_jobs, panels, panel_jobs = _grid(kind, m, k, n, threads)
        jobs, chunks = row_jobs * panel_jobs, (padded + _PACK_ROWS - 1) // _PACK_ROWS
    _hw_reset_jobs(next_chunk)
    _hw_reset_jobs(chunks_done)
    _hw_reset_jobs(next_job)
    for _ in prange(min(threads, max(jobs, chunks))):
        c = _hw_next_job(next_chunk)
        while c < chunks:
            r0 = c * _PACK_ROWS
            _hw_pack_a_rows(kind, a_addr, m, k, a_sm, a_sk, r0, min(r0 + _PACK_ROWS, padded), pa, flip)
            _hw_job_done(chunks_done)
            c = _hw_next_job(next_chunk)
        j = _hw_next_job(next_job)
        if j < jobs:
            _hw_wait_jobs(chunks_done, chunks)  # all of A packed (one parallel loop, not two)
        while j < jobs:
            whole = entries > 0  # a job is one entry, whole; else one block of the grid
            e = j if whole else 0
            if whole:
                _hw_pack_a_rows(kind, a_addr + e * a_se, m, k, a_sm, a_sk, 0, padded, pa + 4 * e * sa, flip)
                if packing.pack_w:
                    _hw_pack_w_strided(kind, w_addr + e * w_se, n, k, w_sn, w_sk, pw + 4 * e * sw)
            r0 = 0 if whole else (j // panel_jobs) * rows
            p0 = 0 if whole else (j % panel_jobs) * panels
            r1 = m if whole else min(r0 + rows, m)
            p1 = n_panels if whole else min(p0 + panels, n_panels)
            # entry e's operands, bias row and output (hw_linear's own entry offsets, with the bias's step)
            ea, ew, eb, ey = pa + 4 * e * sa, pw + 4 * e * sw, bias + 8 * e * bias_step, y + e * m * n * out_bytes
            _hw_linear(kind, ea, ew, m, k, n, 0, r0, r1, p0, p1, eb, mult, shift, lo, hi, out_bytes, ey, raw)
            if lut != 0:  # the job's rows r0..r1, columns of panels p0..p1, in place
                c0 = p0 * _NR
                for r in range(r0, r1):
                    _hw_lookup_i8(ey + r * n + c0, min(p1 * _NR, n) - c0, lut, ey + r * n + c0)
            j = _hw_next_job(next_job)


@njit(cache=True)
def _sizes_of(kind, m, k, n):
    """(int32 words of one packed A, of one packed W, padded rows) of an M x K x N product."""
    return _hw_packed_a_size(kind, m, k), _hw_packed_w_size(kind, n, k), _hw_rows_padded(kind, m)


@njit(parallel=True, cache=True)
def _batch_parallel(kind, pa, pw, m, k, n, entries, c):
    """hw_gemm_batch, one job per entry (the arrays by address)."""
    for b in prange(entries):
        _hw_gemm_batch(kind, pa, pw, m, k, n, b, b + 1, c)


def _words(count: int) -> np.ndarray:
    """An uninitialized int32 vector of ``count`` words starting on a 64-byte boundary (a cache line).
    The packed operands are read in rows of 64 bytes (an AMX tile row, an AVX-512 load) or 32: from
    numpy's 16-byte alignment such a row can span two lines, and the AMX kernel then reads two lines a
    row. The scratch of a call is aligned in the compiled code instead
    (``_scratch``, ``_linear_parallel``): a few microseconds of Python less a call."""
    buf = np.empty(count + _LINE // 4, np.int32)
    skip = (-buf.ctypes.data % _LINE) // 4
    return buf[skip : skip + count]


def _scratch(count: int) -> np.ndarray:
    """Room for three cache lines (job counters) and ``count`` int32 words after the first 64-byte
    boundary in it (``_line_up``)."""
    return np.empty(count + 4 * _LINE // 4, np.int32)


@njit(cache=True)
def pack_a_rows(kind, a_at, m, k, r0, r1, out, flip):
    """Rows [r0, r1) of the packed A of the M x K matrix at ``a_at`` (a ``Strided``: address, row and
    K strides in bytes) into the int32 words at address ``out``: hw_pack_a_rows, as the compiled
    products call it, for the tests of the layout."""
    _hw_pack_a_rows(kind, a_at.addr, m, k, a_at.row, a_at.k, r0, r1, out, flip)


@njit(cache=True)
def _line_up(address):
    """The first 64-byte boundary at or after ``address`` (a ``_scratch`` buffer's start)."""
    return (address + _LINE - 1) // _LINE * _LINE


def pack_w(w8: np.ndarray, kind: int = 0) -> np.ndarray:
    """(N, K) or (B, N, K) int8 -> the kernel's panels for ``kind`` (one per entry, one after another)."""
    lib = _load()
    w8 = np.ascontiguousarray(w8, np.int8)
    n, k = w8.shape[-2:]
    count = w8.shape[0] if w8.ndim == 3 else 1
    out = _words(count * lib.hw_packed_w_size(kind, n, k))
    lib.hw_pack_w(kind, w8.ctypes.data, count, n, k, out.ctypes.data)
    return out


def _pack_a(a8: np.ndarray, kind: int) -> np.ndarray:
    """Packed A of int8 ``a8``, or of a uint8 ``a8``: for a group-4 kind it holds ``a + 128`` already
    (an unsigned operand in offset form: packed as it is, no pass to take 128 off first); for int16
    the values 0..255 themselves, zero-extended."""
    lib = _load()
    m, k = a8.shape[-2:]
    count = a8.shape[0] if a8.ndim == 3 else 1
    out = _words(count * lib.hw_packed_a_size(kind, m, k))
    if a8.dtype == np.uint8:
        lib.hw_pack_a_biased(kind, a8.ctypes.data, count, m, k, out.ctypes.data)
    else:
        lib.hw_pack_a(kind, a8.ctypes.data, count, m, k, out.ctypes.data)
    return out


def _check_k(k: int, kind: int) -> None:
    if k > k_limit(kind):
        raise ValueError(f"K = {k} > {k_limit(kind)}: the kernel's int32 sums could overflow")


def matmul_packed(
    a8: np.ndarray,
    w8: np.ndarray,
    packed_w: np.ndarray | None = None,
    bias: np.ndarray | None = None,
    kind: int = 0,
) -> np.ndarray:
    """Exact ``bias + a8 @ w8^T`` as int64: (M, K) x (N, K) -> (M, N), or per entry of (B, M, K) x (B, N, K)
    (no bias there), on the kernel ``kind``.

    K at most ``k_limit(kind)`` (``gemm_backends`` splits longer K). ``packed_w``: ``pack_w(w8, kind)``
    made earlier; ``bias``: (N,) int64 or None.
    """
    _load()  # the library's symbols, which the compiled callers call, are in the process
    a8, w8 = np.ascontiguousarray(a8, np.int8), np.ascontiguousarray(w8, np.int8)
    m, k = a8.shape[-2:]
    n = w8.shape[-2]
    _check_k(k, kind)
    pa = _pack_a(a8, kind)
    pw = pack_w(w8, kind) if packed_w is None else packed_w
    if a8.ndim == 3:
        if bias is not None:
            raise ValueError("a batched product takes no bias")
        c = np.empty((a8.shape[0], m, n), np.int64)
        _batch_parallel(kind, pa.ctypes.data, pw.ctypes.data, m, k, n, a8.shape[0], c.ctypes.data)
        return c
    c = np.empty((m, n), np.int64)
    bias = np.zeros(n, np.int64) if bias is None else np.ascontiguousarray(bias, np.int64)
    counter = _scratch(0)
    threads = _threads_for(m, k, n)
    at = (pa.ctypes.data, pw.ctypes.data, bias.ctypes.data, c.ctypes.data, counter.ctypes.data)
    _tiles_parallel(kind, Product(m, k, n), *at, threads)
    return c


@functools.lru_cache(maxsize=1024)
def _sizes(kind: int, m: int, k: int, n: int) -> tuple[int, int, int]:
    """(int32 words of one packed A, of one packed W, padded rows) of a product: asked of the library
    once per shape, not at every call."""
    _load()  # the library's symbols, which _sizes_of calls
    return _sizes_of(kind, m, k, n)


def linear_packed(
    a8: np.ndarray,
    w8: np.ndarray,
    packed_w: np.ndarray | None,
    bias: np.ndarray,
    mult: np.ndarray,
    shift: np.ndarray,
    lo: int,
    hi: int,
    kind: int = 0,
) -> np.ndarray:
    """``ops.requant(bias + a8 @ w8^T, mult, shift)`` clamped to [lo, hi], computed in the tile as
    the sums are stored (the int32 sums are never written out): (M, K) x (N, K) -> (M, N), or per
    entry of (B, M, K) x (B, N, K) with a (B, N) bias, or an (N,) one that every entry shares,
    -> (B, M, N); int8 when [lo, hi] fits it,
    else int16. ``packed_w``: ``pack_w(w8, kind)`` made earlier, or None. A uint8 ``a8`` (an unsigned
    operand, P.V's probabilities) is multiplied as it is: its bytes are what the quad instruction
    takes, and the int16 kernel widens them to 0..255, so neither a pass over it nor an offset
    correction is needed.

    The caller (``hwvit.ops.gemm.linear``) has checked everything the kernel trusts: |bias| + K * 255
    * 128 < 2^31, mult (N,) in [0, 2^31 - 1], shift (N,) in [0, 62], [lo, hi] within 16 bits, K at
    most ``k_limit(kind)``.
    """
    _load()  # the library's symbols, which _linear_parallel calls, are in the process
    if a8.dtype not in (np.int8, np.uint8):
        a8 = np.ascontiguousarray(a8, np.int8)  # int8 and uint8 are packed in any layout, strides and all
    m, k = a8.shape[-2:]
    n = w8.shape[-2]
    _check_k(k, kind)
    if not -(1 << 15) <= lo <= hi < 1 << 15:
        raise ValueError(f"linear_packed: [{lo}, {hi}] must lie within 16 bits")
    if a8.ndim == 2:  # one product: the call a layer's plan makes, with W packed now if need be
        pw = pack_w(np.ascontiguousarray(w8, np.int8), kind) if packed_w is None else packed_w
        return linear_planned(a8, plan_linear(w8, pw, bias, mult, shift, kind), lo, hi)
    entries = a8.shape[0]  # a batch: one job per entry, which packs its own A (and W, unless given)
    y = np.empty((entries, m, n), np.int8 if -128 <= lo and hi <= 127 else np.int16)
    sa, sw, padded = _sizes(kind, m, k, n)
    pa = _scratch(entries * sa)
    pack_in_jobs = packed_w is None
    w8 = w8 if pack_in_jobs and w8.dtype == np.int8 else np.ascontiguousarray(w8, np.int8)
    pw = _scratch(entries * sw) if pack_in_jobs else packed_w  # a packed_w from pack_w is aligned
    # flat int64 vectors (a batch's (B, N) bias entry after entry): one compiled signature
    bias, mult, shift = (np.ascontiguousarray(v, np.int64).reshape(-1) for v in (bias, mult, shift))
    flip = 0 if a8.dtype == np.uint8 else 0x80
    dims = Dims(m, k, n, entries, lo, hi, y.itemsize, numba.get_num_threads())
    packing = Packing(flip, padded, sa, sw, int(pack_in_jobs), n if bias.size > n else 0, 0)
    # every array by address (each lives in this frame for the call), A and W with their strides
    a_at, w_at = (Strided(x.ctypes.data, *x.strides) for x in (a8, w8))
    at = Scratch(pa.ctypes.data, pw.ctypes.data, bias.ctypes.data, mult.ctypes.data, shift.ctypes.data, y.ctypes.data)
    _linear_parallel(kind, a_at, w_at, at, dims, packing)
    return y


def plan_linear(
    w8: np.ndarray, packed_w: np.ndarray, bias: np.ndarray, mult: np.ndarray, shift: np.ndarray, kind: int
) -> tuple:
    """What ``linear_planned`` needs of one layer, made once for a layer's read-only parameters
    (``hwvit.ops.gemm.linear`` keeps it with them): the kind, N, K, W packed for the kind
    (``pack_w(w8, kind)``), the (N,) int64 bias, multipliers and shifts as contiguous vectors, and the
    four addresses (the tuple holds the arrays, so the addresses stay good while it lives). Checked by
    the caller as for ``linear_packed``; K at most ``k_limit(kind)``."""
    _load()
    n, k = w8.shape
    _check_k(k, kind)
    vectors = tuple(np.ascontiguousarray(v, np.int64).reshape(-1) for v in (bias, mult, shift))
    return (kind, n, k, packed_w, vectors, (packed_w.ctypes.data, *(v.ctypes.data for v in vectors)))


def linear_planned(a8: np.ndarray, plan: tuple, lo: int, hi: int) -> np.ndarray:
    """``linear_packed`` of a 2-D int8 (or uint8) ``a8`` in any layout with a layer's ``plan_linear``:
    the same kernel call, with the per-layer work done once (packing, the vectors, their addresses),
    which is most of the Python a call costs (tests/test_ops_linear.py holds it to the same integers)."""
    kind, n, k, _, _, (pw_at, bias_at, mult_at, shift_at) = plan
    m = a8.shape[0]
    y = np.empty((m, n), np.int8 if -128 <= lo and hi <= 127 else np.int16)
    sa, sw, padded = _sizes(kind, m, k, n)
    pa = _scratch(sa)  # the job counter, then A packed by all threads in the kernel
    flip = 0 if a8.dtype == np.uint8 else 0x80
    at = Scratch(pa.ctypes.data, pw_at, bias_at, mult_at, shift_at, y.ctypes.data)
    dims, packing = Dims(m, k, n, 0, lo, hi, y.itemsize, _threads_for(m, k, n)), Packing(flip, padded, sa, sw, 0, 0, 0)
    _linear_parallel(kind, Strided(a8.ctypes.data, 0, *a8.strides), Strided(0, 0, 0, 0), at, dims, packing)
    return y


@njit(parallel=True, cache=True)
def _lookup_parallel(x_at, n, table_at, out_at):
    """hw_lookup_i8 on chunks of _LOOKUP_CHUNK elements, one job each (addresses of int8 arrays)."""
    for c in prange((n + _LOOKUP_CHUNK - 1) // _LOOKUP_CHUNK):
        start = c * _LOOKUP_CHUNK
        _hw_lookup_i8(x_at + start, min(n - start, _LOOKUP_CHUNK), table_at, out_at + start)


def lookup_i8(x8: np.ndarray, table8: np.ndarray) -> np.ndarray:
    """``table8[x8 + 128]`` for an int8 ``x8`` (any shape) and a (256,) int8 table: AVX2 ``vpshufb``
    over the table's sixteen 16-entry rows, 32 elements at a time (``hw_lookup_i8``), chunks of
    64 Ki elements on numba's threads. Every index of an int8 is in the table: nothing to check."""
    _load()
    x8 = np.ascontiguousarray(x8)
    table8 = np.ascontiguousarray(table8)
    if x8.dtype != np.int8 or table8.dtype != np.int8 or table8.shape != (256,):
        raise ValueError("lookup_i8: int8 x and a (256,) int8 table")
    out = np.empty(x8.shape, np.int8)
    _lookup_parallel(x8.ctypes.data, x8.size, table8.ctypes.data, out.ctypes.data)
    return out
