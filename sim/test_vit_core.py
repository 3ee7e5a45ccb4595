"""Testbench of rtl/vit_core.v (through sim/tb_vit_core.v): a whole compiled ViT per image.

hwvit.core.run builds the wrapper (hwvit.simulate.build, kind ``vit_core``), links the compiled
memory images into the run directory under the names the wrapper's $readmemh reads, and writes a
job (JSON, named by HWVIT_CORE_JOB). The cocotb test below then, per image, writes core_in.hex,
pulses load_i / start_i / dump_i and waits for the wrapper's done pulses: no Python runs while the
core computes. With ``host_load`` in the job, preload_i first writes every memory through the host
port (the core's $readmemh images then hold garbage). With ``poke``, the first image's run starts
from counters with offsets added (Icarus). With ``stop_after`` N, each image's run is cut N cycles
after start (reset held for 3 cycles, as a host's watchdog would; the memories keep their words)
and the output range is dumped then, busy or not: what a run has written by a given cycle, for
programs that never end. ``steps`` mode runs one image an instruction
at a time (stop_pc_i, cont_i) and dumps each instruction's output range, for the mismatch search.
Results go to HWVIT_RESULT as JSON.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

TOPLEVEL = "tb_vit_core"
RTL = [
    "rtl/vit_core.v",
    "rtl/vit_core_gemm.v",
    "rtl/vit_core_stream.v",
    "rtl/vit_core_agu.v",
    "rtl/vit_core_ram.v",
    "rtl/gemm.v",
    "rtl/gemm_array.v",
    "rtl/gemm_pe.v",
    "rtl/gemm_out.v",
    "rtl/requant.v",
    "rtl/round_sat.v",
    "rtl/softmax.v",
    "rtl/layernorm.v",
    "rtl/row_stream.v",
    "rtl/row_max.v",
    "rtl/row_moments.v",
    "rtl/inv_sqrt.v",
    "rtl/ln_affine.v",
    "rtl/gelu.v",
    "rtl/residual_add.v",
    "rtl/divu.v",
    "rtl/isqrt.v",
]
SOURCES = ["sim/tb_vit_core.v", *RTL]
BUILD_ARGS = {"verilator": ["--no-public-flat-rw"]}
NEVER = 0xFFFFFFFF  # stop_pc_i that no program reaches


def parse_dump(path: Path) -> list[int]:
    """Words of the wrapper's $writememh dump (Icarus and Verilator formats)."""
    out = []
    for line in path.read_text().splitlines():
        line = line.split("//", 1)[0]
        out.extend(int(tok, 16) for tok in line.split() if not tok.startswith("@"))
    return out


