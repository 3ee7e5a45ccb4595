"""A block kind for every softmax and LayerNorm arithmetic variant (hwvit.variants): ``softmax_ibert``,
``layernorm_ivit``, ... and ``softmax_custom`` / ``layernorm_custom`` for a team's function; and one for
each GELU variant that works on rows (``gelu_shiftgelu``: I-ViT's released ShiftGELU takes its
sigmoid on the row's maximum, so it is no table).

A variant's set holds the rows in (``x``) and out (``y``), the variant's integer parameters in the
manifest (ints) and as parameter tensors (arrays, e.g. I-BERT's gamma and beta), and its name as
the ``variant`` parameter. `hwvit check` computes ``y`` again from ``x`` and the recorded
parameters with the variant's kernel (a team's function cannot be re-run without its context: its
sets are checked for format only). Elementwise GELU variants need no kind of their own: any
arithmetic of an in_bits input is a table, and the gelu block loads it (hwvit.blocks.gelu); requant
variants are the ``rounding`` parameter of a gemm set.

A variant whose Verilog twin exists declares it in hwvit/blocks/variant_rtl/<kind>.py (``FIELDS``:
its files, ports, synthesis parameters); the generic stream bench (sim/byotb.py) runs it on a set.
A variant without one declares no Verilog (``rtl`` empty: `hwvit sim` says so, the RTL tests leave
it out): its sets are golden vectors for a team's own block of that arithmetic (a bind file).
FQ-ViT's released LayerNorm, without a datapath on the row engine yet (``layernorm_ptf``), is such a
kind; hwvit's corrected form (``layernorm_ptf_exact``) keeps the Verilog block.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from hwvit.blocks._common import SIZE, int_option, row_text
from hwvit.blocks.base import BlockKind
from hwvit.formats import OUT_BITS
from hwvit.record import BlockRecord, Spec, make_record

FAMILIES = ("softmax", "layernorm")  # every variant a kind; gelu: the row variants only
CUSTOM = "custom"  # the variant part of a team's function's kind: softmax_custom
WIDE = (-(1 << 62), 1 << 62)  # a variant's integer constant
ROW_KEY = {"softmax": "row_len", "layernorm": "c", "gelu": "n"}


def kind_name(family: str, variant: str) -> str:
    """The block kind of ``family``'s ``variant`` (a team's package.module:function: ``<family>_custom``)."""
    return f"{family}_{CUSTOM if ':' in variant else variant}"


def _seed(name: str) -> int:
    """A fixed random-set seed per kind, apart from the built-in kinds' 0..999."""
    return 1000 + int(hashlib.sha1(name.encode()).hexdigest()[:7], 16)


def _ita_scale() -> float:
    from hwvit.variants.hwsoftmax import ITA_SCALE

    return ITA_SCALE


def _sample_context(family: str):
    from hwvit.variants.base import GeluContext, LayerNormContext, SoftmaxContext

    if family == "softmax":
        return SoftmaxContext(s_in=0.06, in_bits=8, out_bits=8)
    if family == "gelu":
        return GeluContext(s_in=0.05, in_bits=8, s_out=0.04, out_bits=8)
    c = 16
    rng = np.random.default_rng(0)
    return LayerNormContext(rng.normal(1.0, 0.3, c), rng.normal(0.0, 0.3, c), 1e-5, 0.05, 0.05, 8)


def _split(params: dict[str, Any]) -> tuple[dict[str, int], dict[str, np.ndarray]]:
    """A variant's prepared parameters: ints (manifest) and arrays (parameter tensors); keys with a
    leading underscore (a team's function's context) are not recorded."""
    ints, arrays = {}, {}
    for key, value in params.items():
        if key.startswith("_"):
            continue
        if np.ndim(value) == 0:
            ints[key] = int(value)
        else:
            arrays[key] = np.asarray(value, dtype=np.int64).reshape(-1)
    return ints, arrays


def _contract(family: str, arrays: dict[str, np.ndarray]) -> dict[str, Spec]:
    n = ROW_KEY[family]
    contract = {"x": Spec("input", ("rows", n), "in_bits", True)}
    for key in arrays:
        contract[key] = Spec("parameter", (f"{key}_n",), 64, True)
    contract["y"] = Spec("output", ("rows", n), "out_bits", family != "softmax")
    return contract


class _Lazy(Mapping):
    """A mapping made on first use: a variant's constants are named by running its ``prepare``,
    which may import torch (hwvit.quant), so the registry does it only when a kind's contract is read."""

    def __init__(self, make: Callable[[], dict]):
        self._make, self._data = make, None

    def _get(self) -> dict:
        if self._data is None:
            self._data = self._make()
        return self._data

    def __getitem__(self, key):
        return self._get()[key]

    def __iter__(self) -> Iterator:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


