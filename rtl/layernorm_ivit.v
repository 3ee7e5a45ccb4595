// layernorm_ivit: I-ViT's I-LayerNorm as its authors released it (IntLayerNorm and the QuantAct after it,
// zkkli/I-ViT), over a streamed row: the bit-exact twin of layernorm=ivit (hwvit/variants/ivit_released.py
// layernorm_stages; docs/variants/ivit.md).
//
// Per row of C signed IN_BITS inputs x_i (I-ViT's residual stream: 16 bits):
//   mu   = round_half_even(Sx / C),  d_i = x_i - mu,  var = sum d_i^2 = Sxx + mu (C mu - 2 Sx)
//   k    = 2^16, ten times k = floor((k + floor(var / k)) / 2)   (std: Newton steps, not iterated to the end)
//   factor = floor((2^31 - 1) / k),  y_i = floor(d_i factor / 2),  z_i = y_i + bias_i
//   out_i  = sat_OUT_BITS(round_half_even(z_i M_i / 2^E_i))                      (per channel bias, M, E)
// The mean: q, r = divmod(Sx + 2^(IN_BITS-1) C, C) (a nonnegative dividend), mu = q - 2^(IN_BITS-1) +
// [2r > C, or 2r = C and q odd] (q - 2^(IN_BITS-1) has q's parity).
//
// Widths (C <= MAX_C < 2^CW, IN_BITS <= 16): |Sx| <= C 2^(IN_BITS-1) (row_moments: CW + IN_BITS bits),
// Sxx <= C 2^(2 IN_BITS - 2); |d_i| < 2^IN_BITS (IN_BITS + 1 signed); var <= C (2^IN_BITS - 1)^2 < 2^VW,
// VW = CW + 2 IN_BITS (45 at 4096 x 16 bits); |C mu - 2 Sx| <= 3 C 2^(IN_BITS-1). Newton: every k >= 64
// (a step at least halves k: ten from 2^16) and k < 2^(VW/2 + 7) <= 2^29 (the first step's (2^16 + var /
// 2^16) / 2, then falling from above the root), so floor(var / k) < 2^30 (var < 2^VW with k >= 2^16 from
// the root on, or var < 2^32 and k >= 64): the divisions take 30 quotient bits; factor < 2^25 (k >= 64).
// d_i factor: signed IN_BITS + 26 bits, y_i one less; |bias_i| < 2^40 (signed 41, the kernel's bound),
// z_i signed 42 (with IN_BITS + 25 below that); |M_i| <= 2^31 (signed 33), P_i = z_i M_i exact in 75 bits;
// round half to even by 2^E (E clamped to 75, where the formula gives 0 as for any E past |P|), saturated.
//
// On the row engine (rtl/row_stream.v; six stages): FILL sums x_i and x_i^2 (rtl/row_moments.v); CALC runs
// twelve divisions on one rtl/divu.v (31 clocks each): the mean, the ten Newton steps, factor (about 380
// clocks a row: a row of C < 380 elements waits for its CALC); OUT: stage 1 x_i, 2 d_i, 3 y_i with the
// channel's bias, M, E, 4 z_i, 5 P_i, 6 the rounded, saturated output. A row's CALC waits until the row
// before has left stage 2 (it reads mu and factor). bias (signed 41), M (signed 33) and E (7 bits) are
// written through prm_* while no row is in flight (no reset).

