"""The LayerNorm variants' Verilog twins (rtl/layernorm.v at EPS = 0 and PTF = 1,
rtl/layernorm_ivit*.v, rtl/layernorm_ibert.v) at the corners random rows of 64 do not reach, as
sim/test_layernorm.py holds rtl/layernorm.v to them:

- a build with MAX_C = 40, not a power of two: full rows of 40 (all -128, one outlier) fill the top
  bits of the row sums and differences, which a power-of-two MAX_C never reaches, so a sign taken
  from the bit below the sign shows (the campaign found those sign copies alive in every variant;
  layernorm_ptf's channels all at its widest factor, z = x << 3, there and at 4096); a row of sum 35,
  whose remainder mod 40 has the top bit of its 6 (layernorm_ivit divides Sx by C for its mean);
- rows of two one LSB apart (V = 1, the least variance above 0: the largest inverse, 2^32 in
  rtl/layernorm.v at EPS = 0, its top bit set), against as many constant rows (V = 0): both exact, and
  unstalled the constant rows faster by the skipped square root and division (each header says so);
- rows of 4096 whose V is 2^37 and
  2^37 +- 8192, and the alternating row (V near 2^38): the variance's top bits;
- layernorm_no_eps is ops.layernorm at eps_int = 0, so rtl/layernorm.v's hand-made sets at eps 0
  hold it too (sim/layernorm_sets.py): the special rows (G and B at their extremes, saturating
  shifts) and the rows whose outputs flip with inv one off (its rounding 2^43 + sig/2), at C = 64
  and 4096;
- layernorm_ptf's rows whose outputs flip with inv one off, at the drawn eps_int and at 2^61 (the
  square root's top bit);
- layernorm_ivit (16-bit inputs) at its channel table's ends (bias +-(2^40 - 1) and past 2^39, z past
  2^40, M = +-2^31, E = 1 and 93, ties), on rows whose variance is m^2 - 1 (the Newton steps' two-cycle:
  the start shows), and with its output held past the next row's CALC;
- layernorm_ivit_exact at eps_int = 2^40 (its eps port's top bit), and it and layernorm_ibert held likewise;
- layernorm_ivit_exact's and layernorm_ibert's rows whose root is 1 or 2, with constants that make the
  output move with a factor one off (rtl/inv_sqrt.v's quotient at a power-of-two divisor), and their
  constant rows' period, C + 14 clocks unstalled (rtl/row_meanvar.v's CALC clocks), and rows where
  their floored factor and one rounded to nearest give different outputs.

Icarus, through the generic stream bench (sim/byotb.py), sets built by the kinds themselves with the
rows given. All opt-in (marker ``variants``, make test-variants: two minutes of Icarus that make
test's budget has not got; make test checks each variant on its random sets, sim/test_variants.py);
the mutation campaign runs them for the variant blocks (hwvit.mutate.markers_of).
"""

from __future__ import annotations

import numpy as np
import pytest

from hwvit import blocks, toolchain, vectors

pytestmark = pytest.mark.variants

LN_VARIANTS = sorted(
    k for k, spec in blocks.kinds().items() if spec.variant and spec.rtl and spec.family == "layernorm"
)


def _constants(rec) -> dict:
    """A LayerNorm variant record's prepared constants: its manifest integers and parameter tensors."""
    got = {k: v for k, v in rec.params.items() if k not in ("rows", "c", "variant", "rounding")}
    got.update({k: t.data for k, t in rec.tensors.items() if k not in ("x", "y")})
    return got


def _set(kind: str, out, cases: int, seed: int, constants: dict | None = None, **opts):
    """A set of ``kind`` drawn with ``opts`` (``x``: the rows); ``constants`` replace prepared ones
    (layernorm_ptf's ``alpha``, ``eps_int``), y then recomputed by the variant's kernel."""
    from hwvit import variants

    spec = blocks.get(kind)
    rec = spec.random(np.random.default_rng([seed, spec.seed]), cases, {**spec.defaults, **opts})
    if constants:
        x = rec.tensors["x"].data
        vp = {**_constants(rec), **constants}
        y = variants.get("layernorm", spec.variant).kernel(x, vp)
        scales = {"x": rec.tensors["x"].scale, "y": rec.tensors["y"].scale}
        rec = spec.traced(rec.path, x, y, vp, int(rec.params["in_bits"]), int(vp["out_bits"]), scales)
    return vectors.write_set(rec, out, seed=seed)


