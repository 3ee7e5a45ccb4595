"""Bind files: a team's block ports and parameters mapped onto a block kind's logical interface.

``load(path)`` reads the YAML (safe_load) and checks its shape: every mistake is a one-line
``BindError`` before anything is elaborated. ``check_ports(bind, ports, vset)`` then checks the
names, directions and widths against the block as yosys elaborated it for that set.
docs/byo.md describes the format; ``hwvit bind template KIND`` prints a commented one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwvit.byo import kinds
from hwvit.formats import NamedMode
from hwvit.textfiles import read_yaml


class Interface(NamedMode):
    """A bound block's stream handshake (a bind file's ``interface``)."""

    VALID_READY = "valid_ready"  # one port per field, valid/ready (the reference blocks)
    AXIS = "axis"  # AXI4-Stream: the fields packed in tdata


STYLES = Interface.values()
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")
TOP_KEYS = {"kind", "top", "clock", "reset", "interface", "input", "output", "ports", "parameters", "tie"}
STREAM_KEYS = {
    Interface.VALID_READY: {"valid", "ready", "fields", "last"},
    Interface.AXIS: {"tdata", "tvalid", "tready", "tlast", "tuser", "fields"},
}
TABLE_CTRL = ("tbl_we", "tbl_addr")


class BindError(ValueError):
    """A bind file that cannot work; the message is one line naming the file and the entry."""


@dataclass(frozen=True)
class Bind:
    path: str
    kind: str
    top: str | None
    clock: str
    reset: str
    reset_active_high: bool
    style: str
    input: dict[str, Any]  # handshake names (+ tlast/tuser) and "fields"
    output: dict[str, Any]
    ports: dict[str, str]  # logical config/table port -> block port
    parameters: dict[str, Any]  # HDL parameter -> int or {"from": field}
    tie: dict[str, int]

    @property
    def spec(self) -> kinds.Kind:
        return kinds.KINDS[self.kind]

    def hdl_parameters(self, params: dict[str, Any]) -> dict[str, int]:
        """The block's parameter values for a set with manifest ``params``."""
        out = {}
        for name, src in self.parameters.items():
            out[name] = int(params[src["from"]]) if isinstance(src, dict) else int(src)
        return out

    def plan(self, top: str) -> dict[str, Any]:
        """What the cocotb testbench needs (JSON-able): names, offsets, polarity."""
        return {
            "kind": self.kind,
            "top": top,
            "clock": self.clock,
            "reset": self.reset,
            "reset_active_high": self.reset_active_high,
            "style": self.style,
            "input": self.input,
            "output": self.output,
            "ports": self.ports,
            "tie": self.tie,
        }


def _err(path: str, text: str) -> BindError:
    return BindError(f"{path}: {text}")


def _name(path: str, where: str, value: Any) -> str:
    if not isinstance(value, str) or not IDENT.match(value):
        raise _err(path, f"{where}: expected a port name, got {value!r}")
    return value


def _mapping(path: str, where: str, value: Any, required: bool = True) -> dict:
    if value is None and not required:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise _err(path, f"{where}: expected a mapping")
    return value


def _stream(path: str, where: str, raw: Any, style: str, fields: list[str]) -> dict[str, Any]:
    raw = _mapping(path, where, raw)
    unknown = sorted(set(raw) - STREAM_KEYS[style])
    if unknown:
        raise _err(path, f"{where}.{unknown[0]}: not a {style} signal (use {', '.join(sorted(STREAM_KEYS[style]))})")
    needed = ("valid", "ready") if style == Interface.VALID_READY else ("tdata", "tvalid", "tready")
    out: dict[str, Any] = {}
    for key in sorted(set(raw) - {"fields"}):
        out[key] = _name(path, f"{where}.{key}", raw[key])
    for key in needed:
        if key not in out:
            raise _err(path, f"{where}.{key} missing (the testbench follows the {style} handshake)")
    given = _mapping(path, f"{where}.fields", raw.get("fields"))
    for f in fields:
        if f not in given:
            raise _err(path, f"{where}.fields.{f} missing (fields: {', '.join(fields)})")
    for f in given:
        if f not in fields:
            raise _err(path, f"{where}.fields.{f}: no such field (fields: {', '.join(fields)})")
    placed = {}
    for f in fields:
        value = given[f]
        if style == Interface.VALID_READY:
            placed[f] = _name(path, f"{where}.fields.{f}", value)
            continue
        if isinstance(value, dict):
            signal, offset = value.get("signal", "tdata"), value.get("offset")
            extra = set(value) - {"signal", "offset"}
            if extra:
                raise _err(path, f"{where}.fields.{f}.{sorted(extra)[0]}: unknown key (signal, offset)")
        else:
            signal, offset = "tdata", value
        if signal not in ("tdata", "tuser"):
            raise _err(path, f"{where}.fields.{f}.signal: {signal!r} is not tdata or tuser")
        if signal == "tuser" and "tuser" not in out:
            raise _err(path, f"{where}.fields.{f} is in tuser but {where}.tuser names no port")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise _err(path, f"{where}.fields.{f}: bit offset must be an integer >= 0, got {offset!r}")
        placed[f] = {"signal": signal, "offset": offset}
    out["fields"] = placed
    return out


