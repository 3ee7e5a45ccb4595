// round_sat: round half up, shift right, saturate (twin of hwvit.ops rshift_round + saturate).
//
//   y = sat_OUT_BITS( (v + 2^(s-1)) >>> s )      (s = 0: y = sat_OUT_BITS(v))
//
// The one place where hwvit's RTL narrows a value, with its one rounding mode (ties toward
// +inf: an adder and an arithmetic shift). Combinational; requant and residual_add register
// around it. The caller sizes IN_BITS so that |v| + 2^(s-1) cannot overflow (docs/arithmetic.md:
// 64 bits hold |v| < 2^62 with s <= 62).

`default_nettype none

module round_sat #(
  // Width of the signed input v; at least OUT_BITS + 1.
  parameter integer IN_BITS  = 64,
  // Width of the signed, saturated output.
  parameter integer OUT_BITS = 8
) (
  input  wire [IN_BITS-1:0]  v_i,      // signed value to narrow
  input  wire [5:0]          shift_i,  // s, right shift with rounding
  output wire [OUT_BITS-1:0] y_o       // signed, saturated to [-2^(OUT_BITS-1), 2^(OUT_BITS-1)-1]
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
  end
  // verilator coverage_on

  wire signed [IN_BITS-1:0] v       = v_i;
  wire signed [IN_BITS-1:0] rnd     = (shift_i == 6'd0) ? {IN_BITS{1'b0}}
                                      : ({{(IN_BITS - 1){1'b0}}, 1'b1} << (shift_i - 6'd1));
  wire signed [IN_BITS-1:0] sum     = v + rnd;
  wire signed [IN_BITS-1:0] shifted = sum >>> shift_i;

  // The value fits OUT_BITS iff bits [IN_BITS-1 : OUT_BITS-1] are all equal (pure sign extension).
  wire [IN_BITS-OUT_BITS:0] top  = shifted[IN_BITS-1:OUT_BITS-1];
  wire                      fits = (&top) | ~(|top);
  assign y_o = fits ? shifted[OUT_BITS-1:0]
             : shifted[IN_BITS-1] ? {1'b1, {(OUT_BITS - 1){1'b0}}}   // -2^(OUT_BITS-1)
                                  : {1'b0, {(OUT_BITS - 1){1'b1}}};  //  2^(OUT_BITS-1)-1

endmodule

`default_nettype wire
