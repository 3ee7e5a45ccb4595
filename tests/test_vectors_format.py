"""The `.hex` / `.npy` bytes of vector sets against plain-Python formatting."""

from __future__ import annotations

import io

import numpy as np
import pytest

from hwvit.formats import IntFormat
from hwvit.vectors.format import VectorSetError, decode_hex, decode_npy, encode_hex, encode_npy

WIDTHS = [
    (1, False),
    (2, True),
    (6, False),
    (8, True),
    (8, False),
    (15, True),
    (16, False),
    (17, True),
    (24, False),
    (31, True),
    (32, True),
    (32, False),
    (40, True),
    (63, False),
    (64, True),
]


def _ref_hex(values, bits: int) -> bytes:
    """One line per value: the value mod 2^bits in ceil(bits/4) lowercase digits (Python ints)."""
    digits = (bits + 3) // 4
    return "".join(f"{int(v) % (1 << bits):0{digits}x}\n" for v in values).encode()


def _values(bits: int, signed: bool, n: int = 300) -> np.ndarray:
    lo, hi = IntFormat(bits, signed).range
    edges = [lo, hi, 0, min(1, hi), max(-1, lo), lo + 1 if hi > lo else lo, hi - 1 if hi > lo else hi]
    rng = np.random.default_rng(bits)
    if bits < 64:
        rand = rng.integers(lo, hi, n, endpoint=True)
    else:
        rand = rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, n)
    return np.concatenate([np.array(edges, dtype=np.int64), rand.astype(np.int64)])


@pytest.mark.parametrize("bits,signed", WIDTHS)
def test_encode_hex_matches_python_formatting(bits, signed):
    values = _values(bits, signed)
    assert bytes(encode_hex(values, bits)) == _ref_hex(values, bits)


@pytest.mark.parametrize("bits,signed", WIDTHS)
def test_decode_hex_round_trips(bits, signed):
    values = _values(bits, signed)
    got = decode_hex(_ref_hex(values, bits), len(values), bits, signed)
    assert got.dtype == np.int64
    assert got.tolist() == values.tolist()


def test_hex_is_masked_twos_complement_of_the_declared_width():
    assert bytes(encode_hex(np.array([-1, -128, 127]), 8)) == b"ff\n80\n7f\n"
    assert bytes(encode_hex(np.array([-1, -(1 << 14)]), 15)) == b"7fff\n4000\n"  # 15 bits: never ffff
    assert bytes(encode_hex(np.array([63, 0]), 6)) == b"3f\n00\n"
    assert [IntFormat(b).hex_digits for b in (1, 6, 32, 33)] == [1, 2, 8, 9]


def test_encode_hex_accepts_narrow_dtypes_and_shapes():
    data = np.array([[-128, 5], [7, 127]], dtype=np.int8)
    assert bytes(encode_hex(data, 8)) == b"80\n05\n07\n7f\n"
    assert bytes(encode_hex(np.array([2**31 - 1], dtype=np.uint32), 32)) == b"7fffffff\n"


@pytest.mark.parametrize(
    "text,count,bits,signed,message",
    [
        (b"01\n02\n", 3, 8, True, "truncated: 2 lines, expected 3"),
        (b"01\n02\n03\n04\n", 3, 8, True, "extra lines: 4 lines, expected 3"),
        (b"01\n0g\n03\n", 3, 8, True, "line 2: non-hex character 'g'"),
        (b"01\n02\r\n03\n", 3, 8, True, "line 2: non-hex character '\\r'"),
        (b"01\n100\n03\n", 3, 8, True, "line 2: value 0x100 does not fit 8 bits"),
        (b"01\n7f\n40\n", 3, 6, False, "line 2: value 0x7f does not fit 6 bits"),
        (b"7fff\n8000\n", 2, 15, True, "line 2: value 0x8000 does not fit 15 bits"),
        (b"01\n2\n03\n", 3, 8, True, "line 2: 1 hex digits, expected 2"),
        (b"01\n\n03\n", 3, 8, True, "line 2: empty line"),
        (b"01\n02\n03", 3, 8, True, "line 3: no final newline"),
        (b"", 1, 8, True, "truncated: 0 lines, expected 1"),
        (b"// comment\n01\n", 2, 8, True, "line 1: non-hex character '/'"),
        (b"@0\n01\n", 2, 8, True, "line 1: non-hex character '@'"),
        (b"xx\n01\n", 2, 8, True, "line 1: non-hex character 'x'"),
    ],
)
def test_decode_hex_rejects_with_the_first_fault(text, count, bits, signed, message):
    with pytest.raises(VectorSetError) as err:
        decode_hex(text, count, bits, signed)
    assert str(err.value) == message


@pytest.mark.parametrize("bits,signed", WIDTHS)
def test_npy_is_what_np_save_writes_in_the_narrowest_dtype(bits, signed):
    values = _values(bits, signed).reshape(-1, 1)[:300].reshape(30, 10)
    header, body = encode_npy(values, bits, signed)
    ref = io.BytesIO()
    np.save(ref, values.astype(IntFormat(bits, signed).dtype), allow_pickle=False)
    assert header + bytes(body) == ref.getvalue()
    back = decode_npy(header + bytes(body))
    assert back.dtype == IntFormat(bits, signed).dtype and back.shape == (30, 10)
    assert back.astype(np.int64).tolist() == values.tolist()


def test_npy_dtype_choice():
    assert IntFormat(6, False).dtype == np.uint8 and IntFormat(8, True).dtype == np.int8
    assert IntFormat(15, True).dtype == np.int16 and IntFormat(24, False).dtype == np.uint32
    assert IntFormat(31, True).dtype == np.int32 and IntFormat(40, True).dtype == np.int64


def test_decode_npy_refuses_pickles_and_garbage():
    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(VectorSetError, match="not a valid .npy file"):
        decode_npy(buf.getvalue())
    with pytest.raises(VectorSetError, match="not a valid .npy file"):
        decode_npy(b"\x93NUMPY garbage")
