// layernorm_ptf: FQ-ViT's QIntLayerNorm ('int' mode) as its authors released it, over a streamed row: the
// bit-exact twin of layernorm=ptf (hwvit/variants/fqvit_released.py layernorm_ptf_stages, ptf_row_constants;
// docs/variants/ivit.md). Not hwvit's corrected form: that is rtl/layernorm.v with PTF = 1 (ptf_exact).
//
// Per row of C signed IN_BITS inputs x_i, channel i at scale s 2^alpha_i (alpha_i in 0..3, a = min alpha):
//   z_i = x_i << (alpha_i - a),  Sx = sum z_i,  Sxx = sum z_i^2,  v = C Sxx - Sx^2 (exact integers)
// then the module's binary64 steps in its order, each correctly rounded (rtl/f64_unit.v), s1 = s 2^a:
//   mean = (Sx / C) s1,  std = (s1 / C) sqrt(v),  r = s1 / std,  q = mean / std               (per row)
//   A_i = (r g_i) / s_out,  N_i = clamp(7 - floor(log2 |A_i|), 0, 31) (31 at A = 0),
//   M_i = clamp(floor(|A_i| 2^N_i), 0, 255),  B_i = rint(((b_i - q g_i) / s_out) 2^N_i)        (per channel)
// and per element out_i = sat_OUT_BITS(round_half_even((sign(A_i) M_i z_i + B_i) / 2^N_i)). A row of v = 0
// (the module divides by a zero std) takes M_i = 0, N_i = 0, B_i = rint(b_i / s_out): beta alone.
// floor(log2 |A|) is A's exponent; floor(|A| 2^N) and rint(t 2^N) shift the significand by the exponent
// plus N (M: 8 bits of it, 255 past them; B: rounded half to even at the binary point).
//
// Widths (IN_BITS = b <= 12, C <= MAX_C <= 4096 < 2^CW): |x << alpha| <= 2^(b+2): signed b + 3 bits (the
// sums are taken on x << alpha and shifted down by a and 2a after the row: exact, every term a multiple);
// |Sx| <= C 2^(b+2) < 2^27; Sxx <= C 2^(2b+4) <= 2^40; v <= C Sxx <= 2^52: every integer exact in binary64;
// |M z| <= 255 2^(b+2) < 2^22, |B| < 2^52 (the kernel refuses sets beyond), num in signed 54 bits.
//
// The binary64 domain: s, s_out in [2^-400, 2^400], each gamma_i and beta_i zero or of magnitude in
// [2^-400, 2^400] (hwvit/blocks/variant_rtl/layernorm_ptf.py checks a set against it). Then every float here
// is zero or normal and its exact value too, so rtl/f64_unit.v needs no subnormal, infinity or NaN: Sx / C
// in {0} u [2^-12, 2^27), s1 in [2^-400, 2^403], mean and std within [2^-412, 2^430], sqrt(v) in [1, 2^27),
// r in [2^-27, 2^13], q in {0} u [2^-27, 2^27]; r g, q g within 2^-427..2^427; b - q g zero or at least the
// smaller operand's ulp (2^-480); A and (b - q g) / s_out within 2^-880..2^828: all inside 2^-1022..2^1023.
//
// On the row engine (rtl/row_stream.v; five stages): FILL sums x_i << alpha_i (rtl/row_moments.v) and takes
// the row's smallest alpha; CALC runs a fixed program on the binary64 unit, one operation at a time, each
// issued two clocks after the one before (the channel's gamma, beta read from their RAMs): per row three
// integer conversions and seven operations, per channel five (mul, div, mul, sub, div), writing the channel's
// sign, M, N, B; a row of v = 0 one division per channel (docs/rtl.md gives the clocks). OUT: stage 1 x_i and
// alpha_i, 2 z_i, 3 the channel's sign, M, N, B, 4 num_i, 5 the rounded, saturated output. A row's CALC waits
// until the row before has left stage 2 (it rewrites the channel constants stage 3 reads, and a).
// gamma, beta and alpha are written per channel through prm_* while no row is in flight; s and s_out as the
// table's entry 0 (prm_s_i, prm_s_out_i at prm_addr_i = 0; other entries ignore them), binary64 bit patterns.

