"""What crosses from Python into hwvit's compiled code goes by name: no compiled function takes more
than eight parameters (the rest travel in the named records of hwvit.ops.records and
hwvit.engine.compiled), and no source file of hwvit is longer than a reader can hold."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest
from numba.core.dispatcher import Dispatcher

import hwvit

COMPILED = ("hwvit.ops._jit", "hwvit.ops.native", "hwvit.engine.compiled")
MAX_PARAMETERS = 8
MAX_LINES = 600


@pytest.mark.parametrize("module_name", COMPILED)
def test_no_compiled_function_takes_more_than_eight_parameters(module_name):
    module = importlib.import_module(module_name)
    compiled = {
        n: f for n, f in vars(module).items() if isinstance(f, Dispatcher) and f.py_func.__module__ == module_name
    }
    assert compiled, module_name  # the module's own numba functions were found
    wide = {n: len(inspect.signature(f.py_func).parameters) for n, f in compiled.items()}
    assert {n: k for n, k in wide.items() if k > MAX_PARAMETERS} == {}


def test_no_c_function_python_calls_takes_more_than_eight_parameters():
    """What Python calls in the C library through ctypes (argument types declared by native._load,
    the tests' own declarations included once they have run) takes at most 8 parameters; the wide C
    entry points are called from compiled code only (hw_linear, hw_pack_a_rows: native.pack_a_rows
    is the tests' way in, with a Strided record)."""
    from hwvit.ops import native

    if native.unavailable() is not None:
        pytest.fail(f"the C library does not load here: {native.unavailable()}")
    lib = native._load()
    declared = {n: f.argtypes for n, f in vars(lib).items() if n.startswith("hw_") and f.argtypes is not None}
    assert "hw_pack_w_strided" in declared  # the declarations were found
    assert {n: len(a) for n, a in declared.items() if len(a) > MAX_PARAMETERS} == {}


def test_no_source_file_of_hwvit_is_over_600_lines():
    root = Path(hwvit.__file__).parent
    files = [*root.rglob("*.py"), *root.rglob("*.c"), *root.rglob("*.h")]
    lines = {str(p.relative_to(root.parent)): len(p.read_text().splitlines()) for p in files}
    assert len(lines) > 100
    over = {p for p, n in lines.items() if n > MAX_LINES}
    assert over == set(), sorted(over)
