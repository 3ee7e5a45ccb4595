"""requant=onnxruntime (hwvit.variants.rounding): the binary32 requant of onnxruntime's fused integer
kernels. Its int64 kernel equals its Python-int reference and the CPU's own binary32 arithmetic, and
onnxruntime's QLinearMatMul and QGemm on this machine give its integers, where the exactly rounded
product (requant=half_even of the real multiplier) does not."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from hwvit import ops, variants
from hwvit.ops.round_sat import f32_multiplier, f32_product, round_significant
from hwvit.variants.base import RequantContext

V = variants.get("requant", "onnxruntime")
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


def _params(m, s, bits=8):
    return {"multiplier": m, "shift": s, "out_bits": bits}


def _binary32(acc, m, s, bits):
    """What the CPU's binary32 unit computes: f32(acc) * f32(M * 2^-s) in float32, rint, clip."""
    real = (np.asarray(m, np.float64) * np.exp2(-np.asarray(s, np.float64))).astype(np.float32)
    y = np.rint(np.asarray(acc).astype(np.float32) * real)
    assert y.dtype == np.float32
    return np.clip(y, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1).astype(np.int64)


def _near_halves(rng, n):
    """acc, M, s with acc * M / 2^s within about 2^-24 of a half: where binary32 rounding decides."""
    acc = rng.integers(1, 2**31, n) >> rng.integers(0, 31, n)
    acc = np.maximum(acc, 1) * rng.choice([-1, 1], n)
    target = rng.integers(0, 8, n) + 0.5
    s = np.ceil(np.log2((2**23 + 1) * np.abs(acc) / target)).astype(np.int64)
    m = np.rint(target * np.exp2(s) / np.abs(acc)).astype(np.int64)
    keep = (m >= 2**23) & (m < 2**24) & (s >= 0) & (s <= 62)
    return acc[keep], m[keep], s[keep]


def test_kernel_equals_reference_and_binary32():
    rng = np.random.default_rng(7)
    n = 3000
    batches = [
        (rng.integers(I32_MIN, I32_MAX, n, endpoint=True), rng.integers(0, 2**24, n), rng.integers(0, 63, n)),
        _near_halves(rng, n),
    ]  # fmt: skip
    edge_acc = np.array([I32_MIN, I32_MAX, 0, 1, -1, 2**24 + 1, -(2**24) - 1, 2**24 + 3, 2**25 + 2, 2**25 + 6])
    for m in (0, 1, 2**23, 2**24 - 1):
        for s in (0, 1, 24, 31, 62):
            batches.append((edge_acc, np.full(edge_acc.size, m), np.full(edge_acc.size, s)))
    differs_from_exact = 0
    for acc, m, s in batches:
        for bits in (8, 16):
            got = V.kernel(acc, _params(m, s, bits))
            assert got.tolist() == V.reference(acc, _params(m, s, bits))
            assert np.array_equal(got, _binary32(acc, m, s, bits))
            exact = variants.get("requant", "half_even").kernel(acc, _params(m, s, bits))
            differs_from_exact += int((got != exact).sum())
    assert differs_from_exact > 500  # the near halves: binary32 lands otherwise than the exact product


def test_round_significant_and_the_product():
    """binary32's value of an integer: ties to even both ways, a carry into the next binade, and the
    product's two roundings, each against numpy's float32 conversion and multiply."""
    v = np.array([2**24 + 1, 2**24 + 3, -(2**24) - 3, 2**25 - 1, 2**31 - 1, I32_MIN, 0, 5, 2**54 + 2**30])
    want = [2**24, 2**24 + 4, -(2**24) - 4, 2**25, 2**31, I32_MIN, 0, 5, 2**54]
    assert round_significant(v).tolist() == want
    acc = np.array([3, -3, 2**24 + 1, I32_MAX])
    m = np.array([9786709, 9786709, 2**24 - 1, 2**24 - 1])
    assert f32_product(acc, m).tolist() == [
        int(x) for x in (acc.astype(np.float32) * m.astype(np.float32)).astype(np.float64)
    ]
    assert f32_product(3, 9786709) == 7 * 2**22  # 7 * 2^22 - 1 has 25 bits: a tie, up to even


def test_multiplier_is_binary32():
    for real in (1e-3, 0.0123, 2.0**-20, 1.0, 3.0e-9, 0.5, 2.0**23):
        m, s = f32_multiplier(real)
        assert 2**23 <= m < 2**24 and 0 <= s <= 62
        assert np.float32(m * 2.0**-s) == np.float32(real)
    assert f32_multiplier(0.0) == (0, 0) and f32_multiplier(2.0**-40) == (0, 0)
    for bad in (-1.0, float("inf"), float("nan"), 2.0**24, 1e39):
        with pytest.raises(ValueError):
            f32_multiplier(bad)
    p = V.prepare(RequantContext(np.array([1e-3, 0.25]), 8))
    assert p["multiplier"].tolist() == [f32_multiplier(1e-3)[0], 2**23] and p["shift"].tolist()[1] == 25
    with pytest.raises(ValueError, match="multiplier"):
        V.kernel(np.array([1]), _params(2**24, 0))


