"""Where the float model comes from, how it is quantized, and where the integer forward runs:
--model/--checkpoint, the quantization knobs, --variant, --recipe, --calib-images, --device and
--gemm. Each refuses the combinations in which one of its options would do nothing."""

from __future__ import annotations

import functools

import click

from hwvit.cli.common import F, LazyChoice, fail, given, refuse
from hwvit.formats import Calibration, ExpMode
from hwvit.textfiles import first_line


def _model_families() -> tuple[str, ...]:
    from hwvit.float.keymaps import MODEL_FAMILIES

    return MODEL_FAMILIES


# --- where the model comes from ----------------------------------------------------------------
def model_options(func: F) -> F:
    """--model PRESET | --checkpoint PATH [--family F] [--config C] [--heads H]: where the float model
    comes from. Refuses the combinations in which an option would do nothing."""

    @click.option(
        "--model",
        "preset",
        metavar="PRESET",
        help="A shipped preset (see `hwvit info`); digits has trained weights, the others random.  [default: digits]",
    )
    @click.option(
        "--checkpoint",
        type=click.Path(exists=True),
        help="A checkpoint file (.safetensors, .pt/.pth/.bin), a model directory (save_pretrained), or a "
        "quantized ONNX file (.onnx, QDQ: its own integer model).",
    )
    @click.option(
        "--family",
        type=LazyChoice(_model_families, "FAMILY"),
        help="Key names of --checkpoint (`hwvit info` lists the families).  [default: read from the key names]",
    )
    @click.option(
        "--config",
        "config_path",
        metavar="PRESET|FILE",
        help="With --checkpoint: what the weights cannot say, as a preset or a YAML/JSON file in hwvit, "
        "HF (config.json), timm or lucidrains names, whole or partial; checked against the weights.",
    )
    @click.option(
        "--heads", type=click.IntRange(1), help="With --checkpoint: attention heads (the one field weights never say)."
    )
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if kwargs["preset"] and kwargs["checkpoint"]:
            refuse("give --model or --checkpoint, not both (use --config for the shape of a checkpoint)")
        if not kwargs["checkpoint"]:
            for name, flag in (("family", "--family"), ("config_path", "--config"), ("heads", "--heads")):
                if kwargs[name]:
                    refuse(f"{flag} applies to --checkpoint only")
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def qconfig_options(func: F) -> F:
    """The quantization knobs; the command receives them as one ``qconfig`` (a QuantConfig)."""

    @click.option(
        "--act-bits",
        type=click.IntRange(2, 8),
        default=8,
        show_default=True,
        help="Activation width (per tensor, symmetric).",
    )
    @click.option(
        "--softmax-bits", type=click.IntRange(2, 8), default=8, show_default=True, help="Softmax probability width."
    )
    @click.option(
        "--exp",
        "exp_mode",
        type=click.Choice(ExpMode.values()),
        default=ExpMode.TABLE.value,
        show_default=True,
        help="Softmax exp: table lookup (the RTL) or shift-and-add.",
    )
    @click.option(
        "--exp-entries",
        type=click.IntRange(1, 256),
        default=256,
        show_default=True,
        help="Exp table entries (--exp table).",
    )
    @click.option(
        "--calibration",
        type=click.Choice(Calibration.values()),
        default=Calibration.MINMAX.value,
        show_default=True,
        help="Activation range estimate: max |x|, a percentile, MSE-optimal or KL-optimal clip.",
    )
    @click.option(
        "--percentile",
        type=click.FloatRange(50.0, 100.0),
        default=99.99,
        show_default=True,
        help="Percentile of |x| for --calibration percentile.",
    )
    @click.option(
        "--variant",
        "variant_specs",
        multiple=True,
        metavar="BLOCK=NAME",
        help="A block's arithmetic (requant, gelu, softmax, layernorm), e.g. softmax=ibert, or a team's "
        "function softmax=mypkg.mod:fn; repeatable. `hwvit info` lists the variants.",
    )
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        from hwvit.quant import QuantConfig

        if kwargs["exp_mode"] == ExpMode.SHIFT and given("exp_entries"):
            refuse("--exp-entries applies to --exp table only")
        if kwargs["calibration"] != Calibration.PERCENTILE and given("percentile"):
            refuse("--percentile applies to --calibration percentile only")
        kwargs["qconfig"] = QuantConfig(
            act_bits=kwargs.pop("act_bits"),
            softmax_bits=kwargs.pop("softmax_bits"),
            exp=kwargs.pop("exp_mode"),
            exp_entries=kwargs.pop("exp_entries"),
            calibration=kwargs.pop("calibration"),
            percentile=kwargs.pop("percentile"),
            **parse_variants(kwargs.pop("variant_specs")),
        )
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def parse_variants(specs) -> dict[str, str]:
    """``--variant BLOCK=NAME`` values -> {block family: variant}; one line (exit 2) on a fault."""
    from hwvit import variants

    chosen: dict[str, str] = {}
    for spec in specs:
        family, eq, name = spec.partition("=")
        if not eq or not name:
            refuse(f"--variant {spec}: give BLOCK=NAME, e.g. softmax=ibert")
        if family not in variants.FAMILIES:
            refuse(f"--variant {spec}: block {family!r} has no variants; choose from {', '.join(variants.FAMILIES)}")
        if family in chosen:
            refuse(f"--variant {family}=... given twice")
        try:
            variants.resolve(family, name)
        except ValueError as exc:
            refuse(f"--variant {spec}: {first_line(exc)}")
        chosen[family] = name
    return chosen


