"""Random unit-test vector sets for one block kind, with the edges a testbench must see.

``random_record(kind, cases, seed, **params)`` runs the kind's generator (``random`` of its module
in ``hwvit.blocks``): it draws inputs (numpy Generator(seed): the same
arguments give the same record), computes the outputs with ``hwvit.ops`` (the specification)
and returns a ``BlockRecord`` with path ``"random"``. Every set opens with fixed edge cases
(extreme values, saturation, ties, shifts 0 and 62, per-channel multipliers, degenerate rows)
followed by random ones; ``cases`` counts elements (requant, gelu, residual_add, divu, isqrt),
rows (softmax, layernorm) or output rows m (gemm). divu sets hold exact divisions (a step whose
partial remainder equals the divisor) and the precondition's edges; isqrt sets the radicands
around squares (``divu_edges``, ``isqrt_edges``: Python ints, any width). Floats appear only in choosing test inputs and
scales; every tensor is an integer array.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hwvit import blocks
from hwvit.blocks.divu import edges as divu_edges
from hwvit.blocks.isqrt import edges as isqrt_edges
from hwvit.record import BlockRecord


def __getattr__(name: str):
    """``DEFAULTS``: the options of each kind and their defaults (None: derived by its generator);
    ``DEFAULT_CASES``: the cases of a set when none are asked for, where not 64."""
    if name == "DEFAULTS":
        return {k: v.defaults for k, v in blocks.kinds().items()}
    if name == "DEFAULT_CASES":
        return {k: v.default_cases for k, v in blocks.kinds().items() if v.default_cases != 64}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def default_cases(kind: str) -> int:
    """Cases of a set when none are asked for (`hwvit vectors-random`): every kind's fixed edge cases
    fit its default, divu's and isqrt's with random ones after."""
    return blocks.get(kind).default_cases


def _options(kind: str, given: dict[str, Any]) -> dict[str, Any]:
    defaults = blocks.get(kind).defaults
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ValueError(f"{kind}: unknown parameter {unknown[0]!r}; known: {', '.join(defaults)}")
    return {**defaults, **{k: v for k, v in given.items() if v is not None}}


def random_record(kind: str, cases: int, seed: int, **params: Any) -> BlockRecord:
    """``cases`` random unit-test cases of ``kind`` (edge cases first); outputs from hwvit.ops.

    ``params`` override the kind's ``defaults`` (row_len, c, k, n, in_bits, out_bits, entries,
    a_signed, table / exp_table, scales, n_bits / d_bits / q_bits, ...). ValueError on an unknown kind or parameter.
    """
    spec = blocks.get(kind)
    if isinstance(cases, bool) or not isinstance(cases, (int, np.integer)) or not 1 <= cases <= 1 << 24:
        raise ValueError(f"cases must be an integer in [1, 2^24], got {cases!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    opts = _options(kind, params)
    rng = np.random.default_rng([int(seed), spec.seed])
    record = spec.random(rng, int(cases), opts)
    assert math.prod(next(iter(record.tensors.values())).data.shape) > 0, "empty random record"
    return record


__all__ = ["default_cases", "divu_edges", "isqrt_edges", "random_record"]
