// requant: requantize a signed accumulator to a narrow signed output (twin of hwvit.ops.requant).
//
//   y = sat_OUT_BITS( (acc * M + 2^(s-1)) >>> s )      (s = 0: y = sat_OUT_BITS(acc * M))
//
// One exact product, one round-half-up (ties toward +inf), one saturation; see
// docs/arithmetic.md "requant". The multiplier M (unsigned 31 bit) and shift s (0..63) travel with
// every input beat, so the GEMM engine can reuse this block as its per-output-channel stage.
//
// Pipeline: 2 register stages (product; round + shift + saturate), one beat per cycle, latency 2
// cycles. A stage advances when it is empty or the stage after it advances, so bubbles collapse.
// in_ready_o depends combinationally on out_ready_i (no skid buffer): a source must not make
// in_valid_i depend on in_ready_o, as valid/ready requires anyway.
// Reset (rst_ni, synchronous, active low) empties the pipeline and zeroes every register, so
// out_data_o is never X after reset.

`default_nettype none

module requant #(
  // Accumulator width (signed). The contract uses 32; any width >= OUT_BITS works.
  parameter integer ACC_BITS = 32,
  // Output width (signed), 2..16 in the contract.
  parameter integer OUT_BITS = 8
) (
  input  wire                clk_i,
  input  wire                rst_ni,

  // ---- input stream: accumulator with its multiplier and shift (sideband) ----
  input  wire                in_valid_i,
  output wire                in_ready_o,
  input  wire [ACC_BITS-1:0] in_acc_i,    // signed accumulator
  input  wire [30:0]         in_mult_i,   // M, unsigned, [0, 2^31-1]
  input  wire [5:0]          in_shift_i,  // s, right shift with rounding

  // ---- output stream ----
  output wire                out_valid_o,
  input  wire                out_ready_i,
  output wire [OUT_BITS-1:0] out_data_o   // signed, saturated
);

  // ---------------------------------------------------------------- parameter checks
  // Verilog-2005 has no elaboration-time assertion: Icarus and Verilator stop at time 0,
  // yosys stops synthesis ("System task `$finish' executed").
  // verilator coverage_off
  // (the parameter checks run only on a bad parameter: no valid build can cover them)
  initial begin
    if (OUT_BITS < 2 || OUT_BITS > 16) begin
      $display("ERROR: requant: OUT_BITS = %0d must be in 2..16", OUT_BITS);
      $finish;
    end
    if (ACC_BITS < OUT_BITS) begin
      $display("ERROR: requant: ACC_BITS = %0d must be >= OUT_BITS = %0d", ACC_BITS, OUT_BITS);
      $finish;
    end
  end
  // verilator coverage_on

  // acc * M: signed ACC_BITS x unsigned 31 bits fits ACC_BITS + 31 signed bits.
  localparam integer PROD_BITS = ACC_BITS + 31;
  // acc * M + 2^(s-1): the rounding term reaches 2^62 (s = 63), so at least 64 bits; for
  // ACC_BITS = 32, |acc * M| < 2^62 and the sum stays below 2^63.
  localparam integer SUM_BITS  = (PROD_BITS + 1 > 64) ? PROD_BITS + 1 : 64;

  // ---------------------------------------------------------------- handshake
  reg  s1_valid_q, s1_valid_d;              // stage 1 (product) holds a beat
  reg  out_valid_q, out_valid_d;            // stage 2 (output register) holds a beat
  wire s2_en = ~out_valid_q | out_ready_i;  // output register loads this cycle
  wire s1_en = ~s1_valid_q | s2_en;         // stage 1 loads this cycle

  assign in_ready_o  = s1_en;
  assign out_valid_o = out_valid_q;

  // ---------------------------------------------------------------- stage 1: exact product
  // Both operands extended to PROD_BITS so the multiply is PROD_BITS wide; the true product fits,
  // so truncating to PROD_BITS is exact (synthesis trims the redundant sign/zero bits).
  wire signed [PROD_BITS-1:0] acc_ext  = {{31{in_acc_i[ACC_BITS-1]}}, in_acc_i};
  // verilator coverage_off
  // (zero-extended copies, dr_next32 plus one: live bits toggle in their source, the rest are 0)
  wire signed [PROD_BITS-1:0] mult_ext = {{ACC_BITS{1'b0}}, in_mult_i};
  // verilator coverage_on
  wire signed [PROD_BITS-1:0] prod     = acc_ext * mult_ext;

  reg signed [PROD_BITS-1:0] prod_q, prod_d;
  reg        [5:0]           shift_q, shift_d;

  // ---------------------------------------------------------------- stage 2: round, shift, saturate
  wire signed [SUM_BITS-1:0] prod_ext = {{(SUM_BITS - PROD_BITS){prod_q[PROD_BITS-1]}}, prod_q};
  wire        [OUT_BITS-1:0] rounded;

  round_sat #(
    .IN_BITS  (SUM_BITS),
    .OUT_BITS (OUT_BITS)
  ) u_round_sat (
    .v_i      (prod_ext),
    .shift_i  (shift_q),
    .y_o      (rounded)
  );

  reg [OUT_BITS-1:0] out_q, out_d;
  assign out_data_o = out_q;

  // ---------------------------------------------------------------- next state
  always @* begin
    s1_valid_d  = s1_valid_q;
    prod_d      = prod_q;
    shift_d     = shift_q;
    out_valid_d = out_valid_q;
    out_d       = out_q;
    if (s1_en) begin
      s1_valid_d = in_valid_i;
      if (in_valid_i) begin
        prod_d  = prod;
        shift_d = in_shift_i;
      end
    end
    if (s2_en) begin
      out_valid_d = s1_valid_q;
      if (s1_valid_q) begin
        out_d = rounded;
      end
    end
  end

  // ---------------------------------------------------------------- registers
  always @(posedge clk_i) begin
    if (!rst_ni) begin
      s1_valid_q  <= 1'b0;
      prod_q      <= {PROD_BITS{1'b0}};
      shift_q     <= 6'd0;
      out_valid_q <= 1'b0;
      out_q       <= {OUT_BITS{1'b0}};
    end else begin
      s1_valid_q  <= s1_valid_d;
      prod_q      <= prod_d;
      shift_q     <= shift_d;
      out_valid_q <= out_valid_d;
      out_q       <= out_d;
    end
  end

endmodule

`default_nettype wire
