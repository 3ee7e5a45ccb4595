// row_meanvar: I-ViT's and I-BERT's LayerNorm statistics of an int8 row: its sums as it fills
// (rtl/row_moments.v), then once per row the rounded mean, the exact variance and the normalizer:
//   q, r = divmod(Sx + 128 C, C)           (rtl/divu.v, 8 quotient bits, 9 clocks)
//   mean = q - 128 + [2r > C, or 2r = C and (q odd or EVEN != 1)]
//          (EVEN = 1: half to even, I-BERT's round(Sx / C); else half up, I-ViT's floor((2 Sx + C) / 2C))
//   t    = C mean - 2 Sx,  var = Sxx + mean t + eps  (= sum (x_i - mean)^2 + eps, exact)
//   factor = floor(2^K / floor(sqrt(var)))          (rtl/inv_sqrt.v; 0 for var = 0, no root taken)
// Widths (C < 2^CW): Sx + 128 C in [0, 255 C] (q <= 255, and q = 255 only at Sx = 127 C, r = 0, so
// mean + 128 <= 255: signed 8); |t| <= 384 C (CW + 10 bits); |mean t| <= 49152 C (CW + 17); sum (x_i -
// mean)^2 <= 255^2 C, carried in one bit more than CW + 17 and VAR_W, cut to VAR_W (the caller's bound
// on var). go_i starts it (the row's sums complete); done_o marks the clock the factor is known (11
// clocks after go_i when var = 0), factor_o holds it from the next clock and mean_o from then, both
// until the next row's. clear_i (the row enters OUT) and reset clear the sums for the next row.

`default_nettype none

module row_meanvar #(
  parameter integer CW    = 11,  // row length bits: C < 2^CW
  parameter integer VAR_W = 28,  // var bits (var < 2^VAR_W, VAR_W even: the square root's input)
  parameter integer EPS_W = 1,   // eps bits (EPS_W < VAR_W)
  parameter integer K     = 31,  // factor = floor(2^K / std), K + 1 bits (VAR_W/2 <= K + 1)
  parameter integer EVEN  = 1    // 1: mean rounded half to even, else half up
) (
  input  wire             clk_i,
  input  wire             rst_ni,
  input  wire             clear_i,
  input  wire             fill_i,       // x_i is taken this clock
  input  wire [7:0]       x_i,          // signed
  input  wire             go_i,
  input  wire [CW-1:0]    c_i,          // C >= 1
  input  wire [EPS_W-1:0] eps_i,        // added to the variance
  output wire             done_o,
  output wire [7:0]       mean_o,       // signed
  output wire [K:0]       factor_o
);

  localparam integer T_W  = CW + 10;
  localparam integer MT_W = CW + 17;
  localparam integer MW   = ((MT_W > VAR_W) ? MT_W : VAR_W) + 1;

  wire [CW+7:0]    sx;
  wire [CW+13:0]   sxx;
  reg  [2:1]       step_q;            // 1: q, r just taken (t next), 2: var ready
  reg  [7:0]       mean_q;
  reg  [T_W-1:0]   t_q;
  reg  [K:0]       factor_q;
  wire             q_valid, root_valid;
  wire [7:0]       q;
  wire [CW-1:0]    r;
  wire [K:0]       root;
  wire             div_ready_unused, root_ready_unused;  // idle at every request: one of each a row

  row_moments #(.CW(CW), .ZB(8)) u_moments (
    .clk_i(clk_i), .rst_ni(rst_ni), .clear_i(clear_i), .fill_i(fill_i), .z_i(x_i), .sz_o(sx), .szz_o(sxx)
  );
  divu #(.N_BITS(CW + 8), .D_BITS(CW), .Q_BITS(8)) u_divu (
    .clk_i(clk_i), .rst_ni(rst_ni), .in_valid_i(go_i), .in_ready_o(div_ready_unused),
    .in_dividend_i(sx + {1'b0, c_i, 7'd0}), .in_divisor_i(c_i), .out_valid_o(q_valid),
    .out_ready_i(1'b1), .out_quotient_o(q), .out_remainder_o(r)
  );

  wire [CW:0]           r2     = {r, 1'b0};
  wire [CW:0]           c_x    = {1'b0, c_i};
  wire                  up     = (r2 > c_x) || ((r2 == c_x) && (q[0] || EVEN != 1));
  wire [7:0]            mean_d = q + {7'd0, up};  // mean + 128 <= 255
  wire signed [T_W-1:0] t_d    = $signed({{(T_W-CW){1'b0}}, c_i}) * $signed({{(T_W-8){mean_q[7]}}, mean_q})
                               - $signed({{(T_W-CW-9){sx[CW+7]}}, sx, 1'b0});
  wire signed [MT_W-1:0] mt    = $signed({{(MT_W-8){mean_q[7]}}, mean_q}) * $signed({{(MT_W-T_W){t_q[T_W-1]}}, t_q});
  wire [MW-1:0]         ssq    = {{(MW-CW-14){1'b0}}, sxx} + {{(MW-MT_W){mt[MT_W-1]}}, mt};
  wire [VAR_W-1:0]      var_d  = ssq[VAR_W-1:0] + {{(VAR_W-EPS_W){1'b0}}, eps_i};
  wire                  zero   = step_q[2] && (var_d == {VAR_W{1'b0}});

  inv_sqrt #(.IN_BITS(VAR_W), .K(K), .ROUND(0)) u_inv (
    .clk_i(clk_i), .rst_ni(rst_ni), .in_valid_i(step_q[2] && !zero), .in_ready_o(root_ready_unused),
    .in_data_i(var_d), .out_valid_o(root_valid), .out_ready_i(1'b1), .out_data_o(root)
  );

  always @(posedge clk_i) begin
    step_q <= rst_ni ? {step_q[1], q_valid} : 2'b00;
    if (q_valid) begin
      mean_q <= {~mean_d[7], mean_d[6:0]};  // - 128
    end
    if (step_q[1]) begin
      t_q <= t_d;
    end
    if (zero || root_valid) begin
      factor_q <= zero ? {(K+1){1'b0}} : root;
    end
  end

  wire unused_bits = ^ssq[MW-1:VAR_W];  // sum (x - mean)^2 < 2^VAR_W

  assign done_o   = zero || root_valid;
  assign mean_o   = mean_q;
  assign factor_o = factor_q;

endmodule

`default_nettype wire