# layernorm_ptf's channels at the widest power-of-two factor (z = x << 3): its sums and differences
# reach their top bits only there (random factors average 2^1.9); at 40 channels also B = +-(2^30 - 1)
# on the first two (their outputs saturate, the other 38 stay in range)
def _ptf_widest(c: int) -> dict:
    got = {"alpha": np.full(c, 3)}
    if c == 40:
        spec = blocks.get("layernorm_ptf_exact")
        beta = spec.random(np.random.default_rng([40, spec.seed]), 1, {**spec.defaults, "c": c}).tensors["beta"].data
        got["beta"] = np.concatenate([[(1 << 30) - 1, -((1 << 30) - 1)], beta[2:]])
    return got


WIDEST = {"layernorm_ptf_exact": _ptf_widest}


@pytest.mark.parametrize("kind", LN_VARIANTS)
def test_layernorm_variant_max_c_not_a_power_of_two(kind, tmp_path, run_set):
    toolchain.require("icarus")
    rng = np.random.default_rng(40)
    x = [np.full(40, -128), np.full(40, 127), np.where(np.arange(40) % 2 == 0, 127, -128)]
    for lo, hi in ((-128, 127), (127, -128)):  # one outlier: |d| = 255 * 39 at its position
        r = np.full(40, lo)
        r[rng.integers(40)] = hi
        x.append(r)
    x.append(rng.integers(-128, 127, 40, endpoint=True))
    x.append(np.where(np.arange(40) == 0, 35, 0))  # Sx = 35: a mean's remainder mod 40 with bit 5 set
    set_dir = _set(kind, tmp_path / "c40", len(x), 40, WIDEST.get(kind, lambda c: None)(40), c=40, x=np.stack(x))
    res = run_set(set_dir, "icarus", hdl_overrides={"MAX_C": 40})
    assert res.elements == len(x) * 40, res.line()


@pytest.mark.parametrize("kind", LN_VARIANTS)
def test_layernorm_variant_least_variance_and_constant_rows(kind, tmp_path, run_set):
    """12 rows [k, k + 1] and [k + 1, k] (V = 1) against 12 constant rows (V = 0), unstalled: both exact,
    the constant rows at least 40 clocks a row faster (the square root and the division, 47 to 85
    clocks a row, are skipped there) but in layernorm_ivit, I-ViT's released form."""
    import json

    toolchain.require("icarus")
    ks = np.array([-128, -100, -65, -2, -1, 0, 1, 40, 63, 100, 125, 126])
    varied = np.stack([np.where(np.arange(12) % 2 == 0, ks, ks + 1), np.where(np.arange(12) % 2 == 0, ks + 1, ks)], 1)
    constant = np.stack([ks, ks], 1)
    # layernorm_ptf: both channels at factor 1 (z = x) and no eps, so V = 1 there too (Ve = 2^16, the
    # least root 2^8 and the largest inverse 2^35, its top bit) and equal scores give V = 0
    constants = {"alpha": np.zeros(2, dtype=np.int64), "eps_int": 0} if kind == "layernorm_ptf_exact" else None
    if kind == "layernorm_ptf":  # FQ-ViT's released form: factor 1 on both channels, so equal x is V = 0
        constants = {"alpha": np.zeros(2, dtype=np.int64)}
    cycles = {}
    for name, x in (("varied", varied), ("constant", constant)):
        set_dir = _set(kind, tmp_path / name, 12, 41, constants, c=2, x=x)
        res = run_set(set_dir, "icarus", extra_env={"HWVIT_STALL": "0"})
        assert res.elements == 24, res.line()
        cycles[name] = res.cycles
    if kind != "layernorm_ivit":  # I-ViT's released form takes its ten Newton steps on every row (V = 0 too)
        assert cycles["varied"] - cycles["constant"] >= 12 * 40, json.dumps(cycles)


# layernorm_ptf: its float program takes ~233 clocks a channel, ~1M clocks a row of 4096 on Icarus; its
# widest rows (C = 4096, 12-bit inputs, v near 2^52) run on Verilator in sim/test_variants_layernorm_ptf.py
@pytest.mark.parametrize("kind", [k for k in LN_VARIANTS if k != "layernorm_ptf"])
def test_layernorm_variant_variance_near_2_to_the_38(kind, tmp_path, run_set):
    from layernorm_sets import variance_row

    toolchain.require("icarus")
    rng = np.random.default_rng(37)
    rows = [variance_row(4096, (1 << 25) + d, rng) for d in (-2, 0, 2)]
    rows.append(np.where(np.arange(4096) % 2 == 0, 127, -128))
    x = np.stack(rows)
    v = 4096 * (x * x).sum(axis=1) - x.sum(axis=1) ** 2
    assert v[:3].tolist() == [(1 << 37) - 8192, 1 << 37, (1 << 37) + 8192] and v[3] >= 1 << 37
    set_dir = _set(kind, tmp_path / "c4096", 4, 37, WIDEST.get(kind, lambda c: None)(4096), c=4096, x=x)
    res = run_set(set_dir, "icarus")
    assert res.elements == 4 * 4096, res.line()


