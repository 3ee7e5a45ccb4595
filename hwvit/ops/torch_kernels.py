"""The hwvit.ops kernels as torch integer ops, for any torch device (CUDA above all).

Each function computes, on int64 tensors, exactly the formula of docs/arithmetic.md that the numba
path (``hwvit.ops._jit``) computes; tests hold the two equal on CPU (``device='cpu'`` through
this same code) and, where a GPU is present, on CUDA. Like ``_jit``, these trust their inputs'
ranges (the integer model produces them); the one check kept is the int32 range of requant's
accumulator, which is data dependent.

GEMM: 2-D products run through ``torch._int_mm`` (int8 x int8 -> int32), zero-padded to the
shapes its CUDA kernel accepts (M > 16, K and N multiples of 8: zero rows and columns add
nothing). Batched products (attention: every head of every image) run as one float64 ``bmm``:
``|a*w| <= 2^14`` and K <= 2^39 keep every partial sum an integer below 2^53, exact in float64
(float64 has no TF32 mode), and one batched call beats thousands of small ``_int_mm`` launches.
"""

from __future__ import annotations

import os

import torch

I64 = torch.int64
# "1": torch.compile the elementwise kernels on CUDA: faster than eager (docs/figures.md), logits
# and every traced point bit-identical; opt-in because tests/test_device_forward.py fails under
# -m gpu when it runs after other compiled tests in one process (each passes alone; cause unknown).
COMPILE_ENV = "HWVIT_TORCH_COMPILE"


def _fused(fn):
    """``fn`` as is; on CUDA with HWVIT_TORCH_COMPILE=1 through torch.compile (its chain of int64
    elementwise ops becomes one or two kernels instead of one memory pass each).
    Integer ops compile to the same integer ops;
    the gpu tests hold the compiled kernels equal to the numba path."""
    compiled = None

    def run(first, *args):
        nonlocal compiled
        if first.device.type != "cuda" or os.environ.get(COMPILE_ENV, "0") != "1":
            return fn(first, *args)
        if compiled is None:
            compiled = torch.compile(fn, dynamic=None)
        return compiled(first, *args)

    run.__wrapped__ = fn
    return run


def _scalar(v, like: torch.Tensor) -> torch.Tensor:
    """A per-tensor parameter as a tensor on ``like``'s device (compiled kernels then serve every layer)."""
    return v if torch.is_tensor(v) else torch.tensor(int(v), dtype=I64, device=like.device)


def _round_shift(v: torch.Tensor, s) -> torch.Tensor:
    """(v + 2^(s-1)) >> s, or v where s = 0 (round half up); s a scalar or a broadcastable tensor."""
    if not torch.is_tensor(s):
        return (v + (1 << (s - 1))) >> s if s > 0 else v
    half = torch.where(s > 0, torch.ones_like(s) << (s - 1).clamp(min=0), torch.zeros_like(s))
    return (v + half) >> s


