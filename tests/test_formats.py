"""IntFormat: range, storage dtype and hex digits of every width the project uses."""

from __future__ import annotations

import numpy as np
import pytest

from hwvit.formats import ACC, EXP, GAMMA, MULT, MULT_MAX, SHIFT, SHIFT_MAX, IntFormat, signed, unsigned


@pytest.mark.parametrize("bits", [1, 2, 6, 8, 15, 16, 24, 31, 32, 40, 63])
def test_range_dtype_and_digits_agree(bits):
    for fmt in (signed(bits), unsigned(bits)):
        lo, hi = fmt.range
        assert hi - lo == 2**bits - 1 and (lo < 0) == fmt.signed
        info = np.iinfo(fmt.dtype)
        assert info.min <= lo and hi <= info.max and info.bits >= bits and info.bits // 2 < max(bits, 5)
        assert 16**fmt.hex_digits > hi - lo >= 16 ** (fmt.hex_digits - 1) - 1


def test_fixed_widths():
    assert ACC.range == (-(2**31), 2**31 - 1) and GAMMA.range == (-(2**14), 2**14 - 1)
    assert EXP.hi == 2**24 - 1 and MULT.hex_digits == 8 and SHIFT.hi == 63
    assert MULT_MAX < MULT.hi and SHIFT_MAX < SHIFT.hi  # value limits inside the declared widths
    assert str(IntFormat(15)) == "15-bit signed" and IntFormat(8, False) == unsigned(8)


@pytest.mark.parametrize("bits,sign", [(0, True), (65, True), (64, False), (True, True), (8, 1)])
def test_rejects_bad_formats(bits, sign):
    with pytest.raises(ValueError):
        IntFormat(bits, sign)


def test_formats_are_made_once_per_width_and_checked_every_time():
    """The kernels ask for signed(bits) at every call: one immutable IntFormat per int width and sign,
    and a bad width (a bool, a float, out of range) is refused each time, never cached."""
    assert signed(8) is signed(8) and unsigned(8) is unsigned(8) and signed(8) is not unsigned(8)
    assert signed(8).range == (-128, 127) and unsigned(8).range == (0, 255)
    for bad in (True, 8.0, 0, 65):
        for _ in range(2):
            with pytest.raises(ValueError, match="bits must be an integer"):
                signed(bad)
