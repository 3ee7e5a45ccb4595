"""cocotb body shared by the one-stream blocks (requant, residual_add, gelu).

Such a block takes one beat of several input signals per valid/ready handshake and returns one
signed output word per beat, in order. ``run_stream`` drives a vector set through it with random
stalls on both sides and checks every word; ``run_reset_midstream`` resets the block in each of
its states (which pipeline stages hold a beat) while the set streams, checks that no output is X
and that nothing survives the reset, then streams the whole set again and checks it. Both end in
``tbutil.finish``, which writes the JSON result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import cocotb
import numpy as np
from cocotb.simtime import get_sim_time
from cocotb.triggers import ReadOnly, RisingEdge, SimTimeoutError, with_timeout

import tbutil


@dataclass
class Stream:
    """The handshake and data signals of a one-in, one-out stream block."""

    dut: Any
    in_data: Sequence[Any]  # input data handles, in the order of each beat's values
    out_signed: bool = True

    @property
    def clk(self):
        return self.dut.clk_i


def _timeout_ns(beats: int) -> int:
    # With stall probability p on both sides a beat needs ~1/(1-p) cycles on average; allow 8x
    # that plus the pipeline's fill: a design that drops or holds beats ends here, not in a hang.
    p = min(tbutil.stall_probability(), 0.95)
    return int((beats * 8 / (1 - p) + 200) * tbutil.CLK_NS)


async def transfer(stream: Stream, words: Sequence[Sequence[int]]) -> tuple[list[int], int]:
    """Send ``words`` and collect as many outputs; return (outputs, cycles). Stops at a timeout."""
    dut, stall = stream.dut, tbutil.stall_probability()
    src = tbutil.Source(stream.clk, dut.in_valid_i, dut.in_ready_o, stream.in_data, stall, tbutil.stream_rng(0))
    snk = tbutil.Sink(
        stream.clk, dut.out_valid_o, dut.out_ready_i, [dut.out_data_o], [stream.out_signed], stall, tbutil.stream_rng(1)
    )
    t0 = get_sim_time("ns")
    send = cocotb.start_soon(src.send(words))
    recv = cocotb.start_soon(snk.collect(len(words)))
    try:
        await with_timeout(recv, _timeout_ns(len(words)), "ns")
    except SimTimeoutError:
        recv.cancel()  # report what arrived: the checker names the missing elements
        dut.out_ready_i.value = 0
    send.cancel()
    dut.in_valid_i.value = 0
    cycles = int(round((get_sim_time("ns") - t0) / tbutil.CLK_NS))
    return [w[0] for w in snk.words], cycles


async def run_stream(
    stream: Stream, vset, words: Sequence[Sequence[int]], expected: np.ndarray, name: str = "y"
) -> None:
    """Stream the whole set once and check every output word (the ``run_vectors`` body)."""
    await _check_idle(stream, vset, "after reset")
    try:
        got, cycles = await transfer(stream, words)
    except AssertionError as exc:  # an X on out_data_o while out_valid_o is high
        tbutil.fail(vset, str(exc))
    tbutil.finish(stream.dut, vset, {name: (expected, np.array(got, dtype=np.int64))}, cycles=cycles)


def _outputs_resolvable(dut) -> None:
    for handle in (dut.out_valid_o, dut.out_data_o, dut.in_ready_o):
        tbutil.to_int(handle, signed=False)  # raises on X/Z


async def _check_idle(stream: Stream, vset, when: str) -> None:
    """In this cycle's ReadOnly phase: no output is X and out_valid_o is low; then the next edge."""
    dut = stream.dut
    await ReadOnly()
    try:
        _outputs_resolvable(dut)
    except AssertionError as exc:
        tbutil.fail(vset, f"{when}: {exc}")
    if dut.out_valid_o.value:
        tbutil.fail(vset, f"out_valid_o high {when}")
    await RisingEdge(stream.clk)


