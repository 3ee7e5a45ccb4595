"""hwvit's own GEMM kernels (``csrc/gemm_kernels.c``): built on first use, loaded with ctypes.

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

from hwvit import toolchain
from hwvit.ops import cpu
from hwvit.ops._jit import layernorm_rows, residual_layernorm_rows, residual_rows, softmax_row

SOURCE = Path(__file__).with_name("csrc") / "gemm_kernels.c"
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
    src = SOURCE.read_bytes()
    version = subprocess.run([cc, "--version"], capture_output=True, text=True, check=False).stdout
    key = hashlib.sha1(src + repr(FLAGS).encode() + version.encode()).hexdigest()[:16]
    out = toolchain.cache_dir() / "native" / key / "libhwvit_gemm.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=".build.", suffix=".so")
    os.close(fd)
    try:
        res = subprocess.run([cc, *FLAGS, "-o", tmp, str(SOURCE)], capture_output=True, text=True, check=False)
        if res.returncode != 0:
            first = (res.stderr.strip().splitlines() or ["no message"])[0]
            raise OSError(f"{Path(cc).name} failed on {SOURCE.name}: {first}")
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
                lib.hw_pack_a_rows.argtypes = [i64, ptr, *[i64] * 6, ptr, i64]
                lib.hw_pack_w_strided.argtypes = [i64, ptr, *[i64] * 4, ptr]
                lib.hw_pack_a_rows.restype = lib.hw_pack_w_strided.restype = None
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


def _threads_for(m: int, k: int, n: int) -> int:
    """numba's threads for an M x K x N product (``_threads_of``; asked in Python:
    ``numba.get_num_threads`` inside a compiled function keeps numba from caching it). A product
    below _SMALL runs on one thread without asking (the question takes two locks: 40 us in the
    forward, e.g. for the classifier's one row a image)."""
    return 1 if m * n * k < _SMALL else numba.get_num_threads()  # _threads_of's rule, without a dispatch


@njit(cache=True)
def _threads_of(threads, m, k, n):
    """The threads an M x K x N product runs on out of ``threads``: one below _SMALL multiply-adds."""
    return threads if m * n * k >= _SMALL else 1


@njit(parallel=True, cache=True)
def _tiles_parallel(kind, pa, pw, m, k, n, bias, c, counter, threads):
    """hw_gemm_tiles on ``_grid``'s jobs for ``threads`` threads, handed out by the job counter (a
    ``_scratch`` buffer's first line) to one worker a thread. The arrays (packed A, packed W, bias, c)
    by address, as in ``_linear_parallel``."""
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
    chunk size is set from Python. ``padded``: the packed rows of one A; ``sa``, ``sw``: int32 words
    of one packed A, W. A batch of products (``entries`` > 0): one job per entry, which packs its own
    A (and its W, where ``pack_w``) and runs it whole. One product: the workers first pack A in chunks
    of _PACK_ROWS rows, each counted done when written; a worker waits for all of them
    (``hw_wait_jobs``) before its first block of ``_grid``'s jobs (a second parallel loop cost a
    fork and join, 11 us a call on 16 threads). ``out_bytes``: 1 (int8 y) or 2 (int16); ``flip``: 0x80
    for an int8 ``a8``, 0 for a uint8 one (its bytes are the operand: the tile runs raw, with no
    offset correction). ``dims``: (m, k, n, entries, lo, hi, out_bytes, threads); ``packing``: (flip,
    padded, sa, sw, pack_w, bias_step): ``bias_step`` the int64 words from one entry's bias row to
    the next (N; 0: one row that every entry shares), ``lut``: 0, or the address of a 256-entry int8
    table that each job's int8 outputs are looked up in as soon as it has stored them (GELU after fc1,
    while the block is in cache: ``hw_lookup_i8`` in place). A and W come as (address, entry stride, row
    stride, K stride), in bytes (one byte an element): any layout; the scratch and the vectors as
    addresses ``at``: (packed A, packed W, bias, mult, shift, y), the packed A a ``_scratch`` buffer
    (three counters on lines of their own from its first cache line, packed A after them) and W,
    where ``pack_w``, one too (from its first line on). Only integers and tuples of them: one compiled
    signature whatever the dtypes and flags of the arrays (a read-only array is a type of its own to
    numba, and each signature costs seconds to compile)."""
    m, k, n, entries, lo, hi, out_bytes, threads = dims
    flip, padded, sa, sw, pack_w, bias_step, lut = packing
    pa, pw, bias, mult, shift, y = at
    next_chunk = _line_up(pa)  # three counters, a line each (every worker adds to them), then packed A
    chunks_done, next_job = next_chunk + _LINE, next_chunk + 2 * _LINE
    pa = next_chunk + 3 * _LINE  # the packed operands this call makes start on a cache line (_scratch)
    if pack_w:
        pw = _line_up(pw)
    raw = 1 if flip == 0 else 0
    a_addr, a_se, a_sm, a_sk = a_at
    w_addr, w_se, w_sn, w_sk = w_at
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
                if pack_w:
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


@njit(parallel=True, cache=True)
def _attention_parallel(kind, q_at, k_at, v_at, y_at, vecs, dims, scores, probs, ebuf, ctx, scratch, table):
    """``attention_heads``: per entry e, one job of a worker (one a thread, entries from a counter):
    Q.K^T requantized to int8 scores (pack q[e] and k[e], hw_linear), the softmax of each score row
    to uint8 probabilities (``_jit.softmax_row``), P.V^T requantized to the int8 context (pack the
    probabilities raw, v[e] as W with its rows along hd, hw_linear). The worker's scores, probabilities,
    exp buffer and context are its rows of ``scores``, ``probs``, ``ebuf``, ``ctx``; its packed
    operands a slot of its own in ``scratch``, after the counter's line (``_attention_buffers``).

    Entry e is head ``e % heads`` of image ``e // heads``; q, k, v come as (address, image stride,
    head stride, row stride, K stride) in bytes (v's row stride along hd, its K stride along the
    tokens), the (N, hd) context goes to (address, image stride, head stride, row stride): the
    heads of an (E, N, hd) array (heads = E, image stride 0) or the column blocks of a (B, N, H*hd)
    activation alike. ``vecs``: (zero bias, score multipliers, score shifts, context multipliers,
    context shifts), (N,) or (hd,) int64 addresses; ``dims``: (E, heads, N, hd, threads, score lo,
    hi, context lo, hi, softmax q, recip_shift, exp_frac, shift_frac, NQ): the first NQ <= N query rows
    of each entry against all N keys and values (each query row's context depends on its own row of
    Q alone), an (NQ, hd) context."""
    q_addr, q_si, q_sh, q_sm, q_sk = q_at
    k_addr, k_si, k_sh, k_sn, k_sk = k_at
    v_addr, v_si, v_sh, v_sd, v_sn = v_at
    y_addr, y_si, y_sh, y_sm = y_at
    zero, s_mult, s_shift, c_mult, c_shift = vecs
    entries, heads, n, hd, threads, slo, shi, clo, chi, qmax, recip_shift, exp_frac, shift_frac, nq = dims
    (sa1, sw1, sa2, sw2), _, _ = _attention_slot(kind, n, hd)
    slot = sa1 + sw1 + sa2 + sw2
    pad = _hw_rows_padded(kind, nq)  # the packed rows of Q and of P (the slot holds N's)
    workers = min(threads, entries)
    counter = _line_up(scratch.ctypes.data)
    _hw_reset_jobs(counter)
    for t in prange(workers):
        pa1 = counter + _LINE + 4 * t * slot
        pw1 = pa1 + 4 * sa1
        pa2 = pw1 + 4 * sw1
        pw2 = pa2 + 4 * sa2
        sc, pr, e_buf, own = scores[t], probs[t], ebuf[t], ctx[t].ctypes.data
        e = _hw_next_job(counter)
        while e < entries:
            img, head = e // heads, e % heads
            q_e, k_e = q_addr + img * q_si + head * q_sh, k_addr + img * k_si + head * k_sh
            _hw_pack_a_rows(kind, q_e, nq, hd, q_sm, q_sk, 0, pad, pa1, 0x80)
            _hw_pack_w_strided(kind, k_e, n, hd, k_sn, k_sk, pw1)
            s_at, panels = sc.ctypes.data, -(-n // _NR)
            _hw_linear(kind, pa1, pw1, nq, hd, n, 0, 0, nq, 0, panels, zero, s_mult, s_shift, slo, shi, 1, s_at, 0)
            for i in range(nq):
                softmax_row(sc, i, table, qmax, recip_shift, False, 0, exp_frac, shift_frac, e_buf, pr)
            _hw_pack_a_rows(kind, pr.ctypes.data, nq, n, n, 1, 0, pad, pa2, 0)
            _hw_pack_w_strided(kind, v_addr + img * v_si + head * v_sh, hd, n, v_sd, v_sn, pw2)
            y_e = y_addr + img * y_si + head * y_sh
            panels = -(-hd // _NR)
            if y_sm == hd:  # the entry's (NQ, hd) context is contiguous where it goes: written there
                _hw_linear(kind, pa2, pw2, nq, n, hd, 0, 0, nq, 0, panels, zero, c_mult, c_shift, clo, chi, 1, y_e, 1)
            else:  # into the worker's own, then row by row to its place
                _hw_linear(kind, pa2, pw2, nq, n, hd, 0, 0, nq, 0, panels, zero, c_mult, c_shift, clo, chi, 1, own, 1)
                _hw_copy_rows(own, nq, hd, y_e, y_sm)
            e = _hw_next_job(counter)


@njit(cache=True)
def _lines(words):
    """``words`` int32 words rounded up to whole cache lines."""
    return -(-words // (_LINE // 4)) * (_LINE // 4)


@njit(cache=True)
def _sizes_of(kind, m, k, n):
    """(int32 words of one packed A, of one packed W, padded rows) of an M x K x N product."""
    return _hw_packed_a_size(kind, m, k), _hw_packed_w_size(kind, n, k), _hw_rows_padded(kind, m)


@njit(cache=True)
def _attention_slot(kind, n, hd):
    """(int32 words of a worker's packed Q, K, P and V^T, each a whole number of cache lines; the
    padded rows of Q and of P) for ``_attention_parallel``."""
    sa1, sw1, pad1 = _sizes_of(kind, n, hd, n)
    sa2, sw2, pad2 = _sizes_of(kind, n, n, hd)
    return (_lines(sa1), _lines(sw1), _lines(sa2), _lines(sw2)), pad1, pad2


@njit(cache=True)
def _attention_buffers(kind, workers, n, hd):
    """Each worker's scores, probabilities, exp buffer and context for ``_attention_parallel``, and the
    scratch for the counter and every worker's packed operands. Made by the caller and passed in as
    arrays: an array that compiled code only takes the address of is freed after that (numba frees a
    variable after its last use), before the C code it was handed to has run."""
    words, _, _ = _attention_slot(kind, n, hd)
    slot = words[0] + words[1] + words[2] + words[3]
    return (
        np.empty((workers, n, n), np.int8),
        np.empty((workers, n, n), np.uint8),
        np.empty((workers, n), np.int64),
        np.empty((workers, n, hd), np.int8),
        np.empty(workers * slot + 2 * _LINE // 4, np.int32),
    )


@njit(cache=True)
def _keep_alive(array):
    """A use of ``array`` after the C calls that had only its address: numba frees an array after its
    variable's last use, and taking ``.ctypes.data`` is a use that ends there."""
    return array.size


