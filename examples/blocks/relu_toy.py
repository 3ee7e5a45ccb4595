"""A block kind kept outside hwvit: y = max(x, 0) on ``bits``-wide signed values.

The worked example of docs/blocks.md ("Adding a block kind"): this module and relu_toy.v beside it
are all a kind needs. Name the module in HWVIT_BLOCKS and every command knows the kind:

    HWVIT_BLOCKS=examples/blocks/relu_toy.py hwvit vectors-random relu_toy -o out/relu
    HWVIT_BLOCKS=examples/blocks/relu_toy.py hwvit sim out/relu --simulator icarus

It declares no testbench module, so hwvit drives it with the generic stream bench through its
reference ports (the bind file `hwvit bind template relu_toy` prints).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hwvit.blocks import BlockKind
from hwvit.byo.kinds import Field, Kind, bits_param
from hwvit.record import BlockRecord, Spec, make_record

# Manifest parameters: type and inclusive range.
PARAMS = {"bits": (int, (2, 32))}
# The tensors of a record: role, shape (a parameter or a free symbol), width, signedness.
CONTRACT = {
    "x": Spec("input", ("n",), "bits", True),
    "y": Spec("output", ("n",), "bits", True),
}


def relu(x: np.ndarray, bits: int) -> np.ndarray:
    """The exact kernel (numpy int64): every x must fit signed ``bits``."""
    x = np.asarray(x, dtype=np.int64)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if x.size and (x.min() < lo or x.max() > hi):
        raise ValueError(f"relu_toy: inputs outside signed {bits} bits")
    return np.maximum(x, 0)


def relu_ref(x: list[int]) -> list[int]:
    """The slow twin the tests hold the kernel to."""
    return [v if v > 0 else 0 for v in x]


def random_set(rng: np.random.Generator, cases: int, opts: dict[str, Any]) -> BlockRecord:
    """Edges first (both rails, -1, 0, 1), then uniform random values."""
    bits = int(opts["bits"])
    if not 2 <= bits <= 32:
        raise ValueError(f"bits must be an integer in [2, 32], got {bits!r}")
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    edges = np.array([lo, -1, 0, 1, hi], dtype=np.int64)
    x = np.concatenate([edges, rng.integers(lo, hi, max(0, cases - len(edges)), endpoint=True)])[:cases]
    return make_record("relu_toy", "random", {"bits": bits}, x=x, y=relu(x, bits))


def count_bins(params: dict[str, Any], inputs: dict, outputs: dict, limits: dict) -> dict[str, int]:
    x = inputs["x"].reshape(-1)
    return {"negative": int(np.count_nonzero(x < 0)), "zero": int(np.count_nonzero(x == 0))}


def operands(params: dict[str, Any], t: dict[str, np.ndarray], nd_index: list[int]) -> str:
    i = int(nd_index[0])
    return f"x[{i}] {int(t['x'][i])}"


PORTS = Kind(
    "relu_toy",
    inputs={"x": Field("x", bits_param("bits"), True, "input, bits signed")},
    output=("y", Field("y", bits_param("bits"), True, "max(x, 0), bits signed")),
    parameters={"BITS": "bits"},
    doc="y = max(x, 0)",
)

KIND = BlockKind(
    name="relu_toy",
    doc=PORTS.doc,
    seed=1000,  # any number no other kind uses: random sets seed from it
    kernel=relu,
    reference=relu_ref,
    params=PARAMS,
    contract=CONTRACT,
    random=random_set,
    defaults={"bits": 8},
    bins=("negative", "zero", "out_stall"),
    count_bins=count_bins,
    reset_states=(),
    rtl=(str(Path(__file__).with_name("relu_toy.v")),),
    operands=operands,
    ports=PORTS,
    reference_ports={"fields": {"x": "in_data_i"}, "out": "out_data_o"},
    synth={},
)
