"""What a block arithmetic costs in logic: each variant's Verilog block synthesized by yosys
(hwvit.synth), for the sweep's Pareto of error against cells.

``block_of(family, name)`` names the block that computes a variant and its synthesis parameters:
softmax and LayerNorm variants are blocks of their own (``softmax_ibert``, ...); every elementwise
GELU variant is a table on rtl/gelu.v (the same cells, another table), a row GELU its own block
(``gelu_shiftgelu``); a requant rounding is a
parameter of rtl/requant.v (``hwvit.blocks.requant.rtl_rounding``: ROUNDING, WRAP). ``costs(rows)`` adds
``cells``, ``flip_flops``, ``longest_path`` and ``memory_bits`` to a sweep's variant rows (and the
baseline's, per family), each block synthesized once.
"""

from __future__ import annotations

from typing import Any

COST_KEYS = ("cells", "flip_flops", "longest_path", "memory_bits")


def block_of(family: str, name: str) -> tuple[str, dict[str, int]] | None:
    """(block kind, yosys parameters) of variant ``name`` of ``family``; None when no Verilog computes it."""
    from hwvit import blocks, variants

    if ":" in name:  # a team's own function: its block is theirs
        return None
    if family in ("softmax", "layernorm") or (family == "gelu" and variants.get(family, name).row):
        kind = family if variants.is_default(family, name) else f"{family}_{name}"
        spec = blocks.get(kind)
        return (kind, dict(spec.synth)) if spec.rtl and spec.synth is not None else None
    if family == "gelu":
        return "gelu", dict(blocks.get("gelu").synth or {})
    if family == "requant":
        from hwvit.blocks import requant

        try:
            params = requant.rtl_rounding(name)
        except ValueError:
            return None
        return "requant", {**dict(blocks.get("requant").synth or {}), **params}
    return None


def costs(rows: list[dict[str, Any]], families: tuple[str, ...], synth_block=None) -> dict[tuple[str, str], Any]:
    """Synthesize the block of every variant row (``factor`` a family, ``label`` the variant) and of
    the baseline's arithmetic of each family seen; add the cost keys to those rows. Returns
    {(family, name): SynthResult or None}."""
    from hwvit import synth, variants

    synth_block = synth_block or synth.synth_block
    wanted: dict[tuple[str, str], tuple[str, dict[str, int]] | None] = {}
    for r in rows:
        if r["factor"] in families:
            wanted[(r["factor"], r["label"])] = block_of(r["factor"], r["label"])
    for family in {f for f, _ in wanted}:
        default = next(n for n in variants.names(family) if variants.is_default(family, n))
        wanted.setdefault((family, default), block_of(family, default))
    done: dict[tuple[str, tuple], Any] = {}
    out: dict[tuple[str, str], Any] = {}
    for key, target in wanted.items():
        if target is None:
            out[key] = None
            continue
        block, params = target
        memo = (block, tuple(sorted(params.items())))
        if memo not in done:
            done[memo] = synth_block(block, params)
        out[key] = done[memo] if done[memo].ok else None
    for r in rows:
        res = out.get((r["factor"], r["label"]))
        for k in COST_KEYS:
            r[k] = getattr(res, k) if res is not None else None
    return out
