"""I-BERT's integer-only arithmetic (Kim et al., ICML 2021) as hwvit variants.

Four variants, each (a) a core integer function that is I-BERT's algorithm given the integer
constants derived from the scaling factor, equal bit for bit to transformers'
``models/ibert/quant_modules.py`` run in float64 (tests/test_variants_ibert.py), and (b) the
``Variant`` wrapper that maps hwvit's signed codes through it and requantizes where the family
needs it:

- ``gelu=ibert``: i-GELU, erf by the clipped second-order polynomial (paper Algorithm 2);
- ``softmax=ibert``: i-exp (Algorithm 1 + 3), the 16-bit QuantAct of exp, the 2^32 / sum factor;
- ``layernorm=ibert``: integer mean and variance, integer sqrt (Algorithm 4), 2^31 / std;
- ``requant=ibert``: QuantAct / FixedPointMul: ``m * 2^-e`` from ``batch_frexp`` (31-bit mantissa
  rounded half away from zero), round half to even (``torch.round``), clamp.

Only ``prepare`` and the ``*_constants`` functions touch floats, and they do the exact float64
operations transformers does on the scaling factor (so the integer constants are the same
integers); every kernel and reference is integer arithmetic. docs/variants/ibert.md derives each
formula, every intermediate's width and the float32 finding.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

import numpy as np

from hwvit.variants.base import GeluContext, LayerNormContext, Params, RequantContext, SoftmaxContext, Variant

# I-BERT's constants (paper sections 3.4-3.6; the same decimals as the reference implementation).
GELU_K = 1.4142  # sqrt(2): erf(x / sqrt 2)
GELU_A, GELU_B = -0.2888, -1.769  # erf(x) ~ sign(x) [a (min(|x|, -b) + b)^2 + 1]
GELU_C = 1.0 / GELU_A  # the polynomial as a ((x + b)^2 + c)
GELU_SHIFT = 14  # the erf integer is divided by 2^14 (floor) against overflow
EXP_X0 = -0.6931  # -ln 2
EXP_A = 0.35815147  # exp(p) ~ a (p + b)^2 + c on (-ln 2, 0], written a (p (p + b') + c')
EXP_B = 0.96963238 / EXP_A
EXP_C = 1.0 / EXP_A
EXP_N = 30  # exp = poly * 2^(30 - q), q <= 30
EXP_ACT_BITS = 16  # QuantAct(16) of exp "to avoid overflow"
SOFTMAX_MAX_BIT = 32  # factor = floor(2^32 / sum)
LN_MAX_BIT = 32  # the variance must stay below 2^32 (I-BERT's overflow shift)
FRAC_BITS = 31  # batch_frexp's mantissa bits


# ----------------------------------------------------------------------------------------------
# integer helpers (numpy int64 and Python int twins)


def _rhe_div(n: int, d: int) -> int:
    """round(n / d), ties to even (torch.round), for Python ints, d > 0."""
    q, r = divmod(n, d)
    if 2 * r > d or (2 * r == d and q & 1):
        q += 1
    return q


def _rhe_shift(v: np.ndarray, e: np.ndarray) -> np.ndarray:
    """round(v / 2^e), ties to even, int64; 1 <= e <= 62 elementwise (broadcast)."""
    q = v >> e
    r = v - (q << e)
    half = np.left_shift(np.int64(1), e - 1)
    return q + ((r > half) | ((r == half) & ((q & 1) == 1))).astype(np.int64)


def _sat(v, bits: int):
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if isinstance(v, int):
        return min(max(v, lo), hi)
    return np.clip(v, lo, hi)


def frexp31(scale: float) -> tuple[int, int]:
    """batch_frexp: ``scale ~= M * 2^-E``, ``scale = m * 2^ex`` with ``m`` in [0.5, 1) (frexp),
    ``M = round_half_away(m * 2^31)`` (the Decimal ROUND_HALF_UP of quant_modules), ``E = 31 - ex``.

    ``|M|`` lies in ``[2^30, 2^31]`` (``2^31`` itself when ``m * 2^31`` rounds up to it); its sign is
    the sign of ``scale``; ``scale = 0`` gives ``(0, 31)``.
    """
    m, ex = math.frexp(float(scale))
    big = Decimal(m * 2.0**FRAC_BITS).quantize(Decimal(1), rounding=ROUND_HALF_UP)  # exact: m * 2^31 is a float
    return int(big), FRAC_BITS - ex


# ----------------------------------------------------------------------------------------------
# requant: QuantAct / FixedPointMul


def ibert_requant_ref(z: int, m: int, e: int, bits: int) -> int:
    """I-BERT's requant of one integer: ``clamp(round_half_even(z * M / 2^E), -2^(b-1), 2^(b-1)-1)``."""
    if e >= 0:
        v = _rhe_div(z * m, 1 << e)
    else:
        v = z * m << -e
    return _sat(v, bits)


