"""`hwvit demo`: the main job on the bundled digits model, end to end."""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import click
import numpy as np

from hwvit.cli.common import fail
from hwvit.cli.outdir import check_out_dir, force_option, out_option
from hwvit.cli.progress import progress_bar
from hwvit.cli.sim_options import jobs_option, require_simulators, simulator_option
from hwvit.textfiles import count, first_line


def _step(n: int, total: int, text: str) -> None:
    click.secho(f"[{n}/{total}] {text}", bold=True)


@click.command()
@out_option("Where the vector sets of one image go.", name="--vectors", dest="vectors_dir", default="vectors/digits")
@out_option("Where the compare report goes.", default="out/report")
@out_option("Where the model compiled for the RTL core goes.", name="--core", dest="core_dir", default="out/core")
@click.option(
    "--core-images",
    type=click.IntRange(1),
    default=10,
    show_default=True,
    help="Held-out images run through the whole-model RTL core (rtl/vit_core.v).",
)
@force_option
@click.option(
    "--image",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="Index of the held-out test image traced into vector sets.",
)
@simulator_option("Simulator for the RTL check.")
@jobs_option(default=2)
def demo(vectors_dir, out_dir, core_dir, core_images, force, image, simulator, jobs):
    """Quantize the digits model, write its vector sets, check the RTL on them, write the report.

    \b
    Steps:
      1. load the shipped digits ViT and measure its float accuracy on the held-out split
      2. calibrate and convert it to the integer model; compare float vs int
      3. trace one test image into vector sets (every block instance)
      4. run every set through its Verilog block (hwvit sim)
      5. write the float-vs-fixed report with plots
      6. compile the model for the RTL core and run held-out images through it (logits bit-exact)
    A second run needs --force (it then replaces the vector sets and the report it wrote).

    \b
    Example:
      hwvit demo
    """
    from tqdm import tqdm

    from hwvit import pipeline, vectors
    from hwvit.analysis.compare import compare
    from hwvit.intvit import trace_model
    from hwvit.quant import QuantConfig, quantize_model
    from hwvit.report.write import write_report
    from hwvit.simulate import run_many
    from hwvit.vectors.provenance import provenance

    t0 = time.perf_counter()
    sims = require_simulators(simulator)
    check_out_dir(vectors_dir, force, "vectors")
    check_out_dir(out_dir, force, "compare-report")
    total = 6

    _step(1, total, "float model: the shipped digits ViT (hwvit/data/digits.safetensors)")
    try:
        source = pipeline.load_source("digits")
    except (ValueError, OSError) as exc:
        fail(first_line(exc))
    x_test, y_test = pipeline.eval_inputs(source)
    if image >= len(x_test):
        fail(f"--image {image}: the test split has {len(x_test)} images")
    cfg = source.model.cfg
    click.echo(
        f"      {cfg.depth} blocks, dim {cfg.dim}, {cfg.heads} heads, {cfg.num_tokens} tokens, "
        f"{sum(p.numel() for p in source.model.parameters())} parameters"
    )

    _step(2, total, "integer model: calibrate on 256 training images, compare on the held-out split")
    calib = pipeline.calibration_inputs(source, 256)
    int_model = quantize_model(source.model, calib, QuantConfig())
    result = compare(source.model, int_model, x_test, y_test, name="digits")
    worst = result.worst_layer()
    click.echo(
        f"      top-1 float {100 * result.top1_float:.2f}%, int8 {100 * result.top1_int:.2f}% "
        f"on {count(result.images, 'image')}; agreement {100 * result.agreement:.2f}%; "
        f"logits SQNR {result.logits_sqnr_db:.1f} dB"
    )
    if worst is not None:
        sq = "inf" if worst["sqnr_db"] == math.inf else f"{worst['sqnr_db']:.1f}"
        click.echo(f"      lowest SQNR: {worst['path']} {sq} dB")

    _step(3, total, f"vector sets: test image {image} traced through every block -> {vectors_dir}")
    traced = x_test[image : image + 1]
    _, records, _ = trace_model(int_model, traced.numpy())
    elements = sum(int(t.data.size) for r in records for t in r.tensors.values())
    model_config = {"model": cfg.to_dict(), "quant": QuantConfig().to_dict(), "image": image}
    with progress_bar(elements, "writing", "el", unit_scale=True) as bar:  # the step's line says what
        summary = vectors.write_sets(
            records,
            vectors_dir,
            seed=0,
            source_sha256=source.sha256,
            model_config=model_config,
            provenance=provenance(source.model, calib, traced, model_config),
            force=force,
            progress=lambda _p, n: bar.update(n),
        )
    click.echo(f"      {summary.line()}")

    _step(4, total, f"RTL: every set through its Verilog block on {' and '.join(sims)} (bit-exact check)")
    sets = vectors.find_sets(Path(vectors_dir))
    jobs_list = [(str(d), s) for d in sets for s in sims]
    failures = []
    with progress_bar(len(jobs_list), "simulating", "set") as bar:

        def on_result(res):
            bar.update(1)
            if not res.passed:
                failures.append(res)
                tqdm.write(res.line())

        results = run_many(jobs_list, workers=jobs, on_result=on_result)
    kinds = sorted({r.kind for r in results})
    cycles = sum(r.cycles or 0 for r in results)
    elems = sum(r.elements for r in results)
    click.echo(
        f"      {len(results) - len(failures)} passed, {len(failures)} failed "
        f"({', '.join(kinds)}; {elems} output elements compared, {cycles} cycles)"
    )

    _step(5, total, f"report: float vs fixed per layer -> {out_dir}")
    try:
        report = write_report(result, out_dir)
    except (ValueError, OSError) as exc:
        fail(first_line(exc))
    click.echo(f"      {report}")

    core_sim = sims[0]
    _step(6, total, f"RTL core: {core_images} held-out images through rtl/vit_core.v on {core_sim} -> {core_dir}")
    core_line = _core_step(int_model, cfg, x_test[:core_images], y_test[:core_images], core_dir, force, core_sim)
    click.echo(f"      {core_line}")

    click.echo("")
    click.echo(f"done in {time.perf_counter() - t0:.0f} s:")
    click.echo(f"  vector sets   {vectors_dir}/  ({len(sets)} sets; validate with `hwvit check {vectors_dir}`)")
    click.echo(
        f"  RTL check     {len(results) - len(failures)} passed, {len(failures)} failed "
        f"(rerun: `hwvit sim {vectors_dir} --simulator both`)"
    )
    click.echo(f"  report        {report}")
    click.echo(f"  RTL core      {core_line} (rerun: `hwvit core run {core_dir} --images {core_images}`)")
    sys.exit(1 if failures or "mismatch" in core_line else 0)


