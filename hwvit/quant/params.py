"""Float -> integer parameter builders: multipliers, tables, fixed-point gamma/beta, int weights.

These run once, at conversion time, and are the only place besides ``ops.quantize`` where floats
become integers. Each follows docs/arithmetic.md; the integer kernels in ``hwvit.ops`` consume
what they return. Multipliers are computed in exact rational arithmetic (``fractions``), so the
only float rounding is the caller's own computation of the real ratio.

Every integer here is the same on every machine for the same float arguments: the float steps are
IEEE operations that round the same everywhere (``+ - * /``, sqrt, floor), and the two tables
of transcendental values (exp, erfc) are computed in float64 and then checked: an entry whose
float64 value lies within 2^-20 of a rounding boundary (its error is below 2^-28) is computed
again exactly with mpmath (``_exact_where_close``). A vector library's exp (numpy's AVX-512 one
differs from glibc's in the last bit of one value in twenty) cannot move an entry.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from hwvit.formats import MULT_MAX, SHIFT_MAX
from hwvit.ops.layernorm import B_MAX, EPS_MAX, G_MAX, LN_F, LN_T
from hwvit.ops.requant import quantize
from hwvit.ops.softmax import EXP_ONE


def _round_half_up(q: Fraction) -> int:
    return math.floor(q + Fraction(1, 2))


def _positive(value: Any, name: str) -> float:
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return v


def _float_array(x: Any, name: str) -> np.ndarray:
    if type(x).__module__.split(".")[0] == "torch":
        x = x.detach().cpu().double().numpy()
    arr = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: holds NaN or infinity")
    return arr


# A float64 table value is this close to a rounding boundary (x.5) before it is computed again
# exactly. Its own error is below 2^-28: the exp table's values are at most 2^23 with a few ulps
# (2^-52 relative) of error from the argument's rounding and the library's exp, the GELU table's
# at most 2^16 with the same.
_CLOSE = 2.0**-20
_EXACT_BITS = 256  # mpmath's working precision for those: far beyond any float64 argument's


def _exact_where_close(y: np.ndarray, exact: Callable[[int], Any]) -> np.ndarray:
    """``y`` (float64 estimates of real values) with every element within ``_CLOSE`` of a rounding
    boundary (a fraction of |y| at one half) replaced by ``exact(flat index)``, the value computed
    by mpmath at ``_EXACT_BITS`` bits and nudged by 2^-10 to its side of the boundary, so that any
    round-half rule then rounds it as the exact value rounds."""
    y = np.array(y, dtype=np.float64)
    frac = np.abs(y) - np.floor(np.abs(y))
    close = np.flatnonzero(np.abs(frac - 0.5) < _CLOSE)
    if close.size:
        import mpmath

        with mpmath.workprec(_EXACT_BITS):
            for i in close:
                v = exact(int(i))
                a = abs(v)
                side = 1 if a - mpmath.floor(a) >= mpmath.mpf(1) / 2 else -1
                y.flat[i] = math.copysign(float(mpmath.floor(a)) + 0.5 + side * 2.0**-10, float(v))
    return y


def _quantize_one(real: float) -> tuple[int, int]:
    if not math.isfinite(real) or real < 0:
        raise ValueError(f"multiplier must be finite and >= 0, got {real!r}")
    if real == 0:
        return 0, 0
    exact = Fraction(real)
    _, e = math.frexp(real)  # real = f * 2^e, f in [0.5, 1): M = round(f * 2^31) in [2^30, 2^31]
    s = 31 - e
    if s > SHIFT_MAX:
        # real < 2^-32: keep the largest shift; M = round(real * 2^62) < 2^30 loses precision
        # (relative error up to 2^-31/real) and is 0 below 2^-63.
        return _round_half_up(exact * (1 << SHIFT_MAX)), SHIFT_MAX
    m = _round_half_up(exact * Fraction(2) ** s)
    if m > MULT_MAX:  # f rounded up to 1.0: M = 2^31 -> 2^30 with one shift less
        m, s = m >> 1, s - 1
    if s < 0:
        raise ValueError(f"multiplier {real!r} is too large: M * 2^-s needs M < 2^31 with s >= 0")
    return m, s


def quantize_multiplier(real: Any) -> tuple[Any, Any]:
    """A real multiplier ``m >= 0`` as ``(M, s)`` with ``m ~= M * 2^-s``.

    ``M`` in ``[2^30, 2^31-1]`` and ``s`` in ``[0, 62]``: the relative error is at most
    ``2^-31``. ``m = 0`` gives ``(0, 0)``. Tiny ``m < 2^-32`` clamp to ``s = 62`` with
    ``M = round(m * 2^62) < 2^30`` (fewer significant bits; 0 below 2^-63). ``m`` too large for
    ``s = 0`` (``>= 2^31 - 1/2``) raises ValueError. Scalars give Python ints; an array gives two
    int64 arrays of its shape (per-channel multipliers), see ``quantize_multipliers``.
    """
    if np.ndim(real) == 0:
        return _quantize_one(float(real))
    return quantize_multipliers(real)


def quantize_multipliers(reals: Any) -> tuple[np.ndarray, np.ndarray]:
    """``quantize_multiplier`` elementwise: two int64 arrays (M, s) of the shape of ``reals``."""
    arr = _float_array(reals, "multipliers")
    pairs = [_quantize_one(float(r)) for r in arr.reshape(-1)]
    m = np.array([p[0] for p in pairs], dtype=np.int64).reshape(arr.shape)
    s = np.array([p[1] for p in pairs], dtype=np.int64).reshape(arr.shape)
    return m, s


def gelu_table(s_in: float, s_out: float, in_bits: int = 8, out_bits: int = 8) -> np.ndarray:
    """The ``2^in_bits`` GELU entries: ``sat_out(round_half_away(GELU(q * s_in) / s_out))``.

    Entry ``i`` is input ``q = i - 2^(in_bits-1)``. Exact erf GELU in float64, written with erfc
    (``x * erfc(-x/sqrt 2) / 2``) so negative inputs keep full relative precision.
    """
    s_in = _positive(s_in, "s_in")
    s_out = _positive(s_out, "s_out")
    if not 2 <= in_bits <= 16 or not 2 <= out_bits <= 16:
        raise ValueError(f"gelu_table: in_bits and out_bits must lie in [2, 16], got {in_bits}, {out_bits}")
    half = 1 << (in_bits - 1)
    x = np.arange(-half, half, dtype=np.float64) * s_in
    g = np.array([0.5 * v * math.erfc(-v / math.sqrt(2.0)) for v in x])

    def exact(i: int):
        import mpmath

        v = (i - half) * mpmath.mpf(s_in)
        return v * mpmath.erfc(-v / mpmath.sqrt(2)) / 2 / mpmath.mpf(s_out)

    return quantize(_exact_where_close(g / s_out, exact), 1.0, out_bits)


def exp_table(s_in: float, entries: int = 256) -> np.ndarray:
    """Softmax exp table: ``T[d] = round_half_up(2^23 * exp(-d * s_in))``, ``T[0] = 2^23``.

    Unsigned 24-bit values (int64 array), non-increasing.
    """
    s_in = _positive(s_in, "s_in")
    if isinstance(entries, bool) or not isinstance(entries, (int, np.integer)) or not 1 <= entries <= 1 << 16:
        raise ValueError(f"exp_table: entries must be an integer in [1, 65536], got {entries!r}")
    d = np.arange(int(entries), dtype=np.float64)

    def exact(i: int):
        import mpmath

        return EXP_ONE * mpmath.exp(-i * mpmath.mpf(s_in))

    table = np.floor(_exact_where_close(EXP_ONE * np.exp(-d * s_in), exact) + 0.5).astype(np.int64)
    table[0] = EXP_ONE
    return table


LOG2E = 1.4426950408889634  # log2(e) correctly rounded to float64 (a literal: no libm log2 in between)


def exp_shift_mult(s_in: float) -> int:
    """``round(s_in * log2(e) * 2^16)``: the slope of softmax's shift-and-add exp (exp='shift')."""
    s_in = _positive(s_in, "s_in")
    m = math.floor(s_in * LOG2E * (1 << 16) + 0.5)
    if m > MULT_MAX:
        raise ValueError(f"exp_shift_mult: s_in={s_in} is too large")
    return m


