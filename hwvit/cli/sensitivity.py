"""`hwvit sensitivity`: which layers can go narrow, which must stay at 8 bits."""

from __future__ import annotations

import click

from hwvit.cli.common import fail, quiet_option, seed_option
from hwvit.cli.loading import data_options, describe_data, load_data
from hwvit.cli.model_options import calib_images_option, model_options, recipe_option, refuse_seed_for_digits
from hwvit.cli.outdir import out_option
from hwvit.textfiles import first_line


@click.command()
@model_options
@recipe_option
@calib_images_option
@data_options(
    "Evaluate on at most N inputs, the first ones (digits: its held-out split, all by default; "
    "without --images: 8 seeded random)."
)
@click.option(
    "--bits",
    type=click.IntRange(2, 8),
    default=4,
    show_default=True,
    help="The narrow width a unit drops to (or rises from, with --rise).",
)
@click.option(
    "--knob",
    type=click.Choice(["weight_bits", "act_bits"]),
    default="weight_bits",
    show_default=True,
    help="What narrows: each linear layer's weights, or each activation point's tensor (the "
    "output of the layer there).",
)
@click.option("--rise", is_flag=True, help="Baseline: every layer at --bits; each row raises one group to 8.")
@click.option(
    "--groups",
    metavar="LIST",
    help="Comma-separated globs, one row each (default: one row per linear layer, or per "
    "activation point with --knob act_bits), e.g. 'layers.*.attn.*,layers.*.mlp.*'.",
)
@click.option(
    "--target-top1-drop",
    "target",
    type=click.FloatRange(0.0, 100.0),
    metavar="POINTS",
    help="Propose a recipe with the fewest wide (8-bit) groups whose top-1 (agreement without "
    "labels) is at most POINTS percentage points below the all-8-bit model; written as "
    "recipe.yaml in --out.",
)
@seed_option()
@out_option("Write sensitivity.md, sensitivity.png, sensitivity.json (and recipe.yaml) here.", default="sensitivity")
@quiet_option("Only the summary line.")
def sensitivity(calib_images, bits, knob, rise, groups, target, seed, out_dir, quiet, recipe, **kw):
    """Per layer (or glob group): what top-1 and logits SQNR lose when only it drops to --bits.

    With --rise, what they gain when only it rises to 8 from an all --bits baseline. The knob is
    each linear layer's weight width (2-8 bits, stored int8: the GEMM and the RTL are unchanged)
    or, with --knob act_bits, each activation point's width (the recipe's act_bits).

    A quantized ONNX file (--checkpoint model.onnx, docs/onnx.md): the baseline is the file's own
    model; each layer's weights are re-quantized from the file's at --bits (its bias at the new
    accumulator scale), every other quantizer, table and rounding the file's.

    \b
    Example:
      hwvit sensitivity --model digits --bits 2 --limit 60 --calib-images 32 \\
        --groups 'embed.*,layers.*.attn.*,layers.*.mlp.*,head' --target-top1-drop 1 --out sens/
      hwvit compare --model digits --recipe sens/recipe.yaml --limit 60 --calib-images 32 -q
      hwvit sensitivity --model digits --knob act_bits --bits 4 --limit 20 --calib-images 16 \\
        --groups 'layers.0.*,layers.1.*' --out sens-act/ -q
      hwvit onnx-demo --out model.onnx
      hwvit sensitivity --checkpoint model.onnx --bits 4 --limit 16 --groups 'layers.0.*,head' --out sens-onnx/ -q
    """
    from hwvit.analysis import sensitivity as sens
    from hwvit.report import sensitivity_write

    kw.pop("qconfig", None)
    refuse_seed_for_digits(kw["preset"], kw["checkpoint"])
    if target is not None and rise:
        fail("--target-top1-drop ranks layers by how much dropping each costs: leave out --rise")
    from hwvit.onnx import is_onnx

    imported = bool(kw.get("checkpoint")) and is_onnx(kw["checkpoint"])
    if imported:  # the file's own model is the baseline; its layers' weights are what varies
        given_here = [f for f, v in (("--recipe", recipe), ("--target-top1-drop", target)) if v is not None]
        if knob != "weight_bits" or given_here:
            what = f"--knob {knob}" if knob != "weight_bits" else given_here[0]
            fail(f"{what}: a quantized ONNX file fixes it; its sensitivity re-quantizes each layer's weights")
    source, data = load_data(kw, seed, calib_images)
    describe_data(data, quiet)
    try:
        if imported:
            ev = sens.ImportedEvaluator(source.imported, data.inputs, data.labels, knob=knob)
        else:
            ev = sens.Evaluator(source.model, data.calib, data.inputs, data.labels, base=recipe, knob=knob)
        paths = ev.paths()
        units = sens.groups_of(paths, [g.strip() for g in groups.split(",") if g.strip()] if groups else None)

        def progress(i: int, n: int, name: str) -> None:
            if not quiet:
                click.echo(f"[{i}/{n}] {name}", err=True)

        mode = "rise" if rise else "drop"
        base, rows = sens.analyse(ev, units, bits, mode, progress)
        metric = "top-1" if base.top1 is not None else "agreement"
        noun = "Activations" if knob == "act_bits" else "Weights"
        what = (
            f"{noun}: every group at {bits} bits, one at a time raised to 8."
            if rise
            else f"{noun}: every group at 8 bits, one at a time dropped to {bits}."
        )
        if imported:
            what = (
                f"Weights re-quantized from the file's: every group at {bits} bits, one at a time back to the file's 8."
                if rise
                else f"Weights: the file's model, one group at a time re-quantized from the file's to {bits} bits."
            )
        meta = {
            "model": source.name,
            "mode": mode,
            "knob": knob,
            "bits": bits,
            "metric": metric,
            "description": what,
            "images": len(data.labels) if data.labels is not None else None,
            "calib_images": None if imported else len(data.calib),  # a quantized ONNX file's scales are its own
            "baseline_acc": base.acc,
            "baseline_sqnr_db": base.logits_sqnr_db,
            "seed": seed,
            "checkpoint_sha256": source.sha256,
        }
        proposal = chosen = None
        if target is not None:
            reference = base  # drop mode: the all-8-bit model
            chosen, score, k = sens.propose(ev, units, [r["group"] for r in rows], bits, target / 100.0, reference)
            wide = [r["group"] for r in rows][:k]
            proposal = {
                "target_top1_drop_points": target,
                "wide_groups": wide,
                "narrow_bits": bits,
                "acc": score.acc,
                "logits_sqnr_db": score.logits_sqnr_db,
                "drop_points": 100 * (reference.acc - score.acc),
                "text": (
                    f"{k} of {len(units)} groups at 8 bits ({', '.join(wide) or 'none'}), the rest at "
                    f"{bits}: {metric} {100 * score.acc:.2f}% ({100 * (score.acc - reference.acc):+.2f} "
                    f"points against all 8-bit, target -{target:g}), logits SQNR "
                    f"{score.logits_sqnr_db:.2f} dB. Greedy: groups widened in the table's order."
                ),
            }
        written = sensitivity_write.write(out_dir, meta, rows, proposal, chosen)
    except (ValueError, OSError) as exc:
        fail(first_line(exc))
    if not quiet:
        head, body = sensitivity_write.table(rows, metric)
        widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(head)]
        click.echo("  ".join(h.ljust(w) for h, w in zip(head, widths)))
        for r in body:
            click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    line = (
        f"{source.name}: {len(rows)} groups, {ev.runs} quantized models; baseline {metric} "
        f"{100 * base.acc:.2f}%, logits SQNR {base.logits_sqnr_db:.2f} dB"
    )
    if proposal is not None:
        line += f"; proposed: {proposal['text'].split('. Greedy')[0]}; recipe {written / 'recipe.yaml'}"
    click.echo(f"{line}; wrote {written}/")
