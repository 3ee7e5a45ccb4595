"""Cycle model of rtl/vit_core.v: cycles per instruction, exact against the RTL on the digits model.

Every instruction costs CTRL cycles of control (fetch, decode, issue, retire) plus its body:
- GEMM: the engine's no-stall job time (docs/rtl.md: tiles back to back when K >= 2*ROWS + COLS)
  plus the start/done handshake;
- stream: copy/gelu/residual_add one element per cycle plus the unit's latency; softmax and
  layernorm rows follow each other at the blocks' documented row periods (2N + 26 + the
  probabilities' width, the core's SOFTMAX_BITS: 2N + 34 at 8 bits; C + 82);
- LOAD: one table entry per cycle.
"""

from __future__ import annotations

import math

from hwvit.core import isa

CTRL = 4  # FETCH, DEC, ISSUE, NEXT
GEMM_HANDSHAKE = 1
STREAM_LAT = {isa.U_COPY: 3, isa.U_GELU: 4, isa.U_ADD: 5}
SOFTMAX_ROW = 26  # + 2N + OUT_BITS per row (docs/rtl.md)
FEED = 3  # stream engine: scratchpad read + FIFO before the first input, write + done after the last
LN_ROW = 82  # + C per row (docs/rtl.md)
LN_FIRST = 88  # a row's first output after its last input (docs/rtl.md)
LOAD_TAIL = 1


def gemm_cycles(m: int, k: int, n: int, rows: int, cols: int) -> int:
    """rtl/gemm.v without output stalls: busy cycles of one M x K x N job.

    Tiles run n-fastest. A tile's last beat waits until the previous tile's results are read out
    (ROWS + COLS cycles after that tile's last beat, then one cycle per valid row r_prev), so the
    tiles are spaced max(K, ROWS + COLS + r_prev) apart; the last one takes K + ROWS + COLS + 4 + r.
    """
    tm, tn = math.ceil(m / rows), math.ceil(n / cols)
    r_last = m - (tm - 1) * rows  # valid rows of the last tile row
    full, part = (tm - 1) * tn, tn  # tiles with ROWS valid rows, tiles with r_last
    gaps = [rows] * full + [r_last] * part  # valid rows of each tile, in issue order
    total = sum(max(k, rows + cols + r) for r in gaps[:-1])
    return total + k + rows + cols + 4 + r_last


def body_cycles(ins: isa.Instr, rows: int, cols: int, softmax_bits: int = 8) -> int:
    if ins.op == isa.OP_GEMM:
        m, k, n, _ = ins.n
        return gemm_cycles(m, k, n, rows, cols) + GEMM_HANDSHAKE
    if ins.op == isa.OP_LOAD:
        return ins.n[0] + LOAD_TAIL
    count = ins.elements()
    if ins.unit == isa.U_SOFTMAX:
        n = ins.n[0]  # R rows take N + 1 + R * (2N + 26 + bits) from the first input to the last output
        return n + 1 + (count // n) * (2 * n + SOFTMAX_ROW + softmax_bits) + FEED
    if ins.unit == isa.U_LAYERNORM:
        c = ins.n[0]  # the first row: C in, 88, C out; every further row C + 82 later
        return (count // c - 1) * (c + LN_ROW) + 2 * c + LN_FIRST + FEED - 2
    return count + STREAM_LAT[ins.unit]


def instr_cycles(ins: isa.Instr, rows: int, cols: int, softmax_bits: int = 8) -> int:
    return CTRL + body_cycles(ins, rows, cols, softmax_bits)


def cls_of(ins: isa.Instr) -> str:
    if ins.op == isa.OP_GEMM:
        return "gemm"
    if ins.op == isa.OP_LOAD:
        return "load"
    return "row" if ins.unit in (isa.U_SOFTMAX, isa.U_LAYERNORM) else "elem"


def program_cycles(program: list[isa.Instr], rows: int, cols: int, softmax_bits: int = 8) -> dict:
    """Predicted counters of one run: total and per class (as the core's cyc_*_o); ``softmax_bits``:
    the core's SOFTMAX_BITS (its compiled directory's sizes, 8 where they do not name it)."""
    out = {"total": 0, "ctrl": 0, "gemm": 0, "row": 0, "elem": 0, "load": 0}
    for ins in program:
        if ins.op == isa.OP_END:
            out["total"] += 3
            out["ctrl"] += 3
            continue
        body = body_cycles(ins, rows, cols, softmax_bits)
        out["total"] += CTRL + body
        out["ctrl"] += CTRL
        out[cls_of(ins)] += body
    return out
