"""`hwvit bind template KIND`: a commented bind file that fits the reference block of KIND as is.

A team edits the names to its own ports; the commented AXI4-Stream lines show the other style.
The text round-trips: hwvit.byo.bind.parse accepts it (tests/test_byo_bind.py checks both).
"""

from __future__ import annotations

from hwvit import blocks
from hwvit.byo import kinds
from hwvit.vectors.schema import PARAMS


def template(kind: str) -> str:
    spec = kinds.KINDS[kind]
    ref = kinds.REFERENCE_PORTS[kind]
    top = blocks.get(kind).top  # the reference block's module (a variant may be a parameter of another kind's block)
    lines = [
        f"# hwvit bind file: a {kind} block ({spec.doc}).",
        "# Maps the kind's logical ports onto your module's. Values below fit rtl/" + top + ".v as is;",
        "# rename them to your ports. Checked against your RTL (elaborated by yosys) before any simulation.",
        f"kind: {kind}",
        f"top: {top:<19} # your top module (or give --top NAME)",
        "clock: clk_i                # rising-edge clock",
        "reset:",
        "  port: rst_ni              # synchronous reset",
        "  active: low               # low | high",
        "interface: valid_ready      # valid_ready (one port per field) | axis (AXI4-Stream, fields in tdata)",
        "input:",
        "  valid: in_valid_i",
        "  ready: in_ready_o",
        "  fields:                   # one port per field, exactly this wide:",
    ]
    for name, f in spec.inputs.items():
        lines.append(f"    {name}: {ref['fields'][name]:<20}# {_width(f)}, {f.doc} (tensor {f.tensor})")
    out_name, out_field = spec.output
    lines += [
        "output:",
        "  valid: out_valid_o",
        "  ready: out_ready_i",
        "  fields:",
        f"    {out_name}: {ref['out']:<20}# {_width(out_field)}, {out_field.doc} (tensor {out_field.tensor})",
    ]
    if "last" in ref:
        lines.append(f"  last: {ref['last']:<23}# optional: high with the last element of each row (checked)")
    lines += [
        "# interface: axis instead: each field at a bit offset of tdata (or of tuser: {signal: tuser, offset: N}),",
        "# the input's tlast marks each row's end, the output's tlast is checked against it.",
        "# input:",
        "#   tdata: s_axis_tdata",
        "#   tvalid: s_axis_tvalid",
        "#   tready: s_axis_tready",
        "#   tlast: s_axis_tlast     # optional",
        "#   tuser: s_axis_tuser     # optional",
        "#   fields: {" + ", ".join(f"{n}: OFFSET" for n in spec.inputs) + "}",
        "# output: {tdata: m_axis_tdata, tvalid: m_axis_tvalid, tready: m_axis_tready, tlast: m_axis_tlast,",
        "#          fields: {" + f"{out_name}: 0" + "}}",
    ]
    ports = ref.get("ports", {})
    if ports:
        lines.append("ports:                       # steady configuration and the table write port (optional each)")
        for logical, port in ports.items():
            lines.append(f"  {logical}: {port:<22}# {_port_doc(spec, logical)}")
    else:
        lines.append("ports: {}                    # this kind has no configuration or table ports")
    lines.append("parameters:                  # each an integer, or `from: FIELD` of the set's manifest params")
    for name, field in spec.parameters.items():
        lines.append(f"  {name}: {{from: {field}}}")
    for name, value in spec.fixed.items():
        lines.append(f"  {name}: {value}")
    lines.append(f"# manifest fields of a {kind} set: {', '.join(PARAMS[kind])}")
    ties = "{" + ", ".join(f"{port}: {value}" for port, value in ref.get("tie", {}).items()) + "}"
    note = "# constant inputs the bind does not otherwise drive, e.g. {tkeep: 1}"
    lines.append(f"tie: {ties:<24}{note}")
    return "\n".join(lines) + "\n"


SAMPLE = {"in_bits": 8, "out_bits": 8, "row_len": 197, "entries": 256, "c": 192}


def _width(f: kinds.Field) -> str:
    try:
        bits = f"{f.bits({})} bits"
    except KeyError:
        try:
            bits = f"{f.bits(SAMPLE)} bits at in_bits = out_bits = 8"
        except KeyError:  # a kind of another width parameter: its default
            defaults = {k: v for k, v in blocks.get(kinds_of(f)).defaults.items() if isinstance(v, int)}
            bits = f"{f.bits(defaults)} bits at " + ", ".join(f"{k} = {v}" for k, v in defaults.items())
    return f"{'signed' if f.signed else 'unsigned'} {bits}"


def kinds_of(f: kinds.Field) -> str:
    """The kind whose ports hold field ``f``."""
    for name, spec in kinds.KINDS.items():
        fields = [*spec.inputs.values(), spec.output[1], *(spec.table.data.values() if spec.table else ())]
        if any(g is f for g in fields):
            return name
    raise KeyError(f.tensor)


def _port_doc(spec: kinds.Kind, logical: str) -> str:
    if logical in spec.config:
        return f"in, {spec.config[logical].doc}, held steady"
    if logical == "tbl_we":
        return f"in, 1 bit: write one table entry this clock ({spec.table.doc})"
    if logical == "tbl_addr":
        return "in, table address, wide enough for every entry"
    return f"in, {_width(spec.table.data[logical])}: {spec.table.data[logical].doc}"
