"""`hwvit compile` and `hwvit core run|estimate`: a whole ViT on the RTL accelerator core."""

from __future__ import annotations

import subprocess

import click

from hwvit.cli.common import fail, seed_option
from hwvit.cli.model_options import calib_images_option, model_options, qconfig_options, recipe_option
from hwvit.cli.outdir import force_option, out_option
from hwvit.toolchain import Simulator


def _spec(preset, checkpoint, family, config_path, heads, qconfig, calib_images, seed, recipe=None) -> dict:
    spec = {
        "preset": preset,
        "checkpoint": checkpoint,
        "family": family,
        "config": config_path,
        "heads": heads,
        "quant": qconfig.to_dict(),
        "calib_images": calib_images,
        "seed": seed,
    }
    if recipe is not None:  # `core run` rebuilds the model from it
        spec["recipe"] = {k: v for k, v in recipe.to_dict().items() if k != "source"}
    return spec


@click.command()
@model_options
@qconfig_options
@recipe_option
@calib_images_option
@seed_option("Seed of random weights and calibration inputs.")
@out_option("Output core directory.", required=True)
@click.option(
    "--act-base",
    type=click.IntRange(0, 2**30 - 1),
    default=0,
    show_default=True,
    help="Scratchpad address of the model's first region (its input); the words below are left to the host.",
)
@force_option
def compile(qconfig, recipe, calib_images, seed, out_dir, act_base, force, **kw):  # noqa: A001 - the command's name
    """Compile the integer model for the RTL core (rtl/vit_core.v): program, memory images, manifest.

    The core's requant saturates every activation to int8: a recipe may set weight widths,
    per-tensor weights and calibration per layer, but not narrower per-layer activations.

    \b
    Example:
      hwvit compile --model digits --out core/
    """
    from hwvit.cli.loading import build_models
    from hwvit.core.compile import CoreCompileError, compile_model
    from hwvit.core.coredir import write_core_dir

    preset, checkpoint, family, config_path, heads = (
        kw.get(k) for k in ("preset", "checkpoint", "family", "config_path", "heads")
    )
    _, _, int_model = build_models(kw, qconfig, calib_images, seed, recipe=recipe)
    try:
        compiled = compile_model(int_model, act_base=act_base)
        write_core_dir(
            compiled,
            out_dir,
            _spec(
                preset or (None if checkpoint else "digits"),
                checkpoint,
                family,
                config_path,
                heads,
                qconfig,
                calib_images,
                seed,
                recipe,
            ),
            force=force,
        )
    except (CoreCompileError, FileExistsError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{exc.filename or out_dir}: {exc.strerror or exc}")
    s = compiled.sizes
    click.echo(
        f"compiled {len(compiled.program)} instructions, {sum(i.macs() for i in compiled.program):,} MACs/image; "
        f"scratchpad {s['ACT_DEPTH']} B, weights {s['WGT_DEPTH']} B, params {s['PRM_DEPTH']} words -> {out_dir}"
    )


@click.group()
def core():
    """Run or estimate the RTL accelerator core (rtl/vit_core.v).

    \b
    Example:
      hwvit core run core/ --images 10 --simulator verilator
      hwvit core estimate --model vit-b16 --rows 16 --cols 16 --clock-mhz 500
    """


def _int_model(cdir):
    """The integer model the directory was compiled from, checked by recompiling it."""
    from hwvit.cli.loading import build_models
    from hwvit.core.compile import CoreCompileError, compile_model
    from hwvit.quant import QuantConfig
    from hwvit.quant.recipe import from_dict

    spec = cdir.manifest["model"]
    try:
        qconfig = QuantConfig(**spec["quant"])
        recipe = from_dict(spec["recipe"]) if spec.get("recipe") is not None else None
        model = {
            "preset": spec["preset"],
            "checkpoint": spec["checkpoint"],
            "family": spec["family"],
            "config_path": spec["config"],
            "heads": spec.get("heads"),
        }
        source, _, m = build_models(model, qconfig, int(spec["calib_images"]), int(spec["seed"]), recipe=recipe)
        act_base = int(cdir.sizes["IN_BASE"])  # the first region is the input
    except (KeyError, TypeError, ValueError) as exc:
        fail(f"{cdir.path}: manifest model entry unusable ({exc})")
    try:
        again = compile_model(m, act_base=act_base)
    except CoreCompileError as exc:
        fail(f"{cdir.path}: {exc}")
    if [i.word() for i in again.program] != [i.word() for i in cdir.program] or len(again.program) != len(cdir.program):
        fail(f"{cdir.path}: the program differs from a fresh compile of its model; recompile it")
    return source, m


@core.command()
@click.argument("core_dir", type=click.Path())
@click.option(
    "--images",
    type=click.IntRange(1),
    default=10,
    show_default=True,
    help="Images (digits: the held-out split; else seeded random).",
)
@click.option(
    "--simulator",
    type=click.Choice([Simulator.VERILATOR.value, Simulator.ICARUS.value]),
    default=Simulator.VERILATOR.value,
    show_default=True,
)
@click.option("--rows", type=click.IntRange(1, 64), default=8, show_default=True, help="GEMM array rows.")
@click.option("--cols", type=click.IntRange(1, 64), default=8, show_default=True, help="GEMM array columns.")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True, help="Seed of random inputs.")
@click.option(
    "--host-load",
    is_flag=True,
    help="Write the program, weights, parameters and constants through the core's host port, as a host "
    "processor would (one cycle a memory word), over memories started with garbage; default: $readmemh.",
)
def run(core_dir, images, simulator, rows, cols, seed, host_load):
    """Run images through the RTL core and compare every output with the integer model.

    \b
    Example:
      hwvit core run core/ --images 10 --simulator verilator
    """
    from hwvit import pipeline
    from hwvit.cli.sim_options import require_simulators
    from hwvit.core import cycles as cyc
    from hwvit.core import run as crun
    from hwvit.core.coredir import CoreDirError, read_core_dir

    try:
        cdir = read_core_dir(core_dir)
    except CoreDirError as exc:
        fail(str(exc))
    require_simulators(simulator)
    source, m = _int_model(cdir)
    x, labels = pipeline.eval_inputs(source, images, seed)
    xq = m.quantize_input(x.numpy())
    try:
        res = crun.run_images(cdir, m, xq, simulator, rows, cols, host_load=host_load)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        fail(f"{simulator} run failed: {str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__}")
    except SystemExit as exc:  # the cocotb runner exits when the build fails
        from hwvit import simulate

        fail(
            f"{simulator} build or run failed (exit {exc.code}); see the vit_core build.log under "
            f"{simulate.default_build_root()}"
        )
    pred_rtl, pred_int = res.got.argmax(axis=1), res.expected.argmax(axis=1)
    click.echo(f"predicted (RTL):   {' '.join(map(str, pred_rtl))}")
    click.echo(f"predicted (model): {' '.join(map(str, pred_int))}")
    if labels is not None:
        click.echo(f"labels:            {' '.join(map(str, labels[: len(pred_rtl)]))}")
    c0 = res.cycles[0]
    macs = cdir.manifest["macs"]
    pred = cyc.program_cycles(cdir.program, rows, cols, cdir.sizes.get("SOFTMAX_BITS", 8))["total"]
    click.echo(
        f"cycles/image: {c0['total']:,} (gemm {c0['gemm']:,}, row {c0['row']:,}, elem {c0['elem']:,}, "
        f"load {c0['load']:,}, ctrl {c0['ctrl']:,}); cycle model {pred:,}; "
        f"MAC utilization {macs / (c0['total'] * rows * cols):.1%} on {rows}x{cols}"
    )
    total = sum(c["total"] for c in res.cycles)
    if res.cpu_s > 0:
        click.echo(f"{simulator}: {total / res.cpu_s:,.0f} simulated cycles/s (simulator CPU time)")
    n = len(xq)
    if res.reset_wrong:
        click.echo(f"after reset the core shows {res.reset_wrong}: busy, done, pc and every counter must be 0")
        raise SystemExit(1)
    if res.matched == n:
        click.echo(f"{n}/{n} images matched: every output bit-exact ({simulator}, {rows}x{cols})")
        return
    bad = int(next(i for i in range(n) if not (res.got[i] == res.expected[i]).all()))
    click.echo(
        f"{res.matched}/{n} images matched; image {bad}: got {res.got[bad].tolist()}, "
        f"expected {res.expected[bad].tolist()}"
    )
    info = crun.find_mismatch(cdir, m, xq[bad], simulator, rows, cols)
    if info and info.get("instruction") is not None:
        at = ", ".join(map(str, info["at"]))
        click.echo(
            f"first differing instruction: #{info['instruction']} {info['name']} ({info['kind']}): "
            f"{info['value']}[{at}] (flat {info['index']}): expected {info['expected']}, got {info['got']} "
            f"({info['differ']} elements differ)"
        )
    click.echo(f"scratchpad dump: {info['scratchpad'] if info else '?'}")
    raise SystemExit(1)


@core.command()
@click.option("--model", "preset", default="vit-b16", show_default=True, metavar="PRESET", help="A shipped preset.")
@click.option("--rows", type=click.IntRange(1, 256), default=8, show_default=True)
@click.option("--cols", type=click.IntRange(1, 256), default=8, show_default=True)
@click.option("--clock-mhz", type=click.FloatRange(min=1e-3), default=500.0, show_default=True)
def estimate(preset, rows, cols, clock_mhz):
    """Cycles and images/s per layer from the cycle model (no simulation), and MAC utilization.

    \b
    Example:
      hwvit core estimate --model vit-b16 --rows 16 --cols 16 --clock-mhz 500
    """
    from hwvit.core.compile import CoreCompileError, compile_model
    from hwvit.core.estimate import estimate_table
    from hwvit.core.shapes import shape_model
    from hwvit.float.config import load_preset

    try:
        program = compile_model(shape_model(load_preset(preset)), images=False).program
    except (CoreCompileError, ValueError) as exc:
        fail(str(exc).splitlines()[0])
    for line in estimate_table(program, rows, cols, clock_mhz, preset):
        click.echo(line)
