"""Random unit-test records: outputs equal the plain-Python reference, edges are covered, seeds repeat."""

from __future__ import annotations

import numpy as np
import pytest

from hwvit import blocks, vectors
from hwvit.ops import reference as ref
from hwvit.record import KINDS
from hwvit.vectors.schema import CONTRACT

# every kind a random set can be made of (a team's function's kind, softmax_custom, has none)
RANDOM_KINDS = [k for k in KINDS if blocks.get(k).variant != "custom"]


def _l(t) -> list:
    return t.data.tolist()


def _expected(rec) -> dict[str, list]:
    """Outputs of ``rec`` recomputed one element at a time by hwvit.ops.reference."""
    p, t = rec.params, rec.tensors
    if rec.kind == "requant":
        return {"y": ref.requant_ref(_l(t["acc"]), _l(t["multiplier"]), _l(t["shift"]), p["out_bits"])}
    if rec.kind == "gemm":
        acc = ref.gemm_ref(_l(t["a"]), _l(t["w"]), _l(t["bias"]))
        y = [ref.requant_ref(row, _l(t["multiplier"]), _l(t["shift"]), p["out_bits"]) for row in acc]
        return {"acc": acc, "y": y}
    if rec.kind == "gelu":
        return {"y": ref.gelu_ref(_l(t["x"]), _l(t["table"]), p["in_bits"])}
    if rec.kind == "softmax":
        return {"p": [ref.softmax_ref(row, _l(t["exp_table"]), p["out_bits"]) for row in _l(t["x"])]}
    if rec.kind == "layernorm":
        return {
            "y": [
                ref.layernorm_ref(
                    row, _l(t["gamma"]), _l(t["beta"]), p["eps_int"], p["multiplier"], p["shift"], p["out_bits"]
                )
                for row in _l(t["x"])
            ]
        }
    if rec.kind == "divu":
        pairs = [
            ref.divu_ref(a, b, p["n_bits"], p["d_bits"], p["q_bits"])
            for a, b in zip(_l(t["dividend"]), _l(t["divisor"]))
        ]
        return {"quotient": [q for q, _ in pairs], "remainder": [r for _, r in pairs]}
    if rec.kind == "isqrt":
        return {"root": [ref.isqrt_ref(v) for v in _l(t["radicand"])]}
    assert rec.kind == "residual_add"
    return {"y": ref.residual_add_ref(_l(t["a"]), _l(t["b"]), p["mult_a"], p["mult_b"], p["shift"], p["out_bits"])}


CASES = [
    ("requant", {}),
    ("requant", {"out_bits": 4}),
    ("requant", {"out_bits": 16}),
    ("gemm", {}),
    ("gemm", {"a_signed": False, "k": 20, "n": 7}),
    ("gemm", {"k": 1, "n": 1, "out_bits": 12}),
    ("gelu", {}),
    ("gelu", {"in_bits": 4, "out_bits": 6}),
    ("gelu", {"in_bits": 10, "out_bits": 12}),
    ("softmax", {"row_len": 33}),
    ("softmax", {"row_len": 1}),
    ("softmax", {"entries": 40, "row_len": 50}),
    ("softmax", {"in_bits": 6, "out_bits": 4, "row_len": 9}),
    ("layernorm", {"c": 48}),
    ("layernorm", {"c": 1}),
    ("layernorm", {"c": 97, "out_bits": 10}),
    ("residual_add", {}),
    ("residual_add", {"out_bits": 5}),
    ("divu", {}),
    ("divu", {"n_bits": 48, "d_bits": 32, "q_bits": 25}),
    ("divu", {"n_bits": 44, "d_bits": 31}),
    ("divu", {"n_bits": 63, "d_bits": 63, "q_bits": 2}),
    ("divu", {"n_bits": 2, "d_bits": 1}),
    ("isqrt", {}),
    ("isqrt", {"in_bits": 8}),
    ("isqrt", {"in_bits": 4}),
]