def _make(family: str, variant: str) -> BlockKind:
    from hwvit import variants

    name = kind_name(family, variant)
    custom = variant == CUSTOM
    split: dict[str, tuple] = {}

    def constants() -> tuple[dict[str, int], dict[str, np.ndarray]]:
        if "v" not in split:
            split["v"] = ({}, {}) if custom else _split(variants.get(family, variant).prepare(_sample_context(family)))
        return split["v"]

    def make_params() -> dict[str, tuple[type, tuple[int, int] | None]]:
        params: dict[str, tuple[type, tuple[int, int] | None]] = {
            "rows": (int, SIZE),
            ROW_KEY[family]: (int, (1, 4096)),
            "in_bits": (int, (2, 16)),
            "out_bits": (int, OUT_BITS),
        }
        params.update({k: (int, WIDE) for k in constants()[0] if k not in params})
        return params

    params = _Lazy(make_params)
    contract = _Lazy(lambda: _contract(family, constants()[1]))
    arrays = _Lazy(lambda: constants()[1])

    def traced(path: str, rows, y, vparams: dict[str, Any], in_bits: int, out_bits: int, scales: dict) -> BlockRecord:
        got_ints, got_arrays = _split(vparams)
        p = {
            "rows": rows.shape[0],
            ROW_KEY[family]: rows.shape[1],
            **got_ints,
            "in_bits": in_bits,
            "out_bits": out_bits,
            "variant": variant if not custom else vparams.get("_name", CUSTOM),
        }
        return make_record(name, path, p, scales, x=rows, y=y, **got_arrays)

    def random_set(rng: np.random.Generator, cases: int, opts: dict[str, Any]) -> BlockRecord:
        from hwvit.variants.base import GeluContext, LayerNormContext, SoftmaxContext

        if custom:
            raise ValueError(f"{name}: random sets of a team's function come from the traced model")
        n = int_option(opts, ROW_KEY[family], 1, 4096)
        in_bits = int_option(opts, "in_bits", 2, 16)
        out_bits = int_option(opts, "out_bits", 2, 16)
        lo, hi = -(1 << (in_bits - 1)), (1 << (in_bits - 1)) - 1
        if family == "softmax":  # ITA: the scale its hardware fixes (hwvit.variants.hwsoftmax.ITA_SCALE)
            s_in = opts["scale_in"] or (_ita_scale() if variant == "ita" else 16.0 / (1 << in_bits))
            ctx = SoftmaxContext(s_in=s_in, in_bits=in_bits, out_bits=out_bits)
            scales = {"x": s_in}
        elif family == "gelu":  # inputs over [-6, 6), GELU(x > 5) at the top code (hwvit.blocks.gelu's)
            s_in = opts["scale_in"] or 6.0 / (1 << (in_bits - 1))
            s_out = opts["scale_out"] or 5.0 / ((1 << (out_bits - 1)) - 1)
            ctx = GeluContext(s_in=s_in, in_bits=in_bits, s_out=s_out, out_bits=out_bits)
            scales = {"x": s_in, "y": s_out}
        else:
            g = rng.normal(1.0, 0.4, n)
            g[: min(n, 2)] = [2.5, -1.0][: min(n, 2)]
            args = (g, rng.normal(0.0, 0.5, n), float(opts["eps"]), float(opts["scale_in"]), float(opts["scale_out"]))
            ctx = LayerNormContext(*args, out_bits, in_bits)
            if variant.startswith("ptf"):  # channel ranges 1x..8x apart: power-of-two factors 0..3 all drawn
                from hwvit.variants.layernorm_forms import PtfContext, ptf_scale

                absmax = float(opts["scale_in"]) * hi * np.exp2(rng.integers(0, 4, n))
                s = ptf_scale(absmax, in_bits)
                ctx = PtfContext(*args[:3], s, args[4], out_bits, in_bits, channel_absmax=absmax)
            scales = {"x": ctx.s_in, "y": ctx.s_out}
        v = variants.get(family, variant)
        vp = v.prepare(ctx)
        edges = [np.full(n, hi), np.full(n, lo), np.where(np.arange(n) % 2 == 0, hi, lo), np.zeros(n, np.int64)]
        if family == "gelu":  # a row below zero: the released ShiftGELU's e^-max is then large
            edges.append(-1 - np.arange(n) % (-lo))
        one_hot = np.full(n, lo)
        one_hot[0] = hi
        edges.append(one_hot)
        if opts.get("x") is not None:  # rows given (directed tests), each of n scores in range
            rows = list(np.asarray(opts["x"], dtype=np.int64).reshape(-1, n))
            if any(r.min() < lo or r.max() > hi for r in rows):
                raise ValueError(f"{name}: the given rows must lie in [{lo}, {hi}]")
        elif family == "softmax" and opts.get("sweep"):
            # every difference a = max - x once (2^in_bits rows, cases ignored): row a is the max
            # followed by n - 1 copies of max - a, so each exp value sits beside the max alone
            if n < 2:
                raise ValueError(f"{name}: a difference sweep needs rows of 2 or more elements")
            a = np.arange(hi - lo + 1, dtype=np.int64)
            rows = list(np.concatenate([np.full((a.size, 1), hi), np.repeat((hi - a)[:, None], n - 1, 1)], 1))
        else:
            rows = [edges[i] if i < len(edges) else rng.integers(lo, hi, n, endpoint=True) for i in range(cases)]
            for i in range(len(edges), cases, 3):  # a third narrow: every difference near 0
                rows[i] = np.clip(hi - rng.integers(0, 8, n), lo, hi)
        x = np.stack(rows).astype(np.int64)
        y = v.kernel(x, vp)
        if family == "softmax":
            scales["y"] = v.out_scale(ctx, vp)
        return traced("random", x, y, vp, in_bits, out_bits, scales)

    def verify(vset) -> str | None:
        if custom:
            return None
        v = variants.get(family, variant)
        p = {k: val for k, val in vset.params.items() if k not in ("rows", ROW_KEY[family], "variant", "rounding")}
        p.update({k: np.asarray(vset[k]) for k in arrays})
        x = np.asarray(vset["x"], dtype=np.int64)
        y = v.kernel(x, p)
        want = np.asarray(vset["y"], dtype=np.int64)
        bad = np.argwhere(y != want)
        if bad.size:
            i, j = (int(t) for t in bad[0])
            return f"{name}: y[{i}][{j}] is {int(want[i, j])}, the {variant} kernel gives {int(y[i, j])}"
        return None

    def count_bins(params, inputs, outputs, limits) -> dict[str, int]:
        y = outputs.get("y")
        x = inputs["x"]
        top = (1 << int(params["out_bits"])) - 1 if family == "softmax" else (1 << (int(params["out_bits"]) - 1)) - 1
        return {
            "out_max": 0 if y is None else int(np.count_nonzero(y == top)),
            "row_constant": int(np.count_nonzero(np.all(x == x[:, :1], axis=1))),
        }

    def operands(params, t, nd_index) -> str:
        i = int(nd_index[0])
        return f"{family} ({variant}) row {i} x {row_text(t['x'][i])}"

    defaults: dict[str, Any] = {ROW_KEY[family]: 64, "in_bits": 8, "out_bits": 8}
    if family == "softmax":
        defaults.update({"scale_in": None, "sweep": 0})
    elif family == "gelu":
        defaults.update({"scale_in": None, "scale_out": None})
    else:
        defaults.update({"eps": 1e-6, "scale_in": 0.05, "scale_out": 0.05})
    v_doc = "a team's own function" if custom else variants.get(family, variant).doc
    from hwvit.blocks import variant_rtl

    rtl_fields: dict[str, Any] = {"reset_states": (), "rtl": ()}
    rtl_fields.update(variant_rtl.fields(name))
    outside = variants.rtl_fields(name)  # an arithmetic kept outside hwvit (HWVIT_VARIANTS)
    if set(outside) - variant_rtl.ALLOWED:
        raise ValueError(f"{name}: RTL_FIELDS names {', '.join(sorted(set(outside) - variant_rtl.ALLOWED))}")
    rtl_fields.update(outside)
    pending = "" if rtl_fields["rtl"] or custom else " (no Verilog block yet: golden vectors for a team's own block)"
    return BlockKind(
        name=name,
        doc=f"{family} by {variant}: {v_doc}{pending}",
        seed=_seed(name),
        kernel=(lambda x, p: x) if custom else variants.get(family, variant).kernel,
        reference=(lambda x, p: x) if custom else variants.get(family, variant).reference,
        params=params,
        contract=contract,
        random=random_set,
        defaults=defaults,
        bins=("out_max", "row_constant", "out_stall"),
        count_bins=count_bins,
        operands=operands,
        traced=traced,
        rows="rows",
        shared=arrays,  # lazy: the names of its constants
        family=family,
        variant=variant,
        verify=verify,
        **rtl_fields,
    )


def _kinds() -> list[BlockKind]:
    from hwvit import variants

    out = []
    for family in FAMILIES:
        for variant in variants.names(family):
            if not variants.is_default(family, variant):
                out.append(_make(family, variant))
        out.append(_make(family, CUSTOM))
    for variant in variants.names("gelu"):
        if variants.get("gelu", variant).row:
            out.append(_make("gelu", variant))
    return out


def __getattr__(name: str):
    """``KINDS``: built whenever the registry loads, so that the variants of HWVIT_VARIANTS have kinds."""
    if name == "KINDS":
        return _kinds()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def traced(arith, path: str, rows, y, in_bits: int, out_bits: int, scales: dict) -> BlockRecord:
    """The record of one call of a softmax, LayerNorm or row-GELU variant (``arith``:
    hwvit.intvit.qparams.Arith)."""
    from hwvit import blocks

    return blocks.get(kind_name(arith.family, arith.name)).traced(
        path, rows, y, arith.params, in_bits, out_bits, scales
    )