def attention_heads(
    q8: np.ndarray,
    k8: np.ndarray,
    v8: np.ndarray,
    scores: tuple,
    table: np.ndarray,
    qmax: int,
    context: tuple,
    kind: int,
) -> np.ndarray:
    """Per entry e of int8 (E, N, hd) ``q8``, ``k8``, ``v8`` in any layout: the int8 context
    ``requant(softmax(requant(q8[e] @ k8[e]^T)) @ v8[e])`` (E, N, hd), every step on the integers
    of ``linear_packed`` and ``ops.softmax`` (table form), one compiled call whose jobs are the
    entries. ``scores``, ``context``: ((N,) / (hd,) int64 multipliers, shifts, lo, hi) with [lo, hi]
    within int8; ``table``: the softmax's exp table with its trailing 0 (``softmax._padded``),
    ``qmax``: 2^out_bits - 1 of the probabilities (<= 255). Checked by ``hwvit.ops.attention_heads``."""
    from hwvit.ops.softmax import EXP_FRAC, RECIP_SHIFT, SHIFT_FRAC

    _load()
    entries, n, hd = q8.shape
    for k in (hd, n):
        _check_k(k, kind)
    y = np.empty((entries, n, hd), np.int8)
    threads = min(numba.get_num_threads(), entries)
    zero = np.zeros(max(n, hd), np.int64)
    (smult, sshift, slo, shi), (cmult, cshift, clo, chi) = scores, context
    vecs = (zero.ctypes.data, smult.ctypes.data, sshift.ctypes.data, cmult.ctypes.data, cshift.ctypes.data)
    dims = (entries, entries, n, hd, threads, slo, shi, clo, chi, qmax, RECIP_SHIFT, EXP_FRAC, SHIFT_FRAC, n)
    q_at, k_at = ((x.ctypes.data, 0, *x.strides) for x in (q8, k8))
    v_at = (v8.ctypes.data, 0, v8.strides[0], v8.strides[2], v8.strides[1])
    y_at = (y.ctypes.data, 0, n * hd, hd)
    _attention_parallel(kind, q_at, k_at, v_at, y_at, vecs, dims, *_attention_buffers(kind, threads, n, hd), table)
    return y


