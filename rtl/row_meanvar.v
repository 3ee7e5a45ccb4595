// row_meanvar: the rounded mean and the exact sum of squared deviations of an int8 row from its
// sums (rtl/row_moments.v), once per row: I-ViT's and I-BERT's LayerNorm statistics.
//   q, r = divmod(Sx + 128 C, C)           (rtl/divu.v, 8 quotient bits, 9 clocks)
//   mean = q - 128 + [2r > C, or 2r = C and (q odd or not EVEN)]
//          (EVEN: half to even, I-BERT's round(Sx / C); else half up, I-ViT's floor((2 Sx + C) / 2C))
//   t    = C mean - 2 Sx,  ssq = Sxx + mean t  (= sum (x_i - mean)^2, exact)
// Widths (C < 2^CW): Sx + 128 C in [0, 255 C] (q <= 255, and q = 255 only at Sx = 127 C, r = 0, so
// mean + 128 <= 255: signed 8); |t| <= 384 C (CW + 10 bits); |mean t| <= 49152 C (CW + 17); ssq <=
// 255^2 C, carried in one bit more than CW + 17 and SS_W, cut to SS_W (the caller's bound).
// go_i starts it (the row's sums complete); ssq_valid_o marks the one clock ssq_o is ready; mean_o
// holds from then until the next row's mean.

`default_nettype none

module row_meanvar #(
  parameter integer CW   = 11,  // row length bits: C < 2^CW
  parameter integer SS_W = 28,  // ssq_o bits (ssq < 2^SS_W)
  parameter integer EVEN = 1    // 1: mean rounded half to even, 0: half up
) (
  input  wire              clk_i,
  input  wire              rst_ni,
  input  wire              go_i,
  input  wire [CW-1:0]     c_i,          // C >= 1
  input  wire [CW+7:0]     sx_i,         // Sx, signed
  input  wire [CW+13:0]    sxx_i,        // Sxx
  output wire              ssq_valid_o,
  output wire [SS_W-1:0]   ssq_o,
  output wire [7:0]        mean_o        // signed
);

  localparam integer T_W  = CW + 10;
  localparam integer MT_W = CW + 17;
  localparam integer MW   = ((MT_W > SS_W) ? MT_W : SS_W) + 1;

  localparam [1:0] ST_NONE = 2'd0;  // no row
  localparam [1:0] ST_MEAN = 2'd1;  // waiting for q, r
  localparam [1:0] ST_T    = 2'd2;  // t
  localparam [1:0] ST_SSQ  = 2'd3;  // ssq ready

  reg  [1:0]       state_q;
  reg  [7:0]       mean_q;
  reg  [T_W-1:0]   t_q;
  wire             q_valid;
  wire [7:0]       q;
  wire [CW-1:0]    r;
  wire             div_ready_unused;  // idle at every go_i: one division a row

  divu #(.N_BITS(CW + 8), .D_BITS(CW), .Q_BITS(8)) u_divu (
    .clk_i(clk_i), .rst_ni(rst_ni), .in_valid_i(go_i), .in_ready_o(div_ready_unused),
    .in_dividend_i(sx_i + {1'b0, c_i, 7'd0}), .in_divisor_i(c_i), .out_valid_o(q_valid),
    .out_ready_i(state_q == ST_MEAN), .out_quotient_o(q), .out_remainder_o(r)
  );

  wire [CW:0]          r2     = {r, 1'b0};
  wire [CW:0]          c_x    = {1'b0, c_i};
  wire                 up     = (r2 > c_x) || ((r2 == c_x) && (q[0] || EVEN == 0));
  wire [7:0]           mean_d = q + {7'd0, up};  // mean + 128 <= 255
  wire signed [T_W-1:0] t_d   = $signed({{(T_W-CW){1'b0}}, c_i}) * $signed({{(T_W-8){mean_q[7]}}, mean_q})
                              - $signed({{(T_W-CW-9){sx_i[CW+7]}}, sx_i, 1'b0});
  wire signed [MT_W-1:0] mt   = $signed({{(MT_W-8){mean_q[7]}}, mean_q}) * $signed({{(MT_W-T_W){t_q[T_W-1]}}, t_q});
  wire [MW-1:0]        ssq    = {{(MW-CW-14){1'b0}}, sxx_i} + {{(MW-MT_W){mt[MT_W-1]}}, mt};

  always @(posedge clk_i) begin
    if (!rst_ni) begin
      state_q <= ST_NONE;
    end else if (go_i) begin
      state_q <= ST_MEAN;
    end else begin
      case (state_q)
        ST_MEAN: begin
          if (q_valid) begin
            mean_q  <= {~mean_d[7], mean_d[6:0]};  // - 128
            state_q <= ST_T;
          end
        end
        ST_T: begin
          t_q     <= t_d;
          state_q <= ST_SSQ;
        end
        default: state_q <= ST_NONE;
      endcase
    end
  end

  wire unused_bits = ^ssq[MW-1:SS_W];  // ssq < 2^SS_W

  assign ssq_valid_o = (state_q == ST_SSQ);
  assign ssq_o       = ssq[SS_W-1:0];
  assign mean_o      = mean_q;

endmodule

`default_nettype wire
