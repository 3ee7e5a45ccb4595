"""A team's own integer function as a variant: ``--variant softmax=mypkg.mod:fn``.

The function takes the integer input (numpy int64, the shape the block family gives, see
hwvit.variants.base) and the family's context (scales and widths), and returns the integer output.
hwvit imports it, and on every call checks what a block must guarantee, stopping with one line
when it does not hold:

- the result is an integer array of the input's shape (a softmax or LayerNorm keeps the row shape);
- every value fits the declared width: signed ``ctx.out_bits`` (requant, gelu, layernorm) or
  unsigned ``ctx.out_bits`` (softmax);
- the same input gives the same result twice (no hidden state, no randomness).

The output scale is ``ctx.s_out`` (gelu, layernorm), 1/(2^out_bits - 1) for a softmax unless the
function carries an ``out_scale(ctx)`` attribute, and the layer's own for a requant. The function is
its own reference (hwvit cannot know a slower form of it).
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from hwvit.variants.base import FAMILIES, Params, Variant

_CACHE: dict[tuple[str, str], Variant] = {}


def _load(family: str, spec: str):
    module_name, _, attr = spec.partition(":")
    where = f"{family}={spec}"
    if not module_name or not attr:
        raise ValueError(f"variant {where}: name a function as package.module:function")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - a team's module: say what failed, in one line
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ValueError(f"variant {where}: cannot import {module_name}: {exc.__class__.__name__}: {first}") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ValueError(f"variant {where}: {module_name} has no function {attr!r}")
    return fn


def _checked(family: str, spec: str, fn):
    where = f"variant {family}={spec}"

    def kernel(x: np.ndarray, p: Params) -> np.ndarray:
        ctx = p["_ctx"]
        x = np.asarray(x, dtype=np.int64)
        results = []
        for _ in range(2):
            try:
                y = fn(x.copy(), ctx)
            except Exception as exc:  # noqa: BLE001
                first = (str(exc).strip().splitlines() or [""])[0]
                raise ValueError(f"{where}: raised {exc.__class__.__name__}: {first}") from None
            y = np.asarray(y)
            if y.dtype.kind not in "iu":
                raise ValueError(f"{where}: returned {y.dtype} values; a variant returns integers")
            if y.shape != x.shape:
                raise ValueError(f"{where}: returned shape {y.shape} for an input of shape {x.shape}")
            results.append(y.astype(np.int64))
        if not np.array_equal(results[0], results[1]):
            raise ValueError(f"{where}: gave two different results for the same input")
        y = results[0]
        bits = int(ctx.out_bits)
        lo, hi = (0, (1 << bits) - 1) if family == "softmax" else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        if y.size and (int(y.min()) < lo or int(y.max()) > hi):
            kind = "unsigned" if family == "softmax" else "signed"
            raise ValueError(
                f"{where}: returned {int(y.min())}..{int(y.max())}, outside {kind} {bits} bits [{lo}, {hi}]"
            )
        return y

    return kernel


def _out_scale(family: str, fn):
    own = getattr(fn, "out_scale", None)

    def out_scale(ctx: Any, p: Params) -> float:
        if callable(own):
            return float(own(ctx))
        if family == "softmax":
            return 1.0 / ((1 << ctx.out_bits) - 1)
        return float(getattr(ctx, "s_out", float("nan")))

    return out_scale


def custom(family: str, spec: str) -> Variant:
    """The team's function ``spec`` (package.module:function) as a ``family`` variant."""
    if family not in FAMILIES:
        raise ValueError(f"unknown block {family!r} for a variant; choose from {', '.join(FAMILIES)}")
    key = (family, spec)
    if key not in _CACHE:
        fn = _load(family, spec)
        kernel = _checked(family, spec, fn)
        _CACHE[key] = Variant(
            family,
            spec,
            (getattr(fn, "__doc__", None) or f"{spec}: a team's function").strip().splitlines()[0],
            f"{spec} (a team's own function)",
            lambda ctx: {"_ctx": ctx, "_name": spec},
            kernel,
            lambda x, p: kernel(np.asarray(x, dtype=np.int64), p).tolist(),
            _out_scale(family, fn),
        )
    return _CACHE[key]