def _rhe_mul_shift(z: np.ndarray, m: np.ndarray, e: np.ndarray) -> np.ndarray:
    """``round_half_even(z * m / 2^e)`` exactly in int64 for ``|z| < 2^46``, ``|m| <= 2^31`` and
    ``17 <= e <= 78``, the product (up to 2^77) held as ``t * 2^16 + low``: ``m = m_hi 2^16 + m_lo``
    (``|m_hi| <= 2^15``, ``0 <= m_lo < 2^16``), ``|z m_hi| < 2^61``, ``|z m_lo| < 2^62``,
    ``t = z m_hi + (z m_lo >> 16)`` (``|t| < 2^62``), ``low = z m_lo & 0xFFFF``. With ``k = e - 16``:
    quotient ``t >> k``, remainder ``r 2^16 + low`` against the half ``2^(k-1) 2^16``."""
    m_hi, m_lo = m >> 16, m & 0xFFFF
    b = z * m_lo
    t = z * m_hi + (b >> 16)
    low = b & 0xFFFF
    k = e - 16
    q = t >> k
    r = t - (q << k)
    half = np.left_shift(np.int64(1), k - 1)
    up = (r > half) | ((r == half) & ((low > 0) | ((q & 1) == 1)))
    return q + up.astype(np.int64)


def ibert_requant(z: np.ndarray, m, e, bits: int) -> np.ndarray:
    """Vectorized ``ibert_requant_ref``; ``m``/``e`` scalars or broadcast along the last axis.

    Widths: ``|z * M| < 2^62`` with ``1 <= E <= 62`` in one int64 product; ``|z| < 2^46`` and
    ``17 <= E <= 78`` through ``_rhe_mul_shift`` (products up to 2^77: I-ViT's LayerNorm); outside
    both it computes on Python ints.
    """
    z = np.asarray(z, dtype=np.int64)
    m_arr = np.broadcast_to(np.asarray(m, dtype=np.int64), z.shape[-1:] if z.ndim else ())
    e_arr = np.broadcast_to(np.asarray(e, dtype=np.int64), m_arr.shape)
    zmax = int(np.abs(z).max()) if z.size else 0
    mmax = int(np.abs(m_arr).max()) if m_arr.size else 0
    e_lo = int(e_arr.min()) if e_arr.size else 0
    e_hi = int(e_arr.max()) if e_arr.size else 0
    if zmax * mmax < 2**62 and e_arr.size and e_lo >= 1 and e_hi <= 62:
        return _sat(_rhe_shift(z * m_arr, e_arr), bits)
    if zmax < 2**46 and mmax <= 2**31 and e_arr.size and e_lo >= 17 and e_hi <= 78:
        return _sat(_rhe_mul_shift(z, m_arr, e_arr), bits)
    flat = z.reshape(-1, z.shape[-1]) if z.ndim else z.reshape(1, 1)
    ms = np.broadcast_to(m_arr, flat.shape[-1:]).tolist()
    es = np.broadcast_to(e_arr, flat.shape[-1:]).tolist()
    out = [[ibert_requant_ref(int(v), int(ms[j]), int(es[j]), bits) for j, v in enumerate(row)] for row in flat]
    return np.array(out, dtype=np.int64).reshape(z.shape)


def _requant_prepare(ctx: RequantContext) -> Params:
    m, e = frexp31(ctx.scale)
    return {"multiplier": m, "shift": e, "out_bits": ctx.out_bits}


