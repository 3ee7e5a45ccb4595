"""Traced vector sets of one digits image through every block kind, on both simulators.

The random sets of each block's own testbench cover corner cases; these check that what the
integer model really produces (its parameters, shapes and value ranges) runs bit-exact too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_set

from hwvit import pipeline, vectors
from hwvit.intvit import quantize_model, trace_model
from hwvit.record import KINDS


@pytest.fixture(scope="module")
def traced_sets(tmp_path_factory) -> dict[str, Path]:
    """One set per block kind (two for gemm: signed activations, and unsigned probabilities)."""
    source = pipeline.load_source("digits")
    int_model = quantize_model(source.model, pipeline.calibration_inputs(source, 64))
    x_test, _ = pipeline.eval_inputs(source, 1)
    _, records, _ = trace_model(int_model, x_test.numpy())
    chosen: dict[str, object] = {}
    for rec in records:
        key = rec.kind
        if rec.kind == "gemm":
            key = "gemm" if rec.params["a_signed"] else "gemm_unsigned"
        chosen.setdefault(key, rec)
    root = tmp_path_factory.mktemp("traced")
    vectors.write_sets(list(chosen.values()), root, seed=0, source_sha256=source.sha256)
    sets = {}
    for key, rec in chosen.items():
        sets[key] = root / rec.path
        assert (sets[key] / "manifest.yaml").exists()
    return sets


# pool is a requant in the model only for mean pooling; digits pools the cls token.
CASES = ["gemm", "gemm_unsigned", "layernorm", "softmax", "gelu", "residual_add"]


def test_digits_trace_covers_every_block_kind(traced_sets):
    covered = {k.replace("_unsigned", "") for k in traced_sets}
    assert covered >= set(KINDS) - {"requant"}, f"digits trace lacks {set(KINDS) - covered}"


@pytest.mark.parametrize("case", CASES)
def test_traced_set_bit_exact(traced_sets, case, simulator):
    result = run_set(traced_sets[case], simulator)
    assert result.mismatches == 0