def _as_no_eps(record, out):
    """A ``layernorm`` record at eps_int = 0 as a layernorm_no_eps set (its kernel agrees)."""
    from hwvit import variants

    t, p = record.tensors, record.params
    assert p["eps_int"] == 0
    x = t["x"].data
    vp = {k: int(p[k]) for k in ("eps_int", "multiplier", "shift", "out_bits")}
    vp.update(in_bits=8, gamma=t["gamma"].data, beta=t["beta"].data)
    y = variants.get("layernorm", "no_eps").kernel(x, vp)
    assert np.array_equal(y, t["y"].data)
    rec = blocks.get("layernorm_no_eps").traced(record.path, x, y, vp, 8, vp["out_bits"], {"x": 0.05, "y": 0.05})
    return vectors.write_set(rec, out, seed=7)


@pytest.mark.parametrize("c", [64, 4096])
def test_layernorm_no_eps_hand_made_rows(c, tmp_path, run_set):
    from layernorm_sets import inv_rounding_record, special_record

    toolchain.require("icarus")
    records = [inv_rounding_record(c, 8, 8, seed=7)]
    if c == 64:
        records.append(special_record(48, 8, 0, seed=101))
    for i, record in enumerate(records):
        res = run_set(_as_no_eps(record, tmp_path / f"s{i}"), "icarus")
        assert res.elements == record.tensors["x"].data.size, res.line()


@pytest.mark.parametrize("eps", ["drawn", "2^61"])
def test_layernorm_ptf_exact_inv_rounding_rows(eps, tmp_path, run_set):
    """Rows whose outputs change with inv one lower and, others, one higher (hwvit_path_stages'
    inv_delta; found among 100 000 random rows, about 1 in 1 500 of each): the block's inv must be
    round(2^43 / sig) exactly; at the drawn eps_int and at 2^61, the largest layernorm_ptf takes
    (Ve >= 2^61: sig >= 2^30.5 uses the top bit of the root's 31, which the dividend 2^43 + sig / 2
    reads). Random rows leave such a rounding error unseen (the campaign found two alive)."""
    from hwvit.variants.layernorm_forms import layernorm_ptf_stages

    toolchain.require("icarus")
    spec = blocks.get("layernorm_ptf_exact")
    base = spec.random(np.random.default_rng([44, spec.seed]), 1, {**spec.defaults, "c": 64})
    p = _constants(base)
    if eps == "2^61":
        p["eps_int"] = 1 << 61
    x = np.random.default_rng(45).integers(-128, 127, (100_000, 64), endpoint=True)
    out = layernorm_ptf_stages(x, p)["out"]
    rows = []
    for delta in (-1, 1):
        flips = np.flatnonzero((layernorm_ptf_stages(x, p, delta)["out"] != out).any(axis=1))
        assert flips.size >= 8, (delta, flips.size)
        rows.append(x[flips[:8]])
    constants = {k: p[k] for k in ("gamma", "beta", "alpha", "eps_int", "multiplier", "shift")}  # the searched ones
    set_dir = _set("layernorm_ptf_exact", tmp_path / "flip", 16, 44, constants, c=64, x=np.concatenate(rows))
    res = run_set(set_dir, "icarus")
    assert res.elements == 16 * 64, res.line()


