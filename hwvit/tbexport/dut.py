"""The block a bench drives: the kind checked, the set read, the block's Verilog, parameters and
ports as yosys elaborates them for the set (so every bench signal has its port's exact width), and
for a streaming kind the bind that maps the block's ports onto the kind's logical interface."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The request/result units: valid/ready like the streams, one request at a time, several values
# per beat (docs/rtl.md). Tensor -> port of the reference block, in beat order.
UNITS = {
    "divu": {
        "inputs": (("dividend", "in_dividend_i"), ("divisor", "in_divisor_i")),
        "outputs": (("quotient", "out_quotient_o"), ("remainder", "out_remainder_o")),
    },
    "isqrt": {"inputs": (("radicand", "in_data_i"),), "outputs": (("root", "out_data_o"),)},
}
GEMM_PORTS = (
    "clk_i",
    "rst_ni",
    "start_i",
    "m_i",
    "k_i",
    "n_i",
    "a_signed_i",
    "busy_o",
    "done_o",
    "rd_en_o",
    "rd_m_o",
    "rd_n_o",
    "rd_k_o",
    "rd_a_i",
    "rd_w_i",
    "prm_n_o",
    "prm_bias_i",
    "prm_mult_i",
    "prm_shift_i",
    "out_valid_o",
    "out_ready_i",
    "out_m_o",
    "out_n_o",
    "out_acc_o",
    "out_data_o",
)
UNIT_PORTS = ("clk_i", "rst_ni", "in_valid_i", "in_ready_o", "out_valid_o", "out_ready_i")
GEMM_PARAMETERS = ("ROWS", "COLS", "OUT_BITS", "MAX_M", "MAX_K", "MAX_N")  # gemm.v's own


class ExportError(ValueError):
    """The bench cannot be written; the message is one line."""


@dataclass
class Design:
    bind: Any  # hwvit.byo.bind.Bind; None for a request/result unit or the GEMM engine
    top: str
    label: str  # how the mismatch line names the block
    parameters: dict[str, int]
    sources: list[Path]
    ports: dict[str, tuple[str, int]]  # port -> (direction, width) as elaborated


def stream_kinds() -> list[str]:
    from hwvit.byo import kinds

    return sorted(kinds.KINDS)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__


def read_set(kind: str, set_dir: Path):
    from hwvit import vectors

    if not set_dir.exists():
        raise ExportError(f"{set_dir}: no such vector set")
    try:
        vset = vectors.read(set_dir)
    except vectors.VectorSetError as exc:
        raise ExportError(first_line(exc)) from None
    if vset.kind != kind:
        raise ExportError(f"{set_dir}: a {vset.kind} set, not a {kind} set")
    return vset


def check_kind(kind: str) -> None:
    from hwvit import blocks

    names = blocks.names()
    if kind not in names:
        raise ExportError(f"unknown block kind {kind!r} (kinds: {', '.join(names)})")
    if kind not in stream_kinds() and kind not in UNITS and kind != "gemm":
        raise ExportError(
            f"{kind}: tb export writes benches of the streaming kinds ({', '.join(stream_kinds())}), "
            f"of {', '.join(UNITS)} and of gemm; {kind} is a kind without ports to drive: use `hwvit sim` for it"
        )


def reference_parameters(kind: str, vset) -> dict[str, int]:
    """The reference toplevel's parameters for a set: its testbench's ``hdl_parameters`` (the
    build `hwvit sim` makes), else the kind's declared ones."""
    from hwvit.blocks import get

    spec = get(kind)
    try:
        from hwvit.simulate.build import tb_module

        tb = tb_module(kind)
        if hasattr(tb, "hdl_parameters"):
            return {k: int(v) for k, v in tb.hdl_parameters(vset).items()}
    except Exception:  # noqa: BLE001 - no cocotb here: the kind's declared parameters build the same block
        pass
    return {k: int(v) for k, v in spec.parameters_for(vset).items()}


def reference_sources(kind: str) -> list[Path]:
    """The reference block's Verilog files (rtl/), the block's own first."""
    from hwvit import toolchain
    from hwvit.blocks import get

    return [p.resolve() for p in get(kind).rtl_paths(toolchain.repo().root)]


