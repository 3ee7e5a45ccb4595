"""Unit test of rtl/divu.v, the restoring divider shared by softmax and layernorm.

The cocotb test ``divide_cases`` streams divisions through the request/result handshakes with
random stalls on both sides and compares quotient and remainder with Python's ``divmod``. The
widths come from the built design's ports, so one test serves every parameter set. Cases keep
the precondition ``dividend < divisor * 2^Q_BITS`` and sit at its edges (quotient 0, 1,
2^Q_BITS - 1, divisor 1 and all ones, dividend 0 and all ones) as well as in between.
"""

from __future__ import annotations

import os
import random

TOPLEVEL = "divu"
SOURCES = ["rtl/divu.v"]


def divu_cases(n_bits: int, d_bits: int, q_bits: int, count: int, seed: int) -> list[tuple[int, int]]:
    """(dividend, divisor) pairs with divisor >= 1 and a quotient that fits q_bits."""
    rand = random.Random(seed)
    n_max, d_max, q_max = (1 << n_bits) - 1, (1 << d_bits) - 1, (1 << q_bits) - 1

    def bound(b: int) -> int:  # largest dividend allowed with divisor b
        return min(n_max, b * (q_max + 1) - 1)

    cases = []
    for b in (1, 2, 3, d_max, d_max - 1, 1 << (d_bits - 1), (1 << (d_bits - 1)) - 1 or 1):
        top = bound(b)
        for a in (0, 1, b - 1, b, b + 1, top, top - 1, top // 2, q_max * b, min(top, n_max)):
            if 0 <= a <= top:
                cases.append((a, b))
    # Exact divisions q * b: a step whose partial remainder equals the divisor (trial >= div, not >).
    for _ in range(count // 8):
        b = rand.randint(1, d_max)
        q = rand.randint(1, max(1, bound(b) // b))
        cases.append((q * b, b))
    while len(cases) < count:
        b = rand.choice((rand.randint(1, d_max), rand.randint(1, 1 << rand.randint(0, d_bits - 1))))
        a = rand.randint(0, bound(b)) if rand.random() < 0.7 else bound(b) - rand.randint(0, b)
        cases.append((max(a, 0), b))
    return cases


try:
    import cocotb

    import tbutil
except ImportError:  # pragma: no cover - cocotb is a dependency
    cocotb = None

if cocotb is not None:

    @cocotb.test()
    async def divide_cases(dut):
        """Random and edge divisions with random stalls; quotient and remainder must be exact."""
        n_bits, d_bits, q_bits = len(dut.in_dividend_i), len(dut.in_divisor_i), len(dut.out_quotient_o)
        cases = divu_cases(n_bits, d_bits, q_bits, int(os.environ.get("HWVIT_DIVU_CASES", "400")), seed=1)
        dut.in_valid_i.value = 0
        dut.in_dividend_i.value = 0
        dut.in_divisor_i.value = 0
        dut.out_ready_i.value = 0
        await tbutil.start(dut)
        for name in ("in_ready_o", "out_valid_o", "out_quotient_o", "out_remainder_o"):
            tbutil.to_int(getattr(dut, name), False)  # defined after reset
        rand = tbutil.rng()
        stall = tbutil.stall_probability()
        src = tbutil.Source(
            dut.clk_i,
            dut.in_valid_i,
            dut.in_ready_o,
            [dut.in_dividend_i, dut.in_divisor_i],
            stall,
            random.Random(rand.getrandbits(32)),
        )
        sink = tbutil.Sink(
            dut.clk_i,
            dut.out_valid_o,
            dut.out_ready_i,
            [dut.out_quotient_o, dut.out_remainder_o],
            [False, False],
            stall,
            random.Random(rand.getrandbits(32)),
        )
        sender = cocotb.start_soon(src.send(cases))
        got = await sink.collect(len(cases))
        await sender
        bad = [(a, b, divmod(a, b), g) for (a, b), g in zip(cases, got) if divmod(a, b) != tuple(g)]
        first = (
            None
            if not bad
            else {"dividend": bad[0][0], "divisor": bad[0][1], "expected": list(bad[0][2]), "got": list(bad[0][3])}
        )
        message = f"divu N={n_bits} D={d_bits} Q={q_bits}: {len(bad)} wrong; first {first}" if bad else ""
        tbutil.write_result(not bad, elements=len(cases), mismatches=len(bad), first=first, message=message)
        assert not bad, message


# ---------------------------------------------------------------------------- pytest side
import pytest  # noqa: E402

pytestmark = pytest.mark.xdist_group("softmax")

# Softmax's divider (8-bit outputs: 48-bit dividend, 32-bit S, 25-bit R) and a full-width one
# like layernorm's (44-bit dividend, 31-bit divisor, quotient as wide as the dividend).
PARAMS = [
    pytest.param({"N_BITS": 48, "D_BITS": 32, "Q_BITS": 25}, id="n48d32q25"),
    pytest.param({"N_BITS": 44, "D_BITS": 31, "Q_BITS": 44}, id="n44d31q44"),
]


@pytest.mark.parametrize("params", PARAMS)
def test_divu(simulator, params, run_unit):
    result = run_unit("test_divu", TOPLEVEL, SOURCES, simulator, params, "divide_cases")
    assert result.passed, result.message
    assert result.elements >= 400 and result.mismatches == 0


def test_divu_cases_meet_precondition():
    """The generator's cases are legal (divisor >= 1, quotient fits) and reach the edges."""
    n, d, q = 48, 32, 25
    cases = divu_cases(n, d, q, 400, seed=1)
    assert all(1 <= b < 1 << d and 0 <= a < 1 << n and a // b < 1 << q for a, b in cases)
    quotients = {a // b for a, b in cases}
    assert {0, 1, (1 << q) - 1} <= quotients
    assert sum(a % b == 0 and a > b for a, b in cases) >= 30  # exact divisions beyond a = b