def test_layernorm_ivit_exact_largest_y_and_beta_past_2_to_the_29(tmp_path, run_set):
    """layernorm_ivit at the two values its sign extensions leave unseen in random rows (the campaign
    found both alive): rows [k, k + 2] and [k + 2, k] at eps_int = 0 have mu = k + 1, Var = 2, std = 1,
    factor = 2^62 and y = +-2^16, where y = +2^16 is the one value whose bit 16 differs from its sign
    (the header's |y| <= 2^16); and B = 2^30 - 1, 2^29, -2^29 - 1, -(2^30 - 1), whose bit 29 differs
    from their sign bit 30 (drawn B stay below 2^28)."""
    from hwvit.variants.ivit import layernorm_stages

    toolchain.require("icarus")
    spec = blocks.get("layernorm_ivit_exact")
    ks = np.array([-128, -77, -3, -1, 0, 1, 50, 125])
    x = np.concatenate([np.stack([ks, ks + 2], 1), np.stack([ks + 2, ks], 1)])
    p = _constants(spec.random(np.random.default_rng([46, spec.seed]), 1, {**spec.defaults, "c": 2}))
    p["eps_int"] = 0
    assert (layernorm_stages(x, p)["y"] == 1 << 16).sum() == 16
    set_dir = _set("layernorm_ivit_exact", tmp_path / "y", 16, 46, {"eps_int": 0}, c=2, x=x)
    res = run_set(set_dir, "icarus")
    assert res.elements == 32, res.line()

    beta = np.array([(1 << 30) - 1, 1 << 29, -(1 << 29) - 1, -((1 << 30) - 1)])
    x = np.random.default_rng(47).integers(-128, 127, (8, 4), endpoint=True)
    set_dir = _set("layernorm_ivit_exact", tmp_path / "beta", 8, 47, {"beta": beta}, c=4, x=x)
    res = run_set(set_dir, "icarus")
    assert res.elements == 32, res.line()


# Rows [k, k + 2m] (m = 1, 2) have mean k + m, d = +-m and a variance whose floor root is m: the factor
# is 2^K / std exactly, a power of two over a power of two, and y = +-2^16 (I-ViT) or h = +-2^30
# (I-BERT). These constants take the positive one to an output of exactly 0, so a factor one low shows
# as -1; drawn constants round a one-LSB change of y away, and floor(2^K / std) moves from floor((2^K -
# 1) / std) only where std is a power of two.
FACTOR_AT_POW2 = {
    "layernorm_ivit_exact": {"eps_int": 0, "gamma": [1, 1], "beta": [-(2**16)] * 2, "multiplier": 2**30, "shift": 30},
    "layernorm_ibert": {"bias_int": [-(2**30)] * 2, "multiplier": [1, 1], "shift": [0, 0]},
}


@pytest.mark.parametrize("kind", sorted(FACTOR_AT_POW2))
def test_layernorm_factor_at_a_power_of_two_root(kind, tmp_path, run_set):
    """The corrected I-LayerNorm's and I-BERT's factor = floor(2^K / std) where std is 1 or 2."""
    toolchain.require("icarus")
    ks = np.array([-128, -50, -1, 0, 7, 100, 123])
    x = np.concatenate([np.stack([ks, ks + 2 * m], 1)[:, ::o] for m in (1, 2) for o in (1, -1)])
    constants = {k: np.array(v) if isinstance(v, list) else v for k, v in FACTOR_AT_POW2[kind].items()}
    set_dir = _set(kind, tmp_path / "pow2", len(x), 50, constants, c=2, x=x)
    y = vectors.read(set_dir)["y"]
    assert sorted(np.unique(y, return_counts=True)[1].tolist()) == [len(x), len(x)] and (y == 0).sum() == len(x)
    res = run_set(set_dir, "icarus")
    assert res.elements == 2 * len(x), res.line()


def _floored_factor_rows(kind: str) -> tuple[np.ndarray, dict]:
    """Rows where floor(2^K / std) and its rounding to nearest differ and the output shows it: I-BERT,
    rows [k - 2, k - 1, k + 1, k + 2] (var 10, std 3, y_3 = 2, h_3 = the factor itself: 2^31 / 3 =
    715827882.67); the corrected I-ViT, rows of 25 k and one k + 5 (mu = k, Var 25, std 5, d = 5, factor
    (2^62 - 4) / 5 and y = 2^16 - 1, rounded 2^16). The constants put that output at exactly 0."""
    ks = np.arange(-126, 122, 31)
    if kind == "layernorm_ibert":
        x = ks[:, None] + np.array([-2, -1, 1, 2])
        return x, {"bias_int": np.full(4, -715827882), "multiplier": np.ones(4, dtype=np.int64), "shift": np.zeros(4)}
    x = np.repeat(ks[:, None], 26, axis=1)
    x[:, -1] += 5
    return x, {"eps_int": 0, "gamma": np.ones(26), "beta": np.full(26, -(2**16 - 1)), "multiplier": 2**30, "shift": 30}