def parse(data: Any, path: str = "bind") -> Bind:
    """A Bind from the YAML document ``data``; BindError on the first problem."""
    from hwvit.vectors.schema import PARAMS

    data = _mapping(path, "top level", data)
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise _err(path, f"{unknown[0]}: unknown key (keys: {', '.join(sorted(TOP_KEYS))})")
    kind = data.get("kind")
    if kind == "gemm":
        raise _err(
            path,
            "kind gemm: the GEMM engine reads operand memories, not a stream; docs/rtl.md "
            "(gemm, operand-memory interface) describes the adapter to write",
        )
    if kind not in kinds.KINDS:
        raise _err(path, f"kind: {kind!r} is not one of {', '.join(kinds.KINDS)}")
    spec = kinds.KINDS[kind]
    style = data.get("interface")
    if style not in STYLES:
        raise _err(path, f"interface: unknown interface style {style!r} ({' or '.join(STYLES)})")
    for key in ("clock", "reset", "input", "output"):
        if key not in data:
            raise _err(path, f"{key} missing")
    clock = _name(path, "clock", data["clock"])
    reset = data["reset"]
    if isinstance(reset, str):
        reset = {"port": reset}
    reset = _mapping(path, "reset", reset)
    if reset.get("active", "low") not in ("low", "high"):
        raise _err(path, f"reset.active: {reset.get('active')!r} is not low or high")
    top = data.get("top")
    if top is not None:
        top = _name(path, "top", top)
    inp = _stream(path, "input", data["input"], style, list(spec.inputs))
    out = _stream(path, "output", data["output"], style, [spec.output[0]])
    ports = {k: _name(path, f"ports.{k}", v) for k, v in _mapping(path, "ports", data.get("ports"), False).items()}
    allowed = list(spec.config) + (list(TABLE_CTRL) + list(spec.table.data) if spec.table else [])
    for key in ports:
        if key not in allowed:
            raise _err(path, f"ports.{key}: {kind} has no port {key} (ports: {', '.join(allowed) or 'none'})")
    if spec.table:
        table_ports = list(TABLE_CTRL) + list(spec.table.data)
        given = [p for p in table_ports if p in ports]
        if given and len(given) != len(table_ports):
            missing = [p for p in table_ports if p not in ports][0]
            raise _err(path, f"ports.{missing} missing: the table port needs {', '.join(table_ports)}")
    if spec.row_len and "tlast" not in inp and not any(k in ports for k in ("row_len", "c")):
        raise _err(
            path,
            f"{kind} rows need a row-length port (ports.{'c' if kind == 'layernorm' else 'row_len'}) or input.tlast",
        )
    params = {}
    for name, src in _mapping(path, "parameters", data.get("parameters"), False).items():
        _name(path, f"parameters.{name}", name)
        if isinstance(src, int) and not isinstance(src, bool):
            params[name] = src
        elif isinstance(src, dict) and set(src) == {"from"} and src["from"] in PARAMS[kind]:
            params[name] = {"from": src["from"]}
        else:
            raise _err(
                path,
                f"parameters.{name} has no source: give an integer or `from: FIELD` with FIELD one "
                f"of {', '.join(PARAMS[kind])}",
            )
    tie = {}
    for port, value in _mapping(path, "tie", data.get("tie"), False).items():
        _name(path, f"tie.{port}", port)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise _err(path, f"tie.{port}: expected an integer >= 0, got {value!r}")
        tie[port] = value
    return Bind(
        path,
        kind,
        top,
        clock,
        _name(path, "reset.port", reset.get("port")),
        reset.get("active") == "high",
        style,
        inp,
        out,
        ports,
        params,
        tie,
    )


