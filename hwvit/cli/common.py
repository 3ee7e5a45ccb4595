"""What every command shares: one-line errors, option decorators stacked as one, and the small
options many commands take (--json, -q, --seed, --batch).

The other shared options live by role: hwvit.cli.model_options (where the model comes from, how
it is quantized, where it runs), hwvit.cli.loading (the user's data; loading the model and the
data), hwvit.cli.outdir (output directories and the rule for replacing them), hwvit.cli.progress
(progress bars), hwvit.cli.sim_options (simulators, jobs, block kinds, a team's block) and
hwvit.cli.cluster_options (running on Dask). A command stacks the decorators it takes, e.g.::

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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click
from click.core import ParameterSource

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


class LazyChoice(click.Choice):
    """A Choice whose list is read on first use (a value to check, an error listing the choices),
    never for --help: the lists live beside torch and numba, whose imports would take a command's
    help from 0.2 s to 1-2.5 s. --help shows ``metavar``; `hwvit info` lists the choices."""

    def __init__(self, load: Callable[[], tuple[str, ...]], metavar: str) -> None:
        self._load = load
        self._metavar = metavar
        self.case_sensitive = True

    def get_metavar(self, param, ctx) -> str:
        return self._metavar

    def to_info_dict(self) -> dict[str, Any]:
        return {"param_type": "Choice", "name": self.name, "metavar": self._metavar, "case_sensitive": True}

    @property
    def choices(self) -> tuple[str, ...]:  # type: ignore[override]
        return tuple(self._load())

    @choices.setter
    def choices(self, value) -> None:  # click.Choice.__init__ assigns it; ours is computed
        pass


# --- options many commands take -----------------------------------------------------------------
json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")


def quiet_option(help: str = "No progress, only the summary line.") -> Callable[[F], F]:
    return click.option("-q", "--quiet", is_flag=True, help=help)


def seed_option(help: str = "Seed of random weights, inputs and cases.") -> Callable[[F], F]:
    return click.option("--seed", type=click.IntRange(0), default=0, show_default=True, help=help)


def batch_option(default: int | None, help: str) -> Callable[[F], F]:
    return click.option("--batch", type=click.IntRange(1), default=default, show_default=default is not None, help=help)
