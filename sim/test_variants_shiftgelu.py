"""I-ViT's released ShiftGELU in Verilog (rtl/gelu_shiftgelu.v) at the ends of its ranges, beyond
sim/test_variants.py's random sets at the default scale (I_0 = 13, 8 bits):

- every row maximum once, beside elements at the bottom rail: ShiftExp of -max for every max, the
  negative ones through the long shifts (q < 0) to where e2 saturates, and e1 of every difference up
  to its clamp at 23 I_0; again at I_0 = 1, where divisors 1 + 2^j meet remainders equal to them;
- the (max, x) pairs whose sigmoid depends on the dividend's bits 16 and 8 (divider stages 4, 5);
- the sum's clamp at 2^31 - 1 from both sides: rows whose e1 + e2 is the largest below and the
  smallest above it (I_0 = 100, 10-bit inputs);
- I_0 from 1 (every divisor S' = 2 I_0 at its least: factor 2^30 - 1, the divider's widest quotient)
  to 2^16 at 16 bits in and out (e1 up to 2^39, the sigmoid up to 2^15, |x sig| up to 2^30, I-ViT's
  own widths);
- QuantAct's shift at both ends: E past 63 (every output 0) and E = 0 (saturated outputs), and its
  ties (round half to even, s_out = s_in);
- I-ViT's own outputs (tests/authors/ivit_gelu.npz), not the kernel's, as the expected values.

Icarus only: short rows, few of them; the scales beyond I-ViT's widths and QuantAct's shift ends
under the ``variants`` marker (make test-variants, and every mutant's suite). Each set is computed by
the variant's kernel (hwvit.variants.ivit_released.gelu_stages), held to the authors' code by
tests/test_variants_authors.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from hwvit import blocks, toolchain, vectors
from hwvit.variants.ivit_released import GELU_K

KIND = "gelu_shiftgelu"


def _i0_scale(i0: int) -> float:
    """An s_in whose I_0 = ceil(1 / (1.702 s_in)) is ``i0``."""
    return 1.0 / (GELU_K * (i0 - 0.5)) if i0 > 1 else 1.0


def _run(tmp_path, run_set, name: str, opts: dict, cases: int = 10, seed: int = 31) -> dict:
    toolchain.require("icarus")
    spec = blocks.get(KIND)
    options = {**spec.defaults, **opts}
    rec = spec.random(np.random.default_rng([seed, spec.seed]), cases, options)
    set_dir = vectors.write_set(rec, tmp_path / name, seed=seed)
    res = run_set(set_dir, "icarus")
    got = vectors.read(set_dir)
    assert res.elements == got["y"].size, res.line()
    return got.params


# (options, I_0 the set must have)
SCALES = {
    "i0_1": ({"in_bits": 8, "scale_in": 1.0, "n": 24}, 1),
    "i0_2_wide": ({"in_bits": 12, "scale_in": 0.5, "n": 24}, 2),
    "i0_4000_16bit": ({"in_bits": 16, "out_bits": 16, "scale_in": _i0_scale(4000), "n": 24}, 4000),
    "i0_65536_16bit": (
        {"in_bits": 16, "out_bits": 16, "scale_in": 1.0000001 * 2.0**-16 / GELU_K, "scale_out": 2.0**-8, "n": 24},
        1 << 16,
    ),
}


# make test: I-ViT's widths at the smallest scale; the others under `variants` (make test-variants)
@pytest.mark.parametrize(
    "case", [c if c == "i0_65536_16bit" else pytest.param(c, marks=pytest.mark.variants) for c in sorted(SCALES)]
)
def test_gelu_shiftgelu_scales_bit_exact(case, tmp_path, run_set):
    opts, i0 = SCALES[case]
    params = _run(tmp_path, run_set, case, opts)
    assert params["i0"] == i0


@pytest.mark.parametrize("scale_in, scale_out, i0", [(None, None, 13), (1.0, 1.0, 1)], ids=["i0_13", "i0_1"])
def test_gelu_shiftgelu_every_max_bit_exact(scale_in, scale_out, i0, tmp_path, run_set):
    """Rows [m, -128, m - 1] for every m of 8 bits: at the default scale (I_0 = 13, 23 I_0 = 299 within
    reach of 8-bit differences) and at I_0 = 1, where every exponential is a power of two and
    S = 1 + 2^j (e1 of -128 at the clamp, e2 = 2^j) divides 2^(2j) - 1: the division meets a
    partial remainder equal to its divisor (a restoring step that missed the tie survived); there
    s_out = 1 (out = round(x sig / 2^7)) keeps the outputs off the rails, where it would hide."""
    m = np.arange(-128, 128)
    rows = np.stack([m, np.full(m.size, -128), np.maximum(m - 1, -128)], axis=1)
    params = _run(
        tmp_path,
        run_set,
        "every_max",
        {"n": 3, "x": rows, "scale_in": scale_in, "scale_out": scale_out},
        cases=len(rows),
    )
    assert params["i0"] == i0 and params["rows"] == 256


def test_gelu_shiftgelu_sum_clamp_bit_exact(tmp_path, run_set):
    """I_0 = 100, 10 bits: in a row of max -88, e1 + e2 is 2^31 - 1 - 262143 at x = -487 (the largest
    below the clamp any row reaches) and 2^31 at x = -486 (the smallest above it); both in one row,
    where the sigmoid comes from the division for one and from e1 >> 24 for the other."""
    from hwvit.variants.ivit_released import GELU_N, shift_exp

    rows = np.array([[-88, -486, -487, -500], [-88, -487, -486, -88]])
    e = shift_exp(rows - (-88), 100, GELU_N) + shift_exp(np.array(88), 100, GELU_N)
    assert int(e[0, 1]) == 1 << 31 and int(e[0, 2]) == (1 << 31) - 1 - 262143
    params = _run(tmp_path, run_set, "clamp", {"in_bits": 10, "scale_in": _i0_scale(100), "n": 4, "x": rows}, 2)
    assert params["i0"] == 100


@pytest.mark.parametrize(
    "scale_out, shift",
    [
        pytest.param(2.0**40, lambda e: e >= 64, marks=pytest.mark.variants),
        pytest.param(2.0**-37.5, lambda e: e == 0, marks=pytest.mark.variants),
    ],
    ids=["shift_past_63", "shift_0"],
)
def test_gelu_shiftgelu_quantact_shift_bit_exact(scale_out, shift, tmp_path, run_set):
    """E past 63 (QuantAct from s_in 2^-7 to an s_out 2^40 times larger: 0 everywhere, the kernel's
    round half to even of |t M| / 2^E <= 1/4) and E = 0 (no rounding; every nonzero t saturates)."""
    scale_in = 6.0 / 128
    params = _run(tmp_path, run_set, "shift", {"scale_in": scale_in, "scale_out": scale_in * scale_out, "out_bits": 16})
    assert shift(params["shift"]), params


def _authors_groups() -> list[dict]:
    """tests/authors/ivit_gelu.npz: I-ViT's IntGELU and QuantAct run on rows of 16..3072 hidden
    features at seven scales (its provenance: repository, commit, command)."""
    import importlib.util

    from hwvit import toolchain as tc

    path = tc.repo().root / "tests" / "authors" / "__init__.py"
    spec = importlib.util.spec_from_file_location("hwvit_authors_data", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    provenance, groups = module.load("ivit_gelu")
    assert "I-ViT" in str(provenance), provenance
    return groups


@pytest.mark.parametrize(
    "picked, rows, widths",
    [((2, 6), 1, (8,)), pytest.param(None, None, (4, 8, 16), marks=pytest.mark.slow)],
    ids=["two_rows", "every_row"],
)
def test_released_intgelu_outputs_bit_exact(picked, rows, widths, tmp_path, run_set):
    """The block's outputs are what I-ViT's released code computed (not hwvit's kernel): groups of
    the authors' data as sets whose y is the authors' QuantAct output. make test: a row of 3072
    hidden features (s_in 0.1) and one of 197 (s_in 0.004) at 8 bits (I-ViT's QuantAct after GELU);
    make bench (marker ``slow``: two minutes of Icarus): every row of the seven groups at 4, 8 and
    16 bits. Its name leaves out the kind's: `hwvit mutate` runs a mutant's suite (``-k
    gelu_shiftgelu``) in a copy of hwvit/, rtl/ and sim/ alone, without the data in tests/authors/."""
    from hwvit.variants.base import GeluContext

    toolchain.require("icarus")
    spec = blocks.get(KIND)
    variant = __import__("hwvit.variants", fromlist=["get"]).get("gelu", "shiftgelu")
    total = 0
    for i, g in enumerate(_authors_groups()):
        if picked is not None and i not in picked:
            continue
        x = np.asarray(g["x"]).astype(np.int64)[:rows]
        for bits in widths:
            y = np.asarray(g[f"y{bits}"]).astype(np.int64)[:rows]
            vp = variant.prepare(GeluContext(g["s_in"], g["in_bits"], g["s_out"], bits))
            rec = spec.traced(f"authors.{i}", x, y, vp, g["in_bits"], bits, {"x": g["s_in"], "y": g["s_out"]})
            set_dir = vectors.write_set(rec, tmp_path / f"g{i}_{bits}", seed=0)
            total += run_set(set_dir, "icarus").elements
    assert total >= (3072 + 197 if rows else 3 * 60000), total


def test_gelu_shiftgelu_dividend_low_bytes_bit_exact(tmp_path, run_set):
    """Every (max, x) pair of 10-bit inputs at I_0 = 40 whose sigmoid would move if the dividend
    2^31 - 1 lost its bit 16 or its bit 8 (the quotient's bits from divider stages 4 and 5), as rows
    [max, x], at s_out = s_in 2^-6 (out = x sig / 2: every step of the sigmoid shows). Random rows meet
    such pairs about once in a few thousand (a stage-4 dividend bit cleared survived them)."""
    from hwvit.variants.ivit_released import DIV_NUM, GELU_N, shift_exp

    i0, b = 40, 10
    m = np.arange(-(1 << (b - 1)), 1 << (b - 1))[:, None]
    x = np.arange(-(1 << (b - 1)), 1 << (b - 1))[None, :]
    e1 = shift_exp(x - m, i0, GELU_N)
    total = e1 + shift_exp(-m, i0, GELU_N)

    def sig(num: int) -> np.ndarray:
        return np.where(total >= DIV_NUM, e1 >> 24, (e1 * (num // np.minimum(total, DIV_NUM))) >> 24)

    moved = [(sig(DIV_NUM - (1 << k)) != sig(DIV_NUM)) & (x <= m) & (x != 0) for k in (16, 8)]
    assert moved[0].sum() >= 300 and moved[1].sum() >= 5, [int(d.sum()) for d in moved]
    pairs = np.argwhere(moved[0] | moved[1])
    rows = np.stack([m[pairs[:, 0], 0], x[0, pairs[:, 1]]], axis=1)
    scale_in = _i0_scale(i0)
    opts = {"in_bits": b, "out_bits": 16, "scale_in": scale_in, "scale_out": scale_in / 64, "n": 2, "x": rows}
    params = _run(tmp_path, run_set, "low_bytes", opts, cases=len(rows))
    assert params["i0"] == i0


def test_gelu_shiftgelu_quantact_ties_bit_exact(tmp_path, run_set):
    """s_out = s_in: QuantAct's scale 2^-7 is M = 2^30, E = 37, out = round_half_even(x sig / 2^7), and
    every x sig = 128 q + 64 is a tie (half away from zero, rounding's other mode, survived sets
    without them)."""
    from hwvit.variants.ivit_released import gelu_stages

    scale_in = 6.0 / 128
    params = _run(tmp_path, run_set, "ties", {"scale_in": scale_in, "scale_out": scale_in}, cases=16, seed=37)
    assert (params["multiplier"], params["shift"]) == (1 << 30, 37), params
    spec = blocks.get(KIND)
    rec = spec.random(
        np.random.default_rng([37, spec.seed]), 16, {**spec.defaults, "scale_in": scale_in, "scale_out": scale_in}
    )
    t = gelu_stages(rec.tensors["x"].data, {**params})["t"]
    q = t // 128  # half away from zero and half to even part at ties where q >= 0 is even or q < 0 is odd
    ties = (t % 128 == 64) & ((q >= 0) == (q % 2 == 0))
    assert ties.sum() >= 3, int(ties.sum())


def test_gelu_shiftgelu_next_row_issued_under_a_hold(tmp_path, run_set):
    """Output ready held low for 200 clocks after a 16-element row's 9th output, no other stalls: the
    row's last 7 elements fill stages 2..8 of the row engine's pipeline with stage 1 empty, and the
    next row (filled meanwhile) may start (GO_AFTER = 1): its first element enters stage 1 at once
    (a stage takes the element before it whenever it is empty), so once ready returns the outputs
    come one a clock, across the row boundary. The campaign found the engine's read issued only when
    stage 2 could move (en[2] for en[1]) alive: that element waited for the release, a one-clock gap
    between the rows that no value showed."""
    import json

    toolchain.require("icarus")
    spec = blocks.get(KIND)
    rec = spec.random(np.random.default_rng([45, spec.seed]), 3, {**spec.defaults, "n": 16})
    set_dir = vectors.write_set(rec, tmp_path / "held", seed=45)
    env = {"HWVIT_STALL": "0", "HWVIT_SINK_HOLD": json.dumps([9, 200])}
    res = run_set(set_dir, "icarus", extra_env=env)
    t = res.extra["out_cycles"]
    assert len(t) == 48 and t[9] - t[8] > 200, t[:12]
    assert [b - a for a, b in zip(t[9:25], t[10:25])] == [1] * 15, t[9:26]