@pytest.mark.parametrize("kind,params", CASES)
def test_outputs_equal_the_reference(kind, params):
    cases = 120 if kind in ("requant", "gelu", "residual_add", "divu", "isqrt") else 23
    rec = vectors.random_record(kind, cases, 5, **params)
    assert rec.kind == kind and rec.path == "random" and rec.params["rounding"] == "half_up"
    assert set(rec.tensors) == set(CONTRACT[kind])
    for name, want in _expected(rec).items():
        assert rec.tensors[name].data.tolist() == want, name


@pytest.mark.parametrize("kind", RANDOM_KINDS)
def test_cases_count_elements_rows_or_m(kind):
    rec = vectors.random_record(kind, 13, 0)
    first_input = next(t for t in rec.tensors.values() if t.role == "input")
    assert first_input.data.shape[0] == 13
    if kind == "gemm":
        assert rec.params["m"] == 13
    if kind in ("softmax", "layernorm"):
        assert rec.params["rows"] == 13


@pytest.mark.parametrize("kind", RANDOM_KINDS)
def test_seeds_repeat_and_differ(kind):
    a, b, c = (vectors.random_record(kind, 100, s) for s in (1, 1, 2))  # past the fixed edge cases
    assert a.params == b.params
    assert all(np.array_equal(a.tensors[n].data, b.tensors[n].data) for n in a.tensors)
    assert any(not np.array_equal(a.tensors[n].data, c.tensors[n].data) for n in a.tensors)


def test_requant_edges():
    rec = vectors.random_record("requant", 200, 0)
    acc, m, s, y = (rec.tensors[n].data for n in ("acc", "multiplier", "shift", "y"))
    assert {-(2**31), 2**31 - 1} <= set(acc.tolist()) and {0, 2**31 - 1} <= set(m.tolist())
    assert {0, 62} <= set(s.tolist())
    assert {-128, 127} <= set(y.tolist())  # saturation both ways
    assert ((y > -128) & (y < 127) & (y != 0)).sum() > 50  # and plenty of in-range results
    ties = (s > 0) & ((acc * m) % (1 << np.maximum(s, 1)) == (1 << np.maximum(s - 1, 0)))
    assert (ties & (acc < 0)).any() and (ties & (acc > 0)).any()  # exact .5 on both signs


def test_gemm_edges():
    rec = vectors.random_record("gemm", 16, 0, k=32, n=8)
    a, w, acc, y, m, s = (rec.tensors[n].data for n in ("a", "w", "acc", "y", "multiplier", "shift"))
    assert a.min() == -128 and a.max() == 127 and w.min() == -128 and w.max() == 127
    assert acc.max() >= 32 * 128 * 128  # all-min row times all-min channel
    assert len(set(m.tolist())) == 8 and {0, 62} <= set(s.tolist())  # per-channel multipliers and shifts
    assert (y == 127).any() and (y == -128).any() and len(set(y.reshape(-1).tolist())) > 20
    unsigned = vectors.random_record("gemm", 4, 0, a_signed=False)
    assert unsigned.tensors["a"].signed is False and unsigned.tensors["a"].data.max() == 255


def test_gelu_covers_the_whole_table():
    rec = vectors.random_record("gelu", 300, 0)
    assert set(rec.tensors["x"].data.tolist()) == set(range(-128, 128))


def test_softmax_rows_vary():
    rec = vectors.random_record("softmax", 20, 0, row_len=16, entries=64)
    x, p = rec.tensors["x"].data, rec.tensors["p"].data
    assert (p.sum(axis=1) == 255).all()  # cumulative rounding: every row sums to Q
    assert any(len(set(r)) == 1 for r in x.tolist())  # uniform rows
    assert any(sorted(r)[-1] - sorted(r)[0] == 255 for r in x.tolist())  # one-hot max range
    d = x.max(axis=1, keepdims=True) - x
    assert ((d >= 62) & (d <= 65)).any()  # around the table end
    assert (p == 255).any()


