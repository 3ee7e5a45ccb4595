"""The Verilog twins of the arithmetic variants (hwvit/blocks/variant_rtl/<kind>.py, rtl/<kind>.v),
bit-exact through the generic stream bench (sim/byotb.py, the bind-file bench):

- random sets of every variant kind with RTL: the edge rows first (both rails, alternating, zero,
  one hot), a third of the rest narrow; at the kind's defaults and at a short row (1 element), each
  through the reset test (a reset with rows in flight, then one right before the whole set), and
  (opt-in) at a long row with other widths;
- the sets the digits model traces with that variant chosen (`--variant softmax=ibert`): the first
  encoder layer's, which hold what a real model feeds the block;
- the GELU variants on rtl/gelu.v, each as the table it makes (random and traced sets).

By default each set runs on Icarus; ``make test-variants`` runs them on both simulators and adds
long rows with other widths (marker ``variants``: Verilator builds of every variant, and LayerNorm
rows of 192 channels on Icarus, cost minutes that make test's budget has not got). Each LayerNorm
variant's row-length clamp (cfg_c_i = 0, above MAX_C) runs here.
The variant kinds' sets are computed by their exact kernels (hwvit.variants), themselves held to
slow references by tests/test_variants_*.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hwvit import blocks, toolchain, variants, vectors
from hwvit.blocks.variant_kinds import ROW_KEY

# the arithmetic variants' kinds with Verilog (residual_add_channels, a variant of the residual add's
# constants, has its own testbench: sim/test_residual_add_channels.py)
VARIANT_RTL = sorted(k for k, spec in blocks.kinds().items() if spec.variant and spec.rtl and spec.family in ROW_KEY)

# Per family: (options, cases) of the random sets beyond the kind's defaults: a row of one element
# (make test), a long row with other widths (make test-variants: minutes of Icarus for LayerNorm).
SHAPES = {
    "softmax": [({"row_len": 1}, 6)],
    "layernorm": [({"c": 1}, 6)],
    "gelu": [({"n": 1}, 6)],
}
LONG = {
    "softmax": ({"row_len": 197, "in_bits": 10, "out_bits": 7}, 12),
    "layernorm": ({"c": 192, "out_bits": 6}, 12),
    "gelu": ({"n": 3072, "in_bits": 10, "out_bits": 7}, 8),  # a ViT-B token's hidden features
}

# Kinds whose per-row work is long (layernorm_ptf: its binary64 program, ~225 clocks a channel): in make
# test shorter random rows than the defaults, and their traced sets under -m variants only.
SHORT = {"layernorm_ptf": [({"c": 16}, 8), ({"c": 1}, 6)]}
TRACED = [pytest.param(k, marks=pytest.mark.variants) if k in SHORT else k for k in VARIANT_RTL]

# Icarus by default; Verilator too under -m variants (make test-variants).
SIMS = [
    "icarus",
    pytest.param("verilator", marks=pytest.mark.variants),
]


def _require(simulator: str) -> str:
    toolchain.require(simulator)  # a missing simulator fails with its install command
    return simulator


def _random_set(kind: str, out: Path, opts: dict, cases: int, seed: int) -> Path:
    spec = blocks.get(kind)
    options = {**spec.defaults, **opts}
    rec = spec.random(np.random.default_rng([seed, spec.seed]), cases, options)
    return vectors.write_set(rec, out, seed=seed)


@pytest.mark.parametrize("simulator", SIMS)
@pytest.mark.parametrize("kind", VARIANT_RTL)
def test_variant_random_sets_bit_exact(kind, simulator, tmp_path, run_set):
    spec = blocks.get(kind)
    _require(simulator)
    configs = SHORT.get(kind) or [({}, 24), *SHAPES[spec.family]]
    for i, (opts, cases) in enumerate(configs):
        set_dir = _random_set(kind, tmp_path / f"set{i}", opts, cases, seed=11 + i)
        # through the reset test (sim/byotb.py reset_midstream): a reset with rows in flight, then one
        # with the set offered in the first clock after it, the set bit-exact (a row of one element
        # taken in that clock, and a first row of many summed from the registers' reset values)
        res = run_set(set_dir, simulator, testcase="reset_midstream")
        rows = vectors.read(set_dir).params["rows"]
        n = vectors.read(set_dir).params[ROW_KEY[spec.family]]
        assert 1 <= res.extra["before_reset"] < rows * n, res.line()
        assert res.elements == rows * n + res.extra["before_reset"], res.line()


@pytest.mark.variants
@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
@pytest.mark.parametrize("kind", VARIANT_RTL)
def test_variant_long_rows_bit_exact(kind, simulator, tmp_path, run_set):
    spec = blocks.get(kind)
    _require(simulator)
    opts, cases = LONG[spec.family]
    set_dir = _random_set(kind, tmp_path / "long", opts, cases, seed=13)
    res = run_set(set_dir, simulator)
    assert res.elements == cases * opts[ROW_KEY[spec.family]], res.line()


# Every variant block takes its row length as rtl/softmax.v and rtl/layernorm.v do (the row engine,
# rtl/row_stream.v: 0 reads as 1, above the maximum as the maximum).
CLAMPING = VARIANT_RTL
MAX_PARAM = {"softmax": "MAX_N", "layernorm": "MAX_C", "gelu": "MAX_N"}
LEN_PORT = {"softmax": "row_len", "layernorm": "c", "gelu": "row_len"}  # the row length's configuration name


@pytest.mark.parametrize("n, drive", [(1, 0), (16, 17), (16, 31)], ids=["0->1", "17->16", "31->16"])
@pytest.mark.parametrize("kind", CLAMPING)
def test_variant_row_len_clamped(kind, n, drive, tmp_path, run_set):
    """The row-length port (cfg_c_i, row_len_i) read as 0 -> 1 and above the maximum -> the maximum:
    built with a maximum of 16 (a 5-bit port reaches 31), rows of the clamped length driven with the
    out-of-range value must come out as the kernel's rows of that length (the campaign found
    nothing else reaching the clamp: a halved or truncated maximum survived)."""
    import json

    family = blocks.get(kind).family
    key = ROW_KEY[family]
    # 6 rows: the 4 periodic edge rows, the one-hot row and a random one (with the periodic rows
    # alone, a buffer read at index mod 8 went unseen: softmax_shiftmax's rd_cnt_q[AW-2:0])
    set_dir = _random_set(kind, tmp_path / "set", {key: n}, 6, seed=17)
    env = {"HWVIT_BYO_DRIVE": json.dumps({LEN_PORT[family]: drive})}
    res = run_set(set_dir, "icarus", hdl_overrides={MAX_PARAM[family]: 16}, extra_env=env)
    assert res.elements == 6 * n, res.line()


SM_VARIANTS = [k for k in VARIANT_RTL if blocks.get(k).family == "softmax"]


@pytest.mark.parametrize("kind", SM_VARIANTS)
def test_softmax_variant_difference_sweep(kind, tmp_path, run_set):
    """Every difference a = max - x in 0..255 once, each in a row [max, max - a] at the default
    scale: each exp value the block can form, beside the max alone, so that even an exp of 1 LSB
    moves S and with it the max's p (random rows bury small exps under big ones: the campaign found
    shiftmax's E = 0 cut moved from m >= 32 I_0 down to 16 I_0 alive, which flips the max's p from
    128 to 127 at a = 178..222)."""
    set_dir = _random_set(kind, tmp_path / "sweep", {"row_len": 2, "sweep": 1}, 1, seed=19)
    assert vectors.read(set_dir).params["rows"] == 256
    res = run_set(set_dir, "icarus")
    assert res.elements == 512, res.line()


@pytest.fixture(scope="module")
def digits():
    from hwvit import pipeline  # torch: imported by the traced tests only (a mutant's run imports
    # this module for its cheap tests first, and importing torch would cost seconds in each)

    source = pipeline.load_source("digits")
    calib = pipeline.calibration_inputs(source, 32)
    x_test, _ = pipeline.eval_inputs(source, 1)
    return source, calib, x_test.numpy()


def _trace(digits, **quant) -> list:
    """The block records of the digits model quantized with these QuantConfig choices."""
    from hwvit.intvit import trace_model
    from hwvit.quant import QuantConfig, quantize_model

    source, calib, x = digits
    _, records, _ = trace_model(quantize_model(source.model, calib, QuantConfig(**quant)), x)
    return records


@pytest.mark.parametrize("simulator", SIMS)
@pytest.mark.parametrize("kind", TRACED)
def test_variant_traced_sets_bit_exact(kind, simulator, digits, tmp_path, run_set):
    """The first layer's sets of this variant, as the digits model traces them with it chosen."""
    spec = blocks.get(kind)
    _require(simulator)
    records = _trace(digits, **{spec.family: spec.variant})
    mine = [r for r in records if r.kind == kind and r.path.startswith("layers.0.")]
    assert mine, f"the digits model traced no {kind} set in layers.0"
    vectors.write_sets(mine, tmp_path, seed=0)
    sets = vectors.find_sets(tmp_path)
    assert len(sets) == len(mine)
    for set_dir in sets:
        res = run_set(set_dir, simulator)
        assert res.elements == vectors.read(set_dir)["y"].size, res.line()


