// residual_add: add two activations rescaled to a common output scale (twin of hwvit.ops.residual_add).
//
//   y = sat_OUT_BITS( (a * Ma + b * Mb + 2^(s-1)) >>> s )      (s = 0: no rounding term)
//
// Both products are exact, their sum is rounded once (half up, ties toward +inf) and saturated;
// see docs/arithmetic.md "residual_add". Ma * 2^-s = s_a / s_out and Mb * 2^-s = s_b / s_out are
// per-layer constants: they are configuration ports (cfg_*_i), to be held stable while a stream
// is in flight (they are sampled in both pipeline stages).
//
// Pipeline: 2 register stages (two products; sum + round + shift + saturate), one beat per cycle,
// latency 2 cycles, bubbles collapse. in_ready_o depends combinationally on out_ready_i.
// Reset (rst_ni, synchronous, active low) empties the pipeline and zeroes every register.

`default_nettype none

module residual_add #(
  // Input activation width (signed), ACT_BITS = 8 in the contract.
  parameter integer IN_BITS  = 8,
  // Output width (signed), 2..16.
  parameter integer OUT_BITS = 8
) (
  input  wire                clk_i,
  input  wire                rst_ni,

  // ---- configuration: hold stable during a stream ----
  input  wire [30:0]         cfg_mult_a_i,  // Ma, unsigned [0, 2^31-1]
  input  wire [30:0]         cfg_mult_b_i,  // Mb, unsigned [0, 2^31-1]
  input  wire [5:0]          cfg_shift_i,   // s, shared right shift with rounding

  // ---- input stream: one (a, b) pair per beat ----
  input  wire                in_valid_i,
  output wire                in_ready_o,
  input  wire [IN_BITS-1:0]  in_a_i,        // signed
  input  wire [IN_BITS-1:0]  in_b_i,        // signed

  // ---- output stream ----
  output wire                out_valid_o,
  input  wire                out_ready_i,
  output wire [OUT_BITS-1:0] out_data_o     // signed, saturated
);

  // ---------------------------------------------------------------- parameter checks
  // Verilog-2005 has no elaboration-time assertion: Icarus and Verilator stop at time 0,
  // yosys stops synthesis ("System task `$finish' executed").
  // verilator coverage_off
  // (the parameter checks run only on a bad parameter: no valid build can cover them)
  initial begin
    if (IN_BITS < 2) begin
      $display("ERROR: residual_add: IN_BITS = %0d must be >= 2", IN_BITS);
      $finish;
    end
    if (OUT_BITS < 2 || OUT_BITS > 16) begin
      $display("ERROR: residual_add: OUT_BITS = %0d must be in 2..16", OUT_BITS);
      $finish;
    end
  end
  // verilator coverage_on

  // a * Ma: signed IN_BITS x unsigned 31 bits fits IN_BITS + 31 signed bits (39 for 8-bit inputs).
  localparam integer PROD_BITS = IN_BITS + 31;
  // a * Ma + b * Mb + 2^(s-1): the sum of products needs one more bit (|sum| <= 2^39 for 8-bit
  // inputs) and the rounding term reaches 2^62 (s = 63): 64 bits hold both.
  localparam integer SUM_BITS  = (PROD_BITS + 2 > 64) ? PROD_BITS + 2 : 64;

  // ---------------------------------------------------------------- handshake
  reg  s1_valid_q, s1_valid_d;              // stage 1 (products) holds a beat
  reg  out_valid_q, out_valid_d;            // stage 2 (output register) holds a beat
  wire s2_en = ~out_valid_q | out_ready_i;  // output register loads this cycle
  wire s1_en = ~s1_valid_q | s2_en;         // stage 1 loads this cycle

  assign in_ready_o  = s1_en;
  assign out_valid_o = out_valid_q;

  // ---------------------------------------------------------------- stage 1: exact products
  // Operands extended to PROD_BITS; the true products fit, so PROD_BITS-wide results are exact.
  wire signed [PROD_BITS-1:0] a_ext  = {{31{in_a_i[IN_BITS-1]}}, in_a_i};
  wire signed [PROD_BITS-1:0] b_ext  = {{31{in_b_i[IN_BITS-1]}}, in_b_i};
  // verilator coverage_off
  // (zero-extended copies, dr_next32 plus one: live bits toggle in their source, the rest are 0)
  wire signed [PROD_BITS-1:0] ma_ext = {{IN_BITS{1'b0}}, cfg_mult_a_i};
  wire signed [PROD_BITS-1:0] mb_ext = {{IN_BITS{1'b0}}, cfg_mult_b_i};
  // verilator coverage_on
  wire signed [PROD_BITS-1:0] prod_a = a_ext * ma_ext;
  wire signed [PROD_BITS-1:0] prod_b = b_ext * mb_ext;

  reg signed [PROD_BITS-1:0] prod_a_q, prod_a_d;
  reg signed [PROD_BITS-1:0] prod_b_q, prod_b_d;

  // ---------------------------------------------------------------- stage 2: sum, round, shift, saturate
  localparam integer EXT_BITS = SUM_BITS - PROD_BITS;
  wire signed [SUM_BITS-1:0] pa_ext  = {{EXT_BITS{prod_a_q[PROD_BITS-1]}}, prod_a_q};
  wire signed [SUM_BITS-1:0] pb_ext  = {{EXT_BITS{prod_b_q[PROD_BITS-1]}}, prod_b_q};
  wire signed [SUM_BITS-1:0] sum     = pa_ext + pb_ext;
  wire        [OUT_BITS-1:0] rounded;

  round_sat #(
    .IN_BITS  (SUM_BITS),
    .OUT_BITS (OUT_BITS)
  ) u_round_sat (
    .v_i      (sum),
    .shift_i  (cfg_shift_i),
    .y_o      (rounded)
  );

  reg [OUT_BITS-1:0] out_q, out_d;
  assign out_data_o = out_q;

  // ---------------------------------------------------------------- next state
  always @* begin
    s1_valid_d  = s1_valid_q;
    prod_a_d    = prod_a_q;
    prod_b_d    = prod_b_q;
    out_valid_d = out_valid_q;
    out_d       = out_q;
    if (s1_en) begin
      s1_valid_d = in_valid_i;
      if (in_valid_i) begin
        prod_a_d = prod_a;
        prod_b_d = prod_b;
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
      prod_a_q    <= {PROD_BITS{1'b0}};
      prod_b_q    <= {PROD_BITS{1'b0}};
      out_valid_q <= 1'b0;
      out_q       <= {OUT_BITS{1'b0}};
    end else begin
      s1_valid_q  <= s1_valid_d;
      prod_a_q    <= prod_a_d;
      prod_b_q    <= prod_b_d;
      out_valid_q <= out_valid_d;
      out_q       <= out_d;
    end
  end

endmodule

`default_nettype wire
