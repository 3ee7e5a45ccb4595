// layernorm_ibert: I-BERT's IntLayerNorm over a streamed row, with I-BERT's per-channel requant,
// the bit-exact twin of the variant layernorm=ibert (hwvit/variants/ibert.py,
// ibert_layernorm_int + ibert_requant; Kim et al., I-BERT, ICML 2021, Sec. 3.6 and Algorithm 4;
// docs/variants/ibert.md).
//
// Per row of C signed 8-bit inputs x_i (I-BERT's overflow shift t = ln_shift = 0, the value its
// rule gives for int8 rows of C <= 66051: see "Contract" below):
//   Sx   = sum x_i,  Sxx = sum x_i^2
//   mean = round_half_even(Sx / C)
//   var  = sum (x_i - mean)^2 = Sxx + mean*(C*mean - 2 Sx)       (exact identity)
//   std  = max(isqrt(var), 1),  factor = floor(2^31 / std)        once per row
//   y_i  = x_i - mean,  z_i = floor(y_i * factor / 2) + bias_int_i
//   out_i = sat_OUT_BITS(round_half_even(z_i * M_i / 2^E_i))      (per channel M_i, E_i)
// The kernel's I-SQRT (Algorithm 4: x_0 = 2^ceil(bits/2), Newton steps until they stop falling)
// returns floor(sqrt(var)) for every var > 0 (the paper's claim; tests compare it with math.isqrt),
// so std is rtl/isqrt.v's exact floor root: the same integer, without a division per step.
// var = 0 (a constant row) makes every y_i = 0, so z_i = bias_int_i whatever factor: the square
// root and the division are skipped with factor = 0 (the kernel's std = 1 multiplies only zeros).
//
// Widths (C <= MAX_C < 2^CW, C <= 4096):
//   |Sx| <= 128*C: signed CW + 8;  Sxx <= C*2^14: unsigned CW + 14;
//   mean: the divider returns q = floor((Sx + 128 C) / C) = floor(Sx/C) + 128 in [0, 255] and the
//   remainder r (the dividend is >= 0 and <= 255 C < 2^(CW+8) < C * 2^8: rtl/divu.v with an 8-bit
//   quotient, 9 clocks); mean = q + (2r > C or (2r = C and q odd)) - 128, in [-128, 127] (q = 255
//   only for Sx = 127 C, where r = 0): signed 8;
//   t = C*mean - 2 Sx, |t| <= 384 C: signed CW + 10;  |mean*t| <= 49152 C: signed CW + 17;
//   var <= 255^2 * C < 2^28: isqrt of 28 bits (14 clocks), std < 2^14;
//   factor <= 2^31: unsigned 32 (divu 32 bits, 33 clocks);
//   y_i in [-255, 255]: signed 9, and |y_i| <= std (y_i^2 <= var), so |y_i*factor| <= 2^31:
//   signed 33; its floor half |h_i| <= 2^30: signed 32;
//   |bias_int_i| < 2^(BIAS_BITS-1): z_i signed BIAS_BITS + 1;  |M_i| <= 2^31 (batch_frexp's
//   mantissa, sign of gamma): signed 33;  P_i = z_i * M_i exact in BIAS_BITS + 34 bits (PW);
//   round_half_even(P / 2^E): q = P >>> E, r = P - q*2^E, q + (r > 2^(E-1) or r = 2^(E-1) and q
//   odd); E >= PW gives 0 (|P| < 2^(PW-1) <= 2^(E-1)), so E is clamped to PW, where the same
//   formula gives 0 (in PW + 1 bits); then saturation to signed OUT_BITS.
//
// Contract (the block's, beyond the kernel's): ln_shift = 0 (no port: var is taken from the row
// sums, which needs t = 0; every set hwvit writes for this kind has it, int8 rows of C <= 4096);
// |bias_int_i| < 2^(BIAS_BITS-1) (default 48 bits: prepare gives |bias_int| = |beta/gamma| *
// 2^30/sqrt(C), 2^43 at gamma/beta = 1/2^13); |M_i| <= 2^31; E_i in 0..127 (batch_frexp gives
// E = 31 - exponent, 48..73 on random sets; E < 0 would need a scale >= 2^31).
//
// Flow of a row through the MAX_C-entry row buffer (a 1W1R memory):
//   FILL  accept C inputs, write them, accumulate Sx and Sxx (one x^2 multiply per element);
//   MEAN  q and r by the small divider (9 clocks);  VAR1, VAR2  t, then var (two small products);
//   SQRT  std by rtl/isqrt.v (14 clocks), DIV  factor by rtl/divu.v (33 clocks), both skipped
//         when var = 0;
//   OUT   re-read the row through a 6-stage element pipeline: 1 x_i, 2 y_i, 3 h_i (9x32 product)
//         with bias_int_i, M_i, E_i read, 4 z_i, 5 P_i (the (BIAS_BITS+1)x33 product), 6 the
//         rounded, saturated output (the output register); one element per clock when accepted.
//         out_last_o marks each row's last output (a flag that travels with the element).
// The next row fills the buffer behind the OUT pass (slot i is written only after it was read).
//
// Configuration: the row length C is sampled with the first input of each row (0 counts as 1,
// values above MAX_C as MAX_C). bias_int (signed BIAS_BITS), M (signed 33) and E (unsigned 7) are
// RAMs written through prm_*, once per layer, while no row is in flight; they have no reset and
// survive rst_ni.
// Reset (rst_ni, synchronous, active low) drops any partial row and zeroes the control registers
// (state, counters, valid and last flags, the fill sums) and the output register, so
// out_data_o is never X after reset; the data registers a row writes before it reads them (its
// length, row constants, pipeline data) have no reset.

