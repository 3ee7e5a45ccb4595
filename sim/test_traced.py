"""All traced vector sets of one digits image (every block instance), on both simulators.

The random sets of each block's own testbench cover corner cases; these check that what the
integer model really produces (its parameters, shapes and value ranges) runs bit-exact too: one set
of each kind in make test on Icarus (on Verilator under -m slow: 55 s of make test's budget, and
every kind's own testbench runs on Verilator there), all 58 under -m slow.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hwvit import blocks, pipeline, simulate, vectors
from hwvit.intvit import trace_model
from hwvit.quant import quantize_model
from hwvit.record import KINDS, UNIT_KINDS

# One xdist worker runs the module: on a fresh clone its fixture (quantize, trace, write 58 sets,
# numba compiling the kernels) is the costliest of the suite, and two workers would each pay it.
pytestmark = pytest.mark.xdist_group("traced")


@pytest.fixture(scope="session")  # session: kept when xdist runs other modules between its tests
def traced_root(tmp_path_factory) -> Path:
    """Every block instance of one digits test image, as vector sets (58 sets)."""
    source = pipeline.load_source("digits")
    int_model = quantize_model(source.model, pipeline.calibration_inputs(source, 64))
    x_test, _ = pipeline.eval_inputs(source, 1)
    _, records, _ = trace_model(int_model, x_test.numpy())
    root = tmp_path_factory.mktemp("traced")
    vectors.write_sets(records, root, seed=0, source_sha256=source.sha256)
    return root


def test_digits_trace_covers_every_block_kind(traced_root):
    kinds = {vectors.read_manifest(d)["kind"] for d in vectors.find_sets(traced_root)}
    # requant stands alone only for mean pooling; digits pools its cls token (the GEMM engine
    # requantizes through rtl/requant.v all the same). divu and isqrt are parts of softmax and
    # layernorm, never traced as blocks of their own.
    # hwvit's own arithmetic: no variant kind (softmax_ibert, ...) in a default trace
    builtin = {k for k in KINDS if not blocks.get(k).variant}
    assert kinds == builtin - {"requant", *UNIT_KINDS}, kinds
    signs = {
        vectors.read_manifest(d)["params"]["a_signed"]
        for d in vectors.find_sets(traced_root)
        if vectors.read_manifest(d)["kind"] == "gemm"
    }
    assert signs == {True, False}  # int8 activations and uint8 probabilities (P.V)


def _run_bit_exact(sets: list[Path], simulator: str) -> None:
    results = simulate.run_many([(str(d), simulator) for d in sets], workers=1)
    failed = [r.line() for r in results if not r.passed]
    assert not failed, "\n".join(failed)
    assert len(results) == len(sets) and all(r.elements > 0 for r in results)


def _later_layer(d: Path) -> bool:
    return d.name.startswith("layers.") and not d.name.startswith("layers.0.")


@pytest.mark.parametrize(
    "simulator", ["icarus", pytest.param("verilator", marks=pytest.mark.slow)], indirect=True
)  # conftest's fixture, Verilator under -m slow
def test_traced_set_of_each_kind_bit_exact(traced_root, simulator):
    """One set per block kind and GEMM signedness, the first by name outside the later layers
    (embed.proj, layers.0.add1, layers.0.attn.h0.av with unsigned probabilities, layers.0.attn.softmax,
    layers.0.mlp.gelu, layers.0.norm1): what the integer model really feeds each block. The other
    sets repeat the same blocks on other data and shapes (the slow test below runs all 58, `make
    bench` / -m slow; each block's testbench covers its shapes and corners)."""
    every = vectors.find_sets(traced_root)
    chosen: dict[tuple, Path] = {}
    for d in sorted(every, key=lambda d: d.name):
        if _later_layer(d):
            continue
        manifest = vectors.read_manifest(d)
        chosen.setdefault((manifest["kind"], manifest["params"].get("a_signed")), d)
    kinds = {vectors.read_manifest(d)["kind"] for d in every}
    assert {k for k, _ in chosen} == kinds and (("gemm", True) in chosen and ("gemm", False) in chosen)
    _run_bit_exact(list(chosen.values()), simulator)


@pytest.mark.slow
def test_every_traced_set_bit_exact(traced_root, simulator):
    """All sets of the image through their blocks; the failure lists every set that mismatched."""
    sets = vectors.find_sets(traced_root)
    assert len(sets) >= 50
    _run_bit_exact(sets, simulator)