@pytest.mark.parametrize("kind", ["layernorm_ibert", "layernorm_ivit_exact"])
def test_layernorm_factor_floored_not_rounded(kind, tmp_path, run_set):
    """I-BERT's and the corrected I-ViT's factor is floor(2^K / std), not rounded to nearest as
    rtl/layernorm.v's inverse is (rtl/inv_sqrt.v ROUND = 0): rows where the two differ (_floored_factor_rows)."""
    toolchain.require("icarus")
    x, constants = _floored_factor_rows(kind)
    constants = {k: np.asarray(v, dtype=np.int64) if np.ndim(v) else v for k, v in constants.items()}
    set_dir = _set(kind, tmp_path / "floor", len(x), 52, constants, c=x.shape[1], x=x)
    y = vectors.read(set_dir)["y"]
    assert (y[:, -1] == 0).all() and (y[:, :-1] == -128).all(), y
    res = run_set(set_dir, "icarus")
    assert res.elements == x.size, res.line()


@pytest.mark.parametrize("kind", ["layernorm_ibert", "layernorm_ivit_exact"])
def test_layernorm_constant_row_period(kind, tmp_path, run_set):
    """Unstalled constant rows (variance 0: no root, no division) follow each other every C + 14
    clocks: the engine's 3 a row (layernorm.v's constant rows take C + 5 with its two multiplier
    clocks, docs/rtl.md) and CALC's 11 (rtl/row_meanvar.v: the mean's division, 9 clocks, then t and
    the variance, 2). Two rows more take exactly 2 (C + 14) clocks longer."""
    toolchain.require("icarus")
    c = 16
    x = np.repeat(np.array([[-128], [-3], [0], [57], [127], [9]]), c, axis=1)
    cycles = []
    for rows in (4, 6):
        res = run_set(
            _set(kind, tmp_path / f"r{rows}", rows, 51, None, c=c, x=x[:rows]), "icarus", extra_env={"HWVIT_STALL": "0"}
        )
        cycles.append(res.cycles)
    assert cycles[1] - cycles[0] == 2 * (c + 14), cycles


def test_layernorm_ibert_contract_extremes(tmp_path, run_set):
    """layernorm_ibert at the ends of its ports' contract, which drawn constants (|bias_int| < 2^29,
    M in [2^30, 2^31), E 48..73) never reach (the campaign found six sign and rounding mutants alive):
    bias_int at +-(2^47 - 1), 2^46 and -2^46 - 1 (bits 47 and 46 of a 48-bit bias differ, and
    z = h + bias crosses 2^47), M = +-2^31 (M = 2^31 is the one value whose bit 31 differs from its
    sign); and constant rows (y = 0, so z = bias_int) at E = 0, 1 and 2 with M = 1, where P = z is
    rounded half to even at ties both ways (an odd P at E = 1 is a tie; E = 0 rounds nothing)."""
    from hwvit.variants.ibert import ibert_requant_ref

    toolchain.require("icarus")
    b47 = (1 << 47) - 1
    bias = np.array([b47, -b47, 1 << 46, -(1 << 46) - 1, 1 << 46, 12345, -6789, 0])
    mult = np.array([1 << 30, 1 << 30, 1 << 31, 1 << 30, -(1 << 31), 1 << 31, -(1 << 31), 1 << 30])
    shift = np.array([73, 73, 74, 73, 74, 40, 40, 50])
    x = np.random.default_rng(48).integers(-128, 100, (8, 8), endpoint=True)
    x[:, 0] = 127  # above every row's mean: y_0 > 0, h > 0, so z = h + 2^47 - 1 passes 2^47
    set_dir = _set(
        "layernorm_ibert", tmp_path / "wide", 8, 48, {"bias_int": bias, "multiplier": mult, "shift": shift}, c=8, x=x
    )
    res = run_set(set_dir, "icarus")
    assert res.elements == 64, res.line()

    bias = np.array([1, 3, 3, -3, 5, -1, 6, -5])
    shift = np.array([1, 1, 0, 1, 2, 1, 2, 0])
    outs = [ibert_requant_ref(int(b), 1, int(e), 8) for b, e in zip(bias, shift)]
    assert outs == [0, 2, 3, -2, 1, 0, 2, -5]  # ties to even at E = 1 (1/2, 3/2, -3/2, -1/2) and 6/4
    x = np.repeat(np.array([[-128], [-1], [0], [77], [127]]), 8, axis=1)  # constant rows: var = 0, y = 0
    constants = {"bias_int": bias, "multiplier": np.ones(8, dtype=np.int64), "shift": shift}
    set_dir = _set("layernorm_ibert", tmp_path / "ties", 5, 49, constants, c=8, x=x)
    res = run_set(set_dir, "icarus")
    assert res.elements == 40, res.line()


