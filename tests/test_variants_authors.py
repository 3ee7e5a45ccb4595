"""Every variant named after a paper equals what its authors' released code computes, bit for bit.

The data (tests/authors/*.npz) is the released code's own output, made by tests/authors/make_data.py
from checkouts of I-ViT, FQ-ViT, ITA and gemmlowp (run in float64; provenance in each file): per
variant at least 10,000 elements (factors, for FQ-ViT's PTF observer) plus the extremes, at the
widths and scales the authors' models use (I-ViT's 16-bit softmax output and 16-bit LayerNorm input,
FQ-ViT's 9-bit codes and 4-bit log2 codes, ITA's scale). Each test counts the differing elements:
0. Then each released kernel against its slow reference and every intermediate within its stated
width at the extremes.
"""

from __future__ import annotations

import numpy as np
import pytest
from authors import load

from hwvit import variants
from hwvit.variants import fqvit_released as fq
from hwvit.variants import hwsoftmax
from hwvit.variants import ivit_released as iv
from hwvit.variants.base import GeluContext, LayerNormContext, SoftmaxContext

COMMITS = {
    "https://github.com/zkkli/I-ViT": "380ba99144e7dedf428477826a6b3060bf9b85d2",
    "https://github.com/megvii-research/FQ-ViT": "5daf5915c715dc21d6afcd64e661652030e640ab",
    "https://github.com/pulp-platform/ITA": "ba96519becce195d64e85eb9a5302e8a1d5487e7",
    "https://github.com/google/gemmlowp": "16e8662c34917be0065110bfcd9cc27d30f52fdf",
}
DATA = (
    "ivit_softmax",
    "ivit_gelu",
    "ivit_layernorm",
    "fqvit_layernorm",
    "fqvit_ptf",
    "fqvit_log2",
    "ita_softmax",
    "gemmlowp_requant",
)


def _ints(a) -> np.ndarray:
    return np.asarray(a).astype(np.int64)


def _differ(got, want) -> int:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    return int(np.count_nonzero(got != want))


@pytest.mark.parametrize("name", DATA)
def test_data_records_where_it_came_from(name):
    prov, groups = load(name)
    assert COMMITS[prov["repository"]] == prov["commit"]
    assert prov["file"] and prov["function"] and "tests/authors/make_data.py" in prov["command"]
    assert groups


# --------------------------------------------------------------------------------------- I-ViT


def test_shiftmax_is_ivits_intsoftmax():
    v = variants.get("softmax", "shiftmax")
    _, groups = load("ivit_softmax")
    n = bad = 0
    widths = set()
    for g in groups:
        p = v.prepare(SoftmaxContext(g["s_in"], g["in_bits"], g["out_bits"]))
        st = iv.softmax_stages(_ints(g["x"]), p)
        bad += _differ(st["e"], g["exp"]) + _differ(st["out"], g["y"])
        n += g["y"].size
        widths.add(g["out_bits"])
        assert np.array_equal(v.kernel(_ints(g["x"]), p), st["out"])
    assert bad == 0 and n >= 10_000 and widths == {8, 16}, (bad, n)


def test_shiftgelu_is_ivits_intgelu_and_quantact():
    v = variants.get("gelu", "shiftgelu")
    assert v.row
    _, groups = load("ivit_gelu")
    n = bad = 0
    for g in groups:
        x = _ints(g["x"])
        for out_bits in (4, 8, 16):
            st = iv.gelu_stages(x, v.prepare(GeluContext(g["s_in"], g["in_bits"], g["s_out"], out_bits)))
            bad += _differ(st["t"], g["t"]) + _differ(st["out"], g[f"y{out_bits}"])
            n += x.size
    assert bad == 0 and n >= 10_000, (bad, n)


def test_ivit_layernorm_is_ivits_intlayernorm_and_quantact():
    v = variants.get("layernorm", "ivit")
    _, groups = load("ivit_layernorm")
    n = bad = 0
    for g in groups:
        x = _ints(g["x"])
        for out_bits in (8, 16):
            ctx = LayerNormContext(g["gamma"], g["beta"], 1e-6, g["s_in"], g["s_out"], out_bits, g["in_bits"])
            st = iv.layernorm_stages(x, v.prepare(ctx))
            bad += _differ(st["z"], g["z"]) + _differ(st["out"], g[f"y{out_bits}"])
            n += x.size
        assert g["in_bits"] == 16 and np.abs(x).max() == 32768
    assert bad == 0 and n >= 10_000, (bad, n)


