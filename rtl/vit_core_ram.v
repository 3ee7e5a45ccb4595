// vit_core_ram: a plain memory array with NR synchronous read ports and NW write ports.
//
// Every read port registers mem[raddr] on every clock (data one cycle after the address, the
// latency the GEMM engine and the stream engine expect); write port p writes wdata[p] at
// waddr[p] when we[p] (a higher port wins on the same address in the same cycle). An array
// indexed by variables in one clocked process, so yosys infers it as a memory ($mem cells, mapped
// to flip-flops without a RAM library) and simulators see one array. INIT names a $readmemh file
// loaded at time 0 (the testbench's image of the compiled model); "" leaves it uninitialised.
// Addresses at or past DEPTH read as X (Icarus) or 0 (Verilator) and are never written by a
// compiled program (hwvit.core.compile checks every region against the depths).

`default_nettype none

module vit_core_ram #(
  parameter integer W     = 8,     // word width
  parameter integer DEPTH = 1024,  // words
  parameter integer NR    = 1,     // read ports
  parameter integer NW    = 1,     // write ports
  parameter integer AW    = $clog2(DEPTH),
  parameter         INIT  = ""
) (
  input  wire             clk_i,
  input  wire [NR*AW-1:0] raddr_i,
  output reg  [NR*W-1:0]  rdata_o,
  input  wire [NW-1:0]    we_i,
  input  wire [NW*AW-1:0] waddr_i,
  input  wire [NW*W-1:0]  wdata_i
);

  reg [W-1:0] mem [0:DEPTH-1];

  generate
    if (INIT != "") begin : g_init
      initial $readmemh(INIT, mem);
    end
  endgenerate

  integer p;
  always @(posedge clk_i) begin
    for (p = 0; p < NW; p = p + 1) begin
      if (we_i[p]) mem[waddr_i[p*AW +: AW]] <= wdata_i[p*W +: W];
    end
    for (p = 0; p < NR; p = p + 1) begin
      rdata_o[p*W +: W] <= mem[raddr_i[p*AW +: AW]];
    end
  end

endmodule

`default_nettype wire
