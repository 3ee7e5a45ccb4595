"""hwvit.vectors.pick: the operands a mismatch line names, and the one-vector sets of `hwvit sim
--vector` (issue 26)."""

from __future__ import annotations

import numpy as np
import pytest

from hwvit import blocks, ops, vectors
from hwvit.vectors.pick import one_vector, operands, vector_of

KINDS = [k for k, spec in blocks.kinds().items() if not spec.variant]  # the built-in blocks


@pytest.mark.parametrize("kind", KINDS)
def test_one_vector_is_that_vector_of_the_set(kind, tmp_path):
    vset = vectors.read(vectors.write_set(vectors.random_record(kind, 6, seed=2), tmp_path / "all"))
    one = vectors.read(one_vector(vset, 4, tmp_path / "one"))  # read back: a valid set
    assert one.kind == kind and one.path == f"{vset.path}.vector4"
    for name, t in vset.tensors.items():
        if t.role == "parameter" and kind != "residual_add":  # shared by every vector
            assert np.array_equal(one[name], t.data), name
        else:
            assert np.array_equal(one[name], t.data[4:5]), name
    with pytest.raises(ValueError, match="vector 6 out of range: the set holds 6"):
        one_vector(vset, 6, tmp_path / "bad")


def test_gemm_operands_name_row_column_bias_and_requant(tmp_path):
    vset = vectors.read(vectors.write_set(vectors.random_record("gemm", 5, seed=3), tmp_path / "g"))
    t = {n: v.data for n, v in vset.tensors.items()}
    text = operands("gemm", vset.params, t, [3, 7])
    assert text.startswith(f"A row 3 [{int(t['a'][3, 0])}, ") and f"W column 7 (w[7] [{int(t['w'][7, 0])}, " in text
    assert f"+ bias[7] {int(t['bias'][7])}" in text
    assert f"multiplier[7] {int(t['multiplier'][7])}, shift[7] {int(t['shift'][7])}" in text
    # the operands named are the ones that make the element
    acc = int(np.dot(t["a"][3], t["w"][7])) + int(t["bias"][7])
    assert acc == int(t["acc"][3, 7])
    assert vector_of("gemm", [3, 7]) == 3


def test_layernorm_operands_give_the_row_mean_and_variance(tmp_path):
    vset = vectors.read(vectors.write_set(vectors.random_record("layernorm", 4, seed=4), tmp_path / "ln"))
    t = {n: v.data for n, v in vset.tensors.items()}
    x = t["x"][2].astype(np.float64)
    text = operands("layernorm", vset.params, t, [2, 5])
    c = x.size
    assert f"mean {int(x.sum())}/{c} = {x.mean():.4f}" in text
    assert f"variance {int(round(x.var() * c * c))}/{c * c} = {x.var():.4f}" in text
    assert f"gamma[5] {int(t['gamma'][5])}" in text and f"shift {vset.params['shift']}" in text


def test_requant_operands_reproduce_the_element(tmp_path):
    vset = vectors.read(vectors.write_set(vectors.random_record("requant", 8, seed=6), tmp_path / "rq"))
    t = {n: v.data for n, v in vset.tensors.items()}
    assert operands("requant", vset.params, t, [5]) == (
        f"acc[5] {int(t['acc'][5])}, requant multiplier[5] {int(t['multiplier'][5])}, shift[5] {int(t['shift'][5])}"
    )
    y = ops.requant(t["acc"][5:6], t["multiplier"][5:6], t["shift"][5:6], vset.params["out_bits"])
    assert int(y[0]) == int(t["y"][5])


def test_gelu_operands_name_the_table_entry(tmp_path):
    vset = vectors.read(vectors.write_set(vectors.random_record("gelu", 8, seed=7), tmp_path / "g"))
    t = {n: v.data for n, v in vset.tensors.items()}
    x = int(t["x"][3])
    k = x + 128
    assert operands("gelu", vset.params, t, [3]) == f"x[3] {x} -> table[{k}] {int(t['table'][k])}"
    assert int(t["table"][k]) == int(t["y"][3])  # the entry named is the output