def test_requant_zero_takes_it():
    """An imported model's requant with an output zero point: onnxruntime clamps the binary32 value to
    the range less the zero point, converts, then adds it; the same as saturating after."""
    rng = np.random.default_rng(3)
    acc, m, s = _near_halves(rng, 2000)
    for zero in (0, -5, 17):
        got = ops.requant_zero(acc, m, s, 8, "onnxruntime", zero)
        real = (m * np.exp2(-s.astype(np.float64))).astype(np.float32)
        f = np.clip(acc.astype(np.float32) * real, -128 - zero, 127 - zero)
        assert np.array_equal(got, np.rint(f).astype(np.int64) + zero)


def _session(nodes, inputs, outputs, inits, domains=()):
    import onnxruntime as ort
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    opsets = [helper.make_opsetid("", 21), *(helper.make_opsetid(d, 1) for d in domains)]
    model = helper.make_model(graph, opset_imports=opsets)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("op", ["QLinearMatMul", "QGemm"])
def test_onnxruntime_computes_it(op):
    """onnxruntime's own kernels on this CPU: every int8 x int8 product (a 256 x 1 by 1 x 256 matrix
    product, each accumulator a * b) requantized at 120 output scales that put one product within
    binary32's rounding of a half. requant=onnxruntime with onnxruntime's multiplier f32(f32(s_a *
    s_b) / s_y) gives every integer; the exact product of the real multiplier does not."""
    from onnx import TensorProto, helper, numpy_helper

    codes = (np.arange(256) - 128).astype(np.int8)
    a, b = codes.reshape(256, 1), codes.reshape(1, 256)
    acc = a.astype(np.int64) @ b.astype(np.int64)
    rng = np.random.default_rng(11)
    exact_differs = 0
    for _ in range(120):
        sa, sb = (np.float32(x) for x in rng.uniform(1e-3, 0.1, 2))
        near = (int(rng.integers(0, 4)) + 0.5) / (int(rng.integers(1, 128)) * int(rng.integers(1, 128)))
        sy = np.float32(np.float32(sa * sb) / np.float32(near))
        zero = np.array(0, np.int8)
        consts = {"sa": np.array(sa), "sb": np.array(sb), "sy": np.array(sy), "za": zero, "zb": zero, "zy": zero}
        inits = [numpy_helper.from_array(v, k) for k, v in consts.items()] + [numpy_helper.from_array(b, "b")]
        if op == "QGemm":
            node = helper.make_node(
                "QGemm", ["a", "sa", "za", "b", "sb", "zb", "", "sy", "zy"], ["y"], domain="com.microsoft"
            )
        else:
            node = helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"])
        sess = _session(
            [node],
            [helper.make_tensor_value_info("a", TensorProto.INT8, [256, 1])],
            [helper.make_tensor_value_info("y", TensorProto.INT8, [256, 256])],
            inits,
            ("com.microsoft",) if op == "QGemm" else (),
        )
        y = sess.run(None, {"a": a})[0].astype(np.int64)
        mult = np.float32(np.float32(sa * sb) / sy)
        assert np.array_equal(V.kernel(acc, V.prepare(RequantContext(float(mult), 8))), y)
        he = variants.get("requant", "half_even")
        exact_differs += int(
            (he.kernel(acc, he.prepare(RequantContext(float(sa) * float(sb) / float(sy), 8))) != y).sum()
        )
    assert exact_differs > 1000


# ------------------------------------------------------------------ onnxruntime's QLinearAdd


def _f32(x: Fraction) -> Fraction:
    """The binary32 value of the rational ``x`` (normal range), from the definition: its 24 leading
    significant bits, the rest rounded half to even."""
    if x == 0:
        return x
    mag = abs(x)
    e = mag.numerator.bit_length() - mag.denominator.bit_length()
    e -= Fraction(2) ** e > mag  # 2^e <= |x| < 2^(e+1)
    unit = Fraction(2) ** (e - 23)
    q, r = divmod(mag, unit)
    q += r > unit / 2 or (r == unit / 2 and q % 2 == 1)
    return (q * unit) * (1 if x > 0 else -1)


