"""rtl/residual_add_channels.v (twin of the kind residual_add_channels: the residual add with one
(Ma, Mb, s) per channel) through the generic stream bench (sim/byotb.py: the constant table written
through its port, then the tokens streamed with random stalls on both sides, every output and every
token's last flag checked):

- random sets (both rails and zero first) at the kind's default 64 channels, at one channel and at
  a count that is no power of two, each through the reset test (a reset with beats in flight, then
  the whole set from the first clock after another), on both simulators;
- a table at the extremes (the largest multipliers, a zero one, shifts 1 and 62, ties);
- the channel count clamped (0 reads as 1, above MAX_C as MAX_C), full throughput without stalls;
- the sets the digits model traces with FQ-ViT's power of two factor (``layernorm=ptf_exact``), whose
  every block then has Verilog: the whole first layer's sets through `hwvit sim`'s runner;
- a wrong expected value reported, lint and Icarus at other parameters.

Icarus by default; ``make test-variants`` (marker ``variants``) adds Verilator and the traced model
(its calibration of channel ranges alone takes seconds make test's budget has not got).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from hwvit import blocks, toolchain, vectors

KIND = "residual_add_channels"
SOURCES = list(blocks.get(KIND).rtl)
SIMS = ["icarus", pytest.param("verilator", marks=pytest.mark.variants)]


def _random(tmp_path, name: str, cases: int, seed: int, **opts):
    spec = blocks.get(KIND)
    rec = spec.random(np.random.default_rng([seed, spec.seed]), cases, {**spec.defaults, **opts})
    return vectors.write_set(rec, tmp_path / name, seed=seed)


def _directed(tmp_path, a, b, ma, mb, sh, out_bits: int = 8):
    from hwvit.record import make_record

    spec = blocks.get(KIND)
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    consts = {k: np.asarray(v, dtype=np.int64) for k, v in (("mult_a", ma), ("mult_b", mb), ("shift", sh))}
    y = spec.kernel(a, b, consts["mult_a"], consts["mult_b"], consts["shift"], out_bits)
    params = {"rows": a.shape[0], "c": a.shape[1], "out_bits": out_bits}
    rec = make_record(KIND, "directed", params, {"a": 1.0, "b": 1.0}, a=a, b=b, y=y, **consts)
    return vectors.write_set(rec, tmp_path / "directed", seed=0)


@pytest.mark.parametrize("simulator", SIMS)
@pytest.mark.parametrize("c, out_bits", [(64, 8), (1, 6), (7, 16)])
def test_random_sets(tmp_path, simulator, c, out_bits, run_set):
    toolchain.require(simulator)
    set_dir = _random(tmp_path, f"c{c}", 40, seed=c, c=c, out_bits=out_bits)
    res = run_set(set_dir, simulator, testcase="reset_midstream")
    assert 1 <= res.extra["before_reset"] < 40 * c, res.line()
    assert res.elements == 40 * c + res.extra["before_reset"], res.line()


@pytest.mark.parametrize("simulator", SIMS)
def test_table_extremes(tmp_path, simulator, run_set):
    """Ma and Mb at 2^31 - 1 and 0, shifts 1 (everything saturates) and 62 (everything rounds to 0),
    and channels whose sums land exactly on a rounding tie (a * 2^30 + b * 2^30 >> 31)."""
    toolchain.require(simulator)
    ma = [(1 << 31) - 1, 0, (1 << 31) - 1, 1 << 30, 1 << 30, 12345]
    mb = [(1 << 31) - 1, (1 << 31) - 1, 0, 1 << 30, 1 << 30, 1]
    sh = [1, 37, 62, 31, 32, 2]
    rng = np.random.default_rng(7)
    rails = np.array([[127] * 6, [-128] * 6, [0] * 6, [1] * 6, [-1] * 6])
    a = np.concatenate([rails, rails[::-1], rng.integers(-128, 128, (30, 6))])
    b = np.concatenate([rails, rails, rng.integers(-128, 128, (30, 6))])
    set_dir = _directed(tmp_path, a, b, ma, mb, sh, out_bits=8)
    res = run_set(set_dir, simulator)
    assert res.elements == a.size, res.line()


@pytest.mark.parametrize("c, drive", [(1, 0), (16, 17), (16, 31)], ids=["0->1", "17->16", "31->16"])
def test_channel_count_clamped(c, drive, tmp_path, run_set):
    """Built with MAX_C = 16 (a 5-bit count port reaches 31), tokens of the clamped count driven with
    the out-of-range value come out as the kernel's tokens of that count."""
    toolchain.require("icarus")
    set_dir = _random(tmp_path, "clamp", 6, seed=17, c=c)
    env = {"HWVIT_BYO_DRIVE": json.dumps({"c": drive})}
    res = run_set(set_dir, "icarus", hdl_overrides={"MAX_C": 16}, extra_env=env)
    assert res.elements == 6 * c, res.line()