`default_nettype none

module layernorm_ibert #(
  // Longest row (2..4096): entries of the row buffer and the per-channel RAMs.
  parameter integer MAX_C     = 1024,
  // Output width, signed (2..16).
  parameter integer OUT_BITS  = 8,
  // Width of bias_int, signed (32..62).
  parameter integer BIAS_BITS = 48
) (
  input  wire                       clk_i,
  input  wire                       rst_ni,

  // ---- per-channel write port: bias_int, M, E of channel prm_addr_i ----
  input  wire                       prm_we_i,
  input  wire [$clog2(MAX_C)-1:0]   prm_addr_i,
  input  wire [BIAS_BITS-1:0]       prm_bias_i,    // bias_int, signed
  input  wire [32:0]                prm_mult_i,    // M, signed, |M| <= 2^31
  input  wire [6:0]                 prm_shift_i,   // E, unsigned, 0..127

  // ---- configuration ----
  input  wire [$clog2(MAX_C+1)-1:0] cfg_c_i,       // row length C in [1, MAX_C]

  // ---- input stream: x_i, signed 8 bit ----
  input  wire                       in_valid_i,
  output wire                       in_ready_o,
  input  wire [7:0]                 in_data_i,

  // ---- output stream: out_i, signed OUT_BITS; out_last_o with each row's last ----
  output wire                       out_valid_o,
  input  wire                       out_ready_i,
  output wire [OUT_BITS-1:0]        out_data_o,
  output wire                       out_last_o
);

  // ---------------------------------------------------------------- parameter checks
  // Verilog-2005 has no elaboration-time assertion: Icarus and Verilator stop at time 0,
  // yosys stops synthesis ("System task `$finish' executed").
  // verilator coverage_off
  // (the parameter checks run only on a bad parameter: no valid build can cover them)
  initial begin
    if (MAX_C < 2 || MAX_C > 4096) begin
      $display("ERROR: layernorm_ibert: MAX_C = %0d must be in 2..4096 (var < 2^28)", MAX_C);
      $finish;
    end
    if (OUT_BITS < 2 || OUT_BITS > 16) begin
      $display("ERROR: layernorm_ibert: OUT_BITS = %0d must be in 2..16", OUT_BITS);
      $finish;
    end
    if (BIAS_BITS < 32 || BIAS_BITS > 62) begin
      $display("ERROR: layernorm_ibert: BIAS_BITS = %0d must be in 32..62", BIAS_BITS);
      $finish;
    end
  end
  // verilator coverage_on

  // ---------------------------------------------------------------- widths and constants
  localparam integer AW     = $clog2(MAX_C);      // buffer address
  localparam integer CW     = $clog2(MAX_C + 1);  // row length and element counters
  localparam integer SX_W   = CW + 8;             // |Sx| <= C * 128, signed
  localparam integer SXX_W  = CW + 14;            // Sxx <= C * 2^14, unsigned
  localparam integer MN_W   = CW + 8;             // mean dividend Sx + 128 C <= 255 C, unsigned
  localparam integer T_W    = CW + 10;            // t = C*mean - 2 Sx, |t| <= 384 C, signed
  localparam integer MT_W   = (CW + 17 > 28) ? CW + 17 : 28; // mean * t, |.| <= 49152 C, signed; >= VAR_W
  localparam integer VAR_W  = 28;                 // var < 2^28 (isqrt needs an even width)
  localparam integer STD_W  = VAR_W / 2;          // std < 2^14
  localparam integer FAC_W  = 32;                 // factor <= 2^31
  localparam integer H_W    = 33;                 // |y * factor| <= 2^31, signed
  localparam integer Z_W    = BIAS_BITS + 1;      // z = h + bias_int, signed
  localparam integer PW     = Z_W + 33;           // P = z * M, signed, exact
  localparam integer PX     = PW + 1;             // P with a spare sign bit for the clamped shift

  localparam [CW:0]      MAX_C_C = MAX_C[CW:0];   // one spare bit: the compare is never constant
  localparam [CW-1:0]    ONE_C   = {{(CW-1){1'b0}}, 1'b1};
  localparam [FAC_W-1:0] TWO31_C = {1'b1, {(FAC_W-1){1'b0}}};                         // 2^31
  localparam [6:0]       PW_C    = PW[6:0];                                            // E's clamp
  localparam [PX-1:0]    ONE_PX  = {{(PX-1){1'b0}}, 1'b1};
  localparam signed [PX-1:0] OUT_MAX = (ONE_PX <<< (OUT_BITS - 1)) - ONE_PX;         //  2^(b-1) - 1
  localparam signed [PX-1:0] OUT_MIN = -(ONE_PX <<< (OUT_BITS - 1));                 // -2^(b-1)

  localparam [2:0] ST_IDLE = 3'd0;  // no row between FILL and OUT (a filling row may be under way)
  localparam [2:0] ST_MEAN = 3'd1;  // wait for q, r from the mean divider
  localparam [2:0] ST_VAR1 = 3'd2;  // t = C*mean - 2 Sx
  localparam [2:0] ST_VAR2 = 3'd3;  // var; hand it to the square root (or factor = 0)
  localparam [2:0] ST_SQRT = 3'd4;  // wait for std; hand it to the divider
  localparam [2:0] ST_DIV  = 3'd5;  // wait for factor
  localparam [2:0] ST_OUT  = 3'd6;  // read the row out through the element pipeline

  // ---------------------------------------------------------------- memories
  // verilator coverage_off
  // (no toggle coverage of memories: Verilator instruments only arrays of <= 256 bits)
  reg [7:0]           x_mem [0:MAX_C-1];   // the row, in arrival order
  reg [BIAS_BITS-1:0] c_mem [0:MAX_C-1];   // bias_int per channel
  reg [32:0]          m_mem [0:MAX_C-1];   // M per channel
  reg [6:0]           e_mem [0:MAX_C-1];   // E per channel
  // verilator coverage_on

  // ---------------------------------------------------------------- state
  reg [2:0]                   state_q;
  // filling row
  reg [CW-1:0]                wr_cnt_q;      // inputs taken
  reg [CW-1:0]                len_q;         // its length (valid once wr_cnt_q > 0)
  reg                         full_q;        // all its inputs taken
  reg signed [SX_W-1:0]       sx_acc_q;      // Sx
  reg [SXX_W-1:0]             sxx_acc_q;     // Sxx
  // row in MEAN..OUT (mean_q, fac_q written only after the previous row has left stage 2)
  reg [7:0]                   mean_q;        // mean, signed
  reg signed [T_W-1:0]        t_q;           // C*mean - 2 Sx
  reg [FAC_W-1:0]             fac_q;         // factor
  reg [CW-1:0]                c_row_q;       // C of the row being read out
  reg [CW-1:0]                rd_cnt_q;      // buffer reads issued in OUT
  // element pipeline (v*_q: stage holds an element, l*_q: it is its row's last)
  reg                         v1_q, v2_q, v3_q, v4_q, v5_q, v6_q;
  reg                         l1_q, l2_q, l3_q, l4_q, l5_q, l6_q;
  reg [AW-1:0]                idx1_q, idx2_q;
  reg [7:0]                   x1_q;
  reg signed [8:0]            y2_q;
  reg signed [H_W-2:0]        h3_q;          // floor(y * factor / 2), signed 32
  reg [BIAS_BITS-1:0]         c3_q;
  reg [32:0]                  m3_q, m4_q;
  reg [6:0]                   e3_q, e4_q, e5_q;
  reg signed [Z_W-1:0]        z4_q;
  reg signed [PW-1:0]         p5_q;
  reg [OUT_BITS-1:0]          out6_q;

  // ---------------------------------------------------------------- pipeline enables
  wire s6_en = !v6_q || out_ready_i;
  wire s5_en = !v5_q || s6_en;
  wire s4_en = !v4_q || s5_en;
  wire s3_en = !v3_q || s4_en;
  wire s2_en = !v2_q || s3_en;
  wire s1_en = !v1_q || s2_en;
  wire issue = (state_q == ST_OUT) && s1_en;
  wire last_issue = (rd_cnt_q == c_row_q - ONE_C);

  // ---------------------------------------------------------------- fill side
  // Slot i of the buffer is free once the OUT pass has read it (reads precede writes by a clock).
  assign in_ready_o = !full_q && ((state_q != ST_OUT) || (wr_cnt_q < rd_cnt_q));
  wire          in_fire = in_valid_i && in_ready_o;
  wire [CW-1:0] len_in  = (cfg_c_i == {CW{1'b0}}) ? ONE_C
                        : ({1'b0, cfg_c_i} > MAX_C_C) ? MAX_C_C[CW-1:0] : cfg_c_i;
  wire [CW-1:0] len_now = (wr_cnt_q == {CW{1'b0}}) ? len_in : len_q;
  wire [15:0]   x_ext   = {{8{in_data_i[7]}}, in_data_i};
  wire [15:0]   x_sq    = x_ext * x_ext;                       // x^2 <= 2^14, low 16 bits exact

  // ---------------------------------------------------------------- mean: q = floor((Sx + 128 C) / C), r
  // The row is complete and the previous one past stage 2 (stage 2 reads mean_q, stage 3 fac_q).
  wire              row_go       = (state_q == ST_IDLE) && full_q && !v1_q && !v2_q;
  wire              mdiv_in_ready;
  wire              mdiv_out_valid;
  wire [7:0]        mdiv_quo;
  wire [CW-1:0]     mdiv_rem;
  wire [MN_W-1:0]   c128         = {1'b0, len_q, 7'd0};
  wire [MN_W-1:0]   mdividend    = sx_acc_q + c128;           // >= 0 (Sx >= -128 C)
  // round half to even: r > C/2, or r = C/2 with q odd
  wire [CW:0]       rem2         = {mdiv_rem, 1'b0};
  wire [CW:0]       len_x        = {1'b0, len_q};
  wire              mean_up      = (rem2 > len_x) || ((rem2 == len_x) && mdiv_quo[0]);
  wire [7:0]        mean_q128    = mdiv_quo + {7'd0, mean_up};   // mean + 128 <= 255

  divu #(
    .N_BITS (MN_W),
    .D_BITS (CW),
    .Q_BITS (8)
  ) u_divu_mean (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .in_valid_i      (row_go),
    .in_ready_o      (mdiv_in_ready),
    .in_dividend_i   (mdividend),
    .in_divisor_i    (len_q),
    .out_valid_o     (mdiv_out_valid),
    .out_ready_i     (state_q == ST_MEAN),
    .out_quotient_o  (mdiv_quo),
    .out_remainder_o (mdiv_rem)
  );

  // ---------------------------------------------------------------- variance
  // VAR1: t = C*mean - 2 Sx.  VAR2: var = Sxx + mean*t (= sum (x - mean)^2 >= 0, exact).
  wire signed [T_W-1:0]   c_s    = $signed({{(T_W-CW){1'b0}}, len_q});
  wire signed [T_W-1:0]   mean_s = $signed({{(T_W-8){mean_q[7]}}, mean_q});
  wire signed [T_W-1:0]   sx2_s  = $signed({{(T_W-SX_W-1){sx_acc_q[SX_W-1]}}, sx_acc_q, 1'b0});
  wire signed [T_W-1:0]   t_d    = c_s * mean_s - sx2_s;
  wire signed [MT_W-1:0]  mean_t = $signed({{(MT_W-8){mean_q[7]}}, mean_q})
                                 * $signed({{(MT_W-T_W){t_q[T_W-1]}}, t_q});
  wire [MT_W-1:0]         ssq    = $signed({{(MT_W-SXX_W){1'b0}}, sxx_acc_q}) + mean_t;
  wire [VAR_W-1:0]        var_d  = ssq[VAR_W-1:0];                 // < 2^28
  wire                    var_zero = (var_d == {VAR_W{1'b0}});

  // ---------------------------------------------------------------- square root and divider
  wire             sq_in_ready;
  wire             sq_out_valid;
  wire [STD_W-1:0] std_w;
  wire             div_in_valid = (state_q == ST_SQRT) && sq_out_valid;
  wire             div_in_ready;
  wire             div_out_valid;
  wire [FAC_W-1:0] div_quo;
  wire [STD_W-1:0] div_rem_unused;   // the remainder is not needed for factor
  wire             sq_out_ready = (state_q == ST_SQRT) && div_in_ready;

  isqrt #(
    .IN_BITS (VAR_W)
  ) u_isqrt (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .in_valid_i  ((state_q == ST_VAR2) && !var_zero),
    .in_ready_o  (sq_in_ready),
    .in_data_i   (var_d),
    .out_valid_o (sq_out_valid),
    .out_ready_i (sq_out_ready),
    .out_data_o  (std_w)
  );

  divu #(
    .N_BITS (FAC_W),
    .D_BITS (STD_W)
  ) u_divu_factor (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .in_valid_i      (div_in_valid),
    .in_ready_o      (div_in_ready),
    .in_dividend_i   (TWO31_C),
    .in_divisor_i    (std_w),
    .out_valid_o     (div_out_valid),
    .out_ready_i     (state_q == ST_DIV),
    .out_quotient_o  (div_quo),
    .out_remainder_o (div_rem_unused)
  );

  // The row enters OUT: its length moves to c_row_q, the fill side restarts.
  wire row_start = ((state_q == ST_VAR2) && var_zero)
                || ((state_q == ST_DIV) && div_out_valid);

  // ---------------------------------------------------------------- element datapath
  // Stage 2: y_i = x_i - mean.
  wire signed [8:0]     y2_d   = $signed({x1_q[7], x1_q}) - $signed({mean_q[7], mean_q});
  // Stage 3: h_i = floor(y_i * factor / 2), the product exact in 33 bits.
  wire signed [H_W-1:0] fac_x  = $signed({1'b0, fac_q});
  wire signed [H_W-1:0] y_x    = $signed({{(H_W-9){y2_q[8]}}, y2_q});
  wire signed [H_W-1:0] yf     = fac_x * y_x;
  wire signed [H_W-2:0] h3_d   = yf[H_W-1:1];
  // Stage 4: z_i = h_i + bias_int_i.
  wire signed [Z_W-1:0] z4_d   = $signed({{(Z_W-H_W+1){h3_q[H_W-2]}}, h3_q})
                               + $signed({c3_q[BIAS_BITS-1], c3_q});
  // Stage 5: P_i = z_i * M_i, exact in PW bits.
  wire signed [PW-1:0]  z_x    = $signed({{(PW-Z_W){z4_q[Z_W-1]}}, z4_q});
  wire signed [PW-1:0]  m_x    = $signed({{(PW-33){m4_q[32]}}, m4_q});
  wire signed [PW-1:0]  p5_d   = z_x * m_x;
  // Stage 6: round half to even by 2^E (E clamped to PW), saturate.
  wire [6:0]            e_c    = (e5_q > PW_C) ? PW_C : e5_q;
  wire signed [PX-1:0]  p_x    = $signed({p5_q[PW-1], p5_q});
  wire signed [PX-1:0]  q6     = p_x >>> e_c;
  wire [PX-1:0]         mask6  = ~({PX{1'b1}} << e_c);
  wire [PX-1:0]         r6     = p_x & mask6;
  wire [PX-1:0]         half6  = (ONE_PX << e_c) >> 1;
  wire                  up6    = (e_c != 7'd0) && ((r6 > half6) || ((r6 == half6) && q6[0]));
  wire signed [PX-1:0]  o6     = q6 + $signed({{(PX-1){1'b0}}, up6});
  wire [OUT_BITS-1:0]   out6_d = (o6 > OUT_MAX) ? OUT_MAX[OUT_BITS-1:0]
                               : (o6 < OUT_MIN) ? OUT_MIN[OUT_BITS-1:0] : o6[OUT_BITS-1:0];

  // Bits that are dropped by construction (y*factor's floored-off bit, the factor remainder).
  wire unused_bits = ^{yf[0], div_rem_unused, x_sq[15], ssq};  // ssq: its bits above VAR_W (MAX_C > 2048)

  assign out_valid_o = v6_q;
  assign out_data_o  = out6_q;
  assign out_last_o  = l6_q;

  // ---------------------------------------------------------------- memories (no reset)
  always @(posedge clk_i) begin
    if (in_fire) begin
      x_mem[wr_cnt_q[AW-1:0]] <= in_data_i;
    end
    if (issue) begin
      x1_q <= x_mem[rd_cnt_q[AW-1:0]];
    end
    if (prm_we_i) begin
      c_mem[prm_addr_i] <= prm_bias_i;
      m_mem[prm_addr_i] <= prm_mult_i;
      e_mem[prm_addr_i] <= prm_shift_i;
    end
    if (s3_en && v2_q) begin
      c3_q <= c_mem[idx2_q];
      m3_q <= m_mem[idx2_q];
      e3_q <= e_mem[idx2_q];
    end
  end

  // ---------------------------------------------------------------- control and datapath registers
  always @(posedge clk_i) begin
    if (!rst_ni) begin
      state_q   <= ST_IDLE;
      wr_cnt_q  <= {CW{1'b0}};
      full_q    <= 1'b0;
      sx_acc_q  <= {SX_W{1'b0}};
      sxx_acc_q <= {SXX_W{1'b0}};
      v1_q      <= 1'b0;
      v2_q      <= 1'b0;
      v3_q      <= 1'b0;
      v4_q      <= 1'b0;
      v5_q      <= 1'b0;
      v6_q      <= 1'b0;
      l1_q      <= 1'b0;
      l2_q      <= 1'b0;
      l3_q      <= 1'b0;
      l4_q      <= 1'b0;
      l5_q      <= 1'b0;
      l6_q      <= 1'b0;
      out6_q    <= {OUT_BITS{1'b0}};
    end else begin
      // fill side
      if (row_start) begin
        wr_cnt_q  <= {CW{1'b0}};
        full_q    <= 1'b0;
        sx_acc_q  <= {SX_W{1'b0}};
        sxx_acc_q <= {SXX_W{1'b0}};
      end else if (in_fire) begin
        wr_cnt_q  <= wr_cnt_q + ONE_C;
        len_q     <= len_now;
        full_q    <= (wr_cnt_q == len_now - ONE_C);
        sx_acc_q  <= sx_acc_q + $signed({{(SX_W-8){in_data_i[7]}}, in_data_i});
        sxx_acc_q <= sxx_acc_q + {{(SXX_W-15){1'b0}}, x_sq[14:0]};
      end

      // per-row control
      case (state_q)
        ST_IDLE: begin
          if (row_go && mdiv_in_ready) begin
            state_q <= ST_MEAN;
          end
        end
        ST_MEAN: begin
          if (mdiv_out_valid) begin
            mean_q  <= {~mean_q128[7], mean_q128[6:0]};   // - 128
            state_q <= ST_VAR1;
          end
        end
        ST_VAR1: begin
          t_q     <= t_d;
          state_q <= ST_VAR2;
        end
        ST_VAR2: begin
          if (var_zero) begin
            fac_q   <= {FAC_W{1'b0}};
            state_q <= ST_OUT;
          end else if (sq_in_ready) begin
            state_q <= ST_SQRT;
          end
        end
        ST_SQRT: begin
          if (sq_out_valid && div_in_ready) begin
            state_q <= ST_DIV;
          end
        end
        ST_DIV: begin
          if (div_out_valid) begin
            fac_q   <= div_quo;
            state_q <= ST_OUT;
          end
        end
        ST_OUT: begin
          if (issue && last_issue) begin
            state_q <= ST_IDLE;
          end
        end
        // verilator coverage_off
        // (reached only from a state value that no transition produces)
        default: state_q <= ST_IDLE;
        // verilator coverage_on
      endcase
      if (row_start) begin
        c_row_q  <= len_q;
        rd_cnt_q <= {CW{1'b0}};
      end else if (issue) begin
        rd_cnt_q <= rd_cnt_q + ONE_C;
      end

      // element pipeline
      if (s1_en) begin
        v1_q <= issue;
        l1_q <= issue && last_issue;
        if (issue) begin
          idx1_q <= rd_cnt_q[AW-1:0];
        end
      end
      if (s2_en) begin
        v2_q <= v1_q;
        l2_q <= l1_q;
        if (v1_q) begin
          y2_q   <= y2_d;
          idx2_q <= idx1_q;
        end
      end
      if (s3_en) begin
        v3_q <= v2_q;
        l3_q <= l2_q;
        if (v2_q) begin
          h3_q <= h3_d;
        end
      end
      if (s4_en) begin
        v4_q <= v3_q;
        l4_q <= l3_q;
        if (v3_q) begin
          z4_q <= z4_d;
          m4_q <= m3_q;
          e4_q <= e3_q;
        end
      end
      if (s5_en) begin
        v5_q <= v4_q;
        l5_q <= l4_q;
        if (v4_q) begin
          p5_q <= p5_d;
          e5_q <= e4_q;
        end
      end
      if (s6_en) begin
        v6_q <= v5_q;
        l6_q <= l5_q;
        if (v5_q) begin
          out6_q <= out6_d;
        end
      end
    end
  end

endmodule

`default_nettype wire