def _elaborated(sources: list[Path], top: str, params: dict[str, int]) -> dict[str, tuple[str, int]]:
    from hwvit import toolchain
    from hwvit.byo import elaborate

    try:
        return elaborate.ports(sources, top, params)
    except toolchain.ToolMissing as exc:
        raise ExportError(f"{first_line(exc)} (the bench's port widths come from the elaborated block)") from None
    except elaborate.ElaborationError as exc:
        raise ExportError(first_line(exc)) from None


def design(kind: str, vset, bind_path: str | None, rtl: list[str], top: str | None) -> Design:
    """The block of a bench: the reference one (rtl/, or ``rtl`` files with the reference ports) or,
    with ``bind_path``, the team's block in ``rtl`` through its bind file."""
    from hwvit.blocks import get
    from hwvit.byo import bind as bindmod

    if kind in UNITS or kind == "gemm":
        return _unit_design(kind, vset, bind_path, rtl, top)
    if bind_path is not None:
        if not rtl:
            raise ExportError("--bind needs --rtl FILE (your block's Verilog)")
        try:
            bind = bindmod.load(bind_path)
        except bindmod.BindError as exc:
            raise ExportError(first_line(exc)) from None
        if bind.kind != kind:
            raise ExportError(f"{bind_path}: binds a {bind.kind} block, not {kind}")
        top = top or bind.top
        if not top:
            raise ExportError(f"{bind_path}: no `top:`; give --top NAME")
        params = bind.hdl_parameters(vset.params)
        sources = [Path(p).resolve() for p in rtl]
        label = f"{top} ({kind})"
    else:
        from hwvit.byo.template import template
        from hwvit.textfiles import parse_yaml

        name = f"{kind} reference bind"
        bind = bindmod.parse(parse_yaml(template(kind), name), name)
        spec = get(kind)
        top = top or spec.top
        params = reference_parameters(kind, vset)
        if rtl:
            sources = [Path(p).resolve() for p in rtl]
            label = kind if top == spec.top else f"{top} ({kind})"
        else:
            sources = reference_sources(kind)
            label = kind
    for src in sources:
        if not src.is_file():
            raise ExportError(f"{src}: no such Verilog file")
    ports = _elaborated(sources, top, params)
    try:
        bindmod.check_ports(bind, top, ports, vset)
    except bindmod.BindError as exc:
        raise ExportError(first_line(exc)) from None
    return Design(bind, top, label, params, sources, ports)


def _unit_design(kind: str, vset, bind_path: str | None, rtl: list[str], top: str | None) -> Design:
    """divu, isqrt, gemm: the reference ports (an engine of your own keeps them: --rtl, --top)."""
    from hwvit.blocks import get

    if bind_path is not None:
        raise ExportError(f"{kind}: bind files cover the streaming kinds; give your {kind} the reference ports")
    spec = get(kind)
    top = top or spec.top
    sources = [Path(p).resolve() for p in rtl] if rtl else reference_sources(kind)
    params = reference_parameters(kind, vset)
    if kind == "gemm":  # sim/test_gemm.py's build of tb_gemm: these are gemm.v's own parameters
        params = {key: params[key] for key in GEMM_PARAMETERS}
    ports = _elaborated(sources, top, params)
    label = kind if top == spec.top else f"{top} ({kind})"
    if kind == "gemm":
        for port in GEMM_PORTS:
            if port not in ports:
                raise ExportError(f"{top}: no port {port} (a gemm has the reference ports, docs/rtl.md)")
        return Design(None, top, label, params, sources, ports)
    unit = UNITS[kind]
    wanted = [(p, "output" if p in ("in_ready_o", "out_valid_o") else "input") for p in UNIT_PORTS]
    wanted += [(p, "input") for _, p in unit["inputs"]]
    wanted += [(p, "output") for _, p in unit["outputs"]]
    for port, direction in wanted:
        if port not in ports or ports[port][0] != direction:
            raise ExportError(f"{top}: no {direction} port {port} (a {kind} has the reference ports, docs/rtl.md)")
    return Design(None, top, label, params, sources, ports)