def test_layernorm_ivit_contract_ends_and_ties(tmp_path, run_set):
    """layernorm_ivit at the ends of its channel table's contract, which drawn constants never reach
    (the campaign found their sign copies and rounding alive): bias = +-(2^40 - 1) with y of the same
    sign, so z = y + bias passes +-2^40 (z's bits 41 and 40 differ); bias = 2^39 and -2^39 - 1 (bits 40
    and 39 differ); M = 2^31, the one M whose bit 31 differs from its sign, and -2^31; E = 93, the
    kernel's largest. Channels 8..15 are 0 in rows of mean 0 (d = 0, so y = 0 and z = bias) or the rows
    are constant: there M = 1 and E = 1 or 2 round z / 2^E at ties both ways (an odd z at E = 1 is a
    tie; E = 1 is the least shift, where the rounding bit is P's bit 0)."""
    from hwvit.variants.ibert import ibert_requant_ref
    from hwvit.variants.ivit_released import layernorm_stages

    toolchain.require("icarus")
    b40, b39 = (1 << 40) - 1, 1 << 39
    bias = [b40, -b40, b39, -b39 - 1, 0, 0, b40, -b40, 1, 3, -1, -3, 5, 6, -5, 2]
    mult = [1 << 30, 1 << 30, 1 << 30, 1 << 30, 1 << 31, -(1 << 31), 1 << 31, (1 << 31) - 1] + [1] * 8
    shift = [60, 60, 69, 69, 54, 54, 93, 72, 1, 1, 1, 1, 2, 2, 1, 1]
    ties = [ibert_requant_ref(b, 1, e, 8) for b, e in zip(bias[8:], shift[8:])]
    assert ties == [0, 2, 0, -2, 1, 2, -2, 1]  # 1/2, 3/2, -1/2, -3/2 to even; 5/4; 6/4, -5/2 to even; 1
    half = [[32767, -32768, 1000, -999, 20000, -20000, 12345, -12345], [20000, -32768, 7, 12761, -30000, 30000, -1, 1]]
    x = np.array([h + [0] * 8 for h in half] + [[v] * 16 for v in (-32768, -1, 0, 32767)])
    constants = {k: np.array(v, dtype=np.int64) for k, v in (("bias", bias), ("multiplier", mult), ("shift", shift))}
    st = layernorm_stages(x, {**constants, "in_bits": 16, "out_bits": 8})
    assert (st["d"][:, 8:] == 0).all() and (st["y"][:, 8:] == 0).all() and (st["out"][:, 8:] == ties).all()
    assert (st["z"][:2, 0] >= 1 << 40).all() and (st["z"][:2, 1] < -(1 << 40)).all() and (st["out"][:2, 4] != 0).all()
    set_dir = _set("layernorm_ivit", tmp_path / "ends", 6, 50, constants, c=16, in_bits=16, x=x)
    res = run_set(set_dir, "icarus")
    assert res.elements == 6 * 16, res.line()


# Rows of 16-bit inputs (mean 0) whose variance is m^2 - 1, where integer Newton steps settle into the
# two-cycle m - 1, m: ten steps from 2^16 and from 2^16 + 1 end on different sides of it
NEWTON_ROWS = [
    [13574, -1657, 10546, 24922, -10364, -9633, -6966, -20423],  # var = 39814^2 - 1
    [23458, -18864, -19309, -21815, 11292, 31780, 23008, -29551],  # var = 2^32 - 1
]