def _core_step(int_model, cfg, x, labels, core_dir: str, force: bool, simulator: str) -> str:
    """Compile ``int_model`` for the core, run ``x`` through the RTL, return the one-line outcome."""
    from hwvit.core.compile import CoreCompileError, compile_model
    from hwvit.core.coredir import CoreDirError, read_core_dir, write_core_dir
    from hwvit.core.run import run_images
    from hwvit.quant import QuantConfig

    spec = {
        "preset": "digits",
        "checkpoint": None,
        "family": None,
        "config": None,
        "heads": None,
        "quant": QuantConfig().to_dict(),
        "calib_images": 256,
        "seed": 0,
    }
    try:
        write_core_dir(compile_model(int_model), core_dir, spec, force=force)
        res = run_images(read_core_dir(core_dir), int_model, int_model.quantize_input(x.numpy()), simulator)
    except (CoreCompileError, CoreDirError, FileExistsError, OSError, RuntimeError) as exc:
        fail(first_line(exc))
    n = len(x)
    total = res.cycles[0]["total"]
    pred = res.got.argmax(axis=1)
    state = "every logit bit-exact" if res.matched == n else f"{n - res.matched} mismatch(es)"
    top1 = int((pred == np.asarray(labels)).sum())
    return (
        f"{res.matched}/{n} images matched ({state}); predicted {' '.join(map(str, pred))}, "
        f"{top1}/{n} correct; {total:,} cycles/image on 8x8"
    )
