// softmax_ibert: I-BERT's integer softmax over a streamed row, the bit-exact twin of the softmax=ibert
// variant (hwvit/variants/ibert.py ibert_softmax_int, then saturated to OUT_BITS).
//
// Per row of N signed IN_BITS scores x_i, with the layer's constants on configuration ports (x0 = x0_int <
// 0, b = b_int, c = c_int, P = exp_num odd, K = exp_den_log2, M = act_multiplier, E = act_shift;
// docs/variants/ibert.md derives them from the input scale s):
//   i-exp      a_i = min(max - x_i, 30 |x0|),  q_i = floor(a_i / |x0|) in [0, 30],
//              rem_i = a_i - q_i |x0| in [0, |x0|)   (I-BERT's r = x - x0 q = -rem),
//              poly_i = (r + b) r + c = c - rem (b - rem),  exp_i = poly_i * 2^(30 - q_i)
//   QuantAct16 z_i = round_half_even(exp_i * 2^K / P),  e_i = min(round_half_even(z_i M / 2^E), 2^15 - 1)
//   normalize  S = sum e_i,  f = floor(2^32 / S)                                   (once per row)
//              p_i = min((e_i f) >> (32 - OUT_BITS), 2^OUT_BITS - 1)
// (the kernel's max(exp, 0) is dropped: poly >= 1 for every s in range, see below).
//
// The division by P. z_i needs an exact quotient of a number of up to 176 bits by the 53-bit P for every
// element, which no divider does in a clock. It is a multiply and a correction instead:
//   R = floor(2^(K+63) / P)                       (once per row, rtl/divu.v, 125 clocks)
//   t_i = 30 - q_i + K,  n_i = poly_i 2^t_i  (the numerator, exp_i 2^K)
//   zf_i = floor(poly_i R / 2^(33 + q_i))
// poly R / 2^(33+q) = n / P - poly (2^(K+63)/P - R) / 2^(33+q) lies in (n/P - 1/2, n/P] since poly < 2^32
// and 0 <= 2^(K+63)/P - R < 1: so zf is floor(n/P) or one less, and the remainder
//   rho_i = n_i - zf_i P  is in [0, 2P) < 2^54,
// computed modulo 2^54 from the low bits alone: (n mod 2^54) - (zf mod 2^54) P. Then
//   floor(n/P) = zf + [rho >= P],  z = round_half_even(n/P) = zf + [2 rho > P] + [2 rho > 3P]
// (P is odd: n/P is never a tie, and 2 rho > 3P is "rho - P above P/2"). The second rounding: V = z M, e =
// V >> E rounded half to even: the guard bit V[E-1], the sticky OR of V[E-2:0] and the parity of V >> E
// decide the increment; then the clamp at 2^15 - 1.
//
// Widths, for I-BERT's input scale s in [2^-15, 1.67) (the kernel's range; x0 = floor(-0.6931/s), b =
// floor(2.7073/s), c = floor(2.7921/s^2), S_exp = P / 2^K = 0.35815147 s^2 / 2^30, M / 2^E = S_exp /
// S_act):
//   |x0| <= 22713 (15 bits), 30 |x0| < 2^20; b < 2^17; 1 <= c < 2^32; a_i <= 2^IN_BITS - 1 <= 2^16 - 1.
//   rem < |x0|, b - rem > 2.014/s - 1 > 0; poly = c - rem (b - rem) is increasing in rem's negative
//   r over (x0, 0], so poly >= c - (|x0| - 1)(b - |x0| + 1) >= 0.91/s^2 - 1 > 0 for s < 0.957, and
//   |x0| = 1 (rem = 0, poly = c >= 1) above 0.693: poly in [1, c], 32 bits.
//   S_exp in [2^-61.5, 2^-30): 2^K / P in (2^30, 2^61.5], P < 2^53 so K <= 114 (7-bit port);
//   R <= 2^(K+63)/P <= 2^124.5: 125 bits (the divider's quotient; 2^(K+63) < P 2^125 as it needs),
//   dividend 2^(K+63) < 2^178. poly R < 2^157.  zf, z <= c 2^(30+K)/P + 1 < 2^124.
//   M <= 2^31 (frexp's rounding can reach 2^31): 32 bits; V = z M < 2^156; 1 <= E <= 255 (8 bits).
//   e_i <= 2^15 - 1; S <= N (2^15 - 1) < 2^(15 + clog2(MAX_N)); S >= e(max) >= 1 (the row max has
//   exp = c 2^30 = the QuantAct range, e = 32767), so f <= 2^32 (33 bits, rtl/divu.v, 33 clocks);
//   e_i f <= S f <= 2^32 (33 bits), and p <= 2^OUT_BITS before the saturation.
// The block trusts hwvit/variants/ibert.py softmax_constants (K <= 114, E >= 1, P odd, |x0| >= 1).
//
// On the row engine (rtl/row_stream.v; seven stages): FILL takes the max (rtl/row_max.v) and its first
// input starts R's division (the constants steady from then on); CALC waits for R (125 clocks after that
// input); PASS re-reads the row (stage 1 x_i; 2 a, q, rem by five restoring steps; 3 poly, poly R, n mod
// 2^54; 4 zf, rho, z; 5 V = z M; then e_i, V rounded and clamped) into S; CALC divides for f (34 clocks);
// OUT computes e_i again (cheaper than storing it) into stage 6, then p_i = (e_i f) >> (32 - OUT_BITS),
// saturated, into the output register. A row's CALC waits until the row before has left stage 6 (it reads
// max, R and f).

