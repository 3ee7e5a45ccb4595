// inv_sqrt: the once-per-row normalizer of the LayerNorm blocks: s = floor(sqrt(v)), q = floor((2^K +
// [ROUND = 1] floor(s/2)) / s) for v > 0, by rtl/isqrt.v (IN_BITS/2 clocks) then rtl/divu.v (K + 2 clocks), the
// root handed over when ready. One request at a time, the result held until taken. v = 0 is the caller's to
// skip (the quotient would be all ones); 2^K + s/2 < 2^(K+1) needs IN_BITS/2 <= K + 1.

`default_nettype none

module inv_sqrt #(
  parameter integer IN_BITS = 62,  // radicand v, unsigned, even
  parameter integer K       = 43,  // the numerator's power of two
  parameter integer ROUND   = 1    // 1: + floor(s/2), the quotient rounded to nearest; else floored
) (
  input  wire               clk_i,
  input  wire               rst_ni,
  input  wire               in_valid_i,
  output wire               in_ready_o,
  input  wire [IN_BITS-1:0] in_data_i,
  output wire               out_valid_o,
  input  wire               out_ready_i,
  output wire [K:0]         out_data_o
);

  localparam integer S_W = IN_BITS / 2;
  localparam [K:0]   TWO_K = {1'b1, {K{1'b0}}};
  wire           s_valid, div_ready;
  wire [S_W-1:0] s;
  wire [S_W-1:0] rem_unused;  // the remainder is not needed
  wire [K:0]     num = TWO_K + ((ROUND == 1) ? {{(K-S_W+2){1'b0}}, s[S_W-1:1]} : {(K+1){1'b0}});

  isqrt #(.IN_BITS(IN_BITS)) u_isqrt (
    .clk_i(clk_i), .rst_ni(rst_ni), .in_valid_i(in_valid_i), .in_ready_o(in_ready_o), .in_data_i(in_data_i),
    .out_valid_o(s_valid), .out_ready_i(div_ready), .out_data_o(s)
  );

  divu #(.N_BITS(K + 1), .D_BITS(S_W)) u_divu (
    .clk_i(clk_i), .rst_ni(rst_ni), .in_valid_i(s_valid), .in_ready_o(div_ready), .in_dividend_i(num),
    .in_divisor_i(s), .out_valid_o(out_valid_o), .out_ready_i(out_ready_i), .out_quotient_o(out_data_o),
    .out_remainder_o(rem_unused)
  );

endmodule

`default_nettype wire
