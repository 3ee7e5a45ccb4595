"""Images through the RTL core: build, run the cocotb testbench, compare with the integer model.

``run_images`` returns a CoreRun: the RTL logits, the integer model's, cycles per image (the core's
counters) and the per-instruction cycles of the first image. ``find_mismatch`` reruns one image an
instruction at a time and names the first instruction whose output differs from the integer
model's trace (block path, index, expected, got); the scratchpad is dumped beside the run.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hwvit import buildlock, simulate
from hwvit.core import isa
from hwvit.core.coredir import CoreDir

KIND = "vit_core"
LINKS = {"prog": "core_prog.hex", "act": "core_act.hex", "wgt": "core_wgt.hex", "prm": "core_prm.hex"}
HOST_LINKS = {key: name.replace("core_", "host_") for key, name in LINKS.items()}


# Offsets the counter test adds to the core's counters as a run starts ({register: [offset, width]}):
# all ones below the top bit, so the first count carries through every bit into the top one.
COUNTER_POKE = {
    **{f"c_{name}_q": [(1 << 39) - 1, 40] for name in ("tot", "ctrl", "gemm", "row", "elem", "load")},
    "icyc_q": [(1 << 31) - 1, 32],
}


def garbage_image(text: str) -> str:
    """A $readmemh image of ``text``'s shape (lines, digits per line) with every bit inverted: what
    the core's memories start from when the host port must load them (``host_load``)."""
    out = []
    for line in text.split():
        width = len(line)
        out.append(f"{~int(line, 16) & ((1 << 4 * width) - 1):0{width}x}")
    return "\n".join(out) + "\n"


@dataclass
class CoreRun:
    simulator: str
    rows: int
    cols: int
    got: np.ndarray  # (B, out) RTL outputs
    expected: np.ndarray  # (B, out) integer model
    cycles: list[dict]  # per image: the core's counters
    perf: list[int]  # cycles per instruction, first image
    cpu_s: float
    run_dir: Path
    mismatch: dict | None = None
    extra: dict = field(default_factory=dict)
    after_reset: dict = field(default_factory=dict)  # busy, done, pc, counters as reset leaves them

    @property
    def reset_wrong(self) -> dict:
        """What reset leaves other than 0 (busy, done, pc and every counter must be 0)."""
        return {k: v for k, v in self.after_reset.items() if v}

    @property
    def matched(self) -> int:
        return int((self.got == self.expected).all(axis=1).sum())


def hdl_parameters(core: CoreDir, rows: int, cols: int) -> dict:
    s = dict(core.sizes)
    s["MAX_M"] = max(s["MAX_M"], rows)
    s["MAX_N"] = max(s["MAX_N"], cols)
    return {"ROWS": rows, "COLS": cols, **s}


def _signed8(v) -> np.ndarray:
    """Host-port words of act bytes as int8. A word with bits above its byte (the core must read
    them as 0) is kept as it is: out of int8's range, it equals no expected value."""
    a = np.asarray(v, dtype=np.int64)
    return np.where((a >= 128) & (a < 256), a - 256, a)


def _simulate(
    core: CoreDir,
    simulator: str,
    rows: int,
    cols: int,
    job: dict,
    build_root: Path | None,
    tag: str,
    host_load: bool = False,
) -> tuple[dict, Path]:
    from cocotb_tools.runner import get_runner

    params = hdl_parameters(core, rows, cols)
    build_dir = simulate.build(KIND, simulator, params, build_root)
    run_dir = build_dir / "runs" / tag
    # two runs of one tag in one build (pytest-xdist workers, two shells) take turns at its run dir
    with buildlock.locked(run_dir.with_name(f"{tag}.lock")):
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        for key, name in LINKS.items():
            image = core.file(key).resolve()
            if host_load:  # the host port is the only way the right words get in
                (run_dir / HOST_LINKS[key]).symlink_to(image)
                (run_dir / name).write_text(garbage_image(image.read_text()))
            else:
                (run_dir / name).symlink_to(image)
        if host_load:
            job = {**job, "host_load": sum(params[k] for k in ("ACT_DEPTH", "WGT_DEPTH", "PRM_DEPTH", "PROG_DEPTH"))}
        job_file, result_file = run_dir / "job.json", run_dir / "result.json"
        job_file.write_text(json.dumps(job))
        env = {
            "HWVIT_CORE_JOB": str(job_file),
            "HWVIT_RESULT": str(result_file),
            "PYTHONPATH": simulate.sim_pythonpath(),
            **simulate.assertion_rewriting_env(),
        }
        runner = get_runner(simulator)
        try:
            runner.test(
                test_module=f"test_{KIND}",
                hdl_toplevel=simulate.tb_module(KIND).TOPLEVEL,
                hdl_toplevel_lang="verilog",
                testcase="run_core",
                build_dir=build_dir,
                test_dir=run_dir,
                extra_env=env,
                parameters=params,
                log_file=run_dir / "sim.log",
            )
        except SystemExit:
            pass
        if not result_file.exists():
            raise RuntimeError(f"the core testbench wrote no result; see {run_dir / 'sim.log'}")
        return json.loads(result_file.read_text()), run_dir