`default_nettype none

module layernorm_ivit #(
  parameter integer MAX_C    = 1024,  // longest row (2..4096): the row buffer, the channel RAMs
  parameter integer IN_BITS  = 16,    // signed input width (2..16)
  parameter integer OUT_BITS = 8      // output width, signed (2..16)
) (
  input  wire clk_i, input wire rst_ni,  // rst_ni: synchronous, active low
  // ---- per-channel write port: bias, M, E of channel prm_addr_i ----
  input  wire prm_we_i, input wire [$clog2(MAX_C)-1:0] prm_addr_i,
  input  wire [40:0]                prm_bias_i,    // bias_int, signed, |bias| < 2^40
  input  wire [32:0]                prm_mult_i,    // M, signed, |M| <= 2^31
  input  wire [6:0]                 prm_shift_i,   // E, unsigned, 0..127
  // ---- configuration ----
  input  wire [$clog2(MAX_C+1)-1:0] cfg_c_i,       // row length C in [1, MAX_C]
  input  wire in_valid_i, output wire in_ready_o, input wire [IN_BITS-1:0] in_data_i,  // x_i, signed
  output wire out_valid_o, input wire out_ready_i, output wire out_last_o,  // with each row's last
  output wire [OUT_BITS-1:0] out_data_o  // out_i, signed
);

  localparam integer AW  = $clog2(MAX_C), CW = $clog2(MAX_C + 1);  // buffer address, row length
  localparam integer SW  = CW + IN_BITS;           // Sx, signed
  localparam integer QW  = CW + 2 * IN_BITS - 2;   // Sxx
  localparam integer VW  = CW + 2 * IN_BITS;       // var
  localparam integer TW  = CW + IN_BITS + 3;       // t = C mu - 2 Sx, signed; mu t in VW + 4 bits
  localparam integer DN  = VW;                     // dividend (>= SW, >= 31 at IN_BITS >= 8)
  localparam integer DNX = (DN > 31) ? DN : 31;
  localparam integer KW  = 29;                     // k, the divisor
  localparam integer QB  = 30;                     // quotient bits (clocks)
  localparam integer PW  = 75;                     // P = z M
  localparam integer PX  = PW + 1;
  localparam [6:0]           PW_C = 7'd75;
  localparam [PX-1:0]        ONE  = {{(PX-1){1'b0}}, 1'b1};
  localparam signed [PX-1:0] TOP  = (ONE <<< (OUT_BITS - 1)) - ONE;   //  2^(b-1) - 1
  localparam signed [PX-1:0] BOT  = -(ONE <<< (OUT_BITS - 1));        // -2^(b-1)

  // ---------------------------------------------------------------- the engine and the row sums
  wire                fill, go_unused, start, enter, first_unused, calc_unused, passed_unused, pass_unused;
  wire [AW-1:0]       idx, fill_addr_unused, rd_addr_unused;
  wire [CW-1:0]       len, row_len_unused;
  wire [IN_BITS-1:0]  x1;
  wire [6:1]          ld;
  wire [OUT_BITS-1:0] o_d;
  reg                 done;
  row_stream #(
    .NAME("layernorm_ivit"), .LEN_NAME("MAX_C"), .MAX_N(MAX_C), .LIMIT(4096), .W(IN_BITS), .OUT_BITS(OUT_BITS),
    .OUT_MIN(2), .DEPTH(6), .GO_AFTER(2)) u_stream (
    .clk_i(clk_i), .rst_ni(rst_ni), .len_i(cfg_c_i), .in_valid_i(in_valid_i), .in_ready_o(in_ready_o),
    .in_data_i(in_data_i), .out_valid_o(out_valid_o), .out_ready_i(out_ready_i), .out_data_o(out_data_o),
    .out_last_o(out_last_o), .fill_o(fill), .first_o(first_unused), .fill_addr_o(fill_addr_unused), .len_o(len),
    .go_o(go_unused), .calc_o(calc_unused), .enter_o(enter), .passed_o(passed_unused), .done_i(done),
    .pass_o(pass_unused), .start_o(start), .row_len_o(row_len_unused), .rd_addr_o(rd_addr_unused), .idx_o(idx),
    .x1_o(x1), .ld_o(ld), .out_i(o_d)
  );

  wire [SW-1:0] sx;
  wire [QW-1:0] sxx;
  row_moments #(.CW(CW), .ZB(IN_BITS)) u_sums (
    .clk_i(clk_i), .rst_ni(rst_ni), .clear_i(start), .fill_i(fill), .z_i(in_data_i), .sz_o(sx), .szz_o(sxx)
  );

  // ---------------------------------------------------------------- CALC: mean, var, ten Newton steps, factor
  // step_q: 0 the mean's division, 1..10 the Newton steps, 11 factor's; req_q asks divu for step_q's.
  reg  [3:0]          step_q;
  reg                 req_q, var_q;
  reg  [IN_BITS-1:0]  mu_q;
  reg  [VW-1:0]       v_q;
  reg  [KW-1:0]       k_q;
  reg  [24:0]         fac_q;
  wire [QB-1:0]       quo;
  wire [KW-1:0]       rem;
  wire                dv, div_ready_unused;
  wire [CW-1:0]       c_w   = len;
  wire [SW-1:0]       sx_up = sx + {1'b0, c_w, {(IN_BITS-1){1'b0}}};   // Sx + 2^(IN_BITS-1) C >= 0
  reg  [DNX-1:0]      num;                                             // step_q's dividend
  always @* begin
    num = {DNX{1'b0}};
    if (step_q == 4'd0) begin
      num[SW-1:0] = sx_up;
    end else if (step_q == 4'd11) begin
      num[30:0] = {31{1'b1}};
    end else begin
      num[VW-1:0] = v_q;
    end
  end
  wire [KW-1:0]       den   = (step_q == 4'd0) ? {{(KW-CW){1'b0}}, c_w} : k_q;
  divu #(.N_BITS(DNX), .D_BITS(KW), .Q_BITS(QB)) u_div (
    .clk_i(clk_i), .rst_ni(rst_ni), .in_valid_i(req_q), .in_ready_o(div_ready_unused), .in_dividend_i(num),
    .in_divisor_i(den), .out_valid_o(dv), .out_ready_i(1'b1), .out_quotient_o(quo), .out_remainder_o(rem)
  );
  // the mean from q, r: 2r against C, ties to the even q
  wire [CW:0]         r2    = {rem[CW-1:0], 1'b0};
  wire                up    = (r2 > {1'b0, c_w}) || ((r2 == {1'b0, c_w}) && quo[0]);
  wire [IN_BITS-1:0]  mu_d  = quo[IN_BITS-1:0] + {{(IN_BITS-1){1'b0}}, up} - {1'b1, {(IN_BITS-1){1'b0}}};
  // var = Sxx + mu (C mu - 2 Sx), exact
  wire signed [TW-1:0]   t_s  = $signed({{(TW-CW){1'b0}}, c_w}) * $signed({{(TW-IN_BITS){mu_q[IN_BITS-1]}}, mu_q})
                              - $signed({{(TW-SW-1){sx[SW-1]}}, sx, 1'b0});
  wire signed [VW+3:0]   mt_s = $signed({{(VW+4-TW){t_s[TW-1]}}, t_s}) * $signed({{(VW+4-IN_BITS){mu_q[IN_BITS-1]}}, mu_q});
  wire [VW+3:0]          v_d  = {{(VW+4-QW){1'b0}}, sxx} + mt_s;
  wire [KW:0]            k_d  = ({1'b0, k_q} + {1'b0, quo[KW-1:0]}) >> 1;

  always @(posedge clk_i) begin
    done  <= 1'b0;
    req_q <= 1'b0;
    var_q <= 1'b0;
    if (!rst_ni) begin
      step_q <= 4'd0;
    end else if (enter) begin
      step_q <= 4'd0;
      req_q  <= 1'b1;
    end else if (var_q) begin  // mu known: var, then the first Newton step
      v_q    <= v_d[VW-1:0];
      k_q    <= {{(KW-17){1'b0}}, 17'h10000};
      step_q <= 4'd1;
      req_q  <= 1'b1;
    end else if (dv) begin
      if (step_q == 4'd0) begin
        mu_q  <= mu_d;
        var_q <= 1'b1;
      end else if (step_q == 4'd11) begin
        fac_q <= quo[24:0];
        done  <= 1'b1;
      end else begin
        k_q    <= k_d[KW-1:0];
        step_q <= step_q + 4'd1;
        req_q  <= 1'b1;
      end
    end
  end

  // ---------------------------------------------------------------- element datapath
  // verilator coverage_off
  reg [40:0]          b_mem [0:MAX_C-1];   // bias per channel
  reg [32:0]          m_mem [0:MAX_C-1];   // M per channel
  reg [6:0]           e_mem [0:MAX_C-1];   // E per channel
  // verilator coverage_on
  reg signed [IN_BITS:0] d2_q;
  reg signed [40:0]   y3_q;
  reg [40:0]          b3_q;
  reg [32:0]          m3_q, m4_q;
  reg [6:0]           e3_q, e4_q, e5_q;
  reg signed [41:0]   z4_q;
  reg signed [PW-1:0] p5_q;

  wire signed [42:0]    df   = $signed({{(42-IN_BITS){d2_q[IN_BITS]}}, d2_q}) * $signed({18'd0, fac_q});  // |d f| < 2^41
  wire signed [PW-1:0]  p_d  = $signed({{(PW-42){z4_q[41]}}, z4_q}) * $signed({{(PW-33){m4_q[32]}}, m4_q});
  wire [6:0]            e_c  = (e5_q > PW_C) ? PW_C : e5_q;
  wire signed [PX-1:0]  p_x  = $signed({p5_q[PW-1], p5_q});
  wire signed [PX-1:0]  q6   = p_x >>> e_c;
  wire [PX-1:0]         r6   = p_x & ~({PX{1'b1}} << e_c);
  wire [PX-1:0]         h6   = (ONE << e_c) >> 1;
  wire                  u6   = (e_c != 7'd0) && ((r6 > h6) || ((r6 == h6) && q6[0]));
  wire signed [PX-1:0]  o6   = q6 + $signed({{(PX-1){1'b0}}, u6});
  assign o_d = (o6 > TOP) ? TOP[OUT_BITS-1:0] : (o6 < BOT) ? BOT[OUT_BITS-1:0] : o6[OUT_BITS-1:0];

  always @(posedge clk_i) begin
    if (prm_we_i) begin
      b_mem[prm_addr_i] <= prm_bias_i;
      m_mem[prm_addr_i] <= prm_mult_i;
      e_mem[prm_addr_i] <= prm_shift_i;
    end
    if (ld[2]) begin
      d2_q <= $signed({x1[IN_BITS-1], x1}) - $signed({mu_q[IN_BITS-1], mu_q});
    end
    if (ld[3]) begin
      y3_q <= df[41:1];
      b3_q <= b_mem[idx];
      m3_q <= m_mem[idx];
      e3_q <= e_mem[idx];
    end
    if (ld[4]) begin
      z4_q <= $signed({y3_q[40], y3_q}) + $signed({b3_q[40], b3_q});
      m4_q <= m3_q;
      e4_q <= e3_q;
    end
    if (ld[5]) begin
      p5_q <= p_d;
      e5_q <= e4_q;
    end
  end

  wire unused_bits = ^{go_unused, df[42], df[0], quo[QB-1:KW], rem[KW-1:CW], v_d[VW+3:VW], k_d[KW], first_unused,
                       calc_unused, passed_unused, pass_unused, fill_addr_unused, rd_addr_unused, row_len_unused,
                       div_ready_unused, ld[1], ld[6]};

endmodule

`default_nettype wire