def test_full_throughput(tmp_path, run_set):
    """No stalls: one beat per clock once the table is written (64 entries), latency 2."""
    toolchain.require("icarus")
    set_dir = _random(tmp_path, "fast", 30, seed=5)
    res = run_set(set_dir, "icarus", extra_env={"HWVIT_STALL": "0"})
    assert res.elements == 30 * 64 and res.cycles <= 30 * 64 + 64 + 8, res.line()


@pytest.mark.parametrize("simulator", SIMS)
def test_mismatch_is_reported(tmp_path, simulator, sim_run):
    """One expected output off by one LSB (token 2, channel 5): the run fails naming that element,
    its expected and got values and the block."""
    from streamtb import corrupt

    toolchain.require(simulator)
    spec = blocks.get(KIND)
    rec = spec.random(np.random.default_rng([3, spec.seed]), 6, {**spec.defaults, "c": 8})
    bad = corrupt(rec, "y", 2 * 8 + 5)
    set_dir = vectors.write_set(bad, tmp_path / "corrupt")
    res = sim_run(set_dir, simulator)
    want, got = int(bad.tensors["y"].data[2, 5]), int(rec.tensors["y"].data[2, 5])
    assert not res.passed and res.mismatches == 1, res.line()
    assert res.first["expected"] == want and res.first["got"] == got, res.first
    assert KIND in res.message and f"expected {want}" in res.message and f"got {got}" in res.message


@pytest.mark.variants
def test_ptf_model_first_layer_through_the_rtl(tmp_path, run_set):
    """layernorm=ptf_exact (FQ-ViT's power of two factor on hwvit's exact LayerNorm): the residual
    stream per channel; every set the digits model traces in layers.0 has Verilog and passes."""
    from hwvit import pipeline
    from hwvit.intvit import trace_model
    from hwvit.quant import QuantConfig, quantize_model

    toolchain.require("icarus")
    source = pipeline.load_source("digits")
    model = quantize_model(source.model, pipeline.calibration_inputs(source, 32), QuantConfig(layernorm="ptf_exact"))
    x, _ = pipeline.eval_inputs(source, 1)
    _, records, _ = trace_model(model, x.numpy())
    first = [r for r in records if r.path.startswith("layers.0.")]
    kinds = {r.kind for r in first}
    assert {KIND, "layernorm_ptf_exact"} <= kinds and "residual_add" not in kinds
    assert all(blocks.get(k).rtl for k in kinds)
    vectors.write_sets(first, tmp_path / "sets", seed=0)
    sets = vectors.find_sets(tmp_path / "sets")
    assert len(sets) == len(first)
    passed = {run_set(set_dir, "icarus").kind for set_dir in sets}  # each bit-exact, or it raises
    assert passed == kinds


RTL_PARAMS = [{"OUT_BITS": 8}, {"OUT_BITS": 2, "MAX_C": 2}, {"OUT_BITS": 16, "MAX_C": 4096}, {"MAX_C": 1000}]


@pytest.mark.parametrize("params", RTL_PARAMS, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_lint(params):
    from hwvit import synth

    assert synth.lint(SOURCES, params) == []
    assert synth.iverilog(SOURCES, KIND, params) == []
