"""One vector of a set: which vector an output element belongs to, the operands that made it, and
a set holding that vector alone (what ``hwvit sim SET --vector I`` runs).

A vector is what a block computes independently of the rest of the set: one element for the
element-wise blocks (requant, gelu, residual_add, divu, isqrt), one row for softmax and LayerNorm,
one row of A (and of acc and y) for the GEMM (a kind's ``rows``: the parameter counting its rows;
``shared``: the tensors every vector shares). A mismatch line names it, so the RTL engineer reruns
and watches that one vector instead of the whole set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hwvit import blocks
from hwvit.record import BlockRecord, Tensor


def vector_of(kind: str, nd_index: list[int]) -> int:
    """The vector (element or row) that holds the output element at ``nd_index``: its first index,
    for every kind (the element of a 1-D output, the row of a 2-D one)."""
    return int(nd_index[0])


def vectors_in(kind: str, params: dict[str, Any], tensors: dict[str, np.ndarray]) -> int:
    """How many vectors the set holds."""
    spec = blocks.get(kind)
    if spec.rows:
        return int(params[spec.rows])
    per_element = [a for name, a in tensors.items() if name not in spec.shared]  # gelu's table is shared
    return int(per_element[0].shape[0])


def operands(kind: str, params: dict[str, Any], t: dict[str, np.ndarray], nd_index: list[int]) -> str:
    """The inputs and parameters that made the output element at ``nd_index`` (one line; the kind's
    ``operands``)."""
    return blocks.get(kind).operands(params, t, nd_index)


def one_vector(vset, index: int, out_dir: str | Path) -> Path:
    """Write the set holding only vector ``index`` of ``vset`` (a hwvit.vectors.read VectorSet)."""
    from hwvit.vectors.write import write_set

    kind = vset.kind
    n = vectors_in(kind, vset.params, {k: v.data for k, v in vset.tensors.items()})
    if not 0 <= index < n:
        raise ValueError(f"{vset.directory}: vector {index} out of range: the set holds {n} ({kind}: 0..{n - 1})")
    params = dict(vset.params)
    spec = blocks.get(kind)
    if spec.rows:
        params[spec.rows] = 1
    shared = set(spec.shared)
    tensors = {}
    for name, tensor in vset.tensors.items():
        data = tensor.data if name in shared else tensor.data[index : index + 1]
        tensors[name] = Tensor(np.ascontiguousarray(data), tensor.bits, tensor.signed, tensor.role, tensor.scale)
    record = BlockRecord(kind, f"{vset.path}.vector{index}", params, tensors)
    return write_set(record, out_dir, seed=vset.seed, force=True)


__all__ = ["operands", "one_vector", "vector_of", "vectors_in"]
