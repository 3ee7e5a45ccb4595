"""The core's instruction set: 32 fields of 32 bits per instruction (docs/core.md).

Field i is bits [32*i + 31 : 32*i] of the 1024-bit program word. The address generators of
rtl/vit_core_agu.v and rtl/vit_core_gemm.v are mirrored by ``Instr.addresses`` (the order in which
an instruction writes its outputs), which the mismatch search and the cycle model use.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

OP_END, OP_GEMM, OP_STREAM, OP_LOAD = 0, 1, 2, 3
U_COPY, U_GELU, U_ADD, U_SOFTMAX, U_LAYERNORM = 0, 1, 2, 3, 4
OP_NAMES = {OP_END: "end", OP_GEMM: "gemm", OP_STREAM: "stream", OP_LOAD: "load"}
UNIT_NAMES = {U_COPY: "copy", U_GELU: "gelu", U_ADD: "residual_add", U_SOFTMAX: "softmax", U_LAYERNORM: "layernorm"}
WORD_BITS = 1024
PRM_BITS = 72
MASK32 = (1 << 32) - 1


@dataclass
class Gen:
    """One address generator: base + sum_l i_l * stride_l (4 levels, level 0 innermost)."""

    base: int = 0
    strides: tuple[int, int, int, int] = (0, 0, 0, 0)


@dataclass
class Instr:
    op: int
    unit: int = 0
    a_signed: bool = True
    w_act: bool = False  # GEMM: w from the scratchpad
    n: tuple[int, int, int, int] = (1, 1, 1, 1)  # GEMM: (M, K, N, 1)
    a: Gen = field(default_factory=Gen)
    b: Gen = field(default_factory=Gen)
    d: Gen = field(default_factory=Gen)
    p_base: int = 0
    p_stride: int = 0
    mult_a: int = 0
    mult_b: int = 0
    shift: int = 0
    eps: int = 0
    # (za, zw, zy) of a GEMM, (za, zb, zy) of a residual_add: an imported model's zero points (signed
    # bytes in f27, read by a core built with ZERO_POINTS = 1)
    zeros: tuple[int, int, int] = (0, 0, 0)
    name: str = ""  # what it computes: the integer model's path (embed.proj, layers.0.attn.h1.qk, ...)
    check: dict | None = None  # {"value": trace path, "index": [...]} its output in the trace

    @property
    def kind(self) -> str:
        return UNIT_NAMES[self.unit] if self.op == OP_STREAM else OP_NAMES[self.op]

    def fields(self) -> list[int]:
        f = [0] * 32
        f[0] = self.op | (self.unit << 8) | (int(self.a_signed) << 16) | (int(self.w_act) << 17)
        f[1:5] = self.n
        for start, gen in ((5, self.a), (10, self.b), (15, self.d)):
            f[start] = gen.base
            f[start + 1 : start + 5] = gen.strides
        f[20], f[21] = self.p_base, self.p_stride
        f[22], f[23], f[24] = self.mult_a, self.mult_b, self.shift
        f[25], f[26] = self.eps & MASK32, self.eps >> 32
        if any(not -128 <= z <= 127 for z in self.zeros):
            raise ValueError(f"instruction {self.name or self.kind}: zero points {self.zeros} are not int8")
        f[27] = sum((int(z) & 0xFF) << (8 * i) for i, z in enumerate(self.zeros))
        for i, v in enumerate(f):
            if not 0 <= v <= MASK32:
                raise ValueError(f"instruction {self.name or self.kind}: field {i} = {v} does not fit 32 bits")
        return f

    def word(self) -> int:
        return sum(v << (32 * i) for i, v in enumerate(self.fields()))

    def elements(self) -> int:
        if self.op == OP_GEMM:
            return self.n[0] * self.n[2]
        return int(np.prod(self.n))

    def out_addresses(self) -> np.ndarray:
        """Scratchpad addresses of the outputs, in the order of the integer model's tensor (row-major)."""
        if self.op == OP_GEMM:
            m, _, n, _ = self.n
            rs, cs = self.d.strides[0], self.d.strides[1]
            return self.d.base + np.arange(m)[:, None] * rs + np.arange(n)[None, :] * cs
        return gen_addresses(self.n, self.d)

    def macs(self) -> int:
        return self.n[0] * self.n[1] * self.n[2] if self.op == OP_GEMM else 0


def gen_addresses(n, gen: Gen) -> np.ndarray:
    """All addresses of a 4-level generator, shaped (n3, n2, n1, n0)."""
    idx = np.ix_(*(np.arange(c) for c in reversed(n)))
    s = list(reversed(gen.strides))
    return gen.base + sum(i * st for i, st in zip(idx, s))


def end() -> Instr:
    return Instr(op=OP_END, name="end")


def prog_hex(program: list[Instr], depth: int) -> str:
    words = [ins.word() for ins in program] + [0] * (depth - len(program))
    return "".join(f"{w:0{WORD_BITS // 4}x}\n" for w in words)


def gemm_prm_word(bias: int, mult: int, shift: int) -> int:
    """{bias[31:0], M[30:0], 3'b0, s[5:0]}: one GEMM output channel's parameters."""
    return ((int(bias) & MASK32) << 40) | (int(mult) << 9) | int(shift)


def ln_prm_word(gamma: int, beta: int) -> int:
    """{beta[30:0], gamma[14:0]}: one LayerNorm channel (the table LOAD writes)."""
    return ((int(beta) & ((1 << 31) - 1)) << 15) | (int(gamma) & 0x7FFF)


def from_fields(f: list[int], name: str = "", check: dict | None = None) -> Instr:
    """Decode the 32 fields of a program word (the inverse of ``Instr.fields``)."""
    gens = [Gen(f[s], tuple(f[s + 1 : s + 5])) for s in (5, 10, 15)]
    return Instr(
        op=f[0] & 0xFF,
        unit=(f[0] >> 8) & 0xFF,
        a_signed=bool((f[0] >> 16) & 1),
        w_act=bool((f[0] >> 17) & 1),
        n=tuple(f[1:5]),
        a=gens[0],
        b=gens[1],
        d=gens[2],
        p_base=f[20],
        p_stride=f[21],
        mult_a=f[22],
        mult_b=f[23],
        shift=f[24],
        eps=f[25] | (f[26] << 32),
        zeros=tuple(((f[27] >> (8 * i)) & 0xFF) - (((f[27] >> (8 * i)) & 0x80) << 1) for i in range(3)),
        name=name,
        check=check,
    )


def word_fields(word: int) -> list[int]:
    return [(word >> (32 * i)) & MASK32 for i in range(32)]
