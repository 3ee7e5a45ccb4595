"""Vector-writing throughput on the full trace of one ViT-B/16 layer (``hwvit bench-vectors``).

The records hold random integers of the right shapes and widths (this measures writing, not
computing): 197 tokens, 768 channels, 12 heads of 64, MLP 3072, i.e. LN1, QKV, 12 QK^T, softmax,
12 attention x V, projection, residual add, LN2, FC1, GELU, FC2, residual add: ~16 M elements.
Target: >= 50 M elements/s (hex formatting, .npy, sha256 and the files themselves).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from hwvit.record import BlockRecord, Tensor
from hwvit.vectors.schema import ROUNDING
from hwvit.vectors.write import WRITER_THREADS, write_sets

TARGET = 50e6  # elements per second
TOKENS, DIM, HEADS, MLP = 197, 768, 12, 3072


def _rand(rng: np.random.Generator, shape, bits: int, signed: bool, role: str, hi: int | None = None) -> Tensor:
    lo, top = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    hi = top if hi is None else hi
    return Tensor(rng.integers(lo, hi, shape, endpoint=True, dtype=np.int64), bits, signed, role)


def _gemm(rng, path: str, m: int, k: int, n: int, a_signed: bool = True) -> BlockRecord:
    params = {"m": m, "k": k, "n": n, "a_signed": a_signed, "out_bits": 8, "rounding": ROUNDING}
    return BlockRecord("gemm", path, params, {
        "a": _rand(rng, (m, k), 8, a_signed, "input"), "w": _rand(rng, (n, k), 8, True, "parameter"),
        "bias": _rand(rng, (n,), 32, True, "parameter"),
        "multiplier": _rand(rng, (n,), 32, False, "parameter", (1 << 31) - 1),
        "shift": _rand(rng, (n,), 6, False, "parameter"), "acc": _rand(rng, (m, n), 32, True, "output"),
        "y": _rand(rng, (m, n), 8, True, "output")})


def _layernorm(rng, path: str) -> BlockRecord:
    params = {"rows": TOKENS, "c": DIM, "out_bits": 8, "eps_int": 12345, "multiplier": 1 << 30, "shift": 40,
              "rounding": ROUNDING}
    return BlockRecord("layernorm", path, params, {
        "x": _rand(rng, (TOKENS, DIM), 8, True, "input"), "gamma": _rand(rng, (DIM,), 15, True, "parameter"),
        "beta": _rand(rng, (DIM,), 31, True, "parameter"), "y": _rand(rng, (TOKENS, DIM), 8, True, "output")})


def _residual(rng, path: str) -> BlockRecord:
    n = TOKENS * DIM
    params = {"out_bits": 8, "mult_a": 1 << 30, "mult_b": 1 << 30, "shift": 31, "rounding": ROUNDING}
    return BlockRecord("residual_add", path, params, {
        "a": _rand(rng, (n,), 8, True, "input"), "b": _rand(rng, (n,), 8, True, "input"),
        "y": _rand(rng, (n,), 8, True, "output")})


def layer_records(seed: int = 0) -> list[BlockRecord]:
    """Random-valued records with the shapes of one ViT-B/16 encoder layer's trace."""
    rng = np.random.default_rng(seed)
    hd = DIM // HEADS
    recs = [_layernorm(rng, "layers.0.norm1"), _gemm(rng, "layers.0.attn.qkv", TOKENS, DIM, 3 * DIM)]
    recs += [_gemm(rng, f"layers.0.attn.h{h}.qk", TOKENS, hd, TOKENS) for h in range(HEADS)]
    rows = HEADS * TOKENS
    recs.append(BlockRecord("softmax", "layers.0.attn.softmax", {
        "in_bits": 8, "out_bits": 8, "entries": 256, "rows": rows, "row_len": TOKENS, "rounding": ROUNDING}, {
        "x": _rand(rng, (rows, TOKENS), 8, True, "input"),
        "exp_table": _rand(rng, (256,), 24, False, "parameter"),
        "p": _rand(rng, (rows, TOKENS), 8, False, "output")}))
    recs += [_gemm(rng, f"layers.0.attn.h{h}.av", TOKENS, TOKENS, hd, a_signed=False) for h in range(HEADS)]
    recs += [_gemm(rng, "layers.0.attn.proj", TOKENS, DIM, DIM), _residual(rng, "layers.0.add1"),
             _layernorm(rng, "layers.0.norm2"), _gemm(rng, "layers.0.mlp.fc1", TOKENS, DIM, MLP)]
    n = TOKENS * MLP
    recs.append(BlockRecord("gelu", "layers.0.mlp.gelu", {"in_bits": 8, "out_bits": 8, "rounding": ROUNDING}, {
        "x": _rand(rng, (n,), 8, True, "input"), "table": _rand(rng, (256,), 8, True, "parameter"),
        "y": _rand(rng, (n,), 8, True, "output")}))
    recs += [_gemm(rng, "layers.0.mlp.fc2", TOKENS, MLP, DIM), _residual(rng, "layers.0.add2")]
    return recs


def bench_write(repeats: int = 3, root: str | Path | None = None, seed: int = 0) -> dict:
    """Best-of-``repeats`` time to write one ViT-B/16 layer's trace; elements/s against the target.

    ``root``: where the temporary output goes (default: the current directory, where `--out`
    usually points; this machine's /tmp costs twice the CPU per file); the figure includes that
    file system's cost of creating 466 files and writing ~85 MB. ``cpu_seconds``
    (process CPU time of the best run, all threads) separates our work from a busy machine's waits.
    """
    records = layer_records(seed)
    best = None
    summary = None
    root = Path(root) if root is not None else Path.cwd()
    with tempfile.TemporaryDirectory(prefix=".hwvit-bench-", dir=root) as tmp:
        for i in range(repeats):
            out = Path(tmp) / f"run{i}"
            t0, c0 = time.perf_counter(), time.process_time()
            summary = write_sets(records, out, seed=seed)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            if best is None or wall < best[0]:
                best = (wall, cpu)
            shutil.rmtree(out)
    assert summary is not None and best is not None
    wall, cpu = best
    return {"sets": summary.sets, "tensors": summary.tensors, "elements": summary.elements,
            "bytes": summary.bytes, "dir": str(root.resolve()), "seconds": wall, "cpu_seconds": cpu,
            "elements_per_s": summary.elements / wall, "elements_per_cpu_s": summary.elements / max(cpu, 1e-9),
            "target_elements_per_s": TARGET, "meets_target": summary.elements / wall >= TARGET,
            "threads": WRITER_THREADS, "repeats": repeats}
