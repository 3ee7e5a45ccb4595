"""The engine equals the golden forward bit for bit: the logits and every traced value, on every model
family, every arithmetic variant (hwvit.variants' registry), every provider (numpy; torch tensors,
here on the CPU) and every GEMM backend that runs on this CPU.

make test holds each axis against the others' defaults, on tiny models and two images: every family
on both providers, every variant on one family, every backend on two families (one whose blocks go
to the one-call encoder block, one whose position adds send it block by block). The whole product
(family x variant x provider x backend) is ``make test-engine`` (``-m engine``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_intvit import SMALL, inputs_for, small_model

from hwvit import variants
from hwvit.engine import Engine
from hwvit.intvit import Trace
from hwvit.intvit.device import DeviceForward
from hwvit.ops import gemm_backends
from hwvit.quant import QuantConfig, quantize_model

FAMILIES = ("digits", *sorted(SMALL), "hf", "onnx-hf", "onnx-zero-points")
IMPORTED = {"onnx-hf": ("hf", "symmetric"), "onnx-zero-points": ("digits", "uint8")}  # hwvit.onnx: tables, zero points
VARIANTS = sorted(variants.every())  # (block family, variant name), hwvit's own among them
PROVIDERS = ("numpy", "torch")
BACKENDS = tuple(n for n in gemm_backends.BACKENDS if gemm_backends.why_not_here(n) is None)
IMAGES = 2


def _hf_model():
    from transformers import ViTConfig, ViTForImageClassification

    from hwvit.float import load_float

    cfg = ViTConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48, image_size=16,
        patch_size=4, num_labels=7,
    )  # fmt: skip
    torch.manual_seed(0)
    return load_float(ViTForImageClassification(cfg).eval().state_dict(), family="hf", heads=4)


class Family:
    """A float model and its calibration and test inputs; its integer model for a variant, calibrated
    once (the cache) for all of them."""

    def __init__(self, name: str, onnx_zoo=None):
        self.name = name
        if name in IMPORTED:
            from hwvit.onnx import build

            self.imported = build.load(onnx_zoo.file(*IMPORTED[name]), softmax="round_each")
            self.x = np.asarray(onnx_zoo.data(IMPORTED[name][0], IMAGES)[0], np.float32)
            return
        if name == "digits":
            from hwvit.float.digits import load_demo_model, load_digits_split

            self.model = load_demo_model()
            x_train, _, x_test, _ = load_digits_split()
            self.calib, self.x = x_train[:16], x_test[:IMAGES].numpy()
        else:
            self.model = small_model(name) if name in SMALL else _hf_model()
            self.calib = inputs_for(self.model, 16, 1)
            self.x = inputs_for(self.model, IMAGES, 2).numpy()
        self.cache: dict = {}

    def int_model(self, variant: tuple[str, str] | None = None):
        """The integer model with ``variant`` (block family, name) in place of hwvit's own arithmetic
        of that block (an imported model: its own, whatever is asked)."""
        if self.name in IMPORTED:
            return self.imported.int_model
        qc = QuantConfig(**({variant[0]: variant[1]} if variant else {}))
        return quantize_model(self.model, self.calib, qc, calibration_cache=self.cache)


def assert_engine_is_golden(int_model, x, provider: str = "numpy") -> None:
    """The engine's untraced logits, and its traced logits and values, equal the golden forward's."""
    golden = Trace(values=True)
    want = int_model.forward(x, trace=golden)
    engine = Engine(int_model) if provider == "numpy" else DeviceForward(int_model, "cpu")
    with torch.no_grad():
        fast = engine(x)
        traced = Trace(values=True)
        logits = engine(x, trace=traced)
    assert fast.dtype == np.int64 and np.array_equal(fast, want)
    assert np.array_equal(logits, want)
    assert list(traced.values) == list(golden.values)
    for path, (q, scale) in golden.values.items():
        got, got_scale = traced.values[path]
        assert got.shape == q.shape and np.array_equal(got, q), path
        assert np.array_equal(np.asarray(got_scale), np.asarray(scale)), path


@pytest.fixture(scope="module")
def families(request):
    made: dict[str, Family] = {}

    def get(name: str) -> Family:
        if name not in made:
            zoo = request.getfixturevalue("onnx_zoo") if name in IMPORTED else None
            made[name] = Family(name, zoo)
        return made[name]

    return get


def _params(names, grouped=()):
    """pytest params of ``names``; the imported families in the one xdist group that makes the ONNX files."""
    return [pytest.param(n, marks=pytest.mark.xdist_group("onnx")) if n in grouped else n for n in names]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("family", _params(FAMILIES, IMPORTED))
def test_every_family_on_every_provider(families, family, provider):
    f = families(family)
    assert_engine_is_golden(f.int_model(), f.x, provider)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: f"{v[0]}-{v[1]}")
def test_every_variant(families, variant):
    f = families("vit-b16")
    int_model = f.int_model(variant)
    assert_engine_is_golden(int_model, f.x)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("family", ["vit-b16", "ecg1d"])
def test_every_backend(families, family, backend):
    f = families(family)
    int_model = f.int_model()
    with gemm_backends.using(backend):
        assert_engine_is_golden(int_model, f.x)


def test_the_registry_and_the_machine_give_the_axes():
    """The axes are what hwvit has, not a hand list: every variant of every block family, and the
    GEMM backends that run here (the C kernels' among them, where this CPU has AVX2)."""
    assert {f for f, _ in VARIANTS} == set(variants.FAMILIES)
    assert len(VARIANTS) == sum(len(variants.names(f)) for f in variants.FAMILIES)
    assert "int64" in BACKENDS and set(BACKENDS) <= set(gemm_backends.BACKENDS)
    if gemm_backends.why_unavailable("int16_avx2") is None:
        assert {"int16_avx2", "int8_avx2"} <= set(BACKENDS)


# the product's runs: the numpy provider on each backend; the torch provider (its own GEMMs) once
RUNS = [*(("numpy", b) for b in BACKENDS), ("torch", None)]
# an imported model's arithmetic is its file's: no variant is asked of it
PRODUCT = [(f, v) for f in FAMILIES for v in ([None] if f in IMPORTED else VARIANTS)]


@pytest.mark.engine
@pytest.mark.parametrize("provider, backend", RUNS, ids=lambda r: str(r))
@pytest.mark.parametrize(
    "family, variant",
    [pytest.param(f, v, marks=[pytest.mark.xdist_group("onnx")] if f in IMPORTED else []) for f, v in PRODUCT],
    ids=lambda p: p if isinstance(p, str) else ("own" if p is None else f"{p[0]}-{p[1]}"),
)
def test_the_whole_product(families, family, variant, provider, backend):
    f = families(family)
    try:
        int_model = f.int_model(variant)
    except ValueError as exc:  # the variant refuses this model's scales (softmax=log2 a score scale < 2^-9)
        pytest.skip(f"no integer model to compare: {exc}")  # shown as skipped, with the refusal
    with gemm_backends.using(backend):
        assert_engine_is_golden(int_model, f.x, provider)
