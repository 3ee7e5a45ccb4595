"""Work done once for inputs that cannot change: a layer's read-only weights and parameters.

A model's layers hand the same weight matrix, bias, multipliers and shifts to the kernels on every
forward. Checking them (ranges, shapes, the accumulator bound) and deriving what the kernels want
from them (packed or float copies, per-channel vectors) needs doing only once, if nothing can write
them in between: ``derived`` keeps the result for inputs that are read-only numpy arrays, all along
their chain of bases (``frozen``), or immutable scalars, while those arrays live. Anything else
(a writable array, a torch tensor, a list) is worked on again at every call.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

_cache: dict[tuple, tuple[tuple, Any]] = {}  # key -> (weak references to its arrays, the result)
_SCALARS = (int, float, str, bytes, np.integer, np.floating)


def frozen(x: Any) -> bool:
    """Whether no one can write ``x``'s memory: a numpy array read-only all along its chain of bases."""
    if not isinstance(x, np.ndarray):
        return False
    while isinstance(x, np.ndarray):
        if x.flags.writeable:
            return False
        x = x.base
    return x is None or isinstance(x, bytes)


def _part(x: Any) -> tuple | None:
    """The key of one input: its identity for a frozen array, its value for an immutable scalar or
    None; None where the input could change."""
    if x is None or isinstance(x, _SCALARS):  # bool is an int: its type name keeps True apart from 1
        return ("value", type(x).__name__, x)
    if isinstance(x, tuple):  # a shape, or a tuple of immutable scalars (no arrays: they need weakrefs)
        parts = tuple(None if isinstance(v, np.ndarray) else _part(v) for v in x)
        return None if any(p is None for p in parts) else ("tuple", parts)
    if frozen(x):
        return ("array", id(x), x.shape, x.dtype.str)
    return None


def read_only(x: Any) -> np.ndarray:
    """``x`` as an array no one can write: itself if it is ``frozen`` already, else a read-only copy."""
    if frozen(x):
        return x
    out = np.array(x)
    out.flags.writeable = False
    return out


def immutable(x: Any) -> bool:
    """Whether ``x`` cannot change: a ``frozen`` array, a scalar (int, float, str, bytes), None, or a
    tuple of these."""
    return _part(x) is not None


def derived(inputs: tuple, tag: Any, make: Callable[[], Any], otherwise: Callable[[], Any] | None = None) -> Any:
    """``make()``, kept for these ``inputs`` under ``tag`` when every input is immutable (and made
    afresh otherwise, or ``otherwise()`` in its place where given). An exception from ``make`` is
    raised every time: nothing is kept."""
    fresh = make if otherwise is None else otherwise
    # one pass, plain loops, no key objects beyond the tuple: this runs at every kernel call
    # (about 180 times a ViT-B/16 forward). An array's key is its identity, shape and dtype (a
    # read-only array's shape can be set in place); a scalar's its class and value (True is not 1).
    key = [tag]
    arrays = []
    for x in inputs:
        if isinstance(x, np.ndarray):
            if not frozen(x):
                return fresh()
            key.append((id(x), x.shape, x.dtype))
            arrays.append(x)
        elif x is None or isinstance(x, _SCALARS):
            key.append((x.__class__, x))
        else:
            p = _part(x)  # a tuple of scalars; anything else: None
            if p is None:
                return fresh()
            key.append(p)
    key = tuple(key)
    hit = _cache.get(key)
    if hit is not None and len(hit[0]) == len(arrays):
        for ref, x in zip(hit[0], arrays):
            if ref() is not x:
                break
        else:
            return hit[1]
    out = make()
    try:
        refs = tuple(weakref.ref(x, lambda _r, k=key, c=_cache: c.pop(k, None)) for x in arrays)
    except TypeError:
        return out
    _cache[key] = (refs, out)
    return out


def links(arrays) -> tuple:
    """Every numpy array along the chains of bases of ``arrays`` (``frozen`` ones, each once): what
    ``still`` checks. A chain's end and each array's base never change, so whether all of them are
    frozen again later is whether none of these arrays has been made writable since."""
    seen: dict[int, np.ndarray] = {}
    for x in arrays:
        while isinstance(x, np.ndarray):
            seen.setdefault(id(x), x)
            x = x.base
    return tuple(seen.values())


def still(linked: tuple) -> bool:
    """Whether the arrays of ``links(arrays)`` are all read-only still (``frozen``, as they were): one
    flag an array, for callers that keep what they made from many arrays between calls."""
    return not any(x.flags.writeable for x in linked)


def held(x: np.ndarray) -> bool:
    """Whether something derived from array ``x`` is kept (the tests ask)."""
    return any(any(r() is x for r in refs) for refs, _ in _cache.values())
