// requant: requantize a signed accumulator to a narrow signed output (twin of hwvit.ops.requant and
// of the requant variants of hwvit/variants/rounding.py and hwvit/variants/ibert.py).
//
//   y = sat_OUT_BITS( (acc * M + 2^(s-1)) >>> s )      (s = 0: y = sat_OUT_BITS(acc * M))
//
// One exact product, one round-half-up (ties toward +inf), one saturation; see
// docs/arithmetic.md "requant". The multiplier M (unsigned 31 bit) and shift s (0..63) travel with
// every input beat, so the GEMM engine can reuse this block as its per-output-channel stage.
//
// Variants (docs/variants/requant.md), chosen by two parameters; the defaults are hwvit's own:
//   ROUNDING 0 half_up (default), 1 half_away, 2 half_even, 3 floor: y = ovf(round(acc * M / 2^s)),
//            the rounding done by rtl/round_sat.v (its header derives the one shared adder);
//   ROUNDING 4 gemmlowp: TFLite MultiplyByQuantizedMultiplier with s read as a SIGNED 6-bit right
//            shift (-32..31; the variant's range is -30..31), ACC_BITS = 32:
//              left  = max(-s, 0), right = max(s, 0)
//              x     = wrap_32(acc * 2^left)         the low 32 bits of acc << left (C's int32)
//              h     = SRDHM(x, M) = floor((x * M + 2^30) / 2^31)
//              y     = ovf(RoundingDivideByPOT(h, right)) = ovf(round_half_away(h / 2^right))
//            SaturatingRoundingDoublingHighMul is floor(x M / 2^31 + 1/2) in both signs (the
//            derivation is in docs/variants/requant.md); its one saturating case, x = M = -2^31,
//            needs a negative M, which the unsigned 31-bit port cannot carry (TFLite's
//            QuantizeMultiplier gives M in [2^30, 2^31 - 1] or 0), so no saturation is needed:
//            |x M| <= 2^31 (2^31 - 1) gives h in [-2^31 + 1, 2^31 - 1], 32 bits.
//            RoundingDivideByPOT (remainder > (mask >> 1) + [h < 0]) is round half away from zero,
//            round_sat's ROUNDING 1.
//   ROUNDING 5 onnxruntime: its fused integer kernels' requant (MlasRequantizeOutput), the binary32
//            product of f32(acc) and the multiplier m = M * 2^-s (M < 2^24, its significand), then
//            the conversion's round half to even: y = ovf(round_half_even(f32(f32(acc) * M) / 2^s)).
//            Scaling by 2^-s moves no significand bit (every value is a normal binary32), so both
//            binary32 roundings are sig24 below: acc to its 24 leading bits (exact below 2^24; 2^31 - 1
//            becomes 2^31, hence the product's 33-bit operand), then the product (< 2^55) likewise;
//            round_sat's ROUNDING 2 does the last rounding (docs/variants/requant.md).
//   WRAP     0 saturate (default), 1 wrap into OUT_BITS (the *_wrap variants).
//   I-BERT's FixedPointMul (requant=ibert: clamp(round_half_even(acc * M / 2^E))) is ROUNDING 2,
//   WRAP 0 for every M and E the ports carry (M <= 2^31 - 1, E in 0..63); batch_frexp's M = 2^31
//   does not fit the 31-bit port.
//
`default_nettype none

module requant #(
  // Accumulator width (signed). The contract uses 32; any width >= OUT_BITS works.
  parameter integer ACC_BITS = 32,
  // Output width (signed), 2..16 in the contract.
  parameter integer OUT_BITS = 8,
  // Rounding: 0 half_up, 1 half_away, 2 half_even, 3 floor, 4 gemmlowp, 5 onnxruntime (header).
  parameter integer ROUNDING = 0,
  // Overflow: 0 saturate, 1 wrap (keep the low OUT_BITS bits).
  parameter integer WRAP     = 0
) (
  input  wire                clk_i,
  input  wire                rst_ni,

  // ---- input stream: accumulator with its multiplier and shift (sideband) ----
  input  wire                in_valid_i,
  output wire                in_ready_o,
  input  wire [ACC_BITS-1:0] in_acc_i,    // signed accumulator
  input  wire [30:0]         in_mult_i,   // M, unsigned, [0, 2^31-1]
  input  wire [5:0]          in_shift_i,  // s, right shift with rounding (gemmlowp: signed)

  // ---- output stream ----
  output wire                out_valid_o,
  input  wire                out_ready_i,
  output wire [OUT_BITS-1:0] out_data_o   // signed, saturated (WRAP 0) or wrapped (WRAP 1)
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
    if (ROUNDING < 0 || ROUNDING > 5) begin
      $display("ERROR: requant: ROUNDING = %0d must be 0..5 (half_up, half_away, half_even, floor, gemmlowp, onnxruntime)",
               ROUNDING);
      $finish;
    end
    if (ROUNDING == 4 && ACC_BITS != 32) begin
      $display("ERROR: requant: gemmlowp (ROUNDING = 4) needs ACC_BITS = 32, got %0d", ACC_BITS);
      $finish;
    end
    if (WRAP < 0 || WRAP > 1) begin
      $display("ERROR: requant: WRAP = %0d must be 0 (saturate) or 1 (wrap)", WRAP);
      $finish;
    end
  end
  // verilator coverage_on

  // acc * M: signed ACC_BITS x unsigned 31 bits fits ACC_BITS + 31 signed bits.
  localparam integer PROD_BITS = ACC_BITS + 31;
  // acc * M + 2^(s-1): the rounding term reaches 2^62 (s = 63), so at least 64 bits; for
  // ACC_BITS = 32, |acc * M| < 2^62 and the sum stays below 2^63.
  localparam integer SUM_BITS  = (PROD_BITS + 1 > 64) ? PROD_BITS + 1 : 64;
  localparam         GEMMLOWP  = (ROUNDING == 4);
  localparam         F32       = (ROUNDING == 5);
  // round_sat's rounding: gemmlowp's RoundingDivideByPOT is round half away (1), onnxruntime's
  // conversion round half to even (2).
  localparam integer RS_ROUND  = GEMMLOWP ? 1 : (F32 ? 2 : ROUNDING);

  // v (signed, |v| < 2^61) rounded half to even to its 24 leading significant bits, the bits below
  // them zero: the binary32 value of the integer v. The highest set bit k >= 24 of |v| drops
  // d = k - 23 bits; up when the dropped part r is above half of 2^d, or equal to it with the kept
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

  // ---------------------------------------------------------------- handshake
  reg  s1_valid_q, s1_valid_d;              // stage 1 (product) holds a beat
  reg  out_valid_q, out_valid_d;            // stage 2 (output register) holds a beat
  wire s2_en = ~out_valid_q | out_ready_i;  // output register loads this cycle
  wire s1_en = ~s1_valid_q | s2_en;         // stage 1 loads this cycle

  assign in_ready_o  = s1_en;
  assign out_valid_o = out_valid_q;

  // ---------------------------------------------------------------- stage 1: exact product
  // gemmlowp: x = wrap_32(acc << left), left = -s for a negative s (1..32), else 0; ACC_BITS = 32,
  // so the ACC_BITS-bit shift result is the wrap. The other roundings multiply acc itself.
  wire [5:0]                  left     = in_shift_i[5] ? (6'd0 - in_shift_i) : 6'd0;
  wire [ACC_BITS-1:0]         acc_shl  = in_acc_i << left;
  wire [ACC_BITS-1:0]         acc_sel  = GEMMLOWP ? acc_shl : in_acc_i;
  // Both operands extended to PROD_BITS so the multiply is PROD_BITS wide; the true product fits,
  // so truncating to PROD_BITS is exact (synthesis trims the redundant sign/zero bits).
  wire signed [PROD_BITS-1:0] acc_ext  = {{31{acc_sel[ACC_BITS-1]}}, acc_sel};
  // verilator coverage_off
  // (zero-extended copies, dr_next32 plus one: live bits toggle in their source, the rest are 0)
  wire signed [PROD_BITS-1:0] mult_ext = {{ACC_BITS{1'b0}}, in_mult_i};
  // verilator coverage_on
  // onnxruntime: f32(acc) first (|acc| <= 2^31 after rounding; times M < 2^24 stays below 2^55).
  wire signed [PROD_BITS-1:0] acc_mul  = F32 ? sig24(acc_ext) : acc_ext;
  wire signed [PROD_BITS-1:0] prod     = acc_mul * mult_ext;

  reg signed [PROD_BITS-1:0] prod_q, prod_d;
  reg        [5:0]           shift_q, shift_d;

  // ---------------------------------------------------------------- stage 2: round, shift, saturate
  // onnxruntime: the binary32 product, f32(f32(acc) * M).
  wire signed [PROD_BITS-1:0] prod_r   = F32 ? sig24(prod_q) : prod_q;
  wire signed [SUM_BITS-1:0] prod_ext = {{(SUM_BITS - PROD_BITS){prod_r[PROD_BITS-1]}}, prod_r};
  // gemmlowp's SRDHM: h = (x M + 2^30) >>> 31. With ACC_BITS = 32 (PROD_BITS = 63),
  // -2^62 + 2^31 <= x M <= (2^31 - 1)^2 = 2^62 - 2^32 + 1, so x M + 2^30 stays inside 63 signed bits;
  // h fits 32 bits (header) and reaches round_sat sign-extended.
  wire signed [PROD_BITS-1:0] srd_sum = prod_q + $signed({{(PROD_BITS - 31){1'b0}}, 1'b1, 30'd0});
  wire signed [PROD_BITS-1:0] srd_h   = srd_sum >>> 31;
  wire signed [SUM_BITS-1:0]  h_ext   = {{(SUM_BITS - PROD_BITS){srd_h[PROD_BITS-1]}}, srd_h};
  // RoundingDivideByPOT's exponent: right = max(s, 0) of the signed s.
  wire        [5:0]           right   = shift_q[5] ? 6'd0 : shift_q;
  wire        [OUT_BITS-1:0]  rounded;

  round_sat #(
    .IN_BITS  (SUM_BITS),
    .OUT_BITS (OUT_BITS),
    .ROUNDING (RS_ROUND),
    .WRAP     (WRAP)
  ) u_round_sat (
    .v_i      (GEMMLOWP ? h_ext : prod_ext),
    .shift_i  (GEMMLOWP ? right : shift_q),
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