def layernorm_params(
    gamma: Any, beta: Any, eps: float, C: int, s_x: float, s_out: float, out_bits: int = 8
) -> dict[str, Any]:
    """Integer LayerNorm parameters (docs/arithmetic.md): ``G``, ``B``, ``eps_int``, ``M``, ``s``.

    One shared scale ``s_g = max(max|gamma| / (2^14-1), max|beta| * 2^F / (2^30-1))`` so that
    ``|G| <= 2^14-1`` (signed 15) and ``|B| <= 2^30-1`` (signed 31); ``G = round(gamma/s_g)``,
    ``B = round(beta * 2^F / s_g)``, ``M * 2^-s = s_g * 2^-F / s_out``,
    ``eps_int = min(round(eps * C^2 / s_x^2 * 2^22), 2^61)`` (the units of ``V << 2T``). All-zero
    gamma and beta use ``s_g = 1``.
    """
    g = _float_array(gamma, "gamma")
    b = _float_array(beta, "beta")
    if g.shape != (C,) or b.shape != (C,):
        raise ValueError(f"layernorm_params: gamma {g.shape} and beta {b.shape} must have shape ({C},)")
    if not 2 <= out_bits <= 16:
        raise ValueError(f"layernorm_params: out_bits must lie in [2, 16], got {out_bits}")
    s_x = _positive(s_x, "s_x")
    s_out = _positive(s_out, "s_out")
    if not (math.isfinite(float(eps)) and float(eps) >= 0):
        raise ValueError(f"eps must be finite and >= 0, got {eps!r}")
    s_g = max(float(np.abs(g).max()) / G_MAX, float(np.abs(b).max()) * (1 << LN_F) / B_MAX)
    if s_g == 0:
        s_g = 1.0
    g_int = np.clip(quantize(g, s_g, 32), -G_MAX, G_MAX)  # clip: float ulps at the bound only
    b_int = np.clip(quantize(b * (1 << LN_F), s_g, 32), -B_MAX, B_MAX)
    eps_int = min(_round_half_up(Fraction(float(eps)) * C * C * 2 ** (2 * LN_T) / Fraction(s_x) ** 2), EPS_MAX)
    multiplier, shift = quantize_multiplier(s_g / (1 << LN_F) / s_out)
    return {"gamma": g_int, "beta": b_int, "eps_int": int(eps_int), "multiplier": multiplier, "shift": shift}