def cycle_limit(core: CoreDir, rows: int, cols: int) -> int:
    """Cycles the testbench waits for one run of the program before calling it hung: 4x the cycle
    model's total, plus 100,000."""
    from hwvit.core import cycles as cyc

    return 4 * cyc.program_cycles(core.program, rows, cols)["total"] + 100_000


def _job(core: CoreDir, images: np.ndarray, mode: str, cycles_hint: int) -> dict:
    base, size = core.region(core.manifest["output"]["region"])
    ranges = []
    for ins in core.program[:-1]:
        addr = ins.out_addresses()
        ranges.append([int(addr.min()), int(addr.max()) + 1])
    return {
        "mode": mode,
        "images": [[int(v) for v in img.reshape(-1)] for img in images],
        "out": [base, size],
        "ranges": ranges,
        "prog_len": len(core.program),
        "act_depth": core.sizes["ACT_DEPTH"],
        "timeout_cycles": int(cycles_hint),
    }


def run_images(
    core: CoreDir,
    int_model,
    xq: np.ndarray,
    simulator: str = "verilator",
    rows: int = 8,
    cols: int = 8,
    build_root: Path | None = None,
    host_load: bool = False,
    poke: dict | None = None,
) -> CoreRun:
    """Run quantized inputs ``xq`` (B, C, H, W) through the RTL; compare with ``int_model``.
    ``host_load``: the program, weights, parameters and constants go in through the core's host
    write port, as a host processor would load them, instead of the simulator's $readmemh.
    ``poke`` (Icarus; COUNTER_POKE): offsets added to counter registers as the first image starts;
    its counters and per-instruction cycles then carry them."""
    from hwvit.engine import Engine

    expected = np.asarray(Engine(int_model)(xq, quantized=True), dtype=np.int64).reshape(len(xq), -1)
    job = _job(core, xq, "run", cycle_limit(core, rows, cols)) | ({"poke": poke} if poke else {})
    tag = "poke" if poke else "host" if host_load else "run"
    result, run_dir = _simulate(core, simulator, rows, cols, job, build_root, tag, host_load)
    got = np.stack([_signed8(img["logits"]) for img in result["images"]])
    return CoreRun(
        simulator,
        rows,
        cols,
        got,
        expected,
        [img["cycles"] for img in result["images"]],
        result["images"][0].get("perf", []),
        result["cpu_s"],
        run_dir,
        after_reset=result["after_reset"],
    )


def find_mismatch(
    core: CoreDir, int_model, x1: np.ndarray, simulator: str, rows: int, cols: int, build_root: Path | None = None
) -> dict | None:
    """Step one image through the program; the first instruction whose output differs, or None."""
    from hwvit.intvit import Trace

    tr = Trace(values=True)
    int_model.forward(x1[None], trace=tr, quantized=True)
    job = _job(core, x1[None], "steps", cycle_limit(core, rows, cols))
    result, run_dir = _simulate(core, simulator, rows, cols, job, build_root, "steps")
    steps = result["images"][0]["steps"]
    for i, ins in enumerate(core.program[:-1]):
        if not ins.check:
            continue
        want_nd = _select(tr.values[ins.check["value"]][0], ins.check["index"])  # values: (q, scale)
        want = want_nd.reshape(-1)
        addr = ins.out_addresses().reshape(-1)
        lo = int(addr.min())
        dumped = _signed8(steps[i])
        got = dumped[addr - lo]
        if ins.op == isa.OP_STREAM and ins.unit == isa.U_SOFTMAX:
            got = np.asarray(steps[i], dtype=np.int64)[addr - lo]  # probabilities are unsigned bytes
        bad = np.flatnonzero(got != want)
        if bad.size:
            j = int(bad[0])
            return {
                "instruction": i,
                "name": ins.name,
                "kind": ins.kind,
                "value": ins.check["value"],
                "index": int(j),
                "at": [int(v) for v in np.unravel_index(j, want_nd.shape)],
                "expected": int(want[j]),
                "got": int(got[j]),
                "differ": int(bad.size),
                "scratchpad": str(run_dir / "scratchpad.hex"),
            }
    return {"instruction": None, "scratchpad": str(run_dir / "scratchpad.hex")}


def _select(value: np.ndarray, index: list) -> np.ndarray:
    """value[index] for a check index: ints, None (all) and [start, stop] slices."""
    key = tuple(slice(None) if i is None else slice(i[0], i[1]) if isinstance(i, list) else i for i in index)
    return np.asarray(value)[key]