try:
    import cocotb
    from cocotb.clock import Clock
    from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge, SimTimeoutError, with_timeout
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:

    async def _pulse(dut, sig) -> None:
        sig.value = 1
        await RisingEdge(dut.clk_i)
        sig.value = 0

    async def _wait(dut, sig, cycles: int, what: str) -> None:
        try:
            await with_timeout(RisingEdge(sig), cycles * 10, "ns")
        except SimTimeoutError:
            raise AssertionError(f"timeout: {what} not done after {cycles} cycles (pc={int(dut.pc_o.value)})") from None

    async def _dump(dut, base: int, length: int, perf: bool = False) -> list[int]:
        dut.dump_base_i.value = base
        dut.dump_len_i.value = length
        dut.dump_perf_i.value = int(perf)
        await _pulse(dut, dut.dump_i)
        await _wait(dut, dut.dump_done_o, 4 * length + 100, "dump")
        await RisingEdge(dut.clk_i)
        return parse_dump(Path("core_dump.hex"))

    async def _preload(dut, words: int) -> None:
        await _pulse(dut, dut.preload_i)
        await _wait(dut, dut.preload_done_o, words + 100, "host preload")
        await RisingEdge(dut.clk_i)

    async def _load(dut, image: list[int]) -> None:
        Path("core_in.hex").write_text("".join(f"{v & 0xFF:02x}\n" for v in image))
        await _pulse(dut, dut.load_i)
        await _wait(dut, dut.load_done_o, 4 * len(image) + 100, "input load")

    async def _poke(dut, poke: dict) -> None:
        """Add offsets to the core's counter registers (Icarus: their hierarchical names) half a
        clock after start cleared them: {name: [offset, width]}. The counts they report then carry
        the offset, so a counter's top bits are reached without 2^39 cycles of simulation."""
        await FallingEdge(dut.clk_i)
        for name, (offset, width) in poke.items():
            reg = getattr(dut.dut, name)
            reg.value = (int(reg.value) + offset) % (1 << width)

    def _counters(dut) -> dict:
        return {
            name: int(getattr(dut, f"cyc_{name}_o").value) for name in ("total", "ctrl", "gemm", "row", "elem", "load")
        } | {"gemm_beats": int(dut.gemm_beats_o.value)}

    @cocotb.test()
    async def run_core(dut):
        job = json.loads(Path(os.environ["HWVIT_CORE_JOB"]).read_text())
        result_path = Path(os.environ["HWVIT_RESULT"])
        Clock(dut.clk_i, 10, unit="ns", impl="gpi").start()
        for sig in (dut.preload_i, dut.load_i, dut.start_i, dut.cont_i, dut.dump_i, dut.dump_perf_i):
            sig.value = 0
        dut.stop_pc_i.value = NEVER
        dut.rst_ni.value = 0
        for _ in range(3):
            await RisingEdge(dut.clk_i)
        await ReadOnly()  # the reset values, before the first clock without reset
        after_reset = {"busy": int(dut.busy_o.value), "done": int(dut.done_o.value), "pc": int(dut.pc_o.value)}
        after_reset |= _counters(dut)
        await FallingEdge(dut.clk_i)
        dut.rst_ni.value = 1
        await RisingEdge(dut.clk_i)
        if job.get("host_load"):
            await _preload(dut, job["host_load"])
        out_base, out_len = job["out"]
        limit = job["timeout_cycles"]
        images = []
        t_cpu = 0.0
        for image in job["images"]:
            await _load(dut, image)
            if job["mode"] == "steps":
                steps = []
                for i, (lo, hi) in enumerate(job["ranges"]):
                    dut.stop_pc_i.value = i
                    await _pulse(dut, dut.start_i if i == 0 else dut.cont_i)
                    await _wait(dut, dut.done_o, limit, f"instruction {i}")
                    steps.append(await _dump(dut, lo, hi - lo) if hi > lo else [])
                dut.stop_pc_i.value = NEVER
                scratch = await _dump(dut, 0, job["act_depth"])
                Path("scratchpad.hex").write_text("".join(f"{v & 0xFF:02x}\n" for v in scratch))
                images.append({"steps": steps})
                continue
            c0 = time.process_time()
            await _pulse(dut, dut.start_i)
            if job.get("poke") and not images:
                await _poke(dut, job["poke"])
            if job.get("stop_after"):
                await ClockCycles(dut.clk_i, job["stop_after"])
                await FallingEdge(dut.clk_i)
                busy = int(dut.busy_o.value)
                dut.rst_ni.value = 0
                await ClockCycles(dut.clk_i, 3)
                await FallingEdge(dut.clk_i)
                dut.rst_ni.value = 1
                await RisingEdge(dut.clk_i)
                images.append({"logits": await _dump(dut, out_base, out_len), "busy_at_stop": busy})
                continue
            await _wait(dut, dut.done_o, limit, "program")
            t_cpu += time.process_time() - c0
            await RisingEdge(dut.clk_i)
            entry = {"logits": await _dump(dut, out_base, out_len)}
            if not images:
                entry["perf"] = await _dump(dut, 0, job["prog_len"] - 1, perf=True)  # END has none
            # read as a host reads them, after the results: they hold until the next start
            entry["cycles"] = _counters(dut) | {"pc": int(dut.pc_o.value)}
            images.append(entry)
        result_path.write_text(json.dumps({"images": images, "cpu_s": t_cpu, "after_reset": after_reset}))