def recipe_option(func: F) -> F:
    """``--recipe FILE`` (hwvit.quant.recipe): per-layer precision. Goes right under ``qconfig_options``;
    the command receives ``recipe`` (a Recipe or None) and, with a recipe, ``qconfig`` = its default."""

    @click.option(
        "--recipe",
        "recipe_path",
        type=click.Path(dir_okay=False),
        metavar="FILE",
        help="Quantization recipe (YAML): model-wide knobs and per-layer overrides by glob.",
    )
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        from hwvit.quant.recipe import load

        path = kwargs.pop("recipe_path")
        kwargs["recipe"] = None
        if path is not None:
            knobs = [
                f"--{k.replace('_', '-')}"
                for k in ("act_bits", "softmax_bits", "exp", "exp_entries", "calibration", "percentile")
                if given(k)
            ] + (["--variant"] if given("variant_specs") else [])
            if knobs:
                refuse(f"{knobs[0]} and --recipe: set it in the recipe's default section")
            try:
                kwargs["recipe"] = load(path)
            except ValueError as exc:
                fail(first_line(exc))
            kwargs["qconfig"] = kwargs["recipe"].base
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


calib_images_option = click.option(
    "--calib-images",
    type=click.IntRange(1),
    default=256,
    show_default=True,
    help="At most N calibration inputs (digits: its training images; --calib: a seeded choice; else random).",
)


def refuse_seed_for_digits(preset: str | None, checkpoint: str | None) -> None:
    """--seed picks random weights and inputs; the digits model is trained and its inputs are the
    held-out split, so there it would do nothing."""
    if not checkpoint and preset in (None, "digits") and given("seed"):
        refuse("--seed applies to random weights and inputs; the digits model has neither")


# --- where the integer forward runs ---------------------------------------------------------------
def _gemm_choices() -> tuple[str, ...]:
    """The --gemm choices: auto, then every backend of hwvit.ops.gemm_backends (read on first use,
    since that module imports numpy and `hwvit --help` should not)."""
    from hwvit.ops.gemm_backends import BACKENDS

    return ("auto", *BACKENDS)


def compute_options(func: F) -> F:
    """--device cpu|cuda and --gemm BACKEND: where the integer forward runs and which CPU GEMM it uses.

    --gemm is applied before the command runs (it overrides the per-machine probe, as HWVIT_GEMM
    does); --device cuda without a GPU is a one-line error. The command receives ``device``."""

    @click.option(
        "--device",
        type=click.Choice(["cpu", "cuda"]),
        default="cpu",
        show_default=True,
        help="Where the integer forward runs (cuda: torch integer kernels on the GPU).",
    )
    @click.option(
        "--gemm",
        "gemm_name",
        type=LazyChoice(_gemm_choices, "BACKEND"),
        default=None,
        help="CPU GEMM backend: auto or one of `hwvit info`'s backends (default: $HWVIT_GEMM, else the "
        "fastest exact one, probed once per machine).",
    )
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        from hwvit.intvit.device import resolve_device
        from hwvit.ops import gemm_backends

        gemm_name = kwargs.pop("gemm_name")
        try:
            if gemm_name:
                gemm_backends.set_backend(gemm_name)
            name = gemm_backends.named()  # one named by --gemm or HWVIT_GEMM must run here
            why = gemm_backends.why_unavailable(name) if name else None
            if why:
                fail(why)
            resolve_device(kwargs["device"])
        except ValueError as exc:
            fail(first_line(exc))
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