# --------------------------------------------------------------------------------------- FQ-ViT


def test_ptf_is_fqvits_qintlayernorm():
    """QIntLayerNorm's output before the next quantizer clamps it (``q``), and hwvit's saturated output."""
    _, groups = load("fqvit_layernorm")
    n = bad = 0
    for g in groups:
        x, alpha = _ints(g["x"]), _ints(g["alpha"])
        p = fq.ptf_params(g["gamma"], g["beta"], g["s"], alpha, g["s_out"], g["in_bits"], 8)
        st = fq.layernorm_ptf_stages(x, p)
        bad += _differ(st["q"], g["y"]) + _differ(st["out"], np.clip(g["y"], -128, 127))
        n += x.size
        # the variant built from a PtfContext carrying these factors computes the same
        from hwvit.variants.layernorm_forms import PtfContext

        ctx = PtfContext(g["gamma"], g["beta"], 0.0, g["s"], g["s_out"], 8, g["in_bits"], alpha=alpha)
        assert np.array_equal(
            variants.get("layernorm", "ptf").kernel(x, variants.get("layernorm", "ptf").prepare(ctx)), st["out"]
        )
    assert bad == 0 and n >= 10_000, (bad, n)
    assert {g["in_bits"] for g in groups} == {8, 9} and any(_ints(g["alpha"]).min() > 0 for g in groups)


def test_ptf_observer_is_fqvits():
    _, groups = load("fqvit_ptf")
    n = bad = 0
    for g in groups:
        scale, zp, alpha = fq.ptf_observer(g["max_val"], g["min_val"], g["x"], g["bits"], g["signed"])
        bad += _differ(scale, g["scale"]) + (zp != g["zero_point"])
        n += alpha.size
        assert set(alpha.tolist()) <= {0, 1, 2, 3}
    assert bad == 0 and n >= 10_000, (bad, n)


def test_log2_is_fqvits_log_int_softmax():
    v = variants.get("softmax", "log2")
    _, groups = load("fqvit_log2")
    n = bad = 0
    for g in groups:
        x = _ints(g["x"])
        st = fq.log2_stages(x, v.prepare(SoftmaxContext(g["s_in"], g["in_bits"], 16)))
        code = _ints(g["code"])
        bad += _differ(st["e"], g["exp"]) + _differ(st["v"], g["ratio"]) + _differ(np.minimum(st["code"], 16), code)
        # at 16 output bits every 4-bit code is exact: y = 2^(15 - code), 0 where FQ-ViT masks
        bad += _differ(st["out"], np.where(code < 16, np.left_shift(1, 15 - np.minimum(code, 15)), 0))
        n += x.size
    assert bad == 0 and n >= 10_000, (bad, n)
    assert {int(c) for g in groups for c in np.unique(g["code"])} >= set(range(17))  # every code, and the mask


# --------------------------------------------------------------------------------------- ITA, gemmlowp


def test_ita_is_pyitas_streaming_softmax_at_itas_scale():
    v = variants.get("softmax", "ita")
    p = v.prepare(SoftmaxContext(hwsoftmax.ITA_SCALE, 8, 8))
    assert p["mult"] == 1 << 16  # shift = max - x: ITA's exponent since its scale is 1 / log2(e)
    _, groups = load("ita_softmax")
    n = bad = 0
    for g in groups:
        bad += _differ(v.kernel(_ints(g["x"]), p), g["y"])
        n += g["y"].size
    assert bad == 0 and n >= 10_000, (bad, n)


@pytest.mark.parametrize("name, overflow", [("gemmlowp", "sat"), ("gemmlowp_wrap", "wrap")])
def test_gemmlowp_is_gemmlowps_output_stage(name, overflow):
    """gemmlowp's output stage gives int32; hwvit then saturates (or wraps) to out_bits."""
    _, (g,) = load("gemmlowp_requant")
    v = variants.get("requant", name)
    acc, mult, shift = _ints(g["acc"]), _ints(g["multiplier"]), -_ints(g["exponent"])
    bad = 0
    for out_bits in (8, 16):  # one "channel" per element: multiplier and shift along the last axis
        got = v.kernel(acc[None, :], {"multiplier": mult, "shift": shift, "out_bits": out_bits})[0]
        half = 1 << (out_bits - 1)
        y = _ints(g["y"])
        want = np.clip(y, -half, half - 1) if overflow == "sat" else ((y + half) & (2 * half - 1)) - half
        bad += _differ(got, want)
    assert bad == 0 and acc.size >= 10_000