async def run_reset_midstream(
    stream: Stream,
    vset,
    words: Sequence[Sequence[int]],
    expected: np.ndarray,
    states: dict[str, Callable[[Any], bool]],
    name: str = "y",
) -> None:
    """Reset in each of ``states`` in turn (name -> predicate on the dut, in the ReadOnly phase),
    each time with the set streaming through at random stalls; after each reset no output is X,
    nothing comes out of the emptied pipeline, and the words that came out before it are the
    set's first ones. Then the whole set again, checked.
    """
    dut, stall = stream.dut, max(tbutil.stall_probability(), 0.5)  # stalls fill the pipeline
    assert len(words) >= 8, "reset_midstream needs at least 8 beats"
    await _check_idle(stream, vset, "after reset")
    checks: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    resets = []
    for k, (state, in_state) in enumerate(states.items()):
        src = tbutil.Source(
            stream.clk, dut.in_valid_i, dut.in_ready_o, stream.in_data, stall, tbutil.stream_rng(2 + 2 * k)
        )
        snk = tbutil.Sink(
            stream.clk,
            dut.out_valid_o,
            dut.out_ready_i,
            [dut.out_data_o],
            [stream.out_signed],
            stall,
            tbutil.stream_rng(3 + 2 * k),
        )
        send = cocotb.start_soon(src.send(words))
        recv = cocotb.start_soon(snk.collect(len(words)))
        for _ in range(k):  # a few beats in before the state is sought: resets at various depths
            await RisingEdge(stream.clk)
        waited = await tbutil.reset_when(dut, state, lambda held=in_state: held(dut), 20 * len(words))
        await RisingEdge(stream.clk)  # the reset is taken here, in `state` (unless not reached)
        send.cancel()
        recv.cancel()
        dut.in_valid_i.value = 0
        before = [w[0] for w in snk.words]
        resets.append({"state": state, "reached": waited is not None, "words_before": len(before)})
        await RisingEdge(stream.clk)
        await _check_idle(stream, vset, f"after a reset in state {state} (a beat survived the reset)")
        dut.rst_ni.value = 1
        dut.out_ready_i.value = 1
        for cycle in range(4):  # nothing may come out of an emptied pipeline
            await _check_idle(stream, vset, f"{cycle + 1} cycles after a reset in state {state}, no input")
        checks[f"{name}_before_reset_{state}"] = (expected[: len(before)], np.array(before, dtype=np.int64))
    try:
        got, cycles = await transfer(stream, words)
    except AssertionError as exc:
        tbutil.fail(vset, f"after reset: {exc}")
    checks[name] = (expected, np.array(got, dtype=np.int64))
    before_total = sum(r["words_before"] for r in resets)
    tbutil.finish(dut, vset, checks, cycles=cycles, extra={"resets": resets, "before_reset": before_total})


def corrupt(record, name: str, index: int):
    """A copy of ``record`` whose output ``name`` is off by one LSB at flat ``index`` (checker tests)."""
    import dataclasses

    tensor = record.tensors[name]
    data = tensor.data.copy().reshape(-1)
    data[index] += 1 if data[index] < tensor.fmt.hi else -1
    tensors = {**record.tensors, name: dataclasses.replace(tensor, data=data.reshape(tensor.data.shape))}
    return dataclasses.replace(record, tensors=tensors)


# ---------------------------------------------------------------------------- pytest side
# The checks every single-stream block shares; each test file passes its own set maker.


LATENCY = 4  # clocks a beat spends in the block, at most (requant's two stages, the handshakes)


def unstalled_cycles(vset, params: dict) -> int:
    """Most clocks an unstalled run of the set may take: one beat per cycle plus the latency."""
    return int(vset["y"].size) + LATENCY


def check_full_throughput(run_set, set_dir, simulator: str, beats: int, latency: int = LATENCY) -> None:
    """No stalls on either side: one beat per cycle, plus the pipeline latency."""
    result = run_set(set_dir, simulator, extra_env={"HWVIT_STALL": "0"})
    assert result.elements == beats
    assert result.cycles <= beats + latency, result.cycles


def check_reset_midstream(run_set, set_dir, simulator: str, beats: int, states) -> None:
    """A reset in every state of ``states``, then the whole set again: each reset counted in its
    bin, the words before each reset right, counts add up, nothing leaks."""
    result = run_set(set_dir, simulator, testcase="reset_midstream")
    assert [r["state"] for r in result.extra["resets"] if r["reached"]] == list(states)
    assert all(result.extra["bins"][f"reset_{state}"] == 1 for state in states), result.extra["bins"]
    assert 0 < result.extra["before_reset"] < len(states) * beats
    assert result.elements == beats + result.extra["before_reset"]
