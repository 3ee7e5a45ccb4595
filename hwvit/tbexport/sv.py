"""SystemVerilog text: the expressions a bench's values need, and the templates that hold the rest.

The benches' text lives in ``templates/*.sv.tmpl`` (Jinja2): SystemVerilog a verification engineer
can read as such, with ``{{ name }}`` where the set or the block gives a value and ``{% for %}``
where a statement repeats per port, tensor or compared output. ``render`` fills one from a context
of plain values; the expressions below are the few that depend on widths known only at export.
"""

from __future__ import annotations

import functools
from pathlib import Path

FILES_LIST = "files.f"
CLOCK_HALF = 5  # time units per clock half period (the bench sets no timescale)
MAX_STALL = 95


def lit(value: int, width: int) -> str:
    """``value`` as a sized unsigned literal of ``width`` bits (two's complement for a negative)."""
    return f"{width}'d{int(value) & ((1 << width) - 1)}"


def as_int(sig: str, width: int) -> str:
    """An unsigned port of ``width`` <= 32 bits as a 32-bit value (no width warning in arithmetic)."""
    return sig if width >= 32 else f"{{{32 - width}'d0, {sig}}}"


def sv_str(text: str) -> str:
    """``text`` inside a SystemVerilog string literal."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def fit(expr: str, have: int, want: int, signed: bool) -> str:
    """``expr`` (``have`` bits) as exactly ``want`` bits: cut, or sign/zero extended."""
    if have == want:
        return expr
    if have > want:
        return f"{expr}[{want - 1}:0]"
    fill = f"{expr}[{have - 1}]" if signed else "1'b0"
    return f"{{{{{want - have}{{{fill}}}}}, {expr}}}"


def packed(width: int) -> str:
    """The packed range of a ``width``-bit signal with its trailing space, none for one bit."""
    return f"[{width - 1}:0] " if width > 1 else ""


@functools.cache
def _environment():
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
        undefined=jinja2.StrictUndefined,  # a name the driver did not give is an error, not ""
        trim_blocks=True,  # a line holding only a {% tag %} leaves nothing in the bench
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["packed"] = packed
    return env


def render(template: str, **context) -> str:
    return _environment().get_template(template).render(**context)


def header(kind: str, module: str, d, vset) -> dict:
    """The values of templates/header.sv.tmpl: what the bench checks and how to run it."""
    from hwvit import __version__

    b = d.bind
    if b is None and kind == "gemm":
        interface = "reference ports (operand and parameter read ports, output rows; reset rst_ni active low)"
    elif b is None:
        interface = "reference ports (valid_ready, one request at a time; reset rst_ni active low)"
    else:
        style = f"{b.style}, reset {b.reset} active {'high' if b.reset_active_high else 'low'}"
        interface = f"{'bind file ' + b.path if d.label != kind else 'reference ports'} ({style})"
    return {
        "module": module,
        "kind": kind,
        "top": d.top,
        "set_path": vset.path,
        "set_dir": Path(vset.directory).resolve(),
        "block_parameters": ", ".join(f"{k}={v}" for k, v in d.parameters.items()),
        "source_names": ", ".join(s.name for s in d.sources),
        "interface": interface,
        "files_list": FILES_LIST,
        "max_stall": MAX_STALL,
        "version": __version__,
    }


def where(d, vset) -> str:
    """How the mismatch line names the block and the set (sim/tbutil.py ``finish``'s words)."""
    return sv_str(f"{d.label} {vset.path} ({Path(vset.directory).resolve()})")


def tensors(vset) -> list[dict]:
    """The set's tensors as the bench declares and reads them: name, width, size, .hex file, role."""
    return [
        {
            "name": name,
            "bits": t.bits,
            "size": int(t.data.size),
            "hex": vset.hex_path(name).name,
            "role": t.role,
            "signedness": "signed" if t.signed else "unsigned",
        }
        for name, t in vset.tensors.items()
    ]
