"""Design-space sweep: what each quantization choice costs in accuracy, and in hardware.

The default grid is one factor at a time around the int8 baseline of docs/arithmetic.md
(8-bit activations, 8-bit probabilities, 256-entry exp table, min/max calibration): each point
changes exactly one knob, so the difference to the baseline is that knob's price. A point
quantizes the float model with its QuantConfig (calibration included) and runs
hwvit.analysis.compare on the same evaluation images.

Hardware cost is given in the units an architect trades in: activation bits (multiplier width,
buffer width), probability bits, exp table entries and table bits (entries x 24-bit entries),
plus a one-line relative cost against the baseline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from hwvit.analysis.compare import compare
from hwvit.ops.softmax import EXP_FRAC
from hwvit.quant import QuantConfig, quantize_model

BASE = QuantConfig()  # the int8 design
VARIANT_FAMILIES = ("requant", "gelu", "softmax", "layernorm")  # knobs naming a block's arithmetic (hwvit.variants)
EXP_ENTRY_BITS = EXP_FRAC + 1  # each exp table entry is unsigned 24 bit, T[0] = 2^23 (docs/arithmetic.md)

# The default one-factor-at-a-time grid (the baseline value of each knob is the baseline point).
DEFAULT_AXES = {
    "act_bits": (6,),
    "softmax_bits": (4, 6),
    "exp": ("shift",),
    "exp_entries": (16, 32, 64, 128),
    "percentile": (99.9, 99.99),
}
# --quick: one step away from the baseline per knob (6 points instead of 11).
QUICK_AXES = {"act_bits": (6,), "softmax_bits": (4,), "exp": ("shift",), "exp_entries": (32,), "percentile": (99.9,)}

# CSV / table columns, in order.
COLUMNS = (
    "factor",
    "label",
    "act_bits",
    "softmax_bits",
    "exp",
    "exp_entries",
    "table_bits",
    "calibration",
    "percentile",
    "arithmetic",
    "images",
    "top1_float",
    "top1_int",
    "agreement",
    "logits_sqnr_db",
    "worst_point",
    "worst_sqnr_db",
    "probs_sqnr_db",
    "cost_bits",
    "pareto",
    "seconds",
    "cost_note",
)


@dataclass(frozen=True)
class GridPoint:
    """One configuration of a sweep: the knob it varies (``factor``), a short label and its QuantConfig."""

    factor: str  # "baseline", "act_bits", "softmax_bits", "exp", "exp_entries" or "calibration"
    label: str
    qconfig: QuantConfig


def one_factor_grid(axes: dict[str, tuple] | None = None, base: QuantConfig = BASE) -> list[GridPoint]:
    """The baseline, then one point per value in ``axes`` (knob -> values), each changing one knob.

    Knobs: ``act_bits``, ``softmax_bits`` (ints), ``exp`` ("table"/"shift"), ``exp_entries`` (table
    size), ``percentile`` (percentile calibration at that percentile), and a block family
    (``requant``, ``gelu``, ``softmax``, ``layernorm``: variant names of hwvit.variants). A value equal to the
    baseline's is skipped: the baseline point already measures it. ValueError on an unknown knob
    or a value QuantConfig refuses.
    """
    axes = DEFAULT_AXES if axes is None else axes
    points = [GridPoint("baseline", "int8 baseline", base)]
    seen = {_key(base)}
    for knob, values in axes.items():
        for v in values:
            if knob in ("act_bits", "softmax_bits"):
                qc, factor, label = _with(base, **{knob: int(v)}), knob, f"{int(v)} bit"
            elif knob == "exp":
                qc, factor, label = _with(base, exp=str(v)), "exp", str(v)
            elif knob == "exp_entries":
                qc, factor, label = _with(base, exp_entries=int(v)), "exp_entries", f"{int(v)} entries"
            elif knob in VARIANT_FAMILIES:  # a block's arithmetic (hwvit.variants)
                qc, factor, label = _with(base, **{knob: str(v)}), knob, str(v)
            elif knob == "percentile":
                qc, factor, label = (
                    _with(base, calibration="percentile", percentile=float(v)),
                    "calibration",
                    f"percentile {float(v):g}",
                )
            else:
                known = ", ".join((*DEFAULT_AXES, *VARIANT_FAMILIES))
                raise ValueError(f"unknown sweep knob {knob!r}; choose from {known}")
            if _key(qc) not in seen:
                seen.add(_key(qc))
                points.append(GridPoint(factor, label, qc))
    return points


def _with(base: QuantConfig, **changes) -> QuantConfig:
    return QuantConfig(**{**asdict(base), **changes})  # QuantConfig validates the values


def _key(qc: QuantConfig) -> tuple:
    d = asdict(qc)
    if d["calibration"] != "percentile":
        d["percentile"] = None  # the percentile is unused by min/max calibration
    return tuple(sorted(d.items()))


def effective_entries(qc: QuantConfig) -> int:
    """Exp table entries the arithmetic can read: 0 for shift-and-add; at most 2^act_bits (the largest x - max)."""
    if qc.exp == "shift":
        return 0
    return min(qc.exp_entries, 1 << qc.act_bits)


def table_entries(qc: QuantConfig) -> int:
    """Exp table entries the hardware holds (the configured size; 0 for shift-and-add). A narrower
    activation leaves entries beyond 2^act_bits unread but does not shrink the ROM: the act_bits
    row changes one knob only."""
    return 0 if qc.exp == "shift" else qc.exp_entries


def cost(qc: QuantConfig) -> dict:
    """Hardware cost columns of a configuration, and a note relative to the int8 baseline."""
    entries = table_entries(qc)
    bits = entries * EXP_ENTRY_BITS
    base_bits = table_entries(BASE) * EXP_ENTRY_BITS
    notes = []
    if qc.act_bits != BASE.act_bits:
        # An a x w array multiplier grows with a*w; weights stay int8.
        notes.append(
            f"GEMM multipliers {qc.act_bits}x8 bit = {qc.act_bits / BASE.act_bits:.2f}x area of 8x8, "
            f"activation buffers {qc.act_bits / BASE.act_bits:.2f}x"
        )
        if qc.exp == "table" and effective_entries(qc) < entries:
            notes.append(
                f"exp ROM unchanged ({entries} entries; only the first {effective_entries(qc)} are "
                "reachable at this width)"
            )
    if qc.softmax_bits != BASE.softmax_bits:
        notes.append(
            f"P.V multipliers {qc.softmax_bits}x{qc.act_bits} bit and probability buffer "
            f"= {qc.softmax_bits / BASE.softmax_bits:.2f}x of 8 bit"
        )
    if qc.exp == "shift":
        notes.append(
            f"no exp ROM (0 of {base_bits} bit): per element one multiply by a constant "
            f"(d x s_in log2(e) 2^16), a subtract and a 0-{EXP_ENTRY_BITS} position right shift"
        )
    elif bits != base_bits:
        notes.append(f"exp ROM {entries}x{EXP_ENTRY_BITS} = {bits} bit = {bits / base_bits:.3f}x of {base_bits} bit")
    if qc.calibration != BASE.calibration:
        notes.append("calibration is offline: no hardware cost")
    chosen = arithmetic(qc)
    if chosen != "hwvit":
        notes.append(f"arithmetic {chosen}: the block's own datapath in place of hwvit's (its cells: hwvit synth)")
    if not notes:
        notes.append(f"int8 baseline: 8x8 multipliers, exp ROM {entries}x{EXP_ENTRY_BITS} = {bits} bit")
    return {
        "act_bits": qc.act_bits,
        "softmax_bits": qc.softmax_bits,
        "exp": qc.exp,
        "exp_entries": entries,
        "table_bits": bits,
        "calibration": qc.calibration,
        "percentile": qc.percentile if qc.calibration == "percentile" else None,
        "arithmetic": chosen,
        "cost_note": "; ".join(notes),
    }


def arithmetic(qc: QuantConfig) -> str:
    """The block arithmetic a configuration chose where it is not hwvit's own ("softmax=ibert; ..."),
    else "hwvit"."""
    from hwvit import variants

    chosen = [f"{f}={getattr(qc, f)}" for f in VARIANT_FAMILIES if getattr(qc, f) != variants.DEFAULT[f]]
    return "; ".join(chosen) or "hwvit"


def sweep(
    source,
    grid: list[GridPoint] | None = None,
    *,
    images: int | None = None,
    calib_images: int = 256,
    seed: int = 0,
    threads: int | None = 1,
    progress: Callable[[int, int, dict], None] | None = None,
    data=None,
    recipe=None,
    client=None,
    front: str = "both",
) -> list[dict]:
    """Quantize ``source.model`` (a hwvit.pipeline.Source) with each grid point and compare it with the float model.

    Every point is calibrated on the same ``calib_images`` inputs and evaluated on the same
    ``images`` inputs (hwvit.pipeline: the digits held-out split, else seeded random inputs).
    Returns one row per grid point (keys: COLUMNS), in grid order. ``progress(i, n, row)`` is
    called after each point; ``front``: what the rows' ``pareto`` column weighs against cost
    (``pareto``). ``data`` (a hwvit.pipeline.Data) gives the user's calibration and
    evaluation data instead (``images`` and ``calib_images`` are then not used). ``client`` (a Dask
    client, hwvit.cluster): each point a task on its workers, the rows the same as here.

    ``threads``: torch intra-op threads during the sweep (restored afterwards; None keeps the
    caller's). The default is 1: a small model's tensors (digits: 17 tokens x 64) are too small to
    split, and more threads make a point several times slower on a busy machine. Large models want
    more threads.
    """
    import torch

    from hwvit import pipeline

    grid = one_factor_grid() if grid is None else list(grid)
    if not grid:
        raise ValueError("the sweep grid is empty")
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    saved = torch.get_num_threads()
    try:
        if threads is not None:
            torch.set_num_threads(threads)
        if data is not None:
            return _run(source, grid, data.calib, data.inputs, data.labels, progress, recipe, client, front)
        return _run(
            source,
            grid,
            pipeline.calibration_inputs(source, calib_images, seed=seed),
            *pipeline.eval_inputs(source, images, seed),
            progress,
            recipe,
            client,
            front,
        )
    finally:
        torch.set_num_threads(saved)


def storage_bits(layers: list[dict], images: int, act_bits: int, softmax_bits: int) -> int:
    """Bits x elements of every traced activation of one input (probabilities at softmax_bits; a
    row's own ``bits``, which compare records per point, where a recipe set it)."""
    total = 0
    for r in layers:
        if r["path"] == "input":
            continue
        width = r.get("bits") or (softmax_bits if r["path"].endswith(".probs") else act_bits)
        total += width * (r["elements"] // max(images, 1))
    return total


# What a Pareto front weighs against cost (--front): top-1 on a few dozen images moves in steps of
# several points and ties often, so the default asks the logits SQNR too.
FRONTS = {
    "both": "accuracy and logits SQNR",
    "top1": "accuracy",
    "sqnr": "logits SQNR",
}


def pareto(rows: list[dict], acc_key: str, front: str = "both") -> list[bool]:
    """Whether each row is on the Pareto front of cost_bits (lower better) against ``front``'s
    measures (higher better: ``acc_key``, the logits SQNR, or both): no other row costs no more and
    measures no worse on each, and is strictly better on one."""
    if front not in FRONTS:
        raise ValueError(f"unknown front {front!r}; choose from {', '.join(FRONTS)}")
    keys = {"both": (acc_key, "logits_sqnr_db"), "top1": (acc_key,), "sqnr": ("logits_sqnr_db",)}[front]

    def better_or_equal(o: dict, r: dict) -> bool | None:
        if any(o[k] is None or r[k] is None for k in keys):
            return None
        return o["cost_bits"] <= r["cost_bits"] and all(o[k] >= r[k] for k in keys)

    out = []
    for r in rows:
        dominated = any(
            o is not r and better_or_equal(o, r) and (o["cost_bits"] < r["cost_bits"] or any(o[k] > r[k] for k in keys))
            for o in rows
        )
        out.append(not dominated)
    return out


def point_row(
    model, name: str, calib, inputs, labels, base_recipe, point: GridPoint, onnx_path: str | None = None
) -> dict:
    """One grid point: quantize ``model`` with the point's knobs (calibration included) and compare
    it with the float model (a Dask task of ``hwvit sweep --cluster`` too: plain arguments only).
    ``onnx_path``: a quantized ONNX file, whose own integer model is built with the point's softmax
    and LayerNorm arithmetic (hwvit.onnx: every other knob is the file's)."""
    from dataclasses import replace

    from hwvit.pipeline import batch_size_for

    t0 = time.perf_counter()
    if onnx_path is not None:
        from hwvit.pipeline import load_quantized

        qc = point.qconfig
        int_model = load_quantized(onnx_path, softmax=qc.softmax, layernorm=qc.layernorm).int_model
    else:
        int_model = quantize_model(model, calib, recipe=replace(base_recipe, base=point.qconfig))
    res = compare(
        model,
        int_model,
        inputs,
        labels,
        name=name,
        isolated=False,
        batch_size=batch_size_for(model.cfg),
    )  # traces of a batch stay within 1 GB
    worst = res.worst_layer()
    probs = [r["sqnr_db"] for r in res.layers if r["path"].endswith(".attn.probs")]
    row = {
        "factor": point.factor,
        "label": point.label,
        **cost(point.qconfig),
        "images": res.images,
        "top1_float": res.top1_float,
        "top1_int": res.top1_int,
        "agreement": res.agreement,
        "logits_sqnr_db": res.logits_sqnr_db,
        "worst_point": worst["path"] if worst else None,
        "worst_sqnr_db": worst["sqnr_db"] if worst else None,
        "probs_sqnr_db": min(probs) if probs else None,  # the worst softmax output of all layers
        "cost_bits": storage_bits(res.layers, res.images, point.qconfig.act_bits, point.qconfig.softmax_bits)
        + cost(point.qconfig)["table_bits"],
        "pareto": None,
        "seconds": time.perf_counter() - t0,
    }
    out = {k: row[k] for k in COLUMNS}
    # every traced point's SQNR: the layer-by-layer view of a variant (sweep.json, sweep.md)
    out["layers"] = {r["path"]: r["sqnr_db"] for r in res.layers if r["path"] != "input"}
    return out


def _run(source, grid, calib, inputs, labels, progress, recipe=None, client=None, front="both") -> list[dict]:
    from hwvit.quant.recipe import plain

    base_recipe = recipe or plain()
    imported = getattr(source, "imported", None)
    onnx_path = str(imported.path) if imported is not None else None
    if client is None:
        results = (point_row(source.model, source.name, calib, inputs, labels, base_recipe, p, onnx_path) for p in grid)
    else:  # one task per point on the Dask workers; the model and data sent to each worker once
        from hwvit.cluster import map_ordered

        shared = (source.model, source.name, calib, inputs, labels, base_recipe)
        results = map_ordered(client, point_row, shared, grid, onnx_path)
    rows = []
    for i, row in enumerate(results):
        rows.append(row)
        if progress is not None:
            progress(i + 1, len(grid), rows[-1])
    acc_key = "top1_int" if rows and rows[0]["top1_int"] is not None else "agreement"
    for r, on in zip(rows, pareto(rows, acc_key, front)):
        r["pareto"] = on
    return rows


def baseline_row(rows: list[dict]) -> dict | None:
    return next((r for r in rows if r["factor"] == "baseline"), None)