def test_layernorm_rows_vary():
    rec = vectors.random_record("layernorm", 18, 0, c=32)
    x, y = rec.tensors["x"].data, rec.tensors["y"].data
    assert any(len(set(r)) == 1 for r in x.tolist())  # zero variance
    assert any(set(r) == {-128, 127} for r in x.tolist())  # largest variance
    assert (y == 127).any() or (y == -128).any()


def test_divu_edges_and_exact_divisions():
    """The default set holds every edge of divu_edges (quotients 0 and all ones, divisors 1 and all
    ones, dividend 0) and at least a tenth exact divisions beyond a = b; q_bits follows n_bits."""
    from hwvit.vectors.random_sets import default_cases, divu_edges

    rec = vectors.random_record("divu", default_cases("divu"), 0)
    assert rec.params == {"n_bits": 40, "d_bits": 24, "q_bits": 40, "rounding": "half_up"}  # rtl/divu.v's
    a, b, q, r = (rec.tensors[n].data for n in ("dividend", "divisor", "quotient", "remainder"))
    assert set(divu_edges(40, 24, 40)) <= set(zip(a.tolist(), b.tolist()))
    assert {0, (1 << 40) - 1} <= set(q.tolist()) and {1, (1 << 24) - 1} <= set(b.tolist()) and 0 in a
    assert ((r == 0) & (a > b)).sum() >= len(a) // 10
    assert vectors.random_record("divu", 4, 0, n_bits=48).params["q_bits"] == 48  # Q_BITS = N_BITS


def test_isqrt_edges_squares_and_wide_values():
    """0, 2^in_bits - 1, every isqrt_edges radicand, squares m^2 and m^2 + 2m; int64-exact near 2^62."""
    from hwvit.vectors.random_sets import default_cases, isqrt_edges

    rec = vectors.random_record("isqrt", default_cases("isqrt"), 0)
    assert rec.params["in_bits"] == 62 and rec.tensors["root"].bits == 31  # rtl/isqrt.v's default
    x, root = rec.tensors["radicand"].data.tolist(), rec.tensors["root"].data.tolist()
    assert x[:4] == [0, (1 << 62) - 1, 1, 3] and set(isqrt_edges(62)) <= set(x)
    m = (1 << 31) - 1
    assert {m * m - 1, m * m, m * m + 1, m * m + 2 * m} <= set(x)
    assert all(r * r <= v < (r + 1) ** 2 for v, r in zip(x, root))
    assert sum(v == r * r and r > 0 for v, r in zip(x, root)) >= 40
    assert sum(v == r * r + 2 * r and r > 0 for v, r in zip(x, root)) >= 40


def test_overrides_and_tables():
    rec = vectors.random_record("residual_add", 8, 0, mult_a=1 << 30, mult_b=3, shift=31)
    assert (rec.params["mult_a"], rec.params["mult_b"], rec.params["shift"]) == (1 << 30, 3, 31)
    table = np.arange(-128, 128) // 2
    rec = vectors.random_record("gelu", 256, 0, table=table)
    assert np.array_equal(rec.tensors["table"].data, table) and np.array_equal(
        rec.tensors["y"].data, rec.tensors["x"].data // 2
    )


@pytest.mark.parametrize(
    "kind,cases,seed,params,message",
    [
        ("conv", 4, 0, {}, "unknown block kind 'conv'"),
        ("gelu", 0, 0, {}, "cases must be an integer"),
        ("gelu", 4, -1, {}, "seed must be a non-negative integer"),
        ("gelu", 4, 0, {"row_len": 3}, "gelu: unknown parameter 'row_len'"),
        ("softmax", 4, 0, {"in_bits": 4, "entries": 17}, "entries must be an integer in [1, 16]"),
        ("gemm", 4, 0, {"k": 0}, "k must be an integer in [1, 65535]"),
        ("gemm", 4, 0, {"a_signed": "yes"}, "a_signed must be a bool"),
        ("gelu", 4, 0, {"table": np.zeros(10, np.int64)}, "table"),
        ("divu", 4, 0, {"n_bits": 64}, "n_bits must be an integer in [2, 63]"),
        ("divu", 4, 0, {"n_bits": 40, "q_bits": 41}, "q_bits must be an integer in [2, 40]"),
        ("divu", 4, 0, {"q_bits": 8}, "d_bits must be an integer in [32, 63]"),
        ("divu", 4, 0, {"in_bits": 8}, "divu: unknown parameter 'in_bits'"),
        ("isqrt", 4, 0, {"in_bits": 7}, "in_bits must be even"),
        ("isqrt", 4, 0, {"in_bits": 64}, "in_bits must be an integer in [4, 62]"),
    ],
)
def test_bad_parameters(kind, cases, seed, params, message):
    with pytest.raises(ValueError) as err:
        vectors.random_record(kind, cases, seed, **params)
    assert message in str(err.value)


