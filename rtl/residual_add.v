// residual_add: add two activations rescaled to a common output scale (twin of hwvit.ops.residual_add;
// with ROUNDING or ZERO_POINTS, of hwvit.ops.residual_add_zp).
//
//   y = sat_OUT_BITS( (a * Ma + b * Mb + 2^(s-1)) >>> s )      (s = 0: no rounding term)
//
// Both products are exact, their sum is rounded once (half up, ties toward +inf) and saturated;
// see docs/arithmetic.md "residual_add". An imported model's add (docs/onnx.md) rounds half to
// even (ROUNDING 2, rtl/round_sat.v) and has zero points (ZERO_POINTS = 1):
//
//   y = sat_OUT_BITS( round((a - za) * Ma + (b - zb) * Mb, s) + zy )
//
// zy is added after the rounding (half to even does not commute with adding an odd integer): the
// sum is rounded into OUT_BITS + 1 bits, zy added, then saturated to OUT_BITS; a value clipped at
// OUT_BITS + 1 bits lies 2^(OUT_BITS-1) past the output range, beyond any zy's reach, so this is
// the one saturation after the add. ZERO_POINTS = 0 leaves the block as it was (cfg_zero_*_i
// unused). Ma * 2^-s = s_a / s_out and Mb * 2^-s = s_b / s_out (and the zero
// points) are per-layer constants: they are configuration ports (cfg_*_i), to be held stable while a stream
// is in flight (they are sampled in both pipeline stages).
//
// ROUNDING 5 and 6 are onnxruntime's QLinearAdd (MLAS qladd_avx2.cpp, hwvit.ops.residual_add.qlinear_add):
// binary32 arithmetic on the file's codes, an int8 file's as they are (5), a uint8 file's 128 above
// hwvit's (6). With r_a = Ma' * 2^-s and r_b = Mb' * 2^-s its binary32 ratios (each port M = k * 2^24
// + m carries M' = m * 2^k, the significand m moved up k <= 23 bits) and A = a + OFF, ...:
//
//   F = f32(Z_c) - fma(r_a, Z_a, f32(r_b * Z_b)),  y = sat(round_half_even(fma(A, r_a, fma(B, r_b, F)))) - OFF
//
// Every value is a multiple of 2^-s, so the datapath carries each times 2^s, an integer, and each
// binary32 rounding is sig24 (its 24 leading significant bits, half to even). Stage 1 computes F and
// t = fma(B, r_b, F) beside A * Ma'; stage 2 adds them, rounds (sig24), then round_sat's half to even
// by s; the zero point is inside F. Domain (the driver's): IN_BITS = OUT_BITS = 8, k <= 23, s <= 40
// (|A * M'| < 2^55, |Z_c * 2^s| < 2^48: every value below 2^57).
//
// Pipeline: 2 register stages (two products; sum + round + shift + saturate), one beat per cycle,
// latency 2 cycles, bubbles collapse. in_ready_o depends combinationally on out_ready_i.
// Reset (rst_ni, synchronous, active low) empties the pipeline and zeroes every register.