def test_layernorm_ivit_newton_start_rows(tmp_path, run_set, monkeypatch):
    """layernorm_ivit's std starts its ten Newton steps at 2^16 exactly: on rows whose variance is
    m^2 - 1 (the steps' two-cycle) a start of 2^16 + 1 ends one off (std 65535 for 65536), and the
    outputs at M = 2^30, E = 45 (16 bits) change (the campaign found that start alive)."""
    from hwvit.variants import ivit_released

    toolchain.require("icarus")
    x = np.array(NEWTON_ROWS)
    constants = {"bias": np.zeros(8, dtype=np.int64), "multiplier": np.full(8, 1 << 30), "shift": np.full(8, 45)}
    p = {**constants, "in_bits": 16, "out_bits": 16}
    st = ivit_released.layernorm_stages(x, p)
    assert st["var"].ravel().tolist() == [39814**2 - 1, (1 << 32) - 1] and (st["mu"] == 0).all()
    monkeypatch.setattr(ivit_released, "LN_START", ivit_released.LN_START + 1)
    off = ivit_released.layernorm_stages(x, p)
    monkeypatch.undo()
    assert (off["std"] != st["std"]).all() and (off["out"] != st["out"]).sum(axis=1).min() >= 2
    set_dir = _set("layernorm_ivit", tmp_path / "newton", 2, 51, constants, c=8, in_bits=16, out_bits=16, x=x)
    res = run_set(set_dir, "icarus")
    assert res.elements == 16, res.line()


def test_layernorm_ivit_output_held_past_the_next_rows_calc(tmp_path, run_set):
    """A row's next CALC (about 380 clocks: twelve divisions) may start only once stages 1 and 2 hold
    no element of the row before (GO_AFTER = 2), since stage 2's element reads factor on its move to
    stage 3. Output ready held low for 600 clocks after the first row's C - 5 outputs: its last five
    elements then sit in stages 2..6 with stage 1 empty while the next row is filled, so a CALC started
    one stage early would hand the last element the next row's factor (rows whose factors differ, so
    its output would change; random stalls never last that long: the campaign found GO_AFTER = 1 alive)."""
    import json

    from hwvit.variants.ibert import ibert_requant_ref
    from hwvit.variants.ivit_released import layernorm_stages

    toolchain.require("icarus")
    x = np.array([[3, -5, 8, 0, -2, 7, -9, 4], NEWTON_ROWS[1], [900, -400, 1200, -37, 52, -1500, 8, 333]])
    set_dir = _set("layernorm_ivit", tmp_path / "held", 3, 52, None, c=8, in_bits=16, x=x)
    rec = vectors.read(set_dir)
    p = {**_constants(rec), "in_bits": 16, "out_bits": int(rec.params["out_bits"])}
    st = layernorm_stages(x, p)
    y = (int(st["d"][0, 7]) * int(st["factor"][1, 0])) >> 1  # the first row's last element, the next factor
    late = ibert_requant_ref(y + int(p["bias"][7]), int(p["multiplier"][7]), int(p["shift"][7]), p["out_bits"])
    assert late != st["out"][0, 7]
    env = {"HWVIT_STALL": "0", "HWVIT_SINK_HOLD": json.dumps([8 - 5, 600])}
    res = run_set(set_dir, "icarus", extra_env=env)
    assert res.elements == 24 and res.cycles > 600, res.line()


def test_layernorm_ivit_exact_eps_at_2_to_the_40(tmp_path, run_set):
    """layernorm_ivit_exact at eps_int = 2^40, the top of its contract (Var < 2^41, a 41-bit eps port):
    drawn eps stay far below, so an eps cut to 40 bits (which reads 2^40 as 0) went unseen (the
    campaign found row_meanvar's EPS_W = 40 alive). There std is about 2^20 and y = d / 16 or so; with
    eps read as 0 every row's outputs would change."""
    from hwvit.variants.ivit import layernorm_stages

    toolchain.require("icarus")
    spec = blocks.get("layernorm_ivit_exact")
    x = np.random.default_rng(53).integers(-128, 127, (4, 8), endpoint=True)
    p = _constants(spec.random(np.random.default_rng([53, spec.seed]), 1, {**spec.defaults, "c": 8}))
    top = layernorm_stages(x, {**p, "eps_int": 1 << 40})
    assert (top["var"] >= 1 << 40).all() and (top["var"] < 1 << 41).all()
    assert (top["out"] != layernorm_stages(x, {**p, "eps_int": 0})["out"]).any(axis=1).all()
    set_dir = _set("layernorm_ivit_exact", tmp_path / "eps", 4, 53, {"eps_int": 1 << 40}, c=8, x=x)
    res = run_set(set_dir, "icarus")
    assert res.elements == 32, res.line()


