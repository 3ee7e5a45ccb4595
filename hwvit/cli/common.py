"""Options and helpers shared by the commands: each shared option is defined once, here.

A command stacks the decorators it takes, e.g.::

    @click.command()
    @model_options
    @qconfig_options
    @data_options(limit_help="...")
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

import contextlib
import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
from click.core import ParameterSource

from hwvit import blocks, toolchain
from hwvit.formats import Calibration, ExpMode
from hwvit.textfiles import first_line

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
        type=_LazyChoice(_model_families),
        help="Key names of --checkpoint.  [default: read from the key names]",
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


# --- the user's data ----------------------------------------------------------------------------
MODEL_KEYS = ("preset", "checkpoint", "family", "config_path", "heads")
DATA_KEYS = ("images_path", "calib_path", "labels_csv", "limit", "resize", "crop", "rescale", "mean", "std")
_PREPROCESS_FLAGS = (
    ("resize", "--resize"),
    ("crop", "--crop"),
    ("rescale", "--rescale"),
    ("mean", "--mean"),
    ("std", "--std"),
)


def data_options(limit_help: str) -> Callable[[F], F]:
    """--images/--calib PATH, --labels CSV, --limit N and the preprocessing flags: the user's data.

    A PATH is a folder of PNG/JPEG (class sub-folders or a labels.csv give labels), one image, or
    an .npy/.npz array. The command receives the values under DATA_KEYS (see `load_data`)."""

    def deco(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if kwargs["labels_csv"] and not kwargs["images_path"]:
                refuse("--labels applies to --images only")
            if not (kwargs["images_path"] or kwargs["calib_path"]):
                for name, flag in _PREPROCESS_FLAGS:
                    if kwargs[name] is not None:
                        refuse(f"{flag} applies to --images/--calib only")
            return func(*args, **kwargs)

        return options(
            click.option(
                "--images",
                "images_path",
                type=click.Path(exists=True),
                metavar="PATH",
                help="Evaluation data: a folder of PNG/JPEG (labels from class sub-folders or labels.csv), "
                "one image, or an .npy/.npz array.  [default: digits' held-out split; else random]",
            ),
            click.option(
                "--calib",
                "calib_path",
                type=click.Path(exists=True),
                metavar="PATH",
                help="Calibration data, same forms.  [default: a disjoint part of --images]",
            ),
            click.option(
                "--labels",
                "labels_csv",
                type=click.Path(exists=True, dir_okay=False),
                metavar="CSV",
                help="Labels of --images as file,label rows.",
            ),
            click.option("--limit", type=click.IntRange(1), help=limit_help),
            click.option(
                "--resize",
                metavar="N|HxW",
                help="Resize: shortest edge to N, or to exactly HxW.  "
                "[default: the checkpoint's preprocessor_config.json, else the model's size]",
            ),
            click.option("--crop", metavar="N|HxW", help="Center crop after resizing."),
            click.option("--rescale", type=float, help="Factor on raw pixel values.  [default: 1/255]"),
            click.option("--mean", metavar="M[,M,M]", help="Per-channel mean, subtracted after rescaling."),
            click.option("--std", metavar="S[,S,S]", help="Per-channel std, divided by after the mean."),
        )(wrapper)  # type: ignore[return-value]

    return deco


def load_data(kwargs: dict, seed: int = 0, calib_images: int = 256):
    """(Source, Data) for the values of model_options and data_options (popped from ``kwargs``)."""
    from hwvit import pipeline

    m = {k: kwargs.pop(k, None) for k in MODEL_KEYS}
    d = {k: kwargs.pop(k, None) for k in DATA_KEYS}
    try:
        source = pipeline.load_source(
            m["preset"], m["checkpoint"], m["family"], m["config_path"], seed=seed, heads=m["heads"]
        )
        pre = pipeline.preprocessing(source, d["resize"], d["crop"], d["mean"], d["std"], d["rescale"])
        data = pipeline.plan_data(
            source, d["images_path"], d["calib_path"], d["labels_csv"], calib_images, d["limit"], seed, pre=pre
        )
    except (ValueError, OSError, KeyError) as exc:
        fail(first_line(exc))
    return source, data


def build_models(kwargs: dict, qconfig, calib_images: int, seed: int = 0, recipe=None):
    """(Source, Data, IntViT) for the model and data options; bad input becomes a one-line error."""
    from hwvit.quant import quantize_model

    source, data = load_data(kwargs, seed, calib_images)
    if source.imported is not None:  # a quantized ONNX file: its own integer model, hwvit's arithmetic
        # only where it computes in float (softmax, LayerNorm: --variant)
        if recipe is not None:
            refuse("--recipe does not apply to a quantized ONNX file: its quantizers are the file's")
        qc = qconfig or None
        softmax = getattr(qc, "softmax", "hwvit")
        layernorm = getattr(qc, "layernorm", "hwvit")
        if (softmax, layernorm) != ("hwvit", "hwvit"):
            from hwvit.onnx.build import load as load_onnx

            try:
                source.imported = load_onnx(source.name, softmax=softmax, layernorm=layernorm)
            except (ValueError, OSError) as exc:
                fail(first_line(exc))
        return source, data, source.imported.int_model
    try:
        return source, data, quantize_model(source.model, data.calib, qconfig, recipe=recipe)
    except (ValueError, OSError, KeyError) as exc:
        fail(first_line(exc))


def describe_data(data, quiet: bool) -> None:
    """The preprocessing and where calibration data came from, on stderr (stdout stays for results)."""
    if quiet:
        return
    if data.pre is not None:
        click.echo(f"preprocessing: {data.pre.describe()}", err=True)
    for note in data.notes:
        click.echo(note, err=True)


@contextlib.contextmanager
def progress(data, quiet: bool, what: str = "evaluating"):
    """A tqdm bar over a streamed evaluation set (silenced by -q)."""
    from tqdm import tqdm

    if not hasattr(data.inputs, "progress"):
        yield
        return
    with tqdm(total=len(data.inputs), unit="img", disable=quiet, leave=False, desc=what, mininterval=0.5) as bar:
        data.inputs.progress = bar.update
        try:
            yield
        finally:
            data.inputs.progress = None


# --- simulators ---------------------------------------------------------------------------------
class _SimulatorChoice(click.Choice):
    """Every simulator cocotb's runner drives Verilog on, and "both"; a VHDL-only one of cocotb's
    (ghdl, nvc) is refused in one line that says why."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value in toolchain.VHDL_ONLY:
            self.fail(toolchain.vhdl_only(value), param, ctx)
        return super().convert(value, param, ctx)