def residual_params(s_a: float, s_b: float, s_out: float) -> tuple[int, int, int]:
    """``(Ma, Mb, s)`` with ``Ma*2^-s ~= s_a/s_out``, ``Mb*2^-s ~= s_b/s_out``.

    ``s`` is the largest shift in ``[1, 62]`` with both ``Ma, Mb <= 2^31-1`` (the larger one
    lands in ``[2^30, 2^31)``, so its relative error is at most 2^-31). ValueError if even
    ``s = 1`` overflows (a ratio ``>= 2^30``).
    """
    ra = Fraction(_positive(s_a, "s_a")) / Fraction(_positive(s_out, "s_out"))
    rb = Fraction(_positive(s_b, "s_b")) / Fraction(float(s_out))
    top = max(ra, rb)
    # Start one above the answer (top * 2^s >= 2^32 beyond it) and step down.
    s = max(0, min(SHIFT_MAX, 32 - math.floor(math.log2(float(top)))))
    while s >= 1 and _round_half_up(top * (1 << s)) > MULT_MAX:
        s -= 1
    if s < 1:
        raise ValueError(f"residual_params: s_a/s_out or s_b/s_out = {float(top):.6g} is too large (>= 2^30)")
    return _round_half_up(ra * (1 << s)), _round_half_up(rb * (1 << s)), s


def weight_scales(w_float: Any, bits: int = 8) -> np.ndarray:
    """Symmetric per-output-channel scales (axis 0): ``max|w[n]| / (2^(bits-1) - 1)``; zero rows get 1.0."""
    w = _float_array(w_float, "w")
    if w.ndim < 1 or w.shape[0] == 0:
        raise ValueError(f"weight_scales: expected (N, ...) weights, got shape {w.shape}")
    if not 2 <= bits <= 16:
        raise ValueError(f"weight_scales: bits must lie in [2, 16], got {bits}")
    absmax = np.abs(w.reshape(w.shape[0], -1)).max(axis=1) if w[0].size else np.zeros(w.shape[0])
    scales = absmax / ((1 << (bits - 1)) - 1)
    return np.where(scales > 0, scales, 1.0)


def quantize_weights(w_float: Any) -> tuple[np.ndarray, np.ndarray]:
    """int8 weights in ``[-127, 127]`` per output channel (axis 0) and their float64 scales."""
    w = _float_array(w_float, "w")
    scales = weight_scales(w, 8)
    q = quantize(w, scales.reshape((-1,) + (1,) * (w.ndim - 1)), 8)
    return np.clip(q, -127, 127).astype(np.int8), scales


def bias_int(bias_float: Any, s_in: float, s_w: Any) -> np.ndarray:
    """Bias at scale ``s_in * s_w[n]``: ``round_half_away(bias / (s_in * s_w))``, int32 values (int64 array).

    OverflowError if a value leaves the int32 range.
    """
    b = _float_array(bias_float, "bias")
    s_in = _positive(s_in, "s_in")
    s_w = _float_array(s_w, "s_w")
    if not np.all(s_w > 0):
        raise ValueError("bias_int: s_w must be > 0")
    v = b / (s_in * s_w)
    if np.any(np.abs(v) >= (1 << 31) - 0.5):
        raise OverflowError(f"bias_int: bias / (s_in * s_w) reaches {float(np.abs(v).max()):.6g}, beyond int32")
    return quantize(b, s_in * s_w, 32)