`default_nettype none

module residual_add #(
  // Input activation width (signed), ACT_BITS = 8 in the contract.
  parameter integer IN_BITS  = 8,
  // Output width (signed), 2..16.
  parameter integer OUT_BITS = 8,
  // Rounding of the sum (rtl/round_sat.v): 0 half_up (hwvit's), 1 half_away, 2 half_even, 3 floor;
  // 5, 6 onnxruntime's QLinearAdd on int8 or uint8 codes (header).
  parameter integer ROUNDING = 0,
  // 1: zero points (cfg_zero_*_i, header); 0: none.
  parameter integer ZERO_POINTS = 0
) (
  input  wire                clk_i,
  input  wire                rst_ni,

  // ---- configuration: hold stable during a stream ----
  input  wire [30:0]         cfg_mult_a_i,  // Ma, unsigned [0, 2^31-1]
  input  wire [30:0]         cfg_mult_b_i,  // Mb, unsigned [0, 2^31-1]
  input  wire [5:0]          cfg_shift_i,   // s, shared right shift with rounding
  input  wire [IN_BITS-1:0]  cfg_zero_a_i,  // za, signed (ZERO_POINTS = 1)
  input  wire [IN_BITS-1:0]  cfg_zero_b_i,  // zb, signed (ZERO_POINTS = 1)
  input  wire [OUT_BITS-1:0] cfg_zero_out_i,  // zy, signed (ZERO_POINTS = 1)

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
    if (ZERO_POINTS < 0 || ZERO_POINTS > 1) begin
      $display("ERROR: residual_add: ZERO_POINTS = %0d must be 0 or 1", ZERO_POINTS);
      $finish;
    end
    if (ROUNDING < 0 || ROUNDING == 4 || ROUNDING > 6 || (ROUNDING > 4 && (IN_BITS != 8 || OUT_BITS != 8))) begin
      $display("ERROR: residual_add: ROUNDING = %0d must be 0..3, or 5, 6 with 8-bit IN_BITS and OUT_BITS", ROUNDING);
      $finish;
    end
  end
  // verilator coverage_on

  localparam         F32       = (ROUNDING == 5 || ROUNDING == 6);
  localparam [9:0]   OFF       = (ROUNDING == 6) ? 10'd128 : 10'd0;  // a uint8 file's codes: hwvit's + 128
  // a (or a - za, one bit wider: -255..255 for 8-bit inputs; onnxruntime: a + OFF, -128..255) in D_BITS.
  localparam integer D_BITS    = F32 ? IN_BITS + 2 : IN_BITS + ZERO_POINTS;
  // a * Ma: signed D_BITS x unsigned 31 bits fits D_BITS + 31 signed bits (39 for 8-bit inputs);
  // onnxruntime's values stay below 2^57 (header): 60 bits.
  localparam integer PROD_BITS = F32 ? 60 : D_BITS + 31;
  // a * Ma + b * Mb + 2^(s-1): the sum of products needs one more bit (|sum| <= 2^39 for 8-bit
  // inputs, 2^40 with zero points) and the rounding term reaches 2^62 (s = 63): 64 bits hold both.
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
  wire        [D_BITS-1:0]    a_d, b_d;     // a, b (minus za, zb: ZERO_POINTS = 1)
  wire signed [PROD_BITS-1:0] a_ext  = {{(PROD_BITS - D_BITS){a_d[D_BITS-1]}}, a_d};
  wire signed [PROD_BITS-1:0] b_ext  = {{(PROD_BITS - D_BITS){b_d[D_BITS-1]}}, b_d};
  // verilator coverage_off
  // (zero-extended copies, dr_next32 plus one: live bits toggle in their source, the rest are 0)
  wire signed [PROD_BITS-1:0] ma_ext = F32 ? ({{(PROD_BITS - 24){1'b0}}, cfg_mult_a_i[23:0]} << cfg_mult_a_i[30:24])
                                           : {{(PROD_BITS - 31){1'b0}}, cfg_mult_a_i};
  wire signed [PROD_BITS-1:0] mb_ext = F32 ? ({{(PROD_BITS - 24){1'b0}}, cfg_mult_b_i[23:0]} << cfg_mult_b_i[30:24])
                                           : {{(PROD_BITS - 31){1'b0}}, cfg_mult_b_i};
  // verilator coverage_on
  wire signed [PROD_BITS-1:0] prod_a = a_ext * ma_ext;
  wire signed [PROD_BITS-1:0] prod_b = b_ext * mb_ext;
  wire signed [PROD_BITS-1:0] t_f32;            // onnxruntime: fma(B, r_b, F) * 2^s (g_f32)
  wire signed [PROD_BITS-1:0] into_b = F32 ? t_f32 : prod_b;

  // v (signed, |v| < 2^58) rounded half to even to its 24 leading significant bits, the bits below
  // them zero: the binary32 value of v (times 2^s). The highest set bit k >= 24 of |v| drops
  // d = k - 23 bits; up when the dropped part is above half of 2^d, or equal to it with the kept
  // part odd; a carry into bit k + 1 is the next binade's value, still exact.
  function [PROD_BITS-1:0] sig24;
    input [PROD_BITS-1:0] v;
    reg   [PROD_BITS-1:0] mag, kept, rest, half;
    integer k, d;
    begin
      mag = v[PROD_BITS-1] ? (~v + 1'b1) : v;
      d = 0;
      for (k = 24; k < PROD_BITS; k = k + 1)
        if (mag[k]) d = k - 23;
      kept = mag >> d;
      rest = mag & ~({PROD_BITS{1'b1}} << d);
      half = (d == 0) ? {PROD_BITS{1'b0}} : ({{(PROD_BITS - 1){1'b0}}, 1'b1} << (d - 1));
      if (d != 0 && (rest > half || (rest == half && kept[0])))
        kept = kept + 1'b1;
      mag = kept << d;
      sig24 = v[PROD_BITS-1] ? (~mag + 1'b1) : mag;
    end
  endfunction

  reg signed [PROD_BITS-1:0] prod_a_q, prod_a_d;
  reg signed [PROD_BITS-1:0] prod_b_q, prod_b_d;

  // ---------------------------------------------------------------- stage 2: sum, round, shift, saturate
  localparam integer EXT_BITS = SUM_BITS - PROD_BITS;
  wire signed [SUM_BITS-1:0] pa_ext  = {{EXT_BITS{prod_a_q[PROD_BITS-1]}}, prod_a_q};
  wire signed [SUM_BITS-1:0] pb_ext  = {{EXT_BITS{prod_b_q[PROD_BITS-1]}}, prod_b_q};
  wire signed [SUM_BITS-1:0] sum     = pa_ext + pb_ext;
  // onnxruntime: the binary32 sum (|sum| < 2^57 fits PROD_BITS), sign-extended back
  wire signed [PROD_BITS-1:0] sum_r  = sig24(sum[PROD_BITS-1:0]);
  wire signed [SUM_BITS-1:0] sum_sel = F32 ? {{EXT_BITS{sum_r[PROD_BITS-1]}}, sum_r} : sum;
  wire        [OUT_BITS-1:0] rounded;
  // the rounding's width: OUT_BITS, one more with zero points (header), two more for onnxruntime
  // (its value minus OFF, saturated after)
  localparam integer RS_BITS = OUT_BITS + (F32 ? 2 : ZERO_POINTS);
  wire        [RS_BITS-1:0]  rs;

  round_sat #(
    .IN_BITS  (SUM_BITS),
    .OUT_BITS (RS_BITS),
    .ROUNDING (F32 ? 2 : ROUNDING)
  ) u_round_sat (
    .v_i      (sum_sel),
    .shift_i  (cfg_shift_i),
    .y_o      (rs)
  );

  // ---------------------------------------------------------------- zero points
  generate
    if (F32) begin : g_f32
      // the file's codes (one bit wider: a uint8 file's reach 255) and its zero points
      // 10-bit two's complement sums (-128..255), then sign-extended
      wire [9:0] za10 = {{2{cfg_zero_a_i[7]}}, cfg_zero_a_i} + OFF;
      wire [9:0] zb10 = {{2{cfg_zero_b_i[7]}}, cfg_zero_b_i} + OFF;
      wire [9:0] zc10 = {{2{cfg_zero_out_i[7]}}, cfg_zero_out_i} + OFF;
      wire signed [PROD_BITS-1:0] za_raw = {{(PROD_BITS - 10){za10[9]}}, za10};
      wire signed [PROD_BITS-1:0] zb_raw = {{(PROD_BITS - 10){zb10[9]}}, zb10};
      wire signed [PROD_BITS-1:0] zc_raw = {{(PROD_BITS - 10){zc10[9]}}, zc10};
      // F = f32(Z_c) - fma(r_a, Z_a, f32(r_b * Z_b)), then t = fma(B, r_b, F); all times 2^s
      wire signed [PROD_BITS-1:0] qb     = sig24(zb_raw * mb_ext);
      wire signed [PROD_BITS-1:0] pf     = sig24(za_raw * ma_ext + qb);
      wire signed [PROD_BITS-1:0] fixed  = sig24((zc_raw <<< cfg_shift_i) - pf);
      assign t_f32 = sig24(b_ext * mb_ext + fixed);
      assign a_d   = {{2{in_a_i[IN_BITS-1]}}, in_a_i} + OFF;  // D_BITS = 10 here
      assign b_d   = {{2{in_b_i[IN_BITS-1]}}, in_b_i} + OFF;
      // round_half_even(u / 2^s) - OFF: |rs| <= 2^(OUT_BITS+1), the difference fits OUT_BITS + 3 bits
      wire [RS_BITS:0] moved = {rs[RS_BITS-1], rs} - {1'b0, OFF};
      round_sat #(
        .IN_BITS  (RS_BITS + 1),
        .OUT_BITS (OUT_BITS)
      ) u_sat (
        .v_i      (moved),
        .shift_i  (6'd0),
        .y_o      (rounded)
      );
    end else if (ZERO_POINTS == 1) begin : g_zero
      assign t_f32 = {PROD_BITS{1'b0}};
      assign a_d = {in_a_i[IN_BITS-1], in_a_i} - {cfg_zero_a_i[IN_BITS-1], cfg_zero_a_i};
      assign b_d = {in_b_i[IN_BITS-1], in_b_i} - {cfg_zero_b_i[IN_BITS-1], cfg_zero_b_i};
      // |rs| <= 2^OUT_BITS and |zy| <= 2^(OUT_BITS-1): the sum fits OUT_BITS + 2 signed bits
      wire [RS_BITS:0] with_zero = {rs[RS_BITS-1], rs} + {{2{cfg_zero_out_i[OUT_BITS-1]}}, cfg_zero_out_i};
      round_sat #(
        .IN_BITS  (RS_BITS + 1),
        .OUT_BITS (OUT_BITS)
      ) u_sat (
        .v_i      (with_zero),
        .shift_i  (6'd0),
        .y_o      (rounded)
      );
    end else begin : g_plain
      assign t_f32   = {PROD_BITS{1'b0}};
      assign a_d     = in_a_i;
      assign b_d     = in_b_i;
      assign rounded = rs;
      wire unused_zero = ^{cfg_zero_a_i, cfg_zero_b_i, cfg_zero_out_i};  // no zero points in this build
    end
  endgenerate

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
        prod_b_d = into_b;
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
