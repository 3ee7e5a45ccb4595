// softmax_ibert: I-BERT's integer softmax over a streamed row, the bit-exact twin of the
// softmax=ibert variant (hwvit/variants/ibert.py ibert_softmax_int, then saturated to OUT_BITS).
//
// Per row of N signed IN_BITS scores x_i, with the layer's constants on configuration ports
// (x0 = x0_int < 0, b = b_int, c = c_int, P = exp_num odd, K = exp_den_log2, M = act_multiplier,
// E = act_shift; docs/variants/ibert.md derives them from the input scale s):
//   i-exp      a_i = min(max - x_i, 30 |x0|),  q_i = floor(a_i / |x0|) in [0, 30],
//              rem_i = a_i - q_i |x0| in [0, |x0|)   (I-BERT's r = x - x0 q = -rem),
//              poly_i = (r + b) r + c = c - rem (b - rem),  exp_i = poly_i * 2^(30 - q_i)
//   QuantAct16 z_i = round_half_even(exp_i * 2^K / P),  e_i = min(round_half_even(z_i M / 2^E), 2^15 - 1)
//   normalize  S = sum e_i,  f = floor(2^32 / S)                                   (once per row)
//              p_i = min((e_i f) >> (32 - OUT_BITS), 2^OUT_BITS - 1)
// (the kernel's max(exp, 0) is dropped: poly >= 1 for every s in range, see below).
//
// The division by P. z_i needs an exact quotient of a number of up to 176 bits by the 53-bit P
// for every element, which no divider does in a clock. It is a multiply and a correction instead:
//   R = floor(2^(K+63) / P)                       (once per row, rtl/divu.v, 125 clocks)
//   t_i = 30 - q_i + K,  n_i = poly_i 2^t_i  (the numerator, exp_i 2^K)
//   zf_i = floor(poly_i R / 2^(33 + q_i))
// poly R / 2^(33+q) = n / P - poly (2^(K+63)/P - R) / 2^(33+q) lies in (n/P - 1/2, n/P] since
// poly < 2^32 and 0 <= 2^(K+63)/P - R < 1: so zf is floor(n/P) or one less, and the remainder
//   rho_i = n_i - zf_i P  is in [0, 2P) < 2^54,
// computed modulo 2^54 from the low bits alone: (n mod 2^54) - (zf mod 2^54) P. Then
//   floor(n/P) = zf + [rho >= P],  z = round_half_even(n/P) = zf + [2 rho > P] + [2 rho > 3P]
// (P is odd: n/P is never a tie, and 2 rho > 3P is "rho - P above P/2").
// The second rounding: V = z M, e = V >> E rounded half to even: the guard bit V[E-1], the sticky
// OR of V[E-2:0] and the parity of V >> E decide the increment; then the clamp at 2^15 - 1.
//
// Widths, for I-BERT's input scale s in [2^-15, 1.67) (the kernel's stated range; x0 = floor(-0.6931/s),
// b = floor(2.7073/s), c = floor(2.7921/s^2), S_exp = P / 2^K = 0.35815147 s^2 / 2^30, M / 2^E the
// float ratio S_exp / S_act with S_act = c 2^30 / 32767):
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
// hwvit/variants/ibert.py softmax_constants computes the constants; the block trusts them (K <= 114,
// E >= 1, P odd, |x0| >= 1 are not checked).
//
// Flow of a row (one row at a time; the row buffer holds MAX_N scores, the e buffer MAX_N e_i):
//   LOAD  accept N inputs (one per clock when offered), write them, keep the running max; the
//         first input also starts R's division (the constants must be steady from then on);
//   REC   wait for R (125 clocks after the row's first input: only rows shorter than that wait);
//   SUM   re-read the row through a 6-stage pipeline (read; a, q, rem by a 5-step restoring
//         division; poly, poly R, n mod 2^54; zf, rho, z; V = z M; e) and write e_i to the e
//         buffer, accumulating S; one element per clock;
//   DIV   f = floor(2^32 / S) (rtl/divu.v, 34 clocks);
//   OUT   read e_i, p_i = (e_i f) >> (32 - OUT_BITS), saturate; one per clock when accepted;
//         out_last_o marks the row's last p_i. Then LOAD of the next row.
// The row length N is sampled with the row's first input (0 counts as 1, above MAX_N as MAX_N).
// Reset (rst_ni, synchronous, active low) drops any partial row and clears the state, the valid
// flags and the output register; the memories and the data registers each row writes before it
// reads them (N, max, counters, S, R, f, the pipeline's data) keep their values.
`default_nettype none

module softmax_ibert #(
  parameter integer MAX_N    = 256,  // longest row (2..65536); both buffers have MAX_N entries
  parameter integer IN_BITS  = 8,    // signed input width (2..16)
  parameter integer OUT_BITS = 8     // unsigned probability width (1..16)
) (
  input  wire                         clk_i,
  input  wire                         rst_ni,          // synchronous, active low

  // Configuration: the layer's constants (softmax_constants), steady while a row is in flight
  input  wire [$clog2(MAX_N+1)-1:0]   row_len_i,       // N in [1, MAX_N], sampled with a row's first input
  input  wire [15:0]                  x0_int_i,        // x0, signed, in [-22713, -1]
  input  wire [16:0]                  b_int_i,         // b, unsigned
  input  wire [31:0]                  c_int_i,         // c, unsigned, >= 1
  input  wire [52:0]                  exp_num_i,       // P, odd
  input  wire [6:0]                   exp_den_log2_i,  // K <= 114
  input  wire [31:0]                  act_multiplier_i,// M <= 2^31
  input  wire [7:0]                   act_shift_i,     // E >= 1

  // Input stream: x_i, signed two's complement
  input  wire                         in_valid_i,
  output wire                         in_ready_o,
  input  wire [IN_BITS-1:0]           in_data_i,

  // Output stream: p_i, unsigned (real value p_i / 2^OUT_BITS); out_last_o on the row's last
  output wire                         out_valid_o,
  input  wire                         out_ready_i,
  output wire [OUT_BITS-1:0]          out_data_o,
  output wire                         out_last_o
);

  // ---------------------------------------------------------------- parameter checks
  // Verilog-2005 has no elaboration-time assertion: Icarus and Verilator stop at time 0,
  // yosys stops synthesis ("System task `$finish' executed").
  // verilator coverage_off
  // (the parameter checks run only on a bad parameter: no valid build can cover them)
  initial begin
    if (MAX_N < 2 || MAX_N > 65536) begin
      $display("ERROR: softmax_ibert: MAX_N = %0d must be in 2..65536", MAX_N);
      $finish;
    end
    if (IN_BITS < 2 || IN_BITS > 16) begin
      $display("ERROR: softmax_ibert: IN_BITS = %0d must be in 2..16", IN_BITS);
      $finish;
    end
    if (OUT_BITS < 1 || OUT_BITS > 16) begin
      $display("ERROR: softmax_ibert: OUT_BITS = %0d must be in 1..16", OUT_BITS);
      $finish;
    end
  end
  // verilator coverage_on

  // ---------------------------------------------------------------- widths and constants
  localparam integer AW     = $clog2(MAX_N);        // buffer address
  localparam integer LW     = $clog2(MAX_N + 1);    // row length / element counters
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

  localparam [LW:0]     MAX_N_C = MAX_N[LW:0];      // one spare bit: comparisons never constant
  localparam [LW-1:0]   ONE_C   = {{(LW-1){1'b0}}, 1'b1};
  localparam [EB-1:0]   E_MAX_C = {EB{1'b1}};       // 2^15 - 1
  localparam [F_BITS-1:0] TWO32_C = {1'b1, {(F_BITS-1){1'b0}}};  // 2^32: the dividend of f

  localparam [2:0] ST_LOAD = 3'd0;  // taking the row's inputs
  localparam [2:0] ST_REC  = 3'd1;  // waiting for R
  localparam [2:0] ST_SUM  = 3'd2;  // pass 2: e_i and S
  localparam [2:0] ST_DIV  = 3'd3;  // f = 2^32 / S
  localparam [2:0] ST_OUT  = 3'd4;  // pass 3: p_i out

  // ---------------------------------------------------------------- memories
  // verilator coverage_off
  // (no toggle coverage of memories; their write and read paths are covered)
  reg [IN_BITS-1:0] row_mem [0:MAX_N-1];   // the row, in arrival order
  reg [EB-1:0]      e_mem   [0:MAX_N-1];   // e_i
  // verilator coverage_on

  // ---------------------------------------------------------------- state
  reg [2:0]          state_q;
  reg [LW-1:0]       ld_cnt_q;     // inputs taken in this row
  reg [LW-1:0]       len_q;        // row length N
  reg [IN_BITS-1:0]  max_q;        // running max (signed)
  reg [LW-1:0]       rd_cnt_q;     // buffer reads issued in this pass
  reg [LW-1:0]       wr_cnt_q;     // e_i written in SUM
  reg [S_BITS-1:0]   sum_q;        // S
  reg [R_BITS-1:0]   r_q;          // R
  reg [F_BITS-1:0]   f_q;          // f
  reg                div_sent_q;   // the f divider has taken this row's request

  // SUM pipeline: stage k holds an element when sv<k>_q.
  reg                sv1_q, sv2_q, sv3_q, sv4_q, sv5_q;
  reg [IN_BITS-1:0]  x1_q;         // x_i
  reg [4:0]          q2_q, q3_q;   // q_i
  reg [14:0]         rem2_q;       // rem_i < |x0| < 2^15
  reg [Z_BITS-1:0]   pr3_q;        // (poly_i R) >> 33 < 2^124
  reg [LO-1:0]       nlo3_q;       // n_i mod 2^54
  reg [Z_BITS-1:0]   z4_q;         // z_i
  reg [V_BITS-1:0]   v5_q;         // V_i = z_i M

  // OUT pipeline: stage 1 (e_i read), then the output register.
  reg                ov1_q, ol1_q;
  reg [EB-1:0]       e1_q;
  reg                out_valid_q, out_last_q;
  reg [OUT_BITS-1:0] out_data_q;

  // ---------------------------------------------------------------- input side
  wire [LW-1:0] len_in  = (row_len_i == {LW{1'b0}}) ? ONE_C
                        : ({1'b0, row_len_i} > MAX_N_C) ? MAX_N_C[LW-1:0] : row_len_i;
  wire          first   = (ld_cnt_q == {LW{1'b0}});
  wire [LW-1:0] len_now = first ? len_in : len_q;
  wire          in_ready = (state_q == ST_LOAD);
  wire          in_take  = in_valid_i && in_ready;
  wire          in_last  = (ld_cnt_q == len_now - ONE_C);

  // ---------------------------------------------------------------- R = floor(2^(K+63) / P)
  wire [RN-1:0]     rec_dividend = {{(RN-1){1'b0}}, 1'b1} << ({1'b0, exp_den_log2_i} + 8'd63);
  wire              rec_ready_unused;  // idle whenever a row starts (R is taken in REC)
  wire              rec_out_valid;
  wire [R_BITS-1:0] rec_quotient;
  wire [52:0]       rec_rem_unused;

  divu #(
    .N_BITS (RN),
    .D_BITS (53),
    .Q_BITS (R_BITS)
  ) u_rec (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .in_valid_i      (in_take && first),
    .in_ready_o      (rec_ready_unused),
    .in_dividend_i   (rec_dividend),
    .in_divisor_i    (exp_num_i),
    .out_valid_o     (rec_out_valid),
    .out_ready_i     (state_q == ST_REC),
    .out_quotient_o  (rec_quotient),
    .out_remainder_o (rec_rem_unused)
  );

  // ---------------------------------------------------------------- SUM pipeline
  wire issue_s = (state_q == ST_SUM) && (rd_cnt_q != len_q);

  // Stage 2: a = min(max - x, 30 |x0|), then q, rem by five restoring steps (a < 32 |x0|).
  wire [15:0]       x0a   = 16'd0 - x0_int_i;                       // |x0| <= 22713 (x0 in [-22713, -1])
  wire [A_BITS-1:0] lim   = ({4'd0, x0a} << 5) - ({4'd0, x0a} << 1); // 30 |x0| = 32 |x0| - 2 |x0| < 2^20
  wire [IN_BITS:0]  dfull = {max_q[IN_BITS-1], max_q} - {x1_q[IN_BITS-1], x1_q};  // in [0, 2^IN_BITS - 1]
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
  wire [16:0]  bmr3   = b_int_i - {2'd0, rem2_q};
  wire [31:0]  poly3  = c_int_i - {2'd0, rem2_q} * {15'd0, bmr3};
  wire [PR-1:0] pr3   = {{R_BITS{1'b0}}, poly3} * {32'd0, r_q};
  wire [7:0]   t3     = {1'b0, exp_den_log2_i} + 8'd30 - {3'd0, q2_q};  // t = 30 - q + K
  wire [LO-1:0] nlo3  = {{(LO-32){1'b0}}, poly3} << t3;  // 0 once t >= 54 (P >= 2^24: K >= 30 + log2 P)

  wire unused_bits = ^pr3[32:0];  // below zf's lowest bit for every q

  // Stage 4: zf = (poly R) >> (33 + q); rho = n - zf P mod 2^54; z = zf + [2 rho > P] + [2 rho > 3P].
  wire [Z_BITS-1:0] zf4   = pr3_q >> q3_q;                           // pr3_q = (poly R) >> 33
  wire [LO-1:0]     zp4   = zf4[LO-1:0] * {1'b0, exp_num_i};
  wire [LO-1:0]     rho4  = nlo3_q - zp4;
  wire [LO:0]       rho2  = {rho4, 1'b0};
  wire [LO:0]       p1    = {2'd0, exp_num_i};
  wire [LO:0]       p3    = {1'b0, exp_num_i, 1'b0} + p1;
  wire [Z_BITS-1:0] z4    = zf4 + {{(Z_BITS-1){1'b0}}, rho2 > p1} + {{(Z_BITS-1){1'b0}}, rho2 > p3};

  // Stage 5: V = z M.
  wire [V_BITS-1:0] v5 = {32'd0, z4_q} * {{Z_BITS{1'b0}}, act_multiplier_i};

  // Stage 6: e = min(round_half_even(V / 2^E), 2^15 - 1).
  wire [7:0]        em1   = act_shift_i - 8'd1;
  wire [V_BITS-1:0] w6    = v5_q >> em1;                            // guard bit at w6[0]
  wire [V_BITS-1:0] low6  = v5_q & ~({V_BITS{1'b1}} << em1);        // V[E-2:0]
  wire              up6   = w6[0] && ((low6 != {V_BITS{1'b0}}) || w6[1]);
  wire [V_BITS-1:0] qv6   = {1'b0, w6[V_BITS-1:1]} + {{(V_BITS-1){1'b0}}, up6};
  wire [EB-1:0]     e6    = (qv6 > {{(V_BITS-EB){1'b0}}, E_MAX_C}) ? E_MAX_C : qv6[EB-1:0];

  // ---------------------------------------------------------------- f = floor(2^32 / S)
  wire              div_in_valid = (state_q == ST_DIV) && !div_sent_q;
  wire              div_in_ready;
  wire              div_out_valid;
  wire [F_BITS-1:0] div_quotient;
  wire [S_BITS-1:0] div_rem_unused;

  divu #(
    .N_BITS (F_BITS),
    .D_BITS (S_BITS),
    .Q_BITS (F_BITS)
  ) u_div (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .in_valid_i      (div_in_valid),
    .in_ready_o      (div_in_ready),
    .in_dividend_i   (TWO32_C),
    .in_divisor_i    (sum_q),
    .out_valid_o     (div_out_valid),
    .out_ready_i     (state_q == ST_DIV),
    .out_quotient_o  (div_quotient),
    .out_remainder_o (div_rem_unused)
  );

  // ---------------------------------------------------------------- OUT pipeline
  wire adv     = !out_valid_q || out_ready_i;
  wire issue_o = (state_q == ST_OUT) && (rd_cnt_q != len_q) && adv;
  wire [F_BITS-1:0]   pe1  = {{(F_BITS-EB){1'b0}}, e1_q} * f_q;     // e f <= 2^32
  wire [F_BITS-1:0]   pv1  = pe1 >> (32 - OUT_BITS);                 // <= 2^OUT_BITS
  wire [OUT_BITS-1:0] p1o  = (pv1[OUT_BITS] == 1'b1) ? {OUT_BITS{1'b1}} : pv1[OUT_BITS-1:0];
  wire out_done = (state_q == ST_OUT) && (rd_cnt_q == len_q) && !ov1_q && adv;

  // ---------------------------------------------------------------- memories (no reset)
  always @(posedge clk_i) begin
    if (in_take) begin
      row_mem[ld_cnt_q[AW-1:0]] <= in_data_i;
    end
    if (issue_s) begin
      x1_q <= row_mem[rd_cnt_q[AW-1:0]];
    end
  end

  always @(posedge clk_i) begin
    if (sv5_q) begin
      e_mem[wr_cnt_q[AW-1:0]] <= e6;
    end
    if (issue_o) begin
      e1_q <= e_mem[rd_cnt_q[AW-1:0]];
    end
  end

  // Data registers of the SUM pipeline load only behind a valid element.
  always @(posedge clk_i) begin
    if (sv1_q) begin
      q2_q   <= q2;
      rem2_q <= part[14:0];
    end
    if (sv2_q) begin
      q3_q   <= q2_q;
      pr3_q  <= pr3[PR-1:33];
      nlo3_q <= nlo3;
    end
    if (sv3_q) begin
      z4_q <= z4;
    end
    if (sv4_q) begin
      v5_q <= v5;
    end
  end

  // ---------------------------------------------------------------- control
  always @(posedge clk_i) begin
    if (!rst_ni) begin
      state_q     <= ST_LOAD;
      ld_cnt_q    <= {LW{1'b0}};
      div_sent_q  <= 1'b0;
      sv1_q       <= 1'b0;
      sv2_q       <= 1'b0;
      sv3_q       <= 1'b0;
      sv4_q       <= 1'b0;
      sv5_q       <= 1'b0;
      ov1_q       <= 1'b0;
      out_valid_q <= 1'b0;
      out_last_q  <= 1'b0;
      out_data_q  <= {OUT_BITS{1'b0}};
    end else begin
      sv1_q <= issue_s;
      sv2_q <= sv1_q;
      sv3_q <= sv2_q;
      sv4_q <= sv3_q;
      sv5_q <= sv4_q;
      case (state_q)
        ST_LOAD: begin
          if (in_take) begin
            len_q    <= len_now;
            ld_cnt_q <= ld_cnt_q + ONE_C;
            if (first || $signed(in_data_i) > $signed(max_q)) begin
              max_q <= in_data_i;
            end
            if (in_last) begin
              ld_cnt_q <= {LW{1'b0}};
              state_q  <= ST_REC;
            end
          end
        end
        ST_REC: begin
          if (rec_out_valid) begin
            r_q      <= rec_quotient;
            rd_cnt_q <= {LW{1'b0}};
            wr_cnt_q <= {LW{1'b0}};
            sum_q    <= {S_BITS{1'b0}};
            state_q  <= ST_SUM;
          end
        end
        ST_SUM: begin
          if (issue_s) begin
            rd_cnt_q <= rd_cnt_q + ONE_C;
          end
          if (sv5_q) begin
            wr_cnt_q <= wr_cnt_q + ONE_C;
            sum_q    <= sum_q + {{AW{1'b0}}, e6};
          end
          if (!issue_s && !sv1_q && !sv2_q && !sv3_q && !sv4_q && !sv5_q) begin
            state_q <= ST_DIV;
          end
        end
        ST_DIV: begin
          if (div_in_valid && div_in_ready) begin
            div_sent_q <= 1'b1;
          end
          if (div_out_valid) begin
            f_q        <= div_quotient;
            div_sent_q <= 1'b0;
            rd_cnt_q   <= {LW{1'b0}};
            state_q    <= ST_OUT;
          end
        end
        default: begin  // ST_OUT
          if (issue_o) begin
            rd_cnt_q <= rd_cnt_q + ONE_C;
          end
          if (out_done) begin
            state_q <= ST_LOAD;
          end
        end
      endcase
      if (adv) begin
        ov1_q       <= issue_o;
        ol1_q       <= issue_o && (rd_cnt_q == len_q - ONE_C);
        out_valid_q <= ov1_q;
        out_last_q  <= ol1_q && ov1_q;
        if (ov1_q) begin
          out_data_q <= p1o;
        end
      end
    end
  end

  assign in_ready_o  = in_ready;
  assign out_valid_o = out_valid_q;
  assign out_data_o  = out_data_q;
  assign out_last_o  = out_last_q;

endmodule

`default_nettype wire
