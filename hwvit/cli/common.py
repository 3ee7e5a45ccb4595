"""Options and helpers shared by the commands: each shared option is defined once, here.

A command stacks the decorators it takes, e.g.::

    @click.command()
    @model_options
    @qconfig_options
    @input_options(images_help="...")
    @json_option
    @out_option(help="...")
    @force_option
    def compare(...): ...

Choice lists come from where the things are defined (`toolchain.SIMULATORS`, the importer's
model families, the block kinds of the vector-set contract), never from copies. Errors are one
line: `fail` (exit 1, bad input or a failed run) and `refuse` (exit 2, options that contradict
each other or would do nothing in the combination given).

The rule for output directories (`check_out_dir`, the same for every command that writes one):
a missing or empty directory is written; a non-empty one only with --force, and --force replaces
only a previous hwvit output of the same kind (vector sets, a compare report, a sweep), never
someone's other files. It is checked before any work starts.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Callable, NoReturn, TypeVar

import click
from click.core import ParameterSource

from hwvit import toolchain
from hwvit.record import KINDS

F = TypeVar("F", bound=Callable[..., Any])


# --- errors -------------------------------------------------------------------------------------
class Refused(click.ClickException):
    """Options that contradict each other or do nothing together: one line, exit 2 like click's own
    usage errors (click's UsageError would add the usage text above the line)."""

    exit_code = 2


def fail(message: str) -> NoReturn:
    """One-line error, exit 1, no traceback."""
    raise click.ClickException(message)


def refuse(message: str) -> NoReturn:
    """One-line refusal of an option combination, exit 2."""
    raise Refused(message)


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its class name if it has none)."""
    text = str(exc)
    return text.splitlines()[0] if text else exc.__class__.__name__


def given(name: str) -> bool:
    """Whether the current command's parameter ``name`` was set by the user (not its default)."""
    source = click.get_current_context().get_parameter_source(name)
    return source in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT, ParameterSource.PROMPT)


