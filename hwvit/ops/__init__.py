"""hwvit.ops: the integer kernels, THE specification of every RTL block's arithmetic.

Every function takes integer arrays (numpy or torch), checks dtypes, shapes and value ranges,
computes exactly on int64 and returns numpy int64 arrays (with ``narrow=True`` the activation
kernels return the narrowest dtype holding their output width instead, as the integer forward
uses them; an int8 operand needs no range scan). docs/arithmetic.md states each
kernel's widths, rounding and saturation; ``hwvit.ops.reference`` holds slow plain-Python twins
used by the tests. Kernels share names with their Verilog twins: ``ops.<kind>`` <-> ``rtl/<kind>.v``
(requant, gemm, gelu, softmax, layernorm, residual_add, round_sat, divu, isqrt). Compositions of
them for speed (attention's heads in one call, a whole encoder block in one call) are
``hwvit.engine``'s.
"""

from __future__ import annotations

from hwvit.formats import Rounding
from hwvit.ops.divu import divu
from hwvit.ops.gelu import gelu
from hwvit.ops.gemm import gemm, gemm_zero, linear
from hwvit.ops.isqrt import isqrt
from hwvit.ops.layernorm import LN_F, LN_K, LN_T, layernorm
from hwvit.ops.pool import mean_pool
from hwvit.ops.requant import quantize, requant, requant_zero
from hwvit.ops.residual_add import QLINEAR_ADD, residual_add, residual_add_zp
from hwvit.ops.round_sat import round_sat, rshift_round, saturate
from hwvit.ops.softmax import softmax

__all__ = [
    "LN_F",
    "LN_K",
    "LN_T",
    "Rounding",
    "divu",
    "gelu",
    "gemm",
    "gemm_zero",
    "isqrt",
    "layernorm",
    "linear",
    "mean_pool",
    "quantize",
    "requant",
    "requant_zero",
    "residual_add",
    "residual_add_zp",
    "QLINEAR_ADD",
    "round_sat",
    "rshift_round",
    "saturate",
    "softmax",
]
