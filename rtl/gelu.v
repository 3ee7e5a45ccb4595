// gelu: GELU by a loadable lookup table (twin of hwvit.ops.gelu).
//
//   y = table[x + 2^(IN_BITS-1)]        (2^IN_BITS entries of signed OUT_BITS)
//
// Entry i holds the correctly rounded output for input q = i - 2^(IN_BITS-1) (hwvit.quant.gelu_table,
// docs/arithmetic.md "gelu"); the table is written through the tbl_* port, one entry per cycle,
// and then x is streamed. Adding 2^(IN_BITS-1) to a two's-complement x is inverting its sign bit,
// so the lookup address costs one inverter.
//
// Pipeline: the table read is registered into the output register: one beat per cycle, latency 1
// cycle. in_ready_o depends combinationally on out_ready_i.
// Table writes take effect on the next cycle; load the table while no lookup is in flight (a
// lookup of the address being written in the same cycle reads the old entry).
// Reset (rst_ni, synchronous, active low) empties the output register and zeroes it; it does not
// clear the table (a RAM), which keeps its contents across a reset.

`default_nettype none

module gelu #(
  // Input width (signed): the table has 2^IN_BITS entries (256 for 8 bits). At least 2.
  parameter integer IN_BITS  = 8,
  // Table entry and output width (signed).
  parameter integer OUT_BITS = 8
) (
  input  wire                clk_i,
  input  wire                rst_ni,

  // ---- table write port ----
  input  wire                tbl_we_i,
  input  wire [IN_BITS-1:0]  tbl_addr_i,  // entry index i = q + 2^(IN_BITS-1)
  input  wire [OUT_BITS-1:0] tbl_data_i,  // signed entry

  // ---- input stream ----
  input  wire                in_valid_i,
  output wire                in_ready_o,
  input  wire [IN_BITS-1:0]  in_data_i,   // signed x

  // ---- output stream ----
  output wire                out_valid_o,
  input  wire                out_ready_i,
  output wire [OUT_BITS-1:0] out_data_o   // signed GELU(x)
);

  // ---------------------------------------------------------------- parameter checks
  // Verilog-2005 has no elaboration-time assertion: Icarus and Verilator stop at time 0,
  // yosys stops synthesis ("System task `$finish' executed").
  // verilator coverage_off
  // (the parameter checks run only on a bad parameter: no valid build can cover them)
  initial begin
    if (IN_BITS < 2) begin
      $display("ERROR: gelu: IN_BITS = %0d must be >= 2", IN_BITS);
      $finish;
    end
    if (OUT_BITS < 2) begin
      $display("ERROR: gelu: OUT_BITS = %0d must be >= 2", OUT_BITS);
      $finish;
    end
  end
  // verilator coverage_on

  localparam integer DEPTH = 1 << IN_BITS;

  // ---------------------------------------------------------------- table
  reg [OUT_BITS-1:0] table_q [0:DEPTH-1];

  always @(posedge clk_i) begin
    if (tbl_we_i) begin
      table_q[tbl_addr_i] <= tbl_data_i;
    end
  end

  // ---------------------------------------------------------------- lookup
  // The table read stays in the clocked block: yosys then merges out_q into a registered read
  // port of the table RAM. Everything else follows the _d (always @*) / _q (posedge) style.
  reg  out_valid_q, out_valid_d;
  reg  [OUT_BITS-1:0] out_q;
  wire en = ~out_valid_q | out_ready_i;  // output register loads this cycle
  wire [IN_BITS-1:0] addr = {~in_data_i[IN_BITS-1], in_data_i[IN_BITS-2:0]};

  assign in_ready_o  = en;
  assign out_valid_o = out_valid_q;
  assign out_data_o  = out_q;

  always @* begin
    out_valid_d = en ? in_valid_i : out_valid_q;
  end

  always @(posedge clk_i) begin
    if (!rst_ni) begin
      out_valid_q <= 1'b0;
      out_q       <= {OUT_BITS{1'b0}};
    end else begin
      out_valid_q <= out_valid_d;
      if (en && in_valid_i) begin
        out_q <= table_q[addr];
      end
    end
  end

endmodule

`default_nettype wire
