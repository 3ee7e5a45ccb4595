// round_sat: shift right with one of four roundings, then saturate or wrap (twin of hwvit.ops
// rshift_round + saturate, and of the shift modes of hwvit/variants/rounding.py).
//
//   y = ovf_OUT_BITS( round(v / 2^s) )      (s = 0: y = ovf_OUT_BITS(v), every rounding)
//
// ROUNDING (docs/variants/requant.md, "the shift modes"):
//   0 half_up   (v + 2^(s-1)) >>> s                    ties toward +inf (hwvit's own, the default)
//   1 half_away sign(v) * ((|v| + 2^(s-1)) >> s)       ties away from zero
//   2 half_even q = v >>> s, r = v mod 2^s; q + 1 if 2r > 2^s or (2r == 2^s and q odd)
//   3 floor     v >>> s                                toward -inf
// WRAP: 0 saturate to [-2^(OUT_BITS-1), 2^(OUT_BITS-1)-1] (the default); 1 keep the low OUT_BITS
// bits (two's-complement wrap: wrap_b(y) = ((y + 2^(b-1)) mod 2^b) - 2^(b-1) is exactly y's low b
// bits read as signed).
//
// One adder serves every rounding: for s >= 1 each is floor((v + t) / 2^s) with
//   t = (2^(s-1) - 1) + c,   c = 1 (half_up), [v >= 0] (half_away), q[0] (half_even);  t = 0 (floor)
// and t = 0 for s = 0; t is 2^(s-1) (c = 1) or the mask 2^(s-1) - 1 (c = 0), a mux, not an adder.
// Why (v = q 2^s + r, 0 <= r < 2^s):
// - half_up: t = 2^(s-1), the definition.
// - half_away: for v >= 0, c = 1 is half up, which is half away there. For v < 0, half away is
//   ceil(v/2^s - 1/2) = ceil((v - 2^(s-1)) / 2^s) = floor((v - 2^(s-1) + 2^s - 1) / 2^s)
//   = floor((v + 2^(s-1) - 1) / 2^s): c = 0 (a tie goes down, away from zero).
// - half_even: floor((v + t) / 2^s) = q + floor((r + 2^(s-1) - 1 + q[0]) / 2^s); the second term is
//   1 for r > 2^(s-1) (r + 2^(s-1) - 1 >= 2^s), 0 for r < 2^(s-1) (r + 2^(s-1) <= 2^s - 1), and q[0]
//   for the tie r = 2^(s-1): up exactly when q is odd. q[0] is bit s of v.
// Every t is at most 2^(s-1), half_up's: the caller's bound below holds for all four.
//
// The one place where hwvit's RTL narrows a value. Combinational; requant and residual_add
// register around it. The caller sizes IN_BITS so that |v| + 2^(s-1) cannot overflow
// (docs/arithmetic.md: 64 bits hold |v| < 2^62 with s <= 62; s = 63 with |v| < 2^62 stays below
// 2^63 too).

`default_nettype none

module round_sat #(
  // Width of the signed input v; at least OUT_BITS + 1.
  parameter integer IN_BITS  = 64,
  // Width of the signed output.
  parameter integer OUT_BITS = 8,
  // Rounding: 0 half_up, 1 half_away, 2 half_even, 3 floor (header).
  parameter integer ROUNDING = 0,
  // Overflow: 0 saturate, 1 wrap (keep the low OUT_BITS bits).
  parameter integer WRAP     = 0
) (
  input  wire [IN_BITS-1:0]  v_i,      // signed value to narrow
  input  wire [5:0]          shift_i,  // s, right shift with rounding
  output wire [OUT_BITS-1:0] y_o       // signed: saturated (WRAP 0) or wrapped (WRAP 1)
);

  // ---------------------------------------------------------------- parameter checks
  // Verilog-2005 has no elaboration-time assertion: Icarus and Verilator stop at time 0,
  // yosys stops synthesis ("System task `$finish' executed").
  // verilator coverage_off
  // (the parameter checks run only on a bad parameter: no valid build can cover them)
  initial begin
    if (OUT_BITS < 1) begin
      $display("ERROR: round_sat: OUT_BITS = %0d must be >= 1", OUT_BITS);
      $finish;
    end
    if (IN_BITS < OUT_BITS + 1) begin
      $display("ERROR: round_sat: IN_BITS = %0d must be >= OUT_BITS + 1 = %0d", IN_BITS, OUT_BITS + 1);
      $finish;
    end
    if (ROUNDING < 0 || ROUNDING > 3) begin
      $display("ERROR: round_sat: ROUNDING = %0d must be 0 (half_up), 1 (half_away), 2 (half_even) or 3 (floor)",
               ROUNDING);
      $finish;
    end
    if (WRAP < 0 || WRAP > 1) begin
      $display("ERROR: round_sat: WRAP = %0d must be 0 (saturate) or 1 (wrap)", WRAP);
      $finish;
    end
  end
  // verilator coverage_on

  wire signed [IN_BITS-1:0] v      = v_i;
  // q[0], bit 0 of the floor quotient q = v >>> s, is bit s of v (half_even's tie breaker; the
  // caller's bound keeps s < IN_BITS)
  wire                      q_lsb  = |(v_i & ({{(IN_BITS - 1){1'b0}}, 1'b1} << shift_i));
  // c of the header: 1 half_up, [v >= 0] half_away, q[0] half_even
  wire                      c      = ROUNDING == 0 ? 1'b1
                                   : ROUNDING == 1 ? ~v[IN_BITS-1]
                                   :                 q_lsb;
  // t = 2^(s-1) - 1 + c without a second adder: 2^(s-1) for c = 1, the mask 2^(s-1) - 1 for c = 0;
  // 0 for s = 0 and for floor.
  wire        [IN_BITS-1:0] half   = {{(IN_BITS - 1){1'b0}}, 1'b1} << (shift_i - 6'd1);
  wire        [IN_BITS-1:0] low    = ~({IN_BITS{1'b1}} << (shift_i - 6'd1));
  wire signed [IN_BITS-1:0] rnd    = (shift_i == 6'd0 || ROUNDING == 3) ? {IN_BITS{1'b0}}
                                   : c ? half : low;
  wire signed [IN_BITS-1:0] sum     = v + rnd;
  wire signed [IN_BITS-1:0] shifted = sum >>> shift_i;

  // The value fits OUT_BITS iff bits [IN_BITS-1 : OUT_BITS-1] are all equal (pure sign extension).
  wire [IN_BITS-OUT_BITS:0] top  = shifted[IN_BITS-1:OUT_BITS-1];
  wire                      fits = (&top) | ~(|top);
  assign y_o = (WRAP == 1 || fits) ? shifted[OUT_BITS-1:0]
             : shifted[IN_BITS-1] ? {1'b1, {(OUT_BITS - 1){1'b0}}}   // -2^(OUT_BITS-1)
                                  : {1'b0, {(OUT_BITS - 1){1'b1}}};  //  2^(OUT_BITS-1)-1

endmodule

`default_nettype wire
