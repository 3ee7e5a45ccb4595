"""One vector of a set: which vector an output element belongs to, the operands that made it, and
a set holding that vector alone (what ``hwvit sim SET --vector I`` runs).

A vector is what a block computes independently of the rest of the set: one element for the
element-wise blocks (requant, gelu, residual_add, divu, isqrt), one row for softmax and LayerNorm,
one row of A (and of acc and y) for the GEMM. A mismatch line names it, so the RTL engineer reruns
and watches that one vector instead of the whole set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hwvit.record import BlockRecord, Tensor

# Kinds whose vector is a row of their 2-D tensors, and the parameter that counts the rows.
ROW_COUNT = {"softmax": "rows", "layernorm": "rows", "gemm": "m"}
# The tensors of a row kind that do not hold rows (shared by every vector).
SHARED = {"softmax": ("exp_table",), "layernorm": ("gamma", "beta"), "gemm": ("w", "bias", "multiplier", "shift")}


def vector_of(kind: str, nd_index: list[int]) -> int:
    """The vector (element or row) that holds the output element at ``nd_index``: its first index,
    for every kind (the element of a 1-D output, the row of a 2-D one)."""
    return int(nd_index[0])


def vectors_in(kind: str, params: dict[str, Any], tensors: dict[str, np.ndarray]) -> int:
    """How many vectors the set holds."""
    if kind in ROW_COUNT:
        return int(params[ROW_COUNT[kind]])
    per_element = [a for name, a in tensors.items() if name != "table"]  # gelu's table is shared
    return int(per_element[0].shape[0])


def _row_text(row: np.ndarray, most: int = 8) -> str:
    vals = ", ".join(str(int(v)) for v in row[:most])
    return f"[{vals}{', ...' if row.size > most else ''}] ({row.size} values)"


def operands(kind: str, params: dict[str, Any], t: dict[str, np.ndarray], nd_index: list[int]) -> str:
    """The inputs and parameters that made the output element at ``nd_index`` (one line)."""
    i = int(nd_index[0])
    if kind == "gemm":
        j = int(nd_index[1])
        return (
            f"A row {i} {_row_text(t['a'][i])} . W column {j} (w[{j}] {_row_text(t['w'][j])}) + bias[{j}] "
            f"{int(t['bias'][j])}; requant multiplier[{j}] {int(t['multiplier'][j])}, shift[{j}] {int(t['shift'][j])}"
        )
    if kind == "softmax":
        x = t["x"][i]
        return f"softmax row {i} x {_row_text(x)}, row max {int(x.max())}"
    if kind == "layernorm":
        x = t["x"][i].astype(object)  # exact Python ints: C*Sxx reaches 2^33 and beyond
        c, sx = len(x), int(sum(x))
        var_c2 = c * int(sum(v * v for v in x)) - sx * sx  # C^2 times the variance (docs/arithmetic.md)
        j = int(nd_index[1])
        return (
            f"LayerNorm row {i} x {_row_text(t['x'][i])}: mean {sx}/{c} = {sx / c:.4f}, variance "
            f"{var_c2}/{c * c} = {var_c2 / (c * c):.4f} (C*Sxx - Sx^2 = {var_c2}); gamma[{j}] {int(t['gamma'][j])}, "
            f"beta[{j}] {int(t['beta'][j])}; requant multiplier {params['multiplier']}, shift {params['shift']}"
        )
    if kind == "requant":
        return (
            f"acc[{i}] {int(t['acc'][i])}, requant multiplier[{i}] {int(t['multiplier'][i])}, "
            f"shift[{i}] {int(t['shift'][i])}"
        )
    if kind == "residual_add":
        return (
            f"a[{i}] {int(t['a'][i])}, b[{i}] {int(t['b'][i])}; requant multipliers {params['mult_a']}, "
            f"{params['mult_b']}, shift {params['shift']}"
        )
    if kind == "gelu":  # y = table[x + 2^(in_bits-1)] (hwvit.ops.gelu)
        x = int(t["x"][i])
        k = x + (1 << (int(params["in_bits"]) - 1))
        return f"x[{i}] {x} -> table[{k}] {int(t['table'][k])}"
    if kind == "divu":
        return f"dividend[{i}] {int(t['dividend'][i])}, divisor[{i}] {int(t['divisor'][i])}"
    if kind == "isqrt":
        return f"radicand[{i}] {int(t['radicand'][i])}"
    return f"element {i}"


def one_vector(vset, index: int, out_dir: str | Path) -> Path:
    """Write the set holding only vector ``index`` of ``vset`` (a hwvit.vectors.read VectorSet)."""
    from hwvit.vectors.write import write_set

    kind = vset.kind
    n = vectors_in(kind, vset.params, {k: v.data for k, v in vset.tensors.items()})
    if not 0 <= index < n:
        raise ValueError(f"{vset.directory}: vector {index} out of range: the set holds {n} ({kind}: 0..{n - 1})")
    params = dict(vset.params)
    if kind in ROW_COUNT:
        params[ROW_COUNT[kind]] = 1
    shared = set(SHARED.get(kind, ())) | ({"table"} if kind == "gelu" else set())
    tensors = {}
    for name, tensor in vset.tensors.items():
        data = tensor.data if name in shared else tensor.data[index : index + 1]
        tensors[name] = Tensor(np.ascontiguousarray(data), tensor.bits, tensor.signed, tensor.role, tensor.scale)
    record = BlockRecord(kind, f"{vset.path}.vector{index}", params, tensors)
    return write_set(record, out_dir, seed=vset.seed, force=True)


__all__ = ["operands", "one_vector", "vector_of", "vectors_in"]
