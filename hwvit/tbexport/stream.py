"""The bench of a streaming block (through its bind: the reference one or a team's) and of a
request/result unit (divu, isqrt: the reference ports): templates/stream.sv.tmpl, filled here from
the kind's logical interface (hwvit.byo.kinds), the bind, the elaborated ports and the set."""

from __future__ import annotations

from dataclasses import dataclass

from hwvit.tbexport import sv
from hwvit.tbexport.dut import UNITS, Design


@dataclass
class Check:
    """One compared output: the name the mismatch line gives it, the bench expressions of the value
    the block gave and the value expected of element ``n_out``, width, signedness, shape."""

    name: str
    got: str
    want: str
    bits: int
    signed: bool
    shape: tuple[int, ...]


class StreamBench:
    """What templates/stream.sv.tmpl needs of one block and one set: the ports the bench drives and
    reads, the beat it builds from the set's tensors, the outputs it compares, configuration, table."""

    template = "stream.sv.tmpl"

    def __init__(self, kind: str, vset, design: Design):
        self.kind, self.vset, self.d = kind, vset, design
        self.p = vset.params
        self.module = f"hwvit_tb_{kind}"
        self.sig: dict[str, int] = {}  # bound port -> width (its bench signal is s_<port>)
        self.regs: set[str] = set()  # ports the bench drives
        self.fields: list[dict] = []  # the parts of beat n, each set into a w_s_<port> temporary
        self.word_sigs: list[str] = []
        self.checks: list[Check] = []
        self.config: list[dict] = []  # configuration and tied ports: sig, value, note
        self.table: dict | None = None
        self.in_last: str | None = None
        self.row_work = 0  # a streaming kind's per-row work (hwvit.byo.kinds.Kind.row_work), in clocks
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
        part = "" if offset is None else f"[{offset + bits - 1}:{offset}]"
        self.fields.append(
            {"sig": sig, "slice": part, "value": sv.fit(f"v_{tensor}[n]", t.bits, bits, t.signed), "label": label}
        )
        if sig not in self.word_sigs:
            self.word_sigs.append(sig)

    def _check(self, name: str, tensor: str, got: str, bits: int, signed: bool) -> None:
        t = self.vset.tensors[tensor]
        want = sv.fit(f"v_{tensor}[n_out]", t.bits, bits, t.signed)
        self.checks.append(Check(name, got, want, bits, signed, tuple(int(s) for s in t.data.shape)))

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
        self.row_work = spec.row_work(p) if spec.row_work else 0
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
            self.checks.append(Check("last", got, "((n_out + 1) % ROW == 0)", 1, False, (self.n_out,)))
        for logical, port in b.ports.items():
            if logical in spec.config:
                sig = self.port(port, True)
                self._config(sig, sv.lit(spec.config[logical].value(p), self.sig[port]), logical)
        if spec.table is not None and "tbl_we" in b.ports:
            we, addr = self.port(b.ports["tbl_we"], True), self.port(b.ports["tbl_addr"], True)
            data = []
            for logical, f in spec.table.data.items():
                t = self.vset.tensors[f.tensor]
                sig = self.port(b.ports[logical], True)
                value = sv.fit(f"v_{f.tensor}[i]", t.bits, f.bits(p), t.signed)
                data.append({"sig": sig, "size": int(t.data.size), "value": value})
            entries = int(spec.table.entries(self.vset))
            self.table = {"we": we, "addr": addr, "addr_bits": self.sig[addr[2:]], "data": data, "entries": entries}
            self._config(we, "1'b0")
            self._config(addr, "'0")
            for d in data:
                self._config(d["sig"], "'0")
        for port, value in b.tie.items():
            self._config(self.port(port, True), sv.lit(value, self.d.ports[port][1]), "tie")

    def _config(self, sig: str, value: str, note: str | None = None) -> None:
        self.config.append({"sig": sig, "value": value, "note": note})

    @property
    def elements(self) -> int:
        """Elements compared per output beat (row-end flags are compared, not counted: byotb's rule)."""
        return sum(1 for c in self.checks if c.name != "last")

    def _ports(self) -> list[dict]:
        d = self.d
        unbound = [port for port, (way, _) in d.ports.items() if way == "output" and port not in self.sig]
        for port in unbound:  # connected all the same: a port left open is a warning (Verilator: fatal)
            self.sig[port] = d.ports[port][1]
        return [
            {
                "name": port,
                "width": width,
                "driven": port in self.regs,
                "direction": d.ports[port][0],
                "unchecked": port in unbound,
            }
            for port, width in self.sig.items()
        ]

    def _shown(self, k: int, c: Check) -> dict:
        """A check as the template writes it: declarations, compare, and its mismatch line."""
        if len(c.shape) == 2 and c.name != "last":
            fmt, index = "%0d, %0d", f"fi_{k} / {c.shape[1]}, fi_{k} % {c.shape[1]}"
        else:
            fmt, index = "%0d", f"fi_{k}"
        expected, given = (f"$signed(fe_{k})", f"$signed(fg_{k})") if c.signed else (f"fe_{k}", f"fg_{k}")
        return {
            "k": k,
            "name": c.name,
            "bits": c.bits,
            "got": c.got,
            "want": c.want,
            "index_format": fmt,
            "index": index,
            "expected": expected,
            "given": given,
        }

    def text(self) -> str:
        d = self.d
        ports = self._ports()
        return sv.render(
            self.template,
            **sv.header(self.kind, self.module, d, self.vset),
            n_in=self.n_in,
            n_out=self.n_out,
            row=self.row,
            idle_limit=4 * self.row + 2000 + self.row_work,
            tensors=sv.tensors(self.vset),
            ports=ports,
            parameters=list(d.parameters.items()),
            connections=[port for port in d.ports if port in self.sig],
            clock_half=sv.CLOCK_HALF,
            clk=self.clk,
            rst=self.rst,
            rst_active=self.active,
            in_valid=self.v_in,
            in_ready=self.r_in,
            out_valid=self.v_out,
            out_ready=self.r_out,
            out_valid_port=self.v_out_port,
            in_last=self.in_last,
            checks=[self._shown(k, c) for k, c in enumerate(self.checks)],
            words=[{"sig": s, "width": self.sig[s[2:]]} for s in self.word_sigs],
            fields=self.fields,
            config=self.config,
            table=self.table,
            where=sv.where(d, self.vset),
            elements=self.elements,
        )
