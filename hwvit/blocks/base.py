"""What a block kind declares: ``BlockKind``, one per module of ``hwvit.blocks``.

A block kind is an arithmetic block with a Verilog twin. Its module (``hwvit/blocks/<kind>.py``)
declares ``KIND = BlockKind(...)`` with everything the rest of hwvit needs to know about it:

- arithmetic: ``kernel`` (the exact, fast ``hwvit.ops`` kernel) and ``reference`` (the slow,
  obviously correct one the tests hold it to);
- the vector-set contract: ``params`` (manifest parameters, typed and bounded), ``contract``
  (the tensors of a record: role, shape, width, signedness), ``lut`` (the tensor loaded as a
  table, if any) and ``check_params`` (cross-checks of the parameters);
- vectors: ``traced`` (the record of one call, as the integer model makes it), ``random`` (a
  random set with its edge cases), ``defaults`` and ``default_cases`` of `hwvit vectors-random`,
  and ``operands`` (the inputs that made one output element, for a mismatch line);
- coverage: ``bins`` (data bins, counted by ``count_bins``), ``reset_states`` (the states its
  reset test resets in) and ``seen_bins`` (other bins only the testbench can count);
- RTL: ``rtl`` (Verilog files, the block's own first, relative to the repository root or
  absolute), ``toplevel``, ``hdl_parameters`` (the toplevel's parameters for a set) and ``synth``
  (the parameters `hwvit synth` uses; None: not synthesized on its own); ``rtl_domain`` (where a
  set leaves what the Verilog computes exactly, in words: `hwvit sim` refuses such a set);
- the testbench: ``testbench``, a cocotb module (a path; the built-in kinds' are
  ``sim/test_<kind>.py``), or None for a streaming block, which the generic stream bench
  (``sim/byotb.py``) drives through ``ports`` and ``reference_ports``;
- mutation: ``mutate_parts`` (other files of the block `hwvit mutate --source` may mutate) and
  ``mutate_first`` (the tests a mutant runs first).

``seed`` numbers the kind for random sets (``numpy.random.default_rng([seed, kind.seed])``):
fixed per kind, so a set made with a seed is the same whatever other kinds exist.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ParamSpec = dict[str, tuple[type, tuple[int, int] | None]]


@dataclass(frozen=True)
class BlockKind:
    name: str
    doc: str
    seed: int
    kernel: Callable[..., Any]
    reference: Callable[..., Any]
    params: ParamSpec
    contract: dict[str, Any]  # tensor name -> hwvit.record.Spec
    random: Callable[[np.random.Generator, int, dict[str, Any]], Any]  # -> BlockRecord
    defaults: dict[str, Any]
    bins: tuple[str, ...]
    count_bins: Callable[..., dict[str, int]]  # (params, inputs, outputs, limits) -> counts of ``bins``
    reset_states: tuple[str, ...]
    rtl: tuple[str, ...]
    operands: Callable[[dict[str, Any], dict[str, np.ndarray], list[int]], str]
    traced: Callable[..., Any] | None = None  # -> BlockRecord of one call of the integer model
    toplevel: str = ""  # "" : the kind's name
    hdl_parameters: Callable[[Any], dict[str, int]] | None = None  # (VectorSet) -> parameters
    testbench: str | None = None  # cocotb module path; None: the generic stream bench
    lut: str | None = None
    check_params: Callable[[dict[str, Any]], str | None] | None = None  # the fault, in words, or None
    unit: bool = False  # lives inside other blocks: a traced model never records it on its own
    rows: str | None = None  # the parameter counting its vectors when a vector is a row
    shared: tuple[str, ...] = ()  # tensors every vector of a set shares (tables, weights)
    default_cases: int = 64
    seen_bins: tuple[str, ...] = ()
    ports: Any = None  # hwvit.byo.kinds.Kind: the streaming interface a bind file names
    reference_ports: dict[str, Any] | None = None  # the ports of its reference Verilog, for a bind
    synth: dict[str, int] | None = None
    mutate_parts: tuple[str, ...] = ()
    mutate_first: tuple[str, ...] = ()
    family: str = ""  # the block family whose arithmetic variants (hwvit.variants) it takes, if any
    variant: str = ""  # for a kind made for one variant: that variant's name
    verify: Callable[[Any], str | None] | None = None  # (VectorSet) -> a fault in words, or None: `hwvit check`
    rtl_domain: Callable[[Any], str | None] | None = None  # (VectorSet) -> where it leaves the Verilog's domain
    source: str = ""  # the file that declared it (set by the registry)

    @property
    def top(self) -> str:
        return self.toplevel or self.name

    def rtl_paths(self, root: Path) -> list[Path]:
        """The Verilog files as absolute paths (relative ones from ``root``, the repository)."""
        return [Path(p) if Path(p).is_absolute() else root / p for p in self.rtl]

    def parameters_for(self, vset) -> dict[str, int]:
        """The toplevel's parameters for a vector set: ``hdl_parameters``, or the reference parameters
        of its ``ports`` (each read from the set's manifest) with its fixed ones."""
        if self.hdl_parameters is not None:
            return dict(self.hdl_parameters(vset))
        if self.ports is None:
            return {}
        return {**{k: int(vset.params[v]) for k, v in self.ports.parameters.items()}, **self.ports.fixed}