def simulator_option(
    help: str = "Simulator(s) to run: both = icarus + verilator (the two installed here); the others "
    "need their vendor's executables on PATH (docs/verification.md, Simulators).",
) -> Callable[[F], F]:
    return click.option(
        "--simulator",
        type=_SimulatorChoice([*toolchain.RUNNER_SIMULATORS, "both"]),
        default=toolchain.Simulator.VERILATOR.value,
        show_default=True,
        help=help,
    )


def jobs_option(default: int = 1) -> Callable[[F], F]:
    return click.option(
        "-j", "--jobs", type=click.IntRange(1), default=default, show_default=True, help="Parallel simulations."
    )


build_dir_option = click.option(
    "--build-dir",
    type=click.Path(file_okay=False),
    help="Where simulator builds are cached  [default: $XDG_CACHE_HOME/hwvit/sim_build, else ~/.cache/hwvit/sim_build]",
)


def block_kind_option(help: str, multiple: bool = False) -> Callable[[F], F]:
    """--block KIND: a block kind of the vector-set contract."""
    return click.option(
        "--block", "kinds" if multiple else "kind", type=click.Choice(blocks.names()), multiple=multiple, help=help
    )


def require_simulators(simulator: str) -> list[str]:
    """The simulators named by --simulator (one of toolchain.RUNNER_SIMULATORS, or both = icarus
    and verilator), each checked installed, and the source checkout's rtl/ and sim/; a missing one
    is a one-line error (exit 1) with its install command, or the executables it lacks on PATH."""
    sims = list(toolchain.SIMULATORS) if simulator == "both" else [simulator]
    try:
        for sim in sims:
            toolchain.require(sim)
        toolchain.repo()
    except toolchain.ToolMissing as exc:
        fail(str(exc))
    return sims