def _requant_kernel(x: np.ndarray, p: Params) -> np.ndarray:
    """Per-tensor or per-channel (along the last axis) multiplier and shift, as hwvit's GEMM has them."""
    return ibert_requant(x, np.asarray(p["multiplier"]), np.asarray(p["shift"]), int(p["out_bits"]))


def _requant_ref(x, p: Params):
    b = int(p["out_bits"])
    rows = np.asarray(x).reshape(-1, np.shape(x)[-1]) if np.ndim(x) else np.asarray(x).reshape(1, 1)
    ms = np.broadcast_to(np.asarray(p["multiplier"]), rows.shape[-1:]).tolist()
    es = np.broadcast_to(np.asarray(p["shift"]), rows.shape[-1:]).tolist()
    out = [[ibert_requant_ref(int(v), int(ms[j]), int(es[j]), b) for j, v in enumerate(row)] for row in rows.tolist()]
    return np.array(out, dtype=np.int64).reshape(np.shape(x)).tolist()


def _fixed_point_scale(s_pre: float, s_out: float) -> float:
    """FixedPointMul's ``new_scale``: ``double(s_pre) / double(float32(s_out))``."""
    return float(s_pre) / float(np.float32(s_out))


# ----------------------------------------------------------------------------------------------
# GELU (paper Algorithm 2, i-GELU)


