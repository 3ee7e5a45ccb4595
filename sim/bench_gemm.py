"""Benchmarks of the GEMM engine (rtl/gemm.v): array utilization and simulator speed.

1. Utilization = useful MACs / (cycles * ROWS * COLS) of one 197x768 . 768x2304 GEMM (the QKV
   projection of one ViT-B/16 image) on Verilator, memory-loaded, no output stalls. Every one of
   the 453 888 outputs (acc and y) is checked bit for bit against hwvit.ops.
2. Simulated cycles per second, Verilator vs Icarus, on the same memory-loaded test of a smaller
   GEMM. Cycles/s is given per CPU second of the simulator process (cocotb runs inside it), so
   other load on the machine does not distort it, and per wall second.

Figures only, no timed asserts. Vector sets are cached under sim_build/bench_sets (seeded: the
same arguments give the same set). Run: ``.venv/bin/python sim/bench_gemm.py [--rows 8 --cols 8]``;
``bench_gemm(...)`` returns the figures as a dict (for ``hwvit bench``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: make hwvit importable from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hwvit import ops, simulate, toolchain, vectors  # noqa: E402
from hwvit.formats import Rounding  # noqa: E402
from hwvit.record import BlockRecord, Tensor  # noqa: E402

UTIL_SHAPE = (197, 768, 2304)  # (M, K, N): ViT-B/16 QKV projection, 197 tokens
SPEED_SHAPE = (64, 512, 128)  # 8 x 8 array: 65 536 cycles, ~1 min of Icarus CPU
M_LO, M_HI = 1 << 30, (1 << 31) - 1  # quantize_multiplier's range of M


def gemm_record(m: int, k: int, n: int, seed: int = 0, a_signed: bool = True, out_bits: int = 8) -> BlockRecord:
    """A random GEMM of the given shape with per-channel requant; outputs from hwvit.ops (fast path)."""
    rng = np.random.default_rng(seed)
    lo, hi = (-128, 127) if a_signed else (0, 255)
    a = rng.integers(lo, hi, (m, k), endpoint=True)
    w = rng.integers(-128, 127, (n, k), endpoint=True)
    bias = rng.integers(-(1 << 20), 1 << 20, n, endpoint=True)
    acc = ops.gemm(a, w, bias, a_signed)
    mult = rng.integers(M_LO, M_HI, n, endpoint=True)
    # Shift that puts each channel's largest |acc * M| near the top of the output range (+-1 bit:
    # some outputs saturate, most do not).
    peak = np.abs(acc).max(axis=0)
    bits = np.array([(int(p) * int(q)).bit_length() for p, q in zip(peak, mult)], dtype=np.int64)
    shift = np.clip(bits - (out_bits - 1) + rng.integers(-1, 2, n), 0, 62)
    y = ops.requant(acc, mult, shift, out_bits)

    def t(data: np.ndarray, bits_: int, signed: bool, role: str) -> Tensor:
        return Tensor(np.ascontiguousarray(data, dtype=np.int64), bits_, signed, role)

    params = {"m": m, "k": k, "n": n, "a_signed": a_signed, "out_bits": out_bits, "rounding": Rounding.HALF_UP.value}
    return BlockRecord(
        "gemm",
        "bench",
        params,
        {
            "a": t(a, 8, a_signed, "input"),
            "w": t(w, 8, True, "parameter"),
            "bias": t(bias, 32, True, "parameter"),
            "multiplier": t(mult, 32, False, "parameter"),
            "shift": t(shift, 6, False, "parameter"),
            "acc": t(acc, 32, True, "output"),
            "y": t(y, out_bits, True, "output"),
        },
    )


def bench_set(shape: tuple[int, int, int], seed: int = 0, root: Path | None = None) -> Path:
    """The vector set of a bench GEMM, written once and reused (the set is a function of its name)."""
    m, k, n = shape
    root = root or toolchain.repo().root / simulate.DEFAULT_BUILD_ROOT / "bench_sets"
    set_dir = root / f"gemm-{m}x{k}x{n}-s{seed}"
    if set_dir.is_dir():
        try:
            vectors.read_manifest(set_dir)
            return set_dir
        except vectors.VectorSetError:
            pass  # rewritten below
    return vectors.write_set(gemm_record(m, k, n, seed), set_dir, seed=seed, force=True)


def _run(set_dir: Path, simulator: str, rows: int, cols: int, build_root: Path | None) -> dict[str, Any]:
    result = simulate.run(
        set_dir,
        simulator,
        hdl_overrides={"ROWS": rows, "COLS": cols},
        extra_env={"HWVIT_STALL": "0"},
        build_root=build_root,
    )
    if not result.passed:
        raise RuntimeError(f"gemm bench on {simulator}: {result.message}")
    x = result.extra
    return {
        "simulator": simulator,
        "elements_checked": result.extra.get("outputs", result.elements),
        "cycles": result.cycles,
        "beats": x["beats"],
        "macs": x["macs"],
        "utilization": x["utilization"],
        "cpu_s": x["cpu_s"],
        "wall_s": x["wall_s"],
        "cycles_per_cpu_s": x["cycles_per_cpu_s"],
        "cycles_per_s": x["cycles_per_s"],
    }


def bench_gemm(
    rows: int = 8,
    cols: int = 8,
    util_shape: tuple[int, int, int] | None = UTIL_SHAPE,
    speed_shape: tuple[int, int, int] | None = SPEED_SHAPE,
    simulators: tuple[str, ...] = ("verilator", "icarus"),
    seed: int = 0,
    build_root: Path | None = None,
    set_root: Path | None = None,
) -> dict[str, Any]:
    """Utilization (Verilator, ``util_shape``) and cycles/s per simulator (``speed_shape``).

    Either part is skipped when its shape is None. Raises RuntimeError if any output mismatches.
    """
    out: dict[str, Any] = {"array": f"{rows}x{cols}"}
    if util_shape is not None:
        m, k, n = util_shape
        res = _run(bench_set(util_shape, seed, set_root), "verilator", rows, cols, build_root)
        ideal = math.ceil(m / rows) * math.ceil(n / cols) * k  # beats with every tile back to back
        res.update(
            shape=list(util_shape),
            ideal_cycles=ideal,
            edge_efficiency=m * n / (math.ceil(m / rows) * rows * math.ceil(n / cols) * cols),
        )
        out["utilization"] = res
    if speed_shape is not None:
        set_dir = bench_set(speed_shape, seed, set_root)
        out["speed"] = {
            sim: _run(set_dir, sim, rows, cols, build_root) | {"shape": list(speed_shape)} for sim in simulators
        }
        if {"verilator", "icarus"} <= set(out["speed"]):
            v, i = out["speed"]["verilator"], out["speed"]["icarus"]
            out["verilator_over_icarus_cpu"] = v["cycles_per_cpu_s"] / i["cycles_per_cpu_s"]
            out["verilator_over_icarus_wall"] = v["cycles_per_s"] / i["cycles_per_s"]
    return out


def _report(res: dict[str, Any]) -> str:
    lines = [f"GEMM engine, {res['array']} array"]
    if "utilization" in res:
        u = res["utilization"]
        m, k, n = u["shape"]
        lines.append(
            f"  utilization {m}x{k} . {k}x{n} on verilator: {u['utilization']:.2%} "
            f"({u['macs']:,} MACs in {u['cycles']:,} cycles; back-to-back ideal {u['ideal_cycles']:,}; "
            f"edge tiles cap it at {u['edge_efficiency']:.2%}); {u['elements_checked']:,} outputs bit-exact"
        )
        lines.append(
            f"  verilator on that run: {u['cycles_per_cpu_s'] / 1e6:.2f} M cycles per CPU s, "
            f"{u['cycles_per_s'] / 1e6:.2f} M cycles per wall s"
        )
    for sim, s in res.get("speed", {}).items():
        m, k, n = s["shape"]
        lines.append(
            f"  speed {sim:<9} {m}x{k} . {k}x{n}: {s['cycles']:,} cycles in {s['cpu_s']:.2f} CPU s "
            f"({s['cycles_per_cpu_s'] / 1e3:,.1f} k cycles/s; wall {s['wall_s']:.2f} s, "
            f"{s['cycles_per_s'] / 1e3:,.1f} k cycles/s)"
        )
    if "verilator_over_icarus_cpu" in res:
        lines.append(
            f"  verilator / icarus: {res['verilator_over_icarus_cpu']:.0f}x per CPU s, "
            f"{res['verilator_over_icarus_wall']:.0f}x per wall s"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=8, help="PE rows (default 8)")
    parser.add_argument("--cols", type=int, default=8, help="PE columns (default 8)")
    parser.add_argument("--no-util", action="store_true", help="skip the utilization run")
    parser.add_argument("--no-speed", action="store_true", help="skip the Verilator vs Icarus run")
    parser.add_argument("--speed-shape", type=int, nargs=3, metavar=("M", "K", "N"), default=list(SPEED_SHAPE))
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    try:
        res = bench_gemm(
            args.rows,
            args.cols,
            None if args.no_util else UTIL_SHAPE,
            None if args.no_speed else tuple(args.speed_shape),
        )
    except (RuntimeError, ValueError, toolchain.ToolMissing) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(res, indent=2) if args.json else _report(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