def byo_options(func: F) -> F:
    """--rtl FILE (repeatable) --top NAME --bind FILE: a team's own block instead of the reference one."""
    return options(
        click.option(
            "--rtl",
            "rtl_files",
            multiple=True,
            type=click.Path(exists=True, dir_okay=False),
            help="Your block's Verilog (repeatable: every file it needs), checked through --bind.",
        ),
        click.option("--top", help="Your top module  [default: `top:` of the bind file]"),
        click.option(
            "--bind",
            "bind_path",
            type=click.Path(exists=True, dir_okay=False),
            help="Bind file mapping your ports and parameters onto the block kind "
            "(`hwvit bind template KIND` prints one).",
        ),
    )(func)


# --- output -------------------------------------------------------------------------------------
json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
force_option = click.option(
    "--force",
    is_flag=True,
    help="Replace a non-empty output directory holding a previous hwvit output of the same kind.",
)


def quiet_option(help: str = "No progress, only the summary line.") -> Callable[[F], F]:
    return click.option("-q", "--quiet", is_flag=True, help=help)


def seed_option(help: str = "Seed of random weights, inputs and cases.") -> Callable[[F], F]:
    return click.option("--seed", type=click.IntRange(0), default=0, show_default=True, help=help)


def out_option(
    help: str, *, required: bool = False, default: str | None = None, name: str = "--out", dest: str = "out_dir"
) -> Callable[[F], F]:
    """An output directory option (checked with `check_out_dir` before the work starts)."""
    return click.option(
        name,
        dest,
        type=click.Path(file_okay=False),
        required=required,
        default=default,
        show_default=default is not None,
        help=help,
    )


def vector_output_options(out_help: str) -> Callable[[F], F]:
    """--out DIR --force --seed N -q: the options both vector commands share."""
    return options(
        out_option(out_help, required=True),
        force_option,
        seed_option("Seed of the random inputs and cases."),
        quiet_option(),
    )


OUTPUT_KINDS = ("vectors", "compare-report", "sweep")


def _check_previous(out: Path, kind: str) -> None:
    """Fail unless the non-empty ``out`` holds a previous hwvit output of ``kind`` (what --force replaces)."""
    if kind == "vectors":
        from hwvit.vectors import find_sets

        if not find_sets(out):
            fail(
                f"{out}: --force replaces only vector sets, and it holds none (no manifest.yaml); "
                "choose another directory"
            )
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
        type=_LazyChoice(_gemm_choices),
        default=None,
        help="CPU GEMM backend (default: $HWVIT_GEMM, else the fastest exact one, probed once per machine).",
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


def batch_option(default: int | None, help: str) -> Callable[[F], F]:
    return click.option("--batch", type=click.IntRange(1), default=default, show_default=default is not None, help=help)


# --- where the work runs ------------------------------------------------------------------------
def cluster_options(func: F) -> F:
    """--cluster SPEC and --cluster-opt key=value (repeatable): run the command's tasks on Dask.

    The command receives ``cluster``: a parsed ``hwvit.cluster.ClusterSpec``, or None (run here,
    as without the option). Connect with ``cluster_client(spec)``."""

    @click.option(
        "--cluster",
        "cluster_spec",
        metavar="SPEC",
        help="Run on Dask: local[:N] (N worker processes here), tcp://HOST:PORT (a running "
        "`dask scheduler`), or slurm|lsf|pbs|sge (dask-jobqueue, see --cluster-opt).",
    )
    @click.option(
        "--cluster-opt",
        "cluster_opts",
        multiple=True,
        metavar="KEY=VALUE",
        help="Option of the jobqueue cluster (cores=4 memory=8GB queue=Q walltime=01:00:00 jobs=N), "
        "or timeout=S to reach the scheduler (every kind, default 10).",
    )
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        from hwvit import cluster

        spec, opts = kwargs.pop("cluster_spec"), kwargs.pop("cluster_opts")
        if opts and not spec:
            refuse("--cluster-opt applies to --cluster only")
        try:
            kwargs["cluster"] = cluster.parse(spec, opts) if spec else None
        except ValueError as exc:
            refuse(first_line(exc))
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


@contextlib.contextmanager
def cluster_client(spec):
    """A Dask client on ``spec`` (a ClusterSpec); unreachable or unstartable: one line, exit 1."""
    from hwvit import cluster

    try:
        with cluster.connect(spec) as client:
            yield client  # the body never raises ClusterError: only connecting does
    except cluster.ClusterError as exc:
        fail(str(exc))