def gelu_constants(s: float) -> dict:
    """The integers of i-GELU at input scale ``s``: float64 operations as IntGELU does them.

    ``s_erf = s / 1.4142``; ``b = floor(-1.769 / s_erf)``; ``c = floor((1 / -0.2888) / s_erf^2)``;
    ``S_erf = s_erf^2 * -0.2888 * 2^14`` (the erf integer's scale, negative);
    ``one = 1 // S_erf`` (floor division: the integer of 1.0 at ``S_erf``);
    ``S_out = s * S_erf / 2`` (the output integer's scale, negative like ``S_erf``).
    """
    s_erf = float(s) / GELU_K
    b_int = math.floor(GELU_B / s_erf)
    c_int = math.floor(GELU_C / (s_erf * s_erf))
    s_sig = s_erf * s_erf * GELU_A * float(2**GELU_SHIFT)
    one_int = int(1.0 // s_sig)
    return {"b_int": int(b_int), "c_int": int(c_int), "one_int": one_int, "scale": float(s) * s_sig / 2}


def ibert_gelu_int_ref(x: int, b_int: int, c_int: int, one_int: int, trace: dict | None = None) -> int:
    """i-GELU of one integer (Algorithm 2):

    ``L = sign(x) * ((min(|x|, -b) + b)^2 + c)``, ``erf = floor(L / 2^14)``, ``y = x * (erf + one)``.
    """
    sign = (x > 0) - (x < 0)
    clip = min(abs(x), -b_int)
    poly = (clip + b_int) ** 2 + c_int
    erf = (sign * poly) >> GELU_SHIFT
    y = x * (erf + one_int)
    if trace is not None:
        for k, v in (("poly", poly), ("erf", erf), ("erf_plus_one", erf + one_int), ("y", y)):
            trace[k] = max(trace.get(k, 0), abs(v))
    return y


def ibert_gelu_int(x: np.ndarray, b_int: int, c_int: int, one_int: int) -> np.ndarray:
    """i-GELU, int64. Widths (``s >= 2^-20``, ``|x| < 2^31``): ``|b| <= 2.502/s + 1 < 2^22``;
    ``|poly| <= max(b^2, |c|) <= 6.93/s^2 < 2^43``; ``|erf|, |one| <= 6.93/(2^14 s^2) < 2^29``;
    ``|erf + one| <= |erf| + |one| < 2^30``; ``|y| < 2^61``.
    """
    x = np.asarray(x, dtype=np.int64)
    clip = np.minimum(np.abs(x), -b_int)
    poly = (clip + b_int) ** 2 + c_int
    erf = (np.sign(x) * poly) >> GELU_SHIFT
    return x * (erf + one_int)


GELU_LIFT_SCALE = 2.0**-12  # the wrapper's input scale bound (see gelu_lift)


def gelu_lift(s_in: float) -> int:
    """The exact left shift ``L`` the wrapper applies to hwvit's codes, so I-BERT sees ``x << L`` at
    ``s_in / 2^L <= 2^-12``. I-BERT's erf integer has scale ``|S_erf| = 0.1444 * 2^14 * s^2`` (the
    fixed ``/ 2^14``), meant for int32 GEMM outputs at small ``s``; an int8 code at ``s = 0.05`` would
    leave erf 1 bit (``S_erf ~ 5.9``). At ``s <= 2^-12``, ``|S_erf| <= 1.4e-4``."""
    lift = 0
    while s_in / 2.0**lift > GELU_LIFT_SCALE:
        lift += 1
    return lift


def _gelu_prepare(ctx: GeluContext) -> Params:
    lift = gelu_lift(ctx.s_in)
    if ctx.in_bits - 1 + lift > 31:
        raise ValueError(f"I-BERT GELU: in_bits {ctx.in_bits} lifted by {lift} exceeds 32 bits")
    k = gelu_constants(ctx.s_in / 2.0**lift)
    m, e = frexp31(_fixed_point_scale(k["scale"], ctx.s_out))
    return {
        "b_int": k["b_int"],
        "c_int": k["c_int"],
        "one_int": k["one_int"],
        "lift": lift,
        "multiplier": m,
        "shift": e,
        "in_bits": ctx.in_bits,
        "out_bits": ctx.out_bits,
    }


def _gelu_kernel(x: np.ndarray, p: Params) -> np.ndarray:
    x = np.asarray(x, dtype=np.int64) << int(p["lift"])  # |x| < 2^(in_bits - 1 + lift) <= 2^31
    y = ibert_gelu_int(x, int(p["b_int"]), int(p["c_int"]), int(p["one_int"]))
    return ibert_requant(y, int(p["multiplier"]), int(p["shift"]), int(p["out_bits"]))


def _gelu_ref(x, p: Params):
    b, c, o = int(p["b_int"]), int(p["c_int"]), int(p["one_int"])
    m, e, bits = int(p["multiplier"]), int(p["shift"]), int(p["out_bits"])
    lift = int(p["lift"])
    flat = [
        ibert_requant_ref(ibert_gelu_int_ref(int(v) << lift, b, c, o), m, e, bits) for v in np.asarray(x).reshape(-1)
    ]
    return np.array(flat, dtype=np.int64).reshape(np.shape(x)).tolist()


# ----------------------------------------------------------------------------------------------
# softmax (paper Algorithms 1 and 3: i-exp; section 3.5)


def softmax_constants(s: float, out_bits: int, act_x_max: float | None = None) -> dict:
    """The integers of I-BERT's softmax at input scale ``s`` (float64 as IntSoftmax does them).

    ``x0 = floor(-0.6931 / s)``; ``b = floor(b' / s)``, ``c = floor(c' / s^2)`` (b' = 0.96963238 /
    0.35815147, c' = 1 / 0.35815147); ``S_exp = 0.35815147 * s^2 / 2^30`` = ``P / 2^K`` exactly
    (P odd or 0, from the float64's integer ratio).

    The QuantAct(16) of exp: transformers passes the *integer* exp to QuantAct together with its
    scale, so QuantAct first forms ``z = round(exp / S_exp)`` and its range ``x_max`` (what training
    calibrates) is in exp-integer units. Its deterministic setting here: ``x_min = 0``, ``x_max =
    act_x_max``, default ``c * 2^30`` (the exp integer at x = max, the value the training EMA
    converges to), so ``S_act = x_max / 32767`` and the fixed-point pair is ``(M, E) =
    batch_frexp(S_exp / float32(S_act))``. Requires ``c >= 1`` (s < 1.67) and s >= 2^-15.
    """
    s = float(s)
    s2 = s * s
    x0_int = math.floor(EXP_X0 / s)
    b_int = math.floor(EXP_B / s)
    c_int = math.floor(EXP_C / s2)
    if c_int < 1:
        raise ValueError(f"I-BERT softmax needs s_in < 1.67 (c = floor(2.79 / s^2) = 0 at s = {s})")
    s_exp = EXP_A * s2 / float(2**EXP_N)
    num, den = s_exp.as_integer_ratio()
    x_max = float(c_int * 2**EXP_N) if act_x_max is None else float(act_x_max)
    s_act = max(abs(x_max), 1e-8) / (2 ** (EXP_ACT_BITS - 1) - 1)
    m, e = frexp31(_fixed_point_scale(s_exp, s_act))
    return {
        "x0_int": int(x0_int),
        "b_int": int(b_int),
        "c_int": int(c_int),
        "exp_num": int(num),
        "exp_den_log2": int(den).bit_length() - 1,
        "act_multiplier": m,
        "act_shift": e,
        "out_bits": int(out_bits),
    }


def ibert_exp_ref(x: int, x0: int, b: int, c: int, trace: dict | None = None) -> int:
    """i-exp of one integer ``x <= 0`` (Algorithms 1, 3): ``x = max(x, 30 x0)``, ``q = floor(x / x0)``,
    ``r = x - x0 q`` in ``(x0, 0]``, ``poly = r (r + b) + c``, ``exp = max(poly * 2^(30 - q), 0)``."""
    x = max(x, EXP_N * x0)
    q = x // x0
    r = x - x0 * q
    poly = (r + b) * r + c
    e = max(poly << (EXP_N - q), 0)
    if trace is not None:
        for k, v in (("x", x), ("q", q), ("r", r), ("poly", poly), ("exp", e)):
            trace[k] = max(trace.get(k, 0), abs(v))
    return e


def ibert_exp16_ref(exp: int, k: dict, trace: dict | None = None) -> int:
    """The QuantAct(16) of one exp integer: ``z = round_half_even(exp * 2^K / P)`` (= exp / S_exp),
    ``e16 = clamp(round_half_even(z * M / 2^E), -2^15, 2^15 - 1)``."""
    num, k_log2 = int(k["exp_num"]), int(k["exp_den_log2"])
    z = _rhe_div(exp << k_log2, num)
    e16 = ibert_requant_ref(z, int(k["act_multiplier"]), int(k["act_shift"]), EXP_ACT_BITS)
    if trace is not None:
        trace["z"] = max(trace.get("z", 0), abs(z))
        trace["e16"] = max(trace.get("e16", 0), abs(e16))
    return e16


def ibert_softmax_int_ref(row: list[int], k: dict, trace: dict | None = None) -> list[int]:
    """I-BERT's softmax of one row of integers: i-exp of ``x - max``, QuantAct(16), then
    ``factor = floor(2^32 / sum)``, ``p = floor(e16 * factor / 2^(32 - out_bits))`` in [0, 2^out_bits]
    (2^out_bits, i.e. 1.0, when one e16 is a power of two and the rest are 0)."""
    xm = max(row)
    e16 = [ibert_exp16_ref(ibert_exp_ref(v - xm, k["x0_int"], k["b_int"], k["c_int"], trace), k, trace) for v in row]
    total = sum(e16)
    factor = (1 << SOFTMAX_MAX_BIT) // total
    shift = SOFTMAX_MAX_BIT - int(k["out_bits"])
    out = [(v * factor) >> shift for v in e16]
    if trace is not None:
        for name, v in (("sum", total), ("factor", factor), ("prod", max(v * factor for v in e16))):
            trace[name] = max(trace.get(name, 0), v)
    return out


def ibert_softmax_int(x: np.ndarray, k: dict) -> np.ndarray:
    """I-BERT's softmax over the last axis; returns I-BERT's own codes in [0, 2^out_bits].

    Widths (s in [2^-15, 1.67), N <= 2^16): ``x - max`` in ``[-2^(in_bits+1), 0]`` then clamped to
    ``>= 30 x0``, ``|x0| <= 0.6931 / s + 1 < 2^15``; ``q`` in [0, 30]; ``r`` in ``(x0, 0]``;
    ``poly <= c <= 2.7921 / s^2 < 2^32``; ``exp <= c * 2^30 < 2^62`` (int64); ``z = exp / S_exp``
    up to ``2^30 c^2 / 0.358 ~ 2^95``: Python ints (object array) for this step and ``z * M``;
    ``e16`` in ``[0, 2^15 - 1]``; ``sum < N * 2^15 <= 2^31``; ``factor <= 2^32``;
    ``e16 * factor <= 2^32`` (as ``e16 <= sum``) and ``p <= 2^out_bits``.
    """
    e16 = ibert_softmax_e16(x, k)
    factor = (np.int64(1) << SOFTMAX_MAX_BIT) // e16.sum(axis=-1, keepdims=True)
    return (e16 * factor) >> (SOFTMAX_MAX_BIT - int(k["out_bits"]))


def ibert_exp(x: np.ndarray, x0: int, b: int, c: int) -> np.ndarray:
    """``ibert_exp_ref`` vectorized over int64 ``x <= 0`` (the bounds of ``ibert_softmax_int``)."""
    xs = np.maximum(x, EXP_N * x0)
    q = xs // x0
    r = xs - x0 * q
    poly = (r + b) * r + c
    return np.maximum(poly << (EXP_N - q), 0)


def ibert_softmax_e16(x: np.ndarray, k: dict) -> np.ndarray:
    """The first half of ``ibert_softmax_int``: i-exp of ``x - max`` and its QuantAct(16), ``e16``."""
    x = np.asarray(x, dtype=np.int64)
    exp = ibert_exp(x - x.max(axis=-1, keepdims=True), int(k["x0_int"]), int(k["b_int"]), int(k["c_int"]))
    num, k_log2 = int(k["exp_num"]), int(k["exp_den_log2"])
    m, e = int(k["act_multiplier"]), int(k["act_shift"])
    cache: dict[int, int] = {}
    flat = exp.reshape(-1).tolist()
    e16 = np.empty(len(flat), dtype=np.int64)
    for i, v in enumerate(flat):  # the wide step, on Python ints (one per distinct exp value)
        got = cache.get(v)
        if got is None:
            got = cache[v] = ibert_requant_ref(_rhe_div(v << k_log2, num), m, e, EXP_ACT_BITS)
        e16[i] = got
    return e16.reshape(x.shape)


def _softmax_prepare(ctx: SoftmaxContext) -> Params:
    if not 1 <= ctx.out_bits <= 16:
        raise ValueError(f"I-BERT softmax supports out_bits 1..16, not {ctx.out_bits}")
    return {**softmax_constants(ctx.s_in, ctx.out_bits), "in_bits": ctx.in_bits}


def _softmax_kernel(x: np.ndarray, p: Params) -> np.ndarray:
    # I-BERT can emit 2^out_bits (exactly 1.0); hwvit's output is unsigned out_bits: saturate.
    return np.minimum(ibert_softmax_int(x, p), (1 << int(p["out_bits"])) - 1)


def _softmax_ref(x, p: Params):
    top = (1 << int(p["out_bits"])) - 1
    rows = np.asarray(x).reshape(-1, np.shape(x)[-1]).tolist()
    out = [[min(v, top) for v in ibert_softmax_int_ref([int(t) for t in row], p)] for row in rows]
    return np.array(out, dtype=np.int64).reshape(np.shape(x)).tolist()


# ----------------------------------------------------------------------------------------------
# LayerNorm (paper section 3.6, Algorithm 4: integer square root)


def isqrt_ibert(n: int) -> int:
    """Algorithm 4 (I-SQRT): ``x0 = 2^ceil(bits(n) / 2)``, ``x_{i+1} = floor((x_i + floor(n / x_i)) / 2)``
    until ``x_{i+1} >= x_i``; returns ``floor(sqrt(n))`` (what IntLayerNorm's ``floor(sqrt(var))``
    computes in floating point)."""
    if n <= 0:
        return 0
    x = 1 << ((n.bit_length() + 1) // 2)
    while True:
        nxt = (x + n // x) >> 1
        if nxt >= x:
            return x
        x = nxt


def isqrt_ibert_np(n: np.ndarray) -> np.ndarray:
    """Vectorized Algorithm 4 on int64 ``0 <= n < 2^62``: every lane iterates until its fixed point."""
    n = np.asarray(n, dtype=np.int64)
    bits = np.zeros(n.shape, dtype=np.int64)
    v = n.copy()
    for step in (32, 16, 8, 4, 2, 1):
        big = v >= (np.int64(1) << step)
        bits += np.where(big, step, 0)
        v = np.where(big, v >> step, v)
    bits += (v > 0).astype(np.int64)  # bit_length
    x = np.left_shift(np.int64(1), (bits + 1) // 2)
    done = n <= 0
    while not done.all():
        nxt = (x + n // np.maximum(x, 1)) >> 1
        stop = nxt >= x
        done = done | stop
        x = np.where(done, x, nxt)
    return np.where(n <= 0, 0, x)


def layernorm_shift(c: int, in_bits: int) -> int:
    """I-BERT's overflow shift (``set_shift``: ``ceil(log2(sqrt(var / 2^32)))``) for the worst row of
    ``in_bits`` codes: ``var <= C * (2^in_bits - 1)^2``; the smallest ``t >= 0`` with
    ``var_max <= 2^32 * 4^t``."""
    worst = c * ((1 << in_bits) - 1) ** 2
    t = 0
    while worst > (1 << (LN_MAX_BIT + 2 * t)):
        t += 1
    return t


def layernorm_constants(gamma: np.ndarray, beta: np.ndarray, c: int) -> dict:
    """gamma/beta as IntLayerNorm holds them: ``dim_sqrt = float32(sqrt(float32(C)))``;
    ``S_n = dim_sqrt / 2^30``; ``bias_int = floor((beta / gamma) / S_n)`` (float64);
    the output scale per channel ``S_n * gamma``. gamma must be nonzero."""
    gamma = np.asarray(gamma, dtype=np.float64)
    beta = np.asarray(beta, dtype=np.float64)
    if np.any(gamma == 0):
        raise ValueError("I-BERT LayerNorm divides beta by gamma: gamma must be nonzero")
    dim_sqrt = float(np.sqrt(np.float32(c)))
    s_norm = dim_sqrt / float(2**30)
    bias_int = np.floor((beta / gamma) / s_norm).astype(np.int64)
    return {"bias_int": bias_int, "scale": s_norm * gamma}


def ibert_layernorm_int_ref(row: list[int], bias_int: list[int], shift: int, trace: dict | None = None) -> list[int]:
    """I-BERT's LayerNorm of one row of integers:
    ``mean = round_half_even(sum x / C)``, ``y = x - mean``, ``var = sum floor(y / 2^t)^2``,
    ``std = isqrt(var) * 2^t``, ``factor = floor(2^31 / std)``, ``out = floor(y * factor / 2) + bias_int``.

    ``std = 0`` (a constant row) is taken as 1: there transformers divides by zero (inf / NaN); here
    ``y = 0`` (for t = 0) and the output is ``bias_int``.
    """
    n = len(row)
    mean = _rhe_div(sum(row), n)
    y = [v - mean for v in row]
    var = sum((v >> shift) ** 2 for v in y)
    std = max(isqrt_ibert(var) << shift, 1)
    factor = (1 << 31) // std
    out = [((v * factor) >> 1) + b for v, b in zip(y, bias_int, strict=True)]
    if trace is not None:
        for name, v in (
            ("mean", abs(mean)),
            ("y", max(abs(v) for v in y)),
            ("var", var),
            ("std", std),
            ("factor", factor),
            ("prod", max(abs(v * factor) for v in y)),
            ("out", max(abs(v) for v in out)),
        ):
            trace[name] = max(trace.get(name, 0), v)
    return out


def ibert_layernorm_int(x: np.ndarray, bias_int: np.ndarray, shift: int) -> np.ndarray:
    """I-BERT's LayerNorm over the last axis, int64.

    Widths (``|x| < 2^31``, C <= 2^16, t from I-BERT's rule ``var(y) <= 2^32 4^t``): ``|sum x| < 2^47``;
    ``|mean|, |y| < 2^32``; ``var = sum floor(y / 2^t)^2 < 2^34`` (the floors of negatives add at most
    ``2 var(y) / 4^t + 2C``); ``std < 2^(17 + t)``; ``factor <= 2^31``; ``|y * factor| < 3 * 2^31``
    (as ``|y| < 3 std``); ``|out| < 3 * 2^30 + |bias_int|``.
    """
    x = np.asarray(x, dtype=np.int64)
    n = x.shape[-1]
    total = x.sum(axis=-1, keepdims=True)
    q, r = np.divmod(total, n)
    mean = q + ((2 * r > n) | ((2 * r == n) & ((q & 1) == 1))).astype(np.int64)
    y = x - mean
    var = ((y >> shift) ** 2).sum(axis=-1, keepdims=True)
    std = np.maximum(isqrt_ibert_np(var) << shift, 1)
    factor = (np.int64(1) << 31) // std
    return ((y * factor) >> 1) + np.asarray(bias_int, dtype=np.int64)


def _layernorm_prepare(ctx: LayerNormContext) -> Params:
    c = len(ctx.gamma)
    k = layernorm_constants(ctx.gamma, ctx.beta, c)
    s32 = float(np.float32(ctx.s_out))
    pairs = [frexp31(float(sc) / s32) for sc in k["scale"]]
    return {
        "bias_int": k["bias_int"],
        "ln_shift": layernorm_shift(c, ctx.in_bits),
        "multiplier": np.array([m for m, _ in pairs], dtype=np.int64),
        "shift": np.array([e for _, e in pairs], dtype=np.int64),
        "out_bits": ctx.out_bits,
    }


def _layernorm_kernel(x: np.ndarray, p: Params) -> np.ndarray:
    y = ibert_layernorm_int(x, p["bias_int"], int(p["ln_shift"]))
    return ibert_requant(y, p["multiplier"], p["shift"], int(p["out_bits"]))


def _layernorm_ref(x, p: Params):
    bias = [int(v) for v in p["bias_int"]]
    ms, es = [int(v) for v in p["multiplier"]], [int(v) for v in p["shift"]]
    bits, t = int(p["out_bits"]), int(p["ln_shift"])
    out = []
    for row in np.asarray(x).reshape(-1, np.shape(x)[-1]).tolist():
        y = ibert_layernorm_int_ref([int(v) for v in row], bias, t)
        out.append([ibert_requant_ref(v, ms[j], es[j], bits) for j, v in enumerate(y)])
    return np.array(out, dtype=np.int64).reshape(np.shape(x)).tolist()


# ----------------------------------------------------------------------------------------------

_PAPER = "Kim et al., I-BERT: Integer-only BERT Quantization, ICML 2021"

VARIANTS = [
    Variant(
        "requant",
        "ibert",
        "QuantAct/FixedPointMul: clamp(round_half_even(acc * M / 2^E)), (M, E) = batch_frexp(scale), 31-bit M",
        f"{_PAPER}, section 3.1 (dyadic requantization); transformers ibert quant_modules FixedPointMul",
        _requant_prepare,
        _requant_kernel,
        _requant_ref,
        lambda ctx, p: float("nan"),  # the layer's output scale, set by its calibration
    ),
    Variant(
        "gelu",
        "ibert",
        "i-GELU: x * (erf_poly(x / sqrt 2) / 2^14 + 1), erf by the clipped 2nd-order polynomial; I-BERT requant",
        f"{_PAPER}, Algorithm 2 (i-GELU), eq. 16-17",
        _gelu_prepare,
        _gelu_kernel,
        _gelu_ref,
        lambda ctx, p: ctx.s_out,
    ),
    Variant(
        "softmax",
        "ibert",
        "i-exp (x0 = -ln 2, q/r, 2nd-order poly, 2^(30-q)), QuantAct(16), floor(2^32 / sum); saturated to 2^b - 1",
        f"{_PAPER}, Algorithms 1 and 3 (i-exp), section 3.5",
        _softmax_prepare,
        _softmax_kernel,
        _softmax_ref,
        lambda ctx, p: 1.0 / (1 << ctx.out_bits),
    ),
    Variant(
        "layernorm",
        "ibert",
        "integer mean/variance, Algorithm 4 isqrt, floor(2^31 / std), beta/gamma as bias; I-BERT requant",
        f"{_PAPER}, section 3.6 and Algorithm 4 (I-SQRT)",
        _layernorm_prepare,
        _layernorm_kernel,
        _layernorm_ref,
        lambda ctx, p: ctx.s_out,
    ),
]
