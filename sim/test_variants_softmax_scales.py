"""The softmax variants' Verilog twins (rtl/softmax_ibert.v, rtl/softmax_shiftmax.v, rtl/softmax_log2.v)
at input scales beyond sim/test_variants.py's default (16 / 2^in_bits, so every real score difference
stays below 16):

- a wide range (in_bits 12 at s_in = 0.5: differences up to 2047): the paths where the exponential
  reaches 0 or saturates (I-BERT's clamp at 30 x0, ShiftExp's q >= 32, log2's z >= 64) and the
  long shifts;
- each variant's extreme scales (the smallest and largest s_in its constants support);
- a difference sweep at a wide scale (every max - x in 0..255 once at s_in = 0.5, rows [max,
  max - a]): each exponential from 1 down through the clamps beside the max alone, where random
  rows put only a few elements between the clamps.

Icarus only (short rows, few rows): the same random sets as sim/test_variants.py otherwise.
"""

from __future__ import annotations

import numpy as np
import pytest

from hwvit import blocks, toolchain, vectors

# kind -> (options beyond the kind's defaults) per set
SCALES = {
    "softmax_ibert": [
        {"in_bits": 12, "scale_in": 0.5},
        {"in_bits": 16, "scale_in": 2.0**-15, "out_bits": 16},
        {"in_bits": 6, "scale_in": 1.66, "out_bits": 3},
    ],
    "softmax_shiftmax": [
        {"in_bits": 12, "scale_in": 0.5},
        {"in_bits": 16, "scale_in": 2.0**-16, "out_bits": 16},
        {"in_bits": 4, "scale_in": 1.0, "out_bits": 2},
    ],
    "softmax_log2": [
        {"in_bits": 12, "scale_in": 0.5},
        {"in_bits": 16, "scale_in": 2.0**-24, "out_bits": 16},
        {"in_bits": 16, "scale_in": 2.0**16, "out_bits": 3},
        # q_b = floor(1.353 / s) just above 2^24 (2^24 + 2^15): q_b - rem crosses 2^24 within a row
        # of 16-bit scores, where a 24-bit slice of it would go wrong for half the elements only
        {"in_bits": 16, "scale_in": 1.353 / (2**24 + 2**15), "out_bits": 16},
    ],
}


@pytest.mark.parametrize("kind", sorted(SCALES))
def test_softmax_variant_scales_bit_exact(kind, tmp_path, run_set):
    toolchain.require("icarus")
    spec = blocks.get(kind)
    for i, opts in enumerate(SCALES[kind]):
        options = {**spec.defaults, "row_len": 40, **opts}
        rec = spec.random(np.random.default_rng([21 + i, spec.seed]), 10, options)
        out = tmp_path / f"set{i}"
        vectors.write_sets([rec], out, seed=21 + i)
        (set_dir,) = vectors.find_sets(out)
        res = run_set(set_dir, "icarus")
        assert res.elements == 10 * 40, res.line()


@pytest.mark.parametrize("kind", sorted(SCALES))
def test_softmax_variant_wide_difference_sweep(kind, tmp_path, run_set):
    """Rows [max, max - a] for a = 0..255 at s_in = 0.5 (differences up to 127.5: I-BERT's z, ShiftExp's
    q and log2's z all cross their clamps), 16-bit outputs (small exponentials still get a nonzero
    probability): the campaign found log2's restoring division cut to five steps alive, which only
    an exponential with z in 32..63 shows, and its E halved for every element alike."""
    toolchain.require("icarus")
    spec = blocks.get(kind)
    options = {**spec.defaults, "in_bits": 8, "scale_in": 0.5, "out_bits": 16, "row_len": 2, "sweep": 1}
    rec = spec.random(np.random.default_rng([23, spec.seed]), 1, options)
    vectors.write_sets([rec], tmp_path / "sweep", seed=23)
    (set_dir,) = vectors.find_sets(tmp_path / "sweep")
    res = run_set(set_dir, "icarus")
    assert res.elements == 512, res.line()