@njit(cache=True)
def _linear_into(kind, a, lin, y, scratch, threads, lut):
    """``linear_planned`` of the 2-D int8 ``a`` (contiguous) into the int8 ``y``, in compiled code: ``lin``
    is (N, K, packed W, bias, multipliers, shifts, lo, hi), the last four vectors by address;
    ``scratch`` an int32 buffer of at least the packed A's words and four cache lines; ``lut``: 0, or
    a table the outputs are looked up in (``_linear_parallel``). Returns the nanoseconds it took."""
    start = _hw_now_ns()
    n, k, pw, bias, mult, shift, lo, hi = lin
    m = a.shape[0]
    sa, sw, padded = _sizes_of(kind, m, k, n)
    at = (scratch.ctypes.data, pw, bias, mult, shift, y.ctypes.data)
    dims, packing = (m, k, n, 0, lo, hi, 1, _threads_of(threads, m, k, n)), (0x80, padded, sa, sw, 0, 0, lut)
    _linear_parallel(kind, (a.ctypes.data, 0, k, 1), (0, 0, 0, 0), at, dims, packing)
    return _hw_now_ns() - start


@njit(cache=True)
def _encoder_block(kind, x, images, norms, lins, adds, att, gelu_at, table, threads, keep):
    """One pre-norm encoder block on the (B*N, D) int8 rows ``x`` of ``images`` images, every step
    one of the kernels the separate calls run, on the same integers, with no Python between them:
    LayerNorm (``layernorm_rows``), the qkv projection (``_linear_into``), every head's attention
    (``_attention_parallel``, reading q, k and v where the projection put them and writing each head's
    context to its columns), the output projection, the residual add and the second LayerNorm in one
    pass (``residual_layernorm_rows``), fc1 with GELU's lookup in each of its jobs, fc2 and the second
    residual add. ``norms``: two (gamma, beta, eps, mult, shift, lo, hi, t_bits, k_bits, f_bits);
    ``lins``: qkv, proj, fc1, fc2 as ``_linear_into`` takes them; ``adds``: two (Ma, Mb, s vectors,
    lo, hi); ``att``: (heads, head dim, zero bias, score multipliers, shifts (addresses), lo, hi, context
    multipliers, shifts, lo, hi, softmax q, recip_shift, exp_frac, shift_frac); ``table``: the exp
    table with its trailing 0. ``keep``: the tokens of each image that come out (the first ``keep`` of
    its N): every row is LayerNormed and projected to k and v, but only those rows' queries attend,
    and only those rows go on through the projection, the MLP and the adds (each step after the
    attention is row by row), so with ``keep`` < N the output is the full one's rows of those tokens.
    Returns the (B*keep, D) int8 output, the largest Ve of the two norms and the nanoseconds spent in
    the four projections (``hwvit bench`` counts them as GEMM time)."""
    m, d = x.shape
    n = m // images
    mk = images * keep  # the rows that go on after the attention
    qkv, proj, fc1, fc2 = lins
    heads, hd, zero, s_mult, s_shift, slo, shi, c_mult, c_shift, clo, chi, qmax, recip_shift, exp_frac, shift_frac = att
    inner = heads * hd  # the width of q, k, v and the context (D in ViT-B/16, not in every model)
    words = 0
    for lin in (qkv, proj, fc1, fc2):
        words = max(words, _hw_packed_a_size(kind, m, lin[1]))
    scratch = np.empty(words + 4 * _LINE // 4, np.int32)
    g, beta, eps, mult, shift, lo, hi, t_bits, k_bits, f_bits = norms[0]
    h = np.empty((m, d), np.int8)
    ve = layernorm_rows(x, g, beta, eps, mult, shift, lo, hi, t_bits, k_bits, f_bits, h).max()
    qkv_out = np.empty((m, 3 * inner), np.int8)
    spent = _linear_into(kind, h, qkv, qkv_out, scratch, threads, 0)
    ctx = np.empty((mk, inner), np.int8)
    entries = images * heads
    workers = min(threads, entries)
    row, at = 3 * inner, qkv_out.ctypes.data  # q, k, v: column blocks 0, 1, 2 of the projection
    q_at, k_at = (at, n * row, hd, row, 1), (at + inner, n * row, hd, row, 1)
    v_at = (at + 2 * inner, n * row, hd, 1, row)
    y_at = (ctx.ctypes.data, keep * inner, hd, inner)
    dims = (entries, heads, n, hd, workers, slo, shi, clo, chi, qmax, recip_shift, exp_frac, shift_frac, keep)
    vecs = (zero, s_mult, s_shift, c_mult, c_shift)
    _attention_parallel(kind, q_at, k_at, v_at, y_at, vecs, dims, *_attention_buffers(kind, workers, n, hd), table)
    _keep_alive(qkv_out)  # read by address above
    a = np.empty((mk, d), np.int8)
    spent += _linear_into(kind, ctx, proj, a, scratch, threads, 0)
    x1, h2 = np.empty((mk, d), np.int8), np.empty((mk, d), np.int8)
    if keep < n:  # the residual stream of the rows that go on
        xk = np.empty((mk, d), np.int8)
        for i in range(images):  # element by element: a slice assignment compiles a shape check
            for t in range(keep):  # whose error message (string formatting) took 8 s to compile
                for c in range(d):
                    xk[i * keep + t, c] = x[i * n + t, c]
        ve = max(ve, residual_layernorm_rows(xk, a, adds[0], x1, norms[1], h2))
    else:
        ve = max(ve, residual_layernorm_rows(x, a, adds[0], x1, norms[1], h2))
    f = np.empty((mk, fc1[0]), np.int8)
    spent += _linear_into(kind, h2, fc1, f, scratch, threads, gelu_at)  # GELU in place, job by job
    spent += _linear_into(kind, f, fc2, a, scratch, threads, 0)
    out = np.empty((mk, d), np.int8)
    ma, mb, s, rlo, rhi = adds[1]
    residual_rows(x1, a, ma, mb, s, rlo, rhi, out)
    return out, ve, spent


def encoder_block(
    x8: np.ndarray, images: int, plan: tuple, keep: int | None = None, threads: int | None = None
) -> tuple[np.ndarray, int, int]:
    """``_encoder_block`` on the C-contiguous (B*N, D) int8 rows ``x8`` of ``images`` images with a
    block's plan (``hwvit.ops.encoder``: kind, norms, linears, adds, attention, GELU table address,
    exp table; every shape and width checked there): the (B*keep, D) int8 output (``keep``: the first
    tokens of each image, 1..N; None: all N), the largest Ve and the nanoseconds in the projections.
    ``threads``: numba's (asked once for a stack of blocks by the caller: ``numba.get_num_threads``
    takes two locks, 40 us a call in the forward where the GEMMs have evicted them from cache)."""
    _load()
    kind, norms, lins, adds, att, gelu_at, table = plan[:7]  # plan[7]: the arrays behind its addresses
    keep = x8.shape[0] // images if keep is None else keep
    threads = numba.get_num_threads() if threads is None else threads
    return _encoder_block(kind, x8, images, norms, lins, adds, att, gelu_at, table, threads, keep)


@njit(parallel=True, cache=True)
def _batch_parallel(kind, pa, pw, m, k, n, entries, c):
    """hw_gemm_batch, one job per entry (the arrays by address)."""
    for b in prange(entries):
        _hw_gemm_batch(kind, pa, pw, m, k, n, b, b + 1, c)


def _words(count: int) -> np.ndarray:
    """An uninitialized int32 vector of ``count`` words starting on a 64-byte boundary (a cache line).
    The packed operands are read in rows of 64 bytes (an AMX tile row, an AVX-512 load) or 32: from
    numpy's 16-byte alignment such a row can span two lines (the AMX kernel then took 1.5x as long,
    docs/performance.md, session 24). The scratch of a call is aligned in the compiled code instead
    (``_scratch``, ``_linear_parallel``): a few microseconds of Python less a call."""
    buf = np.empty(count + _LINE // 4, np.int32)
    skip = (-buf.ctypes.data % _LINE) // 4
    return buf[skip : skip + count]


def _scratch(count: int) -> np.ndarray:
    """Room for three cache lines (job counters) and ``count`` int32 words after the first 64-byte
    boundary in it (``_line_up``)."""
    return np.empty(count + 4 * _LINE // 4, np.int32)


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
    _tiles_parallel(
        kind, pa.ctypes.data, pw.ctypes.data, m, k, n, bias.ctypes.data, c.ctypes.data, counter.ctypes.data, threads
    )
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
    dims = (m, k, n, entries, lo, hi, y.itemsize, numba.get_num_threads())
    packing = (flip, padded, sa, sw, int(pack_in_jobs), n if bias.size > n else 0, 0)
    # every array by address (each lives in this frame for the call), A and W with their strides
    a_at, w_at = ((x.ctypes.data, *x.strides) for x in (a8, w8))
    at = (pa.ctypes.data, pw.ctypes.data, bias.ctypes.data, mult.ctypes.data, shift.ctypes.data, y.ctypes.data)
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
    at = (pa.ctypes.data, pw_at, bias_at, mult_at, shift_at, y.ctypes.data)
    dims, packing = (m, k, n, 0, lo, hi, y.itemsize, _threads_for(m, k, n)), (flip, padded, sa, sw, 0, 0, 0)
    _linear_parallel(kind, (a8.ctypes.data, 0, *a8.strides), (0, 0, 0, 0), at, dims, packing)
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
