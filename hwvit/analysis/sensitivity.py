"""Per-layer precision sensitivity and a mixed-precision proposal (``hwvit sensitivity``).

The per-layer knob (``Evaluator.knob``) is the weight width of each linear layer (``weight_bits``)
or the width of each activation point's tensor (``act_bits``: the output of the layer there; see
hwvit.quant.recipe). ``drop`` mode: every unit at 8 bits except one at ``bits``; ``rise`` mode:
every unit at ``bits`` except one at 8. Each configuration is quantized (the calibration is
shared: min/max and percentile ranges come from the float model alone; MSE and entropy searches
are cached per width) and compared with the float model on the same images.

``propose`` widens layers in order of their drop-mode sensitivity (largest top-1 loss, then
largest SQNR loss, first) until the top-1 drop against the all-8-bit model is within the target:
a greedy answer, the fewest wide layers along that order (not a search over all subsets).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass, replace

from hwvit.analysis.compare import compare
from hwvit.quant.convert import act_names, quantize_model
from hwvit.quant.recipe import Recipe, plain

KNOBS = ("weight_bits", "act_bits")


def linear_paths(int_model) -> list[str]:
    """Paths of the integer model's linear layers, in forward order (the recipe's weight paths)."""
    out = ["embed.proj"]
    for i, b in enumerate(int_model.blocks):
        a = b.attn
        out += [f"layers.{i}.attn.qkv"] if a.qkv is not None else [f"layers.{i}.attn.{n}" for n in "qkv"]
        out += [f"layers.{i}.attn.proj", f"layers.{i}.mlp.fc1", f"layers.{i}.mlp.fc2"]
    if int_model.readout.pre_head_fc is not None:
        out.append("pre_head.fc")
    if int_model.readout.head is not None:
        out.append("head")
    return out


@dataclass
class Score:
    top1: float | None  # top-1 with labels, else None
    agreement: float  # with the float model's top-1
    logits_sqnr_db: float

    @property
    def acc(self) -> float:
        """What the target is measured on: top-1 with labels, agreement with the float model without."""
        return self.top1 if self.top1 is not None else self.agreement


def act_paths(model, int_model) -> list[str]:
    """The integer model's activation points with a recipe width, in forward order, one name per
    tensor (``logits``, not also ``head``; a fused ``qkv``, not also its ``q``/``k``/``v``); softmax
    probabilities are left out (their width is ``softmax_bits``), and so is ``pool`` when it
    selects the cls token (no arithmetic, no width of its own)."""
    out, seen = [], set()
    for p in int_model.point_bits:
        if p in seen or p.endswith((".probs", ".softmax")) or (p == "pool" and int_model.readout.pool is None):
            continue
        names = act_names(model, p)
        seen |= {p, *names}
        out.append(names[0])
    return out


class Evaluator:
    """Quantize with a recipe and compare on fixed data; calibration shared across recipes."""

    def __init__(
        self,
        model,
        calib,
        inputs,
        labels,
        base: Recipe | None = None,
        batch_size: int | None = None,
        knob: str = "weight_bits",
    ):
        if knob not in KNOBS:
            raise ValueError(f"knob must be one of {', '.join(KNOBS)}, got {knob!r}")
        self.model, self.calib, self.inputs, self.labels = model, calib, inputs, labels
        self.base = base or plain()
        self.batch_size = batch_size
        self.knob = knob
        self.cache: dict = {}
        self.runs = 0

    def recipe(self, default_bits: int, wide: dict[str, int]) -> Recipe:
        """The base recipe with every unit of the knob at ``default_bits`` and ``wide`` (glob -> bits) on top."""
        layers = self.base.layers + tuple((g, {self.knob: b}) for g, b in wide.items())
        if self.knob == "act_bits":
            return replace(self.base, base=replace(self.base.base, act_bits=default_bits), layers=layers)
        return replace(self.base, weight_bits=default_bits, layers=layers)

    def paths(self) -> list[str]:
        """The knob's units: linear layers (weight_bits) or activation points (act_bits)."""
        int_model = quantize_model(self.model, self.calib, recipe=self.base, calibration_cache=self.cache)
        return act_paths(self.model, int_model) if self.knob == "act_bits" else linear_paths(int_model)

    def __call__(self, recipe: Recipe) -> Score:
        int_model = quantize_model(self.model, self.calib, recipe=recipe, calibration_cache=self.cache)
        r = compare(self.model, int_model, self.inputs, self.labels, batch_size=self.batch_size, isolated=False)
        self.runs += 1
        return Score(r.top1_int, r.agreement, r.logits_sqnr_db)