def test_variant_option_picks_the_variant_kind_table_or_rounding(tmp_path):
    """`--variant`: softmax/LayerNorm sets of the variant's kind, GELU the variant's table; a block
    without variants and an unknown name are refused in one line."""
    from click.testing import CliRunner

    from hwvit.cli import main as cli

    run = CliRunner().invoke
    res = run(cli, ["vectors-random", "softmax", "--variant", "ibert", "--cases", "3", "--out", str(tmp_path / "s")])
    assert res.exit_code == 0, res.output
    assert vectors.read(tmp_path / "s").kind == "softmax_ibert"
    res = run(cli, ["vectors-random", "gelu", "--variant", "shiftgelu_exact", "--out", str(tmp_path / "g")])
    assert res.exit_code == 0, res.output
    got = vectors.read(tmp_path / "g")
    assert got.params["variant"] == "shiftgelu_exact"
    assert not np.array_equal(got["table"], vectors.random_record("gelu", 64, 0).tensors["table"].data)
    res = run(cli, ["vectors-random", "residual_add", "--variant", "ibert", "--out", str(tmp_path / "r")])
    assert res.exit_code != 0 and "--variant applies to" in res.output
    # I-ViT's released ShiftGELU works on rows: no table; its sets are a kind of their own
    res = run(cli, ["vectors-random", "gelu", "--variant", "shiftgelu", "--out", str(tmp_path / "rg")])
    assert res.exit_code != 0 and "its sets are kind gelu_shiftgelu" in res.output, res.output
    res = run(cli, ["vectors-random", "gelu_shiftgelu", "--cases", "5", "--out", str(tmp_path / "rg")])
    assert res.exit_code == 0 and vectors.read(tmp_path / "rg").kind == "gelu_shiftgelu", res.output
    res = run(cli, ["vectors-random", "gelu", "--variant", "nope", "--out", str(tmp_path / "n")])
    assert res.exit_code != 0 and "unknown gelu variant 'nope'" in res.output


def test_softmax_variant_difference_sweep(tmp_path):
    """`--set sweep=1` on a softmax variant: one row per difference a = max - x, 0..2^in_bits - 1,
    each the max then n - 1 copies of max - a, with the variant kernel's outputs; a row of one
    element has no difference to sweep and is refused in one line."""
    from click.testing import CliRunner

    from hwvit import variants
    from hwvit.cli import main as cli

    run = CliRunner().invoke
    out = tmp_path / "s"
    args = ["vectors-random", "softmax", "--variant", "log2", "--in-bits", "6", "--row-len", "3"]
    res = run(cli, [*args, "--set", "sweep=1", "--out", str(out)])
    assert res.exit_code == 0, res.output
    got = vectors.read(out)
    x = np.asarray(got["x"])
    assert x.shape == (64, 3)
    assert (x[:, 0] == 31).all()
    assert x[:, 1].tolist() == list(range(31, -33, -1)) and (x[:, 2] == x[:, 1]).all()
    p = {k: v for k, v in got.params.items() if k not in ("rows", "row_len", "variant", "rounding")}
    assert np.array_equal(np.asarray(got["y"]), variants.get("softmax", "log2").kernel(x, p))
    res = run(cli, [*args[:-1], "1", "--set", "sweep=1", "--out", str(tmp_path / "one")])
    assert res.exit_code != 0 and "2 or more elements" in res.output and "Traceback" not in res.output
