"""The softmax variants' Verilog twins (rtl/softmax_ibert.v, rtl/softmax_shiftmax.v, rtl/softmax_log2.v)
at input scales beyond sim/test_variants.py's default (16 / 2^in_bits, so every real score difference
stays below 16):

- a wide range (in_bits 12 at s_in = 0.5: differences up to 2047): the paths where the exponential
  reaches 0 or saturates (I-BERT's clamp at 30 x0, ShiftExp's q >= 32, log2's z >= 64) and the
  long shifts;
- each variant's extreme scales (the smallest and largest s_in its constants support).

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
