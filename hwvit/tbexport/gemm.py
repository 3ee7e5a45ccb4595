"""The bench of the GEMM engine: templates/gemm.sv.tmpl, filled here from the set's job (M, K, N,
the output width, signedness of A) and the engine's elaborated ports (sim/tb_gemm.v's memory model,
in the bench's words)."""

from __future__ import annotations

from hwvit.tbexport import sv
from hwvit.tbexport.dut import Design


class GemmBench:
    """Operand and parameter memories read through the engine's ports (one clock of latency), one
    job started, the output rows taken with random ready drops and written into result images, then
    acc and y compared element by element."""

    template = "gemm.sv.tmpl"
    n_out = 1
    elements = 2  # acc and y of every output element

    def __init__(self, vset, design: Design):
        self.vset, self.d = vset, design
        self.kind, self.module = "gemm", "hwvit_tb_gemm"

    def text(self) -> str:
        d, p, ports = self.d, self.vset.params, self.d.ports
        m, k, n = int(p["m"]), int(p["k"]), int(p["n"])
        rows, cols = int(d.parameters["ROWS"]), int(d.parameters["COLS"])

        def address(port: str) -> str:
            return sv.as_int(f"s_{port}", ports[port][1])

        return sv.render(
            self.template,
            **sv.header(self.kind, self.module, d, self.vset),
            m=m,
            k=k,
            n=n,
            rows=rows,
            cols=cols,
            out_bits=int(p["out_bits"]),
            idle_limit=4 * k + 8 * (rows + cols) + 2000,
            tensors=sv.tensors(self.vset),
            ports=[{"name": port, "direction": way, "width": width} for port, (way, width) in ports.items()],
            parameters=list(d.parameters.items()),
            connections=list(ports),
            clock_half=sv.CLOCK_HALF,
            rd_m=address("rd_m_o"),
            rd_n=address("rd_n_o"),
            rd_k=address("rd_k_o"),
            prm_n=address("prm_n_o"),
            out_m=address("out_m_o"),
            out_n=address("out_n_o"),
            job_m=sv.lit(m, ports["m_i"][1]),
            job_k=sv.lit(k, ports["k_i"][1]),
            job_n=sv.lit(n, ports["n_i"][1]),
            a_signed=1 if p["a_signed"] else 0,
            where=sv.where(d, self.vset),
        )