def _qlinear_add_ref(a, b, ma, mb, s, offset, za, zb, zc) -> int:
    """onnxruntime's QLinearAdd in words, on rationals: F = f32(Z_c) - fma(r_a, Z_a, f32(r_b Z_b)),
    c = sat(round_half_even(fma(A, r_a, fma(B, r_b, F)))), each fma one rounding."""
    r_a, r_b = (Fraction((m % 2**24) * 2 ** (m // 2**24), 2**s) for m in (ma, mb))  # M = k 2^24 + m: m 2^k
    za, zb, zc = za + offset, zb + offset, zc + offset
    fixed = _f32(Fraction(zc) - _f32(r_a * za + _f32(r_b * zb)))
    u = _f32((a + offset) * r_a + _f32((b + offset) * r_b + fixed))
    y = round(u) - offset  # Python's round of a Fraction: half to even
    return max(-128, min(127, y))


def test_qlinear_add_equals_its_reference():
    """hwvit.ops.residual_add.qlinear_add against the rationals, on random pairs of codes at random
    binary32 ratios and zero points, both code offsets (int8 and uint8 files)."""
    from hwvit.ops.residual_add import f32_ratios

    rng = np.random.default_rng(17)
    for i in range(12):
        s_a, s_b, s_c = rng.uniform(0.01, 0.2, 3)
        ma, mb, s = f32_ratios(s_a * (1000.0 if i % 3 == 0 else 1.0), s_b, s_c)  # ratios 2^10 apart too
        zeros = [int(z) for z in rng.integers(-128, 128, 3)]
        for rounding, offset in ops.QLINEAR_ADD.items():
            a, b = rng.integers(-128, 128, 400), rng.integers(-128, 128, 400)
            got = ops.residual_add_zp(a, b, ma, mb, s, 8, rounding, *zeros)
            want = [_qlinear_add_ref(int(x), int(y), ma, mb, s, offset, *zeros) for x, y in zip(a, b)]
            assert got.tolist() == want
    with pytest.raises(ValueError, match="more than 23 bits"):
        ops.residual_add_zp(1, 1, (24 << 24) + 2**23, 2**23, 30, 8, "onnxruntime")
    with pytest.raises(ValueError, match="shift"):
        ops.residual_add_zp(1, 1, 2**23, 2**23, 41, 8, "onnxruntime")


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_onnxruntime_qlinear_add_computes_it(dtype):
    """onnxruntime's QLinearAdd (com.microsoft) on this CPU, every pair of codes at 6 random scale
    and zero-point draws: rounding onnxruntime (int8) / onnxruntime_u8 (uint8 codes, hwvit's + 128)
    with f32_ratios gives every integer; the exact sum (half_even of the same ratios) does not."""
    from onnx import TensorProto, helper, numpy_helper

    from hwvit.ops.residual_add import f32_ratios

    unsigned = dtype == "uint8"
    offset, rounding = (128, "onnxruntime_u8") if unsigned else (0, "onnxruntime")
    codes = np.arange(-128, 128)
    a, b = np.repeat(codes, 256), np.tile(codes, 256)  # hwvit's codes; the file's are + offset
    rng = np.random.default_rng(23 + unsigned)
    exact_differs = 0
    for i in range(6):
        sa, sb, sc = (np.float32(x) for x in rng.uniform(0.01, 0.2, 3))
        sb = np.float32(sb * 300) if i == 0 else sb  # a bias add's ratios lie far apart (HF's: 1 and 318)
        zeros = [int(z) for z in rng.integers(-128, 128, 3)]  # hwvit's; the file's are + offset
        consts = {"sa": np.array(sa), "sb": np.array(sb), "sc": np.array(sc)}
        consts.update({k: np.array(z + offset, dtype) for k, z in zip(("za", "zb", "zc"), zeros)})
        node = helper.make_node(
            "QLinearAdd", ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["c"], domain="com.microsoft"
        )
        kind = TensorProto.UINT8 if unsigned else TensorProto.INT8
        sess = _session(
            [node],
            [helper.make_tensor_value_info(n, kind, [a.size]) for n in "ab"],
            [helper.make_tensor_value_info("c", kind, [a.size])],
            [numpy_helper.from_array(v, k) for k, v in consts.items()],
            ("com.microsoft",),
        )
        feed = {"a": (a + offset).astype(dtype), "b": (b + offset).astype(dtype)}
        c = sess.run(None, feed)[0].astype(np.int64) - offset
        ma, mb, s = f32_ratios(sa, sb, sc)
        assert np.array_equal(ops.residual_add_zp(a, b, ma, mb, s, 8, rounding, *zeros), c)
        exact_differs += int((ops.residual_add_zp(a, b, ma, mb, s, 8, "half_even", *zeros) != c).sum())
    assert exact_differs > 0