class ImportedEvaluator:
    """``Evaluator``'s interface for a quantized ONNX file's model (hwvit.onnx): the baseline is the
    file's own integer model, whose widths (8 bits) the file fixes; a configuration is the layers
    whose weights are re-quantized at another width from the file's dequantized weights
    (hwvit.onnx.requantize), every other quantizer and table the file's. Each is compared with the
    float model of the file's dequantized weights on the same images. Knob: ``weight_bits`` only."""

    def __init__(self, imported, inputs, labels, knob: str = "weight_bits", batch_size: int | None = None):
        if knob != "weight_bits":
            raise ValueError(
                f"--knob {knob}: a quantized ONNX file's activation widths are not varied; its layers' weights are"
            )
        self.imported, self.model, self.inputs, self.labels = imported, imported.model, inputs, labels
        meta = imported.int_model.meta["quant"]
        self.softmax, self.layernorm = meta["softmax"], meta["layernorm"]
        self.batch_size, self.knob, self.runs = batch_size, knob, 0

    def recipe(self, default_bits: int, wide: dict[str, int]) -> dict[str, int]:
        """The layers not at the file's 8 bits: path -> their weight width."""
        widths = {p: default_bits for p in self.paths()} | wide
        return {p: b for p, b in widths.items() if b != 8}

    def paths(self) -> list[str]:
        """The file's linear layers, in forward order."""
        return list(self.imported.weights)

    def __call__(self, widths: dict[str, int]) -> Score:
        from hwvit.onnx import build, requantize

        im = self.imported
        int_model = (
            build.build(requantize.weights_at(im.graph.model, widths, im.weights), im.path, self.softmax,
                        self.layernorm).int_model if widths else im.int_model
        )  # fmt: skip
        r = compare(self.model, int_model, self.inputs, self.labels, batch_size=self.batch_size, isolated=False)
        self.runs += 1
        return Score(r.top1_int, r.agreement, r.logits_sqnr_db)


def groups_of(paths: list[str], globs: list[str] | None) -> dict[str, list[str]]:
    """Units of the analysis: each linear layer, or each glob's matching layers. ValueError on an empty glob."""
    if not globs:
        return {p: [p] for p in paths}
    out = {}
    for g in globs:
        members = [p for p in paths if fnmatch.fnmatchcase(p, g)]
        if not members:
            raise ValueError(f"group {g!r} matches no unit of the knob (they are: {', '.join(paths[:6])}, ...)")
        out[g] = members
    return out


def analyse(
    ev: Evaluator,
    groups: dict[str, list[str]],
    bits: int,
    mode: str = "drop",
    progress: Callable[[int, int, str], None] | None = None,
) -> tuple[Score, list[dict]]:
    """Baseline score and one row per group: its score and the change against the baseline."""
    if mode not in ("drop", "rise"):
        raise ValueError(f"mode must be drop or rise, got {mode!r}")
    base_bits, one_bits = (8, bits) if mode == "drop" else (bits, 8)
    base = ev(ev.recipe(base_bits, {}))
    rows = []
    for i, (name, members) in enumerate(groups.items()):
        if progress is not None:
            progress(i + 1, len(groups), name)
        s = ev(ev.recipe(base_bits, {p: one_bits for p in members}))
        rows.append(
            {
                "group": name,
                "layers": members,
                "bits": one_bits,
                "top1": s.top1,
                "agreement": s.agreement,
                "logits_sqnr_db": s.logits_sqnr_db,
                "d_acc": s.acc - base.acc,
                "d_sqnr_db": s.logits_sqnr_db - base.logits_sqnr_db,
            }
        )
    # Most sensitive first: in drop mode the largest loss; in rise mode the largest gain.
    sign = 1 if mode == "drop" else -1
    rows.sort(key=lambda r: (sign * r["d_acc"], sign * r["d_sqnr_db"]))
    return base, rows


def propose(
    ev: Evaluator, groups: dict[str, list[str]], order: list[str], bits: int, target_drop: float, reference: Score
) -> tuple[Recipe, Score, int]:
    """Widen groups in ``order`` until ``reference.acc - score.acc <= target_drop`` (fractions).

    Returns the recipe, its score and the number of wide groups. All groups wide is the reference
    model itself, so the loop always ends.
    """
    for k in range(len(order) + 1):
        wide = {p: 8 for g in order[:k] for p in groups[g]}
        recipe = ev.recipe(bits, wide)
        s = ev(recipe) if k < len(order) else reference
        if reference.acc - s.acc <= target_drop + 1e-12:
            return recipe, s, k
    raise AssertionError("unreachable: every group wide is the reference")