# GELU: every elementwise arithmetic of an in_bits input is a table, so rtl/gelu.v runs each variant
# as the table that variant makes (the set records it as its `variant` parameter); a variant on rows
# (Variant.row: I-ViT's released ShiftGELU) is no table and has a kind of its own.
GELU_VARIANTS = [
    n for n in variants.names("gelu") if not variants.is_default("gelu", n) and not variants.get("gelu", n).row
]


@pytest.mark.parametrize("simulator", SIMS)
@pytest.mark.parametrize("variant", GELU_VARIANTS)
def test_gelu_variant_tables_bit_exact(variant, simulator, digits, tmp_path, run_set):
    _require(simulator)
    rec = vectors.random_record("gelu", 300, 5, variant=variant)
    assert rec.params["variant"] == variant
    vectors.write_sets([rec], tmp_path / "random", seed=5)
    records = _trace(digits, gelu=variant)
    traced = [r for r in records if r.kind == "gelu" and r.path.startswith("layers.0.")]
    assert traced and all(r.params["variant"] == variant for r in traced)
    vectors.write_sets(traced, tmp_path / "traced", seed=0)
    sets = vectors.find_sets(tmp_path)
    assert len(sets) == 1 + len(traced)
    for set_dir in sets:
        res = run_set(set_dir, simulator)
        assert res.elements == vectors.read(set_dir)["y"].size, res.line()


@pytest.mark.parametrize("simulator", SIMS)
@pytest.mark.parametrize(
    "opts",
    [
        {"c": 24, "in_bits": 16, "out_bits": 16},
        pytest.param({"c": 197, "in_bits": 16}, marks=pytest.mark.variants),
    ],
    ids=["c24", "c197"],
)
def test_layernorm_ivit_16_bit_inputs(opts, simulator, tmp_path, run_set):
    """I-ViT's LayerNorm takes its residual stream's 16-bit codes: the edge rows (both rails,
    alternating: a variance near C 2^30, the Newton steps' widest) and random ones at 16 bits."""
    _require(simulator)
    set_dir = _random_set("layernorm_ivit", tmp_path / "set", opts, 8, seed=43)
    assert vectors.read(set_dir).params["in_bits"] == 16
    res = run_set(set_dir, simulator)
    assert res.elements == 8 * opts["c"], res.line()
