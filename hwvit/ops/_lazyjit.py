"""``hwvit.ops._jit`` imported on first use: the kernels need numba, which takes ~0.1 s to import,
and a process that only reads a vector set (every cocotb simulation does) never calls one."""

from __future__ import annotations

import importlib
from typing import Any


class _LazyJit:
    _module: Any = None

    def __getattr__(self, name: str) -> Any:
        module = _LazyJit._module
        if module is None:  # imported once; every kernel call asks again
            module = _LazyJit._module = importlib.import_module("hwvit.ops._jit")
        return getattr(module, name)


jit = _LazyJit()