def test_layernorm_ivit_exact_output_held_past_the_next_rows_calc(tmp_path, run_set):
    """layernorm_ivit_exact's header: a row's CALC (mu, Var, then std and factor: about 100 clocks)
    waits until the row before has left stage 2, whose element reads factor on its move to stage 3.
    The same hold as layernorm_ivit's above: ready low for 300 clocks after the first row's C - 5
    outputs, its last five elements in stages 2..6, stage 1 empty, the next row filled; a CALC started
    one stage early (GO_AFTER = 1, which the campaign found alive) hands the last element the next
    row's factor, which differs, and its output would change."""
    import json

    from hwvit.variants.ivit import _requant_ref, layernorm_stages

    toolchain.require("icarus")
    x = np.array([[3, -5, 8, 0, -2, 7, -9, 4], [120, -128, 90, -100, 127, -77, 60, -90], [1, 2, 3, 4, -4, -3, -2, -1]])
    set_dir = _set("layernorm_ivit_exact", tmp_path / "held", 3, 54, None, c=8, x=x)
    rec = vectors.read(set_dir)
    p = _constants(rec)
    st = layernorm_stages(x, p)
    y = (int(st["d"][0, 7]) * int(st["factor"][1, 0])) >> 46  # the first row's last element, the next factor
    late = _requant_ref(
        y * int(p["gamma"][7]) + int(p["beta"][7]), int(p["multiplier"]), int(p["shift"]), int(p["out_bits"])
    )
    assert late != st["out"][0, 7]
    env = {"HWVIT_STALL": "0", "HWVIT_SINK_HOLD": json.dumps([8 - 5, 300])}
    res = run_set(set_dir, "icarus", extra_env=env)
    assert res.elements == 24 and res.cycles > 300, res.line()


def test_layernorm_ibert_output_held_past_the_next_rows_calc(tmp_path, run_set):
    """layernorm_ibert's header: a row's CALC (mean, var, then std and factor: about 60 clocks) waits
    until the row before has left stage 2, whose element reads factor on its move to stage 3. The
    hold of layernorm_ivit's test above: ready low for 300 clocks after the first row's C - 5 outputs,
    its last five elements in stages 2..6, stage 1 empty, the next row filled; a CALC started a stage
    early (GO_AFTER = 1) would hand the last element the next row's factor, which differs, and its
    output would change."""
    import json
    import math

    from hwvit.variants.ibert import _rhe_div, ibert_requant_ref

    toolchain.require("icarus")
    x = np.array([[3, -5, 8, 0, -2, 7, -9, 4], [120, -128, 90, -100, 127, -77, 60, -90], [1, 2, 3, 4, -4, -3, -2, -1]])
    set_dir = _set("layernorm_ibert", tmp_path / "held", 3, 55, None, c=8, x=x)
    rec = vectors.read(set_dir)
    p = _constants(rec)
    assert int(p["ln_shift"]) == 0
    means = [_rhe_div(int(r.sum()), 8) for r in x]
    factors = [(1 << 31) // max(math.isqrt(int(((r - m) ** 2).sum())), 1) for r, m in zip(x, means)]
    z = ((int(x[0, 7] - means[0]) * factors[1]) >> 1) + int(p["bias_int"][7])
    late = ibert_requant_ref(z, int(p["multiplier"][7]), int(p["shift"][7]), int(p["out_bits"]))
    assert late != rec.tensors["y"].data[0, 7]
    env = {"HWVIT_STALL": "0", "HWVIT_SINK_HOLD": json.dumps([8 - 5, 300])}
    res = run_set(set_dir, "icarus", extra_env=env)
    assert res.elements == 24 and res.cycles > 300, res.line()


@pytest.mark.parametrize("kind", LN_VARIANTS)
def test_layernorm_variant_reconfigured_between_sets(kind, tmp_path, run_set):
    """Three sets of one build in one simulation, no reset between them (sim/byotb.py reconfig_jobs):
    other scales, eps, gamma and beta, and rows of 8, 5 and 8 channels; the block idle after each
    set's last output while its configuration ports and channel table take the next set's values
    (as between two layers of a model), every output compared."""
    import os

    toolchain.require("icarus")
    runs = [(8, 0.05, 0.05, 1e-6), (5, 0.013, 0.11, 1e-3), (8, 0.2, 0.02, 1e-5)]
    dirs = [
        _set(kind, tmp_path / f"s{i}", 3, 41 + i, c=c, scale_in=s_in, scale_out=s_out, eps=eps)
        for i, (c, s_in, s_out, eps) in enumerate(runs)
    ]
    env = {"HWVIT_BYO_JOBS": os.pathsep.join(str(d) for d in dirs[1:])}
    res = run_set(dirs[0], "icarus", testcase="reconfig_jobs", extra_env=env)
    assert res.elements == 3 * (8 + 5 + 8) and res.extra.get("jobs") == 3, res.line()