def options(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    """Several option decorators as one; they appear in --help in the order given."""

    def apply(func: F) -> F:
        for deco in reversed(decorators):
            func = deco(func)
        return func

    return apply


class _LazyChoice(click.Choice):
    """A Choice whose list is read on first use, so that `hwvit --help` does not import torch."""

    def __init__(self, load: Callable[[], tuple[str, ...]]) -> None:
        self._load = load
        self.case_sensitive = True

    @property
    def choices(self) -> tuple[str, ...]:  # type: ignore[override]
        return tuple(self._load())

    @choices.setter
    def choices(self, value) -> None:  # click.Choice.__init__ assigns it; ours is computed
        pass


def _model_families() -> tuple[str, ...]:
    from hwvit.float.keymaps import MODEL_FAMILIES

    return MODEL_FAMILIES


# --- where the model comes from ----------------------------------------------------------------
def model_options(func: F) -> F:
    """--model PRESET | --checkpoint PATH --family F [--config PRESET|YAML]: where the float model
    comes from. Refuses the combinations in which an option would do nothing."""

    @click.option("--model", "preset", metavar="PRESET",
                  help="A shipped preset (see `hwvit info`); digits has trained weights, the others random.  "
                       "[default: digits]")
    @click.option("--checkpoint", type=click.Path(exists=True, dir_okay=False), help="A checkpoint file.")
    @click.option("--family", type=_LazyChoice(_model_families), help="Key names of --checkpoint.")
    @click.option("--config", "config_path", metavar="PRESET|YAML",
                  help="With --checkpoint: what the weights cannot say, as a preset name or a config YAML "
                       "(default: inferred from the family and the weights).")
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if kwargs["preset"] and kwargs["checkpoint"]:
            refuse("give --model or --checkpoint, not both (use --config for the shape of a checkpoint)")
        if not kwargs["checkpoint"]:
            for name, flag in (("family", "--family"), ("config_path", "--config")):
                if kwargs[name]:
                    refuse(f"{flag} applies to --checkpoint only")
        elif not kwargs["family"]:
            refuse("--checkpoint needs --family")
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def qconfig_options(func: F) -> F:
    """The quantization knobs; the command receives them as one ``qconfig`` (a QuantConfig)."""

    @click.option("--act-bits", type=click.IntRange(2, 8), default=8, show_default=True,
                  help="Activation width (per tensor, symmetric).")
    @click.option("--softmax-bits", type=click.IntRange(2, 8), default=8, show_default=True,
                  help="Softmax probability width.")
    @click.option("--exp", "exp_mode", type=click.Choice(["table", "shift"]), default="table", show_default=True,
                  help="Softmax exp: table lookup (the RTL) or shift-and-add.")
    @click.option("--exp-entries", type=click.IntRange(1, 256), default=256, show_default=True,
                  help="Exp table entries (--exp table).")
    @click.option("--calibration", type=click.Choice(["minmax", "percentile"]), default="minmax",
                  show_default=True, help="Activation range estimate.")
    @click.option("--percentile", type=click.FloatRange(50.0, 100.0), default=99.99, show_default=True,
                  help="Percentile of |x| for --calibration percentile.")
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        from hwvit.intvit import QuantConfig

        if kwargs["exp_mode"] == "shift" and given("exp_entries"):
            refuse("--exp-entries applies to --exp table only")
        if kwargs["calibration"] != "percentile" and given("percentile"):
            refuse("--percentile applies to --calibration percentile only")
        kwargs["qconfig"] = QuantConfig(
            act_bits=kwargs.pop("act_bits"), softmax_bits=kwargs.pop("softmax_bits"),
            exp=kwargs.pop("exp_mode"), exp_entries=kwargs.pop("exp_entries"),
            calibration=kwargs.pop("calibration"), percentile=kwargs.pop("percentile"))
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


calib_images_option = click.option(
    "--calib-images", type=click.IntRange(1), default=256, show_default=True,
    help="Calibration inputs (digits: training images; otherwise seeded random).")


def refuse_seed_for_digits(preset: str | None, checkpoint: str | None) -> None:
    """--seed picks random weights and inputs; the digits model is trained and its inputs are the
    held-out split, so there it would do nothing."""
    if not checkpoint and preset in (None, "digits") and given("seed"):
        refuse("--seed applies to random weights and inputs; the digits model has neither")


def build_models(preset, checkpoint, family, config_path, qconfig, calib_images: int, seed: int = 0):
    """(Source, IntViT) for the model options; bad input becomes a one-line error."""
    from hwvit import pipeline
    from hwvit.intvit import quantize_model

    try:
        source = pipeline.load_source(preset, checkpoint, family, config_path, seed=seed)
        calib = pipeline.calibration_inputs(source, calib_images, seed=seed)
        return source, quantize_model(source.model, calib, qconfig)
    except (ValueError, OSError, KeyError) as exc:
        fail(first_line(exc))


# --- inputs -------------------------------------------------------------------------------------
def images_option(help: str) -> Callable[[F], F]:
    """--images N: how many evaluation inputs (the default and its meaning differ per command)."""
    return click.option("--images", type=click.IntRange(1), default=None, help=help)


inputs_option = click.option("--inputs", "inputs_path", type=click.Path(exists=True, dir_okay=False),
                             help="Inputs from a .npy file (N, *input shape) instead of --images.")


def input_options(images_help: str) -> Callable[[F], F]:
    """--images N | --inputs FILE (the two together are refused before any work)."""

    def deco(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if kwargs["images"] is not None and kwargs["inputs_path"]:
                refuse("give --images or --inputs, not both")
            return func(*args, **kwargs)

        return options(images_option(images_help), inputs_option)(wrapper)  # type: ignore[return-value]

    return deco


def eval_inputs(source, images: int | None, inputs_path: str | None, seed: int):
    """(inputs, labels or None) for --images / --inputs; bad input becomes a one-line error."""
    from hwvit import pipeline

    try:
        if inputs_path:
            return pipeline.load_inputs(inputs_path, source.model.cfg), None
        return pipeline.eval_inputs(source, images, seed)
    except ValueError as exc:
        fail(first_line(exc))


# --- simulators ---------------------------------------------------------------------------------
def simulator_option(help: str = "Simulator(s) to run.") -> Callable[[F], F]:
    return click.option("--simulator", type=click.Choice([*toolchain.SIMULATORS, "both"]), default="verilator",
                        show_default=True, help=help)


def jobs_option(default: int = 1) -> Callable[[F], F]:
    return click.option("-j", "--jobs", type=click.IntRange(1), default=default, show_default=True,
                        help="Parallel simulations.")


build_dir_option = click.option("--build-dir", type=click.Path(file_okay=False),
                                help="Where simulator builds are cached [default: sim_build/ of the checkout].")


def block_kind_option(help: str, multiple: bool = False) -> Callable[[F], F]:
    """--block KIND: a block kind of the vector-set contract."""
    return click.option("--block", "kinds" if multiple else "kind", type=click.Choice(KINDS), multiple=multiple,
                        help=help)


def require_simulators(simulator: str) -> list[str]:
    """The simulators named by --simulator (icarus, verilator or both), each checked installed,
    and the source checkout's rtl/ and sim/; a missing one is a one-line error with its install
    command."""
    sims = list(toolchain.SIMULATORS) if simulator == "both" else [simulator]
    try:
        for sim in sims:
            toolchain.require(sim)
        toolchain.repo()
    except toolchain.ToolMissing as exc:
        fail(str(exc))
    return sims


# --- output -------------------------------------------------------------------------------------
json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
force_option = click.option("--force", is_flag=True,
                            help="Replace a non-empty output directory holding a previous hwvit output of the "
                                 "same kind.")


def quiet_option(help: str = "No progress, only the summary line.") -> Callable[[F], F]:
    return click.option("-q", "--quiet", is_flag=True, help=help)


def seed_option(help: str = "Seed of random weights, inputs and cases.") -> Callable[[F], F]:
    return click.option("--seed", type=click.IntRange(0), default=0, show_default=True, help=help)


def out_option(help: str, *, required: bool = False, default: str | None = None,
               name: str = "--out", dest: str = "out_dir") -> Callable[[F], F]:
    """An output directory option (checked with `check_out_dir` before the work starts)."""
    return click.option(name, dest, type=click.Path(file_okay=False), required=required, default=default,
                        show_default=default is not None, help=help)


def vector_output_options(out_help: str) -> Callable[[F], F]:
    """--out DIR --force --seed N -q: the options both vector commands share."""
    return options(out_option(out_help, required=True), force_option,
                   seed_option("Seed of the random inputs and cases."), quiet_option())


OUTPUT_KINDS = ("vectors", "compare-report", "sweep")


def _check_previous(out: Path, kind: str) -> None:
    """Fail unless the non-empty ``out`` holds a previous hwvit output of ``kind`` (what --force replaces)."""
    if kind == "vectors":
        from hwvit.vectors import find_sets

        if not find_sets(out):
            fail(f"{out}: --force replaces only vector sets, and it holds none (no manifest.yaml); "
                 "choose another directory")
        return
    from hwvit.report import publish

    if kind == "compare-report":
        from hwvit.report.write import FILES
    else:
        from hwvit.report.sweep_write import FILES
    try:
        publish.check_out_dir(out, kind, FILES)
    except ValueError as exc:
        fail(first_line(exc))


def check_out_dir(out_dir: str | os.PathLike | None, force: bool, kind: str) -> None:
    """Refuse an output directory before any work: see the module docstring for the rule."""
    assert kind in OUTPUT_KINDS, kind
    if out_dir is None:
        return
    out = Path(out_dir)
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        fail(f"{out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            fail(f"{out} already exists (use --force to replace it)")
        _check_previous(out, kind)
        return
    parent = next((p for p in out.absolute().parents if p.exists()), None)
    if parent is None or not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        fail(f"{out}: cannot create it ({parent} is not a writable directory)")