`default_nettype none

module softmax_ibert #(
  parameter integer MAX_N    = 256,  // longest row (2..65536); the row buffer has MAX_N entries
  parameter integer IN_BITS  = 8,    // signed input width (2..16)
  parameter integer OUT_BITS = 8     // unsigned probability width (1..16)
) (
  input  wire clk_i, input wire rst_ni,  // rst_ni: synchronous, active low
  // Configuration: the row length (sampled with a row's first input), the layer's constants (steady)
  input  wire [$clog2(MAX_N+1)-1:0]   row_len_i,       // N in [1, MAX_N]
  input  wire [15:0]                  x0_int_i,        // x0, signed, in [-22713, -1]
  input  wire [16:0]                  b_int_i,         // b, unsigned
  input  wire [31:0]                  c_int_i,         // c, unsigned, >= 1
  input  wire [52:0]                  exp_num_i,       // P, odd
  input  wire [6:0]                   exp_den_log2_i,  // K <= 114
  input  wire [31:0]                  act_multiplier_i,// M <= 2^31
  input  wire [7:0]                   act_shift_i,     // E >= 1
  input  wire in_valid_i, output wire in_ready_o, input wire [IN_BITS-1:0] in_data_i,  // x_i, signed
  output wire out_valid_o, input wire out_ready_i, output wire out_last_o,  // with each row's last
  output wire [OUT_BITS-1:0] out_data_o  // p_i, unsigned (p_i / 2^OUT_BITS)
);

  localparam integer AW = $clog2(MAX_N), LW = $clog2(MAX_N + 1);  // buffer address, row length
  localparam integer EB     = 15;                   // e_i, unsigned, <= 2^15 - 1
  localparam integer S_BITS = EB + AW;              // S <= MAX_N (2^15 - 1)
  localparam integer A_BITS = 20;                   // a_i <= min(2^16 - 1, 30 |x0|) < 2^20
  localparam integer R_BITS = 125;                  // R <= 2^124.5
  localparam integer RN     = 178;                  // dividend 2^(K+63), K <= 114
  localparam integer PR     = 32 + R_BITS;          // poly R < 2^157
  localparam integer Z_BITS = 124;                  // zf, z < 2^124
  localparam integer LO     = 54;                   // rho < 2P < 2^54: computed mod 2^54
  localparam integer V_BITS = Z_BITS + 32;          // V = z M < 2^156
  localparam integer F_BITS = 33;                   // f <= 2^32; also e_i f <= 2^32
  localparam [EB-1:0]     E_MAX_C = {EB{1'b1}};     // 2^15 - 1

  // ---------------------------------------------------------------- the engine and the max
  wire                fill, first, go, calc, enter, passed, pass, done, start_unused;
  wire [IN_BITS-1:0]  x1, mx, fill_max_unused;
  wire [7:1]          ld;
  wire [OUT_BITS-1:0] out_d;
  wire [AW-1:0]       fill_addr_unused, rd_addr_unused, idx_unused;
  wire [LW-1:0]       len_unused, row_len_unused;
  row_stream #(
    .NAME("softmax_ibert"), .MAX_N(MAX_N), .LIMIT(65536), .W(IN_BITS), .OUT_BITS(OUT_BITS), .OUT_MIN(1), .DEPTH(7),
    .PASS(1), .PASS_EXIT(5), .PRE_CALC(1), .GO_AFTER(6)) u_stream (
    .clk_i(clk_i), .rst_ni(rst_ni), .len_i(row_len_i), .in_valid_i(in_valid_i), .in_ready_o(in_ready_o),
    .in_data_i(in_data_i), .out_valid_o(out_valid_o), .out_ready_i(out_ready_i), .out_data_o(out_data_o),
    .out_last_o(out_last_o), .fill_o(fill), .first_o(first), .fill_addr_o(fill_addr_unused), .len_o(len_unused),
    .go_o(go), .calc_o(calc), .enter_o(enter), .passed_o(passed), .done_i(done), .pass_o(pass), .start_o(start_unused),
    .row_len_o(row_len_unused), .rd_addr_o(rd_addr_unused), .idx_o(idx_unused), .x1_o(x1), .ld_o(ld), .out_i(out_d)
  );

  row_max #(.W(IN_BITS)) u_max (.clk_i(clk_i), .fill_i(fill), .first_i(first), .data_i(in_data_i), .go_i(go),
                                 .fill_max_o(fill_max_unused), .max_o(mx));

  // ---------------------------------------------------------------- R = floor(2^(K+63) / P), f = floor(2^32 / S)
  reg  [R_BITS-1:0] r_q;
  reg  [S_BITS-1:0] sum_q;          // S
  reg  [F_BITS-1:0] f_q;
  wire              rec_valid, div_valid;
  wire [R_BITS-1:0] rec_quotient;
  wire [F_BITS-1:0] div_quotient;
  wire              rec_ready_unused, div_ready_unused;  // idle at each request: one of each a row
  wire [52:0]       rec_rem_unused;
  wire [S_BITS-1:0] div_rem_unused;

  divu #(.N_BITS(RN), .D_BITS(53), .Q_BITS(R_BITS)) u_rec (
    .clk_i(clk_i), .rst_ni(rst_ni), .in_valid_i(fill && first), .in_ready_o(rec_ready_unused),
    .in_dividend_i({{(RN-1){1'b0}}, 1'b1} << ({1'b0, exp_den_log2_i} + 8'd63)), .in_divisor_i(exp_num_i),
    .out_valid_o(rec_valid), .out_ready_i(calc && !passed), .out_quotient_o(rec_quotient),
    .out_remainder_o(rec_rem_unused)
  );
  divu #(.N_BITS(F_BITS), .D_BITS(S_BITS), .Q_BITS(F_BITS)) u_div (
    .clk_i(clk_i), .rst_ni(rst_ni), .in_valid_i(enter && passed), .in_ready_o(div_ready_unused),
    .in_dividend_i({1'b1, {(F_BITS-1){1'b0}}}), .in_divisor_i(sum_q), .out_valid_o(div_valid),
    .out_ready_i(1'b1), .out_quotient_o(div_quotient), .out_remainder_o(div_rem_unused)
  );
  assign done = passed ? div_valid : rec_valid;

  // ---------------------------------------------------------------- e_i on stages 1..5 (PASS and OUT)
  reg  [4:0]        q2_q, q3_q;     // q_i
  reg  [14:0]       rem2_q;         // rem_i < |x0| < 2^15
  reg  [Z_BITS-1:0] pr3_q;          // (poly_i R) >> 33 < 2^124
  reg  [LO-1:0]     nlo3_q;         // n_i mod 2^54
  reg  [Z_BITS-1:0] z4_q;           // z_i
  reg  [V_BITS-1:0] v5_q;           // V_i = z_i M
  reg  [EB-1:0]     e6_q;           // e_i (OUT)

  // Stage 2: a = min(max - x, 30 |x0|), then q, rem by five restoring steps (a < 32 |x0|).
  wire [15:0]       x0a   = 16'd0 - x0_int_i;                       // |x0| <= 22713 (x0 in [-22713, -1])
  wire [A_BITS-1:0] lim   = ({4'd0, x0a} << 5) - ({4'd0, x0a} << 1); // 30 |x0| = 32 |x0| - 2 |x0| < 2^20
  wire [IN_BITS:0]  dfull = {mx[IN_BITS-1], mx} - {x1[IN_BITS-1], x1};  // in [0, 2^IN_BITS - 1]
  wire [A_BITS-1:0] a2    = {{(A_BITS-IN_BITS-1){1'b0}}, dfull};
  wire [A_BITS-1:0] ac2   = (a2 > lim) ? lim : a2;
  reg  [A_BITS-1:0] part;
  reg  [4:0]        q2;
  integer           j;
  always @* begin
    part = ac2;
    q2   = 5'd0;
    for (j = 4; j >= 0; j = j - 1) begin
      if (part >= ({4'd0, x0a} << j)) begin
        part  = part - ({4'd0, x0a} << j);
        q2[j] = 1'b1;
      end
    end
  end

  // Stage 3: poly = c - rem (b - rem) in [1, c]; poly R; n mod 2^54 = (poly << t) mod 2^54.
  wire [16:0]   bmr3  = b_int_i - {2'd0, rem2_q};
  wire [31:0]   poly3 = c_int_i - {2'd0, rem2_q} * {15'd0, bmr3};
  wire [PR-1:0] pr3   = {{R_BITS{1'b0}}, poly3} * {32'd0, r_q};
  wire [7:0]    t3    = {1'b0, exp_den_log2_i} + 8'd30 - {3'd0, q2_q};  // t = 30 - q + K
  wire [LO-1:0] nlo3  = {{(LO-32){1'b0}}, poly3} << t3;  // 0 once t >= 54 (P >= 2^24: K >= 30 + log2 P)

  // Stage 4: zf = (poly R) >> (33 + q); rho = n - zf P mod 2^54; z = zf + [2 rho > P] + [2 rho > 3P].
  wire [Z_BITS-1:0] zf4   = pr3_q >> q3_q;                           // pr3_q = (poly R) >> 33
  wire [LO-1:0]     zp4   = zf4[LO-1:0] * {1'b0, exp_num_i};
  wire [LO-1:0]     rho4  = nlo3_q - zp4;
  wire [LO:0]       rho2  = {rho4, 1'b0};
  wire [LO:0]       p1    = {2'd0, exp_num_i};
  wire [LO:0]       p3    = {1'b0, exp_num_i, 1'b0} + p1;
  wire [Z_BITS-1:0] z4    = zf4 + {{(Z_BITS-1){1'b0}}, rho2 > p1} + {{(Z_BITS-1){1'b0}}, rho2 > p3};

  // Stage 5: V = z M.  Stage 6: e = min(round_half_even(V / 2^E), 2^15 - 1).
  wire [V_BITS-1:0] v5    = {32'd0, z4_q} * {{Z_BITS{1'b0}}, act_multiplier_i};
  wire [7:0]        em1   = act_shift_i - 8'd1;
  wire [V_BITS-1:0] w6    = v5_q >> em1;                            // guard bit at w6[0]
  wire [V_BITS-1:0] low6  = v5_q & ~({V_BITS{1'b1}} << em1);        // V[E-2:0]
  wire              up6   = w6[0] && ((low6 != {V_BITS{1'b0}}) || w6[1]);
  wire [V_BITS-1:0] qv6   = {1'b0, w6[V_BITS-1:1]} + {{(V_BITS-1){1'b0}}, up6};
  wire [EB-1:0]     e6    = (qv6 > {{(V_BITS-EB){1'b0}}, E_MAX_C}) ? E_MAX_C : qv6[EB-1:0];

  // Output: p = min((e f) >> (32 - OUT_BITS), 2^OUT_BITS - 1); e f <= S f <= 2^32.
  wire [F_BITS-1:0] pe7 = {{(F_BITS-EB){1'b0}}, e6_q} * f_q;
  wire [F_BITS-1:0] pv7 = pe7 >> (32 - OUT_BITS);                   // <= 2^OUT_BITS
  assign out_d = pv7[OUT_BITS] ? {OUT_BITS{1'b1}} : pv7[OUT_BITS-1:0];

  always @(posedge clk_i) begin
    if (rec_valid && calc && !passed) begin
      r_q <= rec_quotient;
    end
    if (div_valid) begin
      f_q <= div_quotient;
    end
    if (go) begin
      sum_q <= {S_BITS{1'b0}};
    end else if (pass && ld[6]) begin  // a pass element leaves stage 5
      sum_q <= sum_q + {{AW{1'b0}}, e6};
    end
    if (ld[2]) begin
      q2_q   <= q2;
      rem2_q <= part[14:0];
    end
    if (ld[3]) begin
      q3_q   <= q2_q;
      pr3_q  <= pr3[PR-1:33];
      nlo3_q <= nlo3;
    end
    if (ld[4]) begin
      z4_q <= z4;
    end
    if (ld[5]) begin
      v5_q <= v5;
    end
    if (ld[6]) begin
      e6_q <= e6;
    end
  end

  wire unused_bits = ^{pr3[32:0], fill_max_unused, fill_addr_unused, rd_addr_unused, idx_unused, len_unused,
                       row_len_unused, start_unused, ld[1], ld[7]};

endmodule

`default_nettype wire