def load(path: str | Path) -> Bind:
    """Read and check a bind file (YAML, safe_load)."""
    return parse(read_yaml(path, error=BindError), str(path))


# ---------------------------------------------------------------------------- against the RTL


def _signals(bind: Bind, vset) -> list[tuple[str, str, str, int, str]]:
    """(where, port, direction, needed width, how: 'eq'|'ge') of every bound port for a set."""
    spec, p = bind.spec, vset.params
    rows = [("clock", bind.clock, "input", 1, "eq"), ("reset.port", bind.reset, "input", 1, "eq")]
    for side, stream, into in (("input", bind.input, "input"), ("output", bind.output, "output")):
        back = "output" if into == "input" else "input"
        fields = spec.inputs if side == "input" else dict([spec.output])
        if bind.style == Interface.VALID_READY:
            rows += [
                (f"{side}.valid", stream["valid"], into, 1, "eq"),
                (f"{side}.ready", stream["ready"], back, 1, "eq"),
            ]
            if "last" in stream:
                rows.append((f"{side}.last", stream["last"], into, 1, "eq"))
            rows += [
                (f"{side}.fields.{f}", port, into, fields[f].bits(p), "eq") for f, port in stream["fields"].items()
            ]
            continue
        rows += [
            (f"{side}.tvalid", stream["tvalid"], into, 1, "eq"),
            (f"{side}.tready", stream["tready"], back, 1, "eq"),
        ]
        if "tlast" in stream:
            rows.append((f"{side}.tlast", stream["tlast"], into, 1, "eq"))
        for signal in ("tdata", "tuser"):
            placed = [(f, v["offset"], fields[f].bits(p)) for f, v in stream["fields"].items() if v["signal"] == signal]
            placed.sort(key=lambda t: t[1])
            for (f1, o1, b1), (f2, o2, _) in zip(placed, placed[1:]):
                if o1 + b1 > o2:
                    raise BindError(
                        f"{bind.path}: {side}.fields.{f1} (bits {o1}..{o1 + b1 - 1}) overlaps {f2} (from bit {o2})"
                    )
            if signal in stream:
                need = max((o + b for _, o, b in placed), default=1)
                rows.append((f"{side}.{signal}", stream[signal], into, need, "ge"))
    for logical, port in bind.ports.items():
        if logical in spec.config:
            rows.append((f"ports.{logical}", port, "input", spec.config[logical].bits(p), "ge"))
        elif logical == "tbl_we":
            rows.append((f"ports.{logical}", port, "input", 1, "eq"))
        elif logical == "tbl_addr":
            rows.append((f"ports.{logical}", port, "input", spec.table.addr_bits(p), "ge"))
        else:
            rows.append((f"ports.{logical}", port, "input", spec.table.data[logical].bits(p), "eq"))
    rows += [(f"tie.{port}", port, "input", max(1, v.bit_length()), "ge") for port, v in bind.tie.items()]
    return rows


def check_ports(bind: Bind, top: str, ports: dict[str, tuple[str, int]], vset) -> None:
    """Every bound port exists with the right direction and width; every input is driven."""
    bound = set()
    for where, port, direction, width, how in _signals(bind, vset):
        if port not in ports:
            raise BindError(f"{bind.path}: {where}: {top} has no port {port!r} (ports: {', '.join(ports)})")
        have_dir, have = ports[port]
        if have_dir != direction:
            raise BindError(
                f"{bind.path}: {where}: port {port} of {top} is an {have_dir}, the bind needs an {direction}"
            )
        if (how == "eq" and have != width) or (how == "ge" and have < width):
            need = f"{width}" if how == "eq" else f"at least {width}"
            raise BindError(
                f"{bind.path}: {where}: port {port} of {top} is {have} bits wide, {bind.kind} needs {need} "
                f"(set {vset.directory.name})"
            )
        bound.add(port)
    for port, (direction, _) in ports.items():
        if direction == "input" and port not in bound:
            raise BindError(
                f"{bind.path}: input {port} of {top} is not bound (bind it or give it a constant under tie:)"
            )
