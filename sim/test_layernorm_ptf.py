"""rtl/layernorm_ptf.v (FQ-ViT's released QIntLayerNorm, its constants on rtl/f64_unit.v) at the corners of
its arithmetic, through the generic stream bench (sim/byotb.py), against the variant's kernel
(hwvit/variants/fqvit_released.py layernorm_ptf_stages):

- 12-bit inputs at both rails (every element -2048 or 2047, alternating, one outlier), rows of variance 0
  (constant rows: beta alone) beside rows of the least variance, with the power-of-two factors 0..3 mixed
  and with the smallest factor 1, 2 or 3 (the sums shifted down by it, s1 = s 2^a);
- B near its bound 2^52 of either sign (gamma tiny: N = 31; beta / s_out near 2^21), a channel of gamma 0
  (A = 0: N = 31, M = 0) and one of A above 255 (N = 0, M = 255);
- every set checked to lie in the block's binary64 domain (hwvit/blocks/variant_rtl/layernorm_ptf.py).

Icarus, a few short rows each (make test; the smallest factors 2 and 3 under the marker ``variants``);
random and traced sets run in sim/test_variants.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from hwvit import blocks, toolchain, variants, vectors
from hwvit.blocks.variant_rtl.layernorm_ptf import domain_error
from hwvit.variants.fqvit_released import layernorm_ptf_stages, ptf_params

pytestmark = pytest.mark.xdist_group("layernorm")

KIND = "layernorm_ptf"


def _set(out, x, alpha, gamma, beta, s: float, s_out: float, in_bits: int, out_bits: int):
    """The set of rows ``x`` at these constants, y by the variant's kernel; returns (set_dir, stages)."""
    spec = blocks.get(KIND)
    x = np.asarray(x, dtype=np.int64)
    vp = ptf_params(gamma, beta, s, np.asarray(alpha, dtype=np.int64), s_out, in_bits, out_bits)
    assert domain_error(vp) is None
    y = variants.get("layernorm", "ptf").kernel(x, vp)
    rec = spec.traced("ptf.corners", x, y, vp, in_bits, out_bits, {"x": s, "y": s_out})
    return vectors.write_set(rec, out, seed=0), layernorm_ptf_stages(x, vp)


def _rails(c: int, rng, alpha) -> np.ndarray:
    """Rows at the 12-bit rails, rows of variance 0 (z constant: x_i = k << (3 - (alpha_i - a))), the least
    variance above 0 and random rows."""
    lo, hi = -2048, 2047
    d = np.asarray(alpha) - min(alpha)
    rows = [np.full(c, hi), np.full(c, lo), np.where(np.arange(c) % 2 == 0, hi, lo)]
    rows += [np.left_shift(k, 3 - d) for k in (255, -256, 0, 5)]
    for v, w in ((lo, hi), (hi, lo)):  # one outlier
        r = np.full(c, v)
        r[rng.integers(c)] = w
        rows.append(r)
    rows.append(np.where(np.arange(c) == 3, 1, 0))  # the least variance above 0 (z = x << (alpha_3 - a))
    rows += [rng.integers(lo, hi, c, endpoint=True) for _ in range(2)]
    return np.stack(rows)


@pytest.mark.parametrize(
    "alpha",
    [
        [0, 1, 2, 3, 3, 2, 1, 0],
        [1, 3, 2, 1, 1, 3, 2, 3],
        pytest.param([2, 3, 3, 2, 3, 2, 2, 3], marks=pytest.mark.variants),
        pytest.param([3] * 8, marks=pytest.mark.variants),
    ],
    ids=["a0", "a1", "a2", "a3"],
)
def test_rails_and_constant_rows(alpha, tmp_path, run_set):
    toolchain.require("icarus")
    rng = np.random.default_rng(sum(alpha))
    x = _rails(8, rng, alpha)
    gamma = rng.normal(1.0, 0.4, 8)
    gamma[:2] = [2.5, -1.0]
    beta = rng.normal(0.0, 0.5, 8)
    set_dir, st = _set(tmp_path / "set", x, alpha, gamma, beta, 0.0123, 0.0417, 12, 8)
    flat = (st["z"] == st["z"][:, :1]).all(axis=1)
    assert flat[3:7].all() and (~flat).sum() >= 6  # beta alone on the constant rows
    assert (st["m"][flat] == 0).all() and (st["n"][flat] == 0).all() and (st["n"][~flat] > 0).any()
    assert np.abs(st["z"]).max() == 2048 << (3 - min(alpha))
    res = run_set(set_dir, "icarus")
    assert res.elements == x.size, res.line()


def test_b_near_2_to_the_52_and_m_at_its_ends(tmp_path, run_set):
    """B within 2^41 of +-2^52 (gamma 1e-9: N = 31; beta = +-(2^21 - 2^-18) s_out), a gamma of 0 (A = 0) and
    gammas that make A >= 256 (M = 255, N = 0), at 16 output bits (the outputs saturate where B is large)."""
    toolchain.require("icarus")
    rng = np.random.default_rng(52)
    c = 6
    s_out = 0.75
    top = (2.0**21 - 2.0**-18) * s_out
    gamma = np.array([1e-9, -1e-9, 0.0, 3e6, -2e7, 1.0])
    beta = np.array([top, -top, 0.3, -0.2, 1e-3, 0.0])
    alpha = [0, 1, 2, 3, 1, 0]
    x = np.concatenate([_rails(c, rng, alpha), rng.integers(-2048, 2047, (4, c), endpoint=True)])
    set_dir, st = _set(tmp_path / "set", x, alpha, gamma, beta, 0.004, s_out, 12, 16)
    live = st["n"][:, 0] != 0  # the rows of variance above 0
    b = st["b"][live]
    assert b[:, 0].min() >= 2**52 - 2**41 and b[:, 1].max() <= -(2**52) + 2**41
    assert (st["m"][live][:, 2] == 0).all() and (st["n"][live][:, 2] == 31).all()
    assert (st["m"][live][:, 3:5] == 255).all() and (st["n"][live][:, 3:5] == 0).all()
    res = run_set(set_dir, "icarus")
    assert res.elements == x.size, res.line()


def test_domain_error_names_what_is_outside():
    vp = ptf_params([1.0, 2.0**-500], [0.0, 1.0], 0.01, np.array([0, 1]), 0.05, 8, 8)
    assert "gamma_f64" in domain_error(vp)
    vp = ptf_params([1.0, 1.0], [0.0, 1.0], 2.0**401, np.array([0, 1]), 0.05, 8, 8)
    assert "s_f64" in domain_error(vp)
    vp = ptf_params([1.0, 0.0], [-0.0, 2.0**400], 2.0**-400, np.array([0, 1]), 2.0**400, 8, 8)
    assert domain_error(vp) is None