`default_nettype none

module layernorm_ptf #(
  parameter integer MAX_C    = 1024,  // longest row (2..4096): the row buffer, the channel RAMs
  parameter integer IN_BITS  = 8,     // signed input width (2..12)
  parameter integer OUT_BITS = 8      // output width, signed (2..16)
) (
  input  wire clk_i, input wire rst_ni,  // rst_ni: synchronous, active low
  // ---- per-channel write port: gamma, beta, alpha of channel prm_addr_i; s and s_out at address 0 ----
  input  wire prm_we_i, input wire [$clog2(MAX_C)-1:0] prm_addr_i,
  input  wire [63:0]                prm_gamma_i,   // gamma_i, binary64
  input  wire [63:0]                prm_beta_i,    // beta_i, binary64
  input  wire [1:0]                 prm_alpha_i,   // alpha_i, 0..3
  input  wire [63:0]                prm_s_i,       // s (address 0), binary64
  input  wire [63:0]                prm_s_out_i,   // s_out (address 0), binary64
  // ---- configuration ----
  input  wire [$clog2(MAX_C+1)-1:0] cfg_c_i,       // row length C in [1, MAX_C]
  input  wire in_valid_i, output wire in_ready_o, input wire [IN_BITS-1:0] in_data_i,  // x_i, signed
  output wire out_valid_o, input wire out_ready_i, output wire out_last_o,  // with each row's last
  output wire [OUT_BITS-1:0] out_data_o  // out_i, signed
);

  localparam integer AW  = $clog2(MAX_C), CW = $clog2(MAX_C + 1);  // buffer address, row length
  localparam integer ZB  = IN_BITS + 3;            // x << alpha, signed
  localparam integer SW  = CW + ZB;                // Sx, signed
  localparam integer QW  = CW + 2 * ZB - 2;        // Sxx
  localparam integer VW  = 2 * SW;                 // C Sxx and Sx^2 (v <= 2^52 at IN_BITS <= 12, C <= 4096)
  localparam integer NW  = 54;                     // num = sign M z + B, signed
  localparam [NW:0]  ONE = {{NW{1'b0}}, 1'b1};
  localparam signed [NW:0] TOP = (ONE <<< (OUT_BITS - 1)) - ONE;   //  2^(b-1) - 1
  localparam signed [NW:0] BOT = -(ONE <<< (OUT_BITS - 1));        // -2^(b-1)
  // the program (pc): operation, operands, destination; T0..T4 temporaries
  localparam [3:0] T0 = 4'd0, T1 = 4'd1, T2 = 4'd2, T3 = 4'd3, T4 = 4'd4, S1 = 4'd5, SOUT = 4'd6, G = 4'd7,
                   BETA = 4'd8, I_SX = 4'd9, I_C = 4'd10, I_V = 4'd11;
  localparam [2:0] MUL = 3'd0, DIV = 3'd1, SQRT = 3'd2, SUB = 3'd3, INT = 3'd4;
  localparam [3:0] PC_CH = 4'd10, PC_A = 4'd11, PC_B = 4'd14, PC_FLAT = 4'd15;

  // ---------------------------------------------------------------- the engine and the row sums
  wire                fill, first, go_unused, enter, calc_unused, passed_unused, pass_unused;
  wire [AW-1:0]       idx, fill_addr, rd_addr;
  wire [CW-1:0]       len, row_len_unused;
  wire [IN_BITS-1:0]  x1;
  wire [5:1]          ld;
  wire                start;
  wire [OUT_BITS-1:0] o_d;
  reg                 done;
  row_stream #(
    .NAME("layernorm_ptf"), .LEN_NAME("MAX_C"), .MAX_N(MAX_C), .LIMIT(4096), .W(IN_BITS), .OUT_BITS(OUT_BITS),
    .OUT_MIN(2), .DEPTH(5), .GO_AFTER(2), .A_NAME("IN_BITS"), .A_VAL(IN_BITS), .A_MIN(2), .A_MAX(12)) u_stream (
    .clk_i(clk_i), .rst_ni(rst_ni), .len_i(cfg_c_i), .in_valid_i(in_valid_i), .in_ready_o(in_ready_o),
    .in_data_i(in_data_i), .out_valid_o(out_valid_o), .out_ready_i(out_ready_i), .out_data_o(out_data_o),
    .out_last_o(out_last_o), .fill_o(fill), .first_o(first), .fill_addr_o(fill_addr), .len_o(len),
    .go_o(go_unused), .calc_o(calc_unused), .enter_o(enter), .passed_o(passed_unused), .done_i(done),
    .pass_o(pass_unused), .start_o(start), .row_len_o(row_len_unused), .rd_addr_o(rd_addr), .idx_o(idx),
    .x1_o(x1), .ld_o(ld), .out_i(o_d)
  );

  // verilator coverage_off
  reg [1:0]  a_mem [0:MAX_C-1];   // alpha per channel
  reg [63:0] g_mem [0:MAX_C-1];   // gamma per channel
  reg [63:0] b_mem [0:MAX_C-1];   // beta per channel
  reg [66:0] k_mem [0:MAX_C-1];   // the row's constants per channel: sign, M (8), N (5), B (signed 53)
  // verilator coverage_on
  reg [63:0] s_q, sout_q;
  reg [1:0]  amin_f_q, amin_q;    // the filling row's smallest alpha; the row in CALC's (a)

  wire [1:0]    a_in = a_mem[fill_addr];
  wire [ZB-1:0] z_in = {{3{in_data_i[IN_BITS-1]}}, in_data_i} << a_in;
  wire [SW-1:0] sx_a;
  wire [QW-1:0] sxx_a;
  row_moments #(.CW(CW), .ZB(ZB)) u_sums (
    .clk_i(clk_i), .rst_ni(rst_ni), .clear_i(start), .fill_i(fill), .z_i(z_in), .sz_o(sx_a), .szz_o(sxx_a)
  );
  wire signed [SW-1:0] sx  = $signed(sx_a) >>> amin_q;            // the sums of z = x << (alpha - a)
  wire [QW-1:0]        sxx = sxx_a >> {amin_q, 1'b0};
  wire [VW-1:0]        sx2 = sx * sx;
  wire [CW+QW-1:0]     csxx = len * sxx;
  wire [VW-1:0]        v   = {2'b00, csxx} - sx2;

  // ---------------------------------------------------------------- CALC: the program on the binary64 unit
  reg  [3:0]  pc_q;
  reg  [CW-1:0] ch_q;
  reg         req_q, nxt_q;
  reg  [63:0] t0_q, t1_q, t2_q, t3_q, t4_q;  // T0..T4
  reg  [63:0] g_q, b_q;
  reg         sgn_q;              // channel ch_q's sign(A), M, N (from A, at pc PC_A)
  reg  [7:0]  m_q;
  reg  [4:0]  n_q;
  reg  [2:0]  op;
  reg  [3:0]  src_a, src_b, dst;
  always @* begin
    case (pc_q)
      4'd0:    {op, src_a, src_b, dst} = {INT, I_SX, T0, T0};    // Sx
      4'd1:    {op, src_a, src_b, dst} = {INT, I_C, T0, T1};     // C
      4'd2:    {op, src_a, src_b, dst} = {INT, I_V, T0, T2};     // v
      4'd3:    {op, src_a, src_b, dst} = {DIV, T0, T1, T0};      // Sx / C
      4'd4:    {op, src_a, src_b, dst} = {MUL, T0, S1, T0};      // mean
      4'd5:    {op, src_a, src_b, dst} = {DIV, S1, T1, T1};      // s1 / C
      4'd6:    {op, src_a, src_b, dst} = {SQRT, T2, T0, T2};     // sqrt(v)
      4'd7:    {op, src_a, src_b, dst} = {MUL, T1, T2, T1};      // std
      4'd8:    {op, src_a, src_b, dst} = {DIV, S1, T1, T2};      // r = s1 / std
      4'd9:    {op, src_a, src_b, dst} = {DIV, T0, T1, T0};      // q = mean / std
      4'd10:   {op, src_a, src_b, dst} = {MUL, T2, G, T3};       // r g
      4'd11:   {op, src_a, src_b, dst} = {DIV, T3, SOUT, T3};    // A
      4'd12:   {op, src_a, src_b, dst} = {MUL, T0, G, T4};       // q g
      4'd13:   {op, src_a, src_b, dst} = {SUB, BETA, T4, T4};    // b - q g
      4'd14:   {op, src_a, src_b, dst} = {DIV, T4, SOUT, T4};    // (b - q g) / s_out
      default: {op, src_a, src_b, dst} = {DIV, BETA, SOUT, T4};  // v = 0: b / s_out
    endcase
  end
  wire [63:0] s1 = {s_q[63], s_q[62:52] + {9'd0, amin_q}, s_q[51:0]};   // s 2^a
  wire [319:0] t_all = {t4_q, t3_q, t2_q, t1_q, t0_q};
  wire [63:0]  ta    = t_all[{src_a[2:0], 6'd0} +: 64];   // T0..T4 (src_a <= T4)
  wire [63:0]  tb    = t_all[{src_b[2:0], 6'd0} +: 64];
  reg  [63:0]  fa, fb;
  always @* begin
    case (src_a)
      S1:      fa = s1;
      BETA:    fa = b_q;
      I_SX:    fa = {{(64-SW){sx[SW-1]}}, sx};
      I_C:     fa = {{(64-CW){1'b0}}, len};
      I_V:     fa = {{(64-VW){1'b0}}, v};
      default: fa = ta;
    endcase
    case (src_b)
      S1:      fb = s1;
      SOUT:    fb = sout_q;
      G:       fb = g_q;
      default: fb = tb;
    endcase
  end
  wire        busy_unused, fdone;
  wire [63:0] y;
  f64_unit u_f64 (
    .clk_i(clk_i), .rst_ni(rst_ni), .start_i(req_q), .op_i(op), .a_i(fa), .b_i(fb), .busy_o(busy_unused),
    .done_o(fdone), .y_o(y)
  );

  // A from y at PC_A: N, M from its exponent E and significand
  wire        y_zero = (y[62:52] == 11'd0);
  wire signed [12:0] e_y = $signed({2'b00, y[62:52]}) - 13'sd1023;
  wire signed [12:0] t_n = 13'sd7 - e_y;
  wire [4:0]  n_a   = y_zero ? 5'd31 : (t_n < 13'sd0) ? 5'd0 : (t_n > 13'sd31) ? 5'd31 : t_n[4:0];
  wire signed [12:0] k_a = e_y + $signed({8'd0, n_a});                   // floor(log2 (|A| 2^N))
  wire [12:0] sh_a  = 13'd52 - k_a;
  wire [52:0] sig   = {1'b1, y[51:0]};
  wire [52:0] fl_a  = sig >> ((sh_a > 13'd63) ? 6'd63 : sh_a[5:0]);
  wire [7:0]  m_a   = y_zero ? 8'd0 : (k_a > 13'sd7) ? 8'd255 : fl_a[7:0];
  // B from y at PC_B (t 2^N, rint) or PC_FLAT (N = 0): |t 2^N| < 2^52, so the shift 52 - E - N is >= 1
  wire [4:0]  n_b   = (pc_q == PC_FLAT) ? 5'd0 : n_q;
  wire signed [12:0] sh_s = 13'sd52 - e_y - $signed({8'd0, n_b});
  wire [5:0]  sh_b  = (sh_s > 13'sd63) ? 6'd63 : (sh_s < 13'sd1) ? 6'd1 : sh_s[5:0];
  wire [63:0] sg64  = {11'd0, sig};
  wire [63:0] q_b   = sg64 >> sh_b;
  wire [63:0] r_b   = sg64 & ~({64{1'b1}} << sh_b);
  wire [63:0] h_b   = 64'd1 << (sh_b - 6'd1);
  wire [52:0] mag_b = q_b[52:0] + {52'd0, (r_b > h_b) || ((r_b == h_b) && q_b[0])};
  wire [52:0] big_b = y_zero ? 53'd0 : y[63] ? -mag_b : mag_b;
  wire        flat  = (v == {VW{1'b0}});
  wire        last_ch = (ch_q == len - {{(CW-1){1'b0}}, 1'b1});

  always @(posedge clk_i) begin
    if (prm_we_i) begin
      a_mem[prm_addr_i] <= prm_alpha_i;
      g_mem[prm_addr_i] <= prm_gamma_i;
      b_mem[prm_addr_i] <= prm_beta_i;
      if (prm_addr_i == {AW{1'b0}}) begin
        s_q    <= prm_s_i;
        sout_q <= prm_s_out_i;
      end
    end
    if (fill) begin
      amin_f_q <= (first || a_in < amin_f_q) ? a_in : amin_f_q;
    end
    g_q <= g_mem[ch_q[AW-1:0]];
    b_q <= b_mem[ch_q[AW-1:0]];
    if (fdone) begin
      case (dst)
        T0:      t0_q <= y;
        T1:      t1_q <= y;
        T2:      t2_q <= y;
        T3:      t3_q <= y;
        default: t4_q <= y;
      endcase
    end
    if (fdone && pc_q == PC_A) begin
      sgn_q <= y[63];
      m_q   <= m_a;
      n_q   <= n_a;
    end
    if (fdone && pc_q >= PC_B) begin
      k_mem[ch_q[AW-1:0]] <= {sgn_q & (pc_q == PC_B), (pc_q == PC_B) ? m_q : 8'd0, n_b, big_b};
    end
  end

  always @(posedge clk_i) begin
    done  <= 1'b0;
    req_q <= nxt_q;
    nxt_q <= 1'b0;
    if (!rst_ni) begin
      req_q <= 1'b0;
      pc_q  <= 4'd0;
    end else if (enter) begin
      amin_q <= amin_f_q;
      pc_q   <= 4'd0;
      ch_q   <= {CW{1'b0}};
      nxt_q  <= 1'b1;
    end else if (nxt_q && pc_q == 4'd0 && flat) begin  // v = 0 (a is in amin_q now): no row program
      pc_q <= PC_FLAT;
    end else if (fdone) begin
      if (pc_q >= PC_B) begin
        ch_q  <= ch_q + {{(CW-1){1'b0}}, 1'b1};
        pc_q  <= (pc_q == PC_B) ? PC_CH : PC_FLAT;
        done  <= last_ch;
        nxt_q <= !last_ch;
      end else begin
        pc_q  <= pc_q + 4'd1;
        nxt_q <= 1'b1;
      end
    end
  end

  // ---------------------------------------------------------------- element datapath
  reg [1:0]           a1_q;
  reg signed [ZB-1:0] z2_q, z3_q;
  reg [66:0]          k3_q;
  reg signed [NW-1:0] num4_q;
  reg [4:0]           n4_q;
  wire signed [ZB+8:0] mz  = $signed({1'b0, k3_q[65:58]}) * z3_q;
  wire signed [NW-1:0] mzs = k3_q[66] ? -$signed({{(NW-ZB-9){mz[ZB+8]}}, mz}) : $signed({{(NW-ZB-9){mz[ZB+8]}}, mz});
  wire signed [NW:0]   n_x = $signed({num4_q[NW-1], num4_q});
  wire signed [NW:0]   q5  = n_x >>> n4_q;
  wire [NW:0]          r5  = n_x & ~({(NW+1){1'b1}} << n4_q);
  wire [NW:0]          h5  = (ONE << n4_q) >> 1;
  wire                 u5  = (n4_q != 5'd0) && ((r5 > h5) || ((r5 == h5) && q5[0]));
  wire signed [NW:0]   o5  = q5 + $signed({{NW{1'b0}}, u5});
  assign o_d = (o5 > TOP) ? TOP[OUT_BITS-1:0] : (o5 < BOT) ? BOT[OUT_BITS-1:0] : o5[OUT_BITS-1:0];

  always @(posedge clk_i) begin
    if (ld[1]) begin
      a1_q <= a_mem[rd_addr];
    end
    if (ld[2]) begin
      z2_q <= $signed({{3{x1[IN_BITS-1]}}, x1}) <<< (a1_q - amin_q);
    end
    if (ld[3]) begin
      z3_q <= z2_q;
      k3_q <= k_mem[idx];
    end
    if (ld[4]) begin
      num4_q <= mzs + $signed({k3_q[52], k3_q[52:0]});
      n4_q   <= k3_q[57:53];
    end
  end

  wire unused_bits = ^{go_unused, calc_unused, passed_unused, pass_unused, row_len_unused, busy_unused, ld[5],
                       sh_a[12:6], fl_a[52:8], q_b[63:53]};

endmodule

`default_nettype wire