def _pad_to(x: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    if x.shape == (rows, cols):
        return x
    return torch.nn.functional.pad(x, (0, cols - x.shape[1], 0, rows - x.shape[0]))


def _ceil8(n: int) -> int:
    return -(-n // 8) * 8


def int8_matmul(a8: torch.Tensor, w8: torch.Tensor) -> torch.Tensor:
    """Exact int64 ``a8 @ w8^T``: int8 (M, K) x (N, K), or per entry of (B, M, K) x (B, N, K)."""
    if a8.ndim == 3:  # float64 bmm: exact (bound above)
        return torch.bmm(a8.double(), w8.double().transpose(1, 2)).to(I64)
    m, k = a8.shape
    n = w8.shape[0]
    if m == 0 or n == 0:
        return torch.zeros((m, n), dtype=I64, device=a8.device)
    mp, kp, np_ = max(17, _ceil8(m)), _ceil8(max(k, 8)), _ceil8(n)
    # After the padding no dimension has size 1 (mp >= 17, kp and np_ >= 8), and .contiguous()
    # copies any other stride torch would hand _int_mm as it is (a broadcast's 0): torch 2.13's CPU
    # _int_mm on a Zen 4 is wrong for stride-0 operands (docs/arithmetic.md, "Operand layouts").
    acc = torch._int_mm(_pad_to(a8, mp, kp).contiguous(), _pad_to(w8, np_, kp).contiguous().t())
    return acc[:m, :n].to(I64)


def gemm(
    a: torch.Tensor,
    w: torch.Tensor,
    bias: torch.Tensor | None = None,
    a_signed: bool = True,
) -> torch.Tensor:
    """``bias + a @ w^T`` as int64: a (..., M, K) signed or unsigned 8 bit, w (N, K) or (B, N, K)."""
    offset = 0 if a_signed else 128  # unsigned a: a*w = (a-128)*w + 128*w
    a8 = (a - offset).to(torch.int8) if offset else a.to(torch.int8)
    w8 = w.to(torch.int8)
    k = w8.shape[-1]
    if w8.ndim == 3:
        acc = int8_matmul(a8, w8)
        if offset:
            acc = acc + offset * w8.to(I64).sum(-1)[:, None, :]
    else:
        acc = int8_matmul(a8.reshape(-1, k), w8).reshape(*a8.shape[:-1], w8.shape[0])
        if offset:
            acc = acc + offset * w8.to(I64).sum(-1)
    return acc if bias is None else acc + bias


class Checks:
    """Data-dependent range checks, kept on the device and read once (one sync per forward, not per kernel).

    ``None`` in place of a Checks object: each kernel checks (and synchronizes) at once."""

    def __init__(self):
        self.flags: list[tuple[torch.Tensor, str]] = []

    def add(self, bad: torch.Tensor, message: str) -> None:
        self.flags.append((bad, message))

    def raise_if_any(self) -> None:
        """Raise the first failed check's error (ValueError, or OverflowError for LayerNorm's bound)."""
        flags, self.flags = self.flags, []
        if not flags:
            return
        for hit, (_, message) in zip(torch.stack([f for f, _ in flags]).cpu().tolist(), flags, strict=True):
            if hit:
                raise _error(message)


def _check(checks, bad: torch.Tensor, message: str) -> None:
    if checks is None:
        if bool(bad):
            raise _error(message)
    else:
        checks.add(bad, message)


def _error(message: str) -> Exception:
    return OverflowError(message) if message.startswith("layernorm") else ValueError(message)


@_fused
def _requant(acc, mult, shift, lo: int, hi: int):
    bad = (acc.min() < -(1 << 31)) | (acc.max() >= 1 << 31)
    return _round_shift(acc * mult, shift).clamp(lo, hi), bad


def requant(acc: torch.Tensor, mult, shift, out_bits: int = 8, checks: Checks | None = None) -> torch.Tensor:
    """``sat_out(rshift_round(acc * M, s))``, M and s scalars or per last-axis channel tensors."""
    lo, hi = -(1 << (out_bits - 1)), (1 << (out_bits - 1)) - 1
    if acc.numel() == 0:
        return acc.clone()
    out, bad = _requant(acc, _scalar(mult, acc), _scalar(shift, acc), lo, hi)
    _check(checks, bad, f"acc: values must lie in [{-(1 << 31)}, {(1 << 31) - 1}]")
    return out


@_fused
def _residual(a, b, mult_a, mult_b, shift, lo: int, hi: int):
    return _round_shift(a * mult_a + b * mult_b, shift).clamp(lo, hi)


def residual_add(a: torch.Tensor, b: torch.Tensor, mult_a, mult_b, shift, out_bits: int = 8) -> torch.Tensor:
    lo, hi = -(1 << (out_bits - 1)), (1 << (out_bits - 1)) - 1
    return _residual(a, b, _scalar(mult_a, a), _scalar(mult_b, a), _scalar(shift, a), lo, hi)


def gelu(x: torch.Tensor, table: torch.Tensor, in_bits: int = 8) -> torch.Tensor:
    return table[x + (1 << (in_bits - 1))]


@_fused
def _softmax(x, table, out_bits: int, exp: str, exp_mult, exp_frac: int, shift_frac: int):
    recip_shift = exp_frac + 17
    q = (1 << out_bits) - 1
    d = x.max(dim=-1, keepdim=True).values - x
    if exp == "shift":  # I-ViT shift-and-add: (2^23 - (r << 6)) >> q, 0 when q > 23
        t = d * exp_mult
        qq = t >> shift_frac
        r = t & ((1 << shift_frac) - 1)
        e = ((1 << exp_frac) - (r << (exp_frac - shift_frac - 1))) >> qq.clamp(max=exp_frac + 1)
        e = torch.where(qq >= exp_frac + 1, torch.zeros_like(e), e)
    else:
        length = table.shape[0]
        e = torch.where(d < length, table[d.clamp(max=length - 1)], torch.zeros_like(d))
    total = e.sum(dim=-1, keepdim=True)
    recip = torch.div((q << recip_shift) + (total >> 1), total, rounding_mode="floor")
    cum = (e.cumsum(dim=-1) * recip + (1 << (recip_shift - 1))) >> recip_shift
    return torch.diff(cum, dim=-1, prepend=torch.zeros_like(cum[..., :1]))


def softmax(
    x: torch.Tensor,
    table: torch.Tensor,
    out_bits: int = 8,
    exp: str = "table",
    exp_mult: int | None = None,
    exp_frac: int = 23,
    shift_frac: int = 16,
) -> torch.Tensor:
    """Rows along the last axis: E = T[max - x] (0 past the table), one rounded reciprocal per row,
    probabilities as differences of the rounded cumulative sums (each row sums to 2^out_bits - 1)."""
    if table is None:
        table = torch.ones(1, dtype=I64, device=x.device)
    mult = _scalar(exp_mult if exp_mult is not None else 0, x)
    return _softmax(x, table, out_bits, exp, mult, exp_frac, shift_frac)


def isqrt(n: torch.Tensor) -> torch.Tensor:
    """floor(sqrt(n)) for int64 0 <= n < 2^62: a float64 estimate (off by at most 1), corrected."""
    r = torch.sqrt(n.double()).floor().to(I64)
    for _ in range(2):
        r = r - (r * r > n).to(I64)
        r = r + ((r + 1) * (r + 1) <= n).to(I64)
    return r


@_fused
def _layernorm(
    x,
    gamma,
    beta,
    eps_int,
    mult,
    shift,
    lo: int,
    hi: int,
    t_bits: int,
    k_bits: int,
    f_bits: int,
):
    c = x.shape[-1]
    sx = x.sum(dim=-1, keepdim=True)
    sxx = (x * x).sum(dim=-1, keepdim=True)
    ve = ((c * sxx - sx * sx) << (2 * t_bits)) + eps_int
    bad = ve.max() >= 1 << 62
    sig = isqrt(ve)
    inv = torch.where(
        sig > 0,
        torch.div((1 << k_bits) + (sig >> 1), sig.clamp(min=1), rounding_mode="floor"),
        torch.zeros_like(sig),
    )
    sh = k_bits - t_bits - f_bits
    y = ((c * x - sx) * inv + (1 << (sh - 1))) >> sh
    return _round_shift((y * gamma + beta) * mult, shift).clamp(lo, hi), bad


def layernorm(
    x: torch.Tensor,
    gamma: torch.Tensor,
    beta: torch.Tensor,
    eps_int: int,
    mult: int,
    shift: int,
    out_bits: int = 8,
    t_bits: int = 11,
    k_bits: int = 43,
    f_bits: int = 10,
    checks: Checks | None = None,
) -> torch.Tensor:
    """Along the last axis: exact sums, one isqrt and one rounded division per row, y*G + B, requant."""
    lo, hi = -(1 << (out_bits - 1)), (1 << (out_bits - 1)) - 1
    if x.numel() == 0:
        return x.clone()
    out, bad = _layernorm(
        x,
        gamma,
        beta,
        _scalar(eps_int, x),
        _scalar(mult, x),
        _scalar(shift, x),
        lo,
        hi,
        t_bits,
        k_bits,
        f_bits,
    )
    _check(checks, bad, "layernorm: (V << 22) + eps_int >= 2^62")
    return out


def mean_pool(
    x: torch.Tensor,
    mult: int,
    shift: int,
    out_bits: int,
    dim: int = 1,
    checks: Checks | None = None,
) -> torch.Tensor:
    return requant(x.sum(dim=dim), mult, shift, out_bits, checks)


def quantize(x: torch.Tensor, scale: float, bits: int = 8) -> torch.Tensor:
    """``sat_bits(round_half_away(x / scale))`` in float64, the same IEEE operations as ops.quantize
    (float64 division and trunc are exact-rounded on CPU and CUDA alike). Inputs must be finite."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    v = (x.double() / float(scale)).clamp(lo - 1, hi + 1)
    whole = torch.trunc(v)
    q = whole + torch.where((v - whole).abs() >= 0.5, torch.sign(v), torch.zeros_like(v))
    return q.clamp(lo, hi).to(I64)
