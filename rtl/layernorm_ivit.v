// layernorm_ivit: I-ViT's I-LayerNorm over a streamed row, the bit-exact twin of the variant
// layernorm=ivit (hwvit/variants/ivit.py, layernorm_stages; Li & Gu, I-ViT, ICCV 2023, Sec. 3.5
// Eq. 19 with IntDiv of Eq. 15; docs/variants/ivit.md).
//
// Per row of C signed 8-bit inputs x_i:
//   Sx  = sum x_i,  Sxx = sum x_i^2
//   mu  = floor((2 Sx + C) / 2C)                        (the mean, rounded half up)
//   Var = sum (x_i - mu)^2 + eps_int  = Sxx + mu*(C*mu - 2 Sx) + eps_int   (exact identity)
//   std = sqrt_iter(Var),  factor = floor(2^62 / std)  (factor = 0 when std = 0)   once per row
//   d_i = x_i - mu,  y_i = (factor * d_i) >>> 46,  acc_i = y_i*G_i + B_i
//   out_i = requant(acc_i, M, s)                        (rtl/requant.v, signed OUT_BITS)
// The kernel's 10-step bit-shift Newton square root (I_0 = 2^floor(bitlen/2), I_(k+1) =
// (I_k + floor(Var/I_k)) >> 1, kept while it falls) returns floor(sqrt(Var)) on its whole domain:
// I_0 is within a factor sqrt(2) of sqrt(Var), each Newton step squares the relative error (0.41,
// 0.061, 0.0018, 1.5e-6, 1e-12 after four: below one unit for Var < 2^41), and the integer
// iteration from above stops exactly at floor(sqrt) (the kernel's docstring; tests compare it with
// math.isqrt). So std is rtl/isqrt.v's exact floor root: the same integer, fewer clocks and no
// divisions. Var = 0 (a constant row without eps) gives std = 0 and every d_i = 0: y_i = 0 whatever
// factor, so the square root and the division are skipped with factor = 0, as the kernel has it.
//
// Widths (C <= MAX_C < 2^CW, C <= 4096; the kernel's docstring):
//   |Sx| <= 128*C: signed CW + 8;  Sxx <= C*2^14: unsigned CW + 14;
//   mu: the divider returns q = mu + 128 = floor((2 Sx + 257 C) / 2C) in [0, 255] (the dividend is
//   >= 0 and <= 511 C < 2^(CW+9), the divisor 2C < 2^(CW+1); 511 C < 2C * 2^8, so an 8-bit
//   quotient: rtl/divu.v with Q_BITS = 8, 9 clocks); mu = q - 128, signed 8;
//   t = C*mu - 2 Sx, |t| <= 384 C: signed CW + 10;  |mu*t| <= 49152 C: signed CW + 17;
//   sum (x_i - mu)^2 <= 255^2 * C < 2^28, + eps_int (<= 2^40, the kernel's bound): Var < 2^41,
//   isqrt of 42 bits (21 clocks), std < 2^21;  factor <= 2^62: unsigned 63 (divu 63 bits, 64 clocks);
//   d_i in [-255, 255]: signed 9, and |d_i| <= std (d_i^2 <= Var), so |factor*d_i| <= 2^62:
//   the product fits signed 64;  y_i = its bits 63..46, |y_i| <= 2^16: signed 18 (y = +2^16 occurs:
//   a row [0, 2] has mu = 1, std = 1, d = 1);  |y_i*G_i| <= 2^16*(2^14 - 1) and |B_i| < 2^30, so
//   acc_i fits signed 32;  requant: |acc_i*M| < 2^62 (rtl/requant.v, as the kernel's _requant).
//
// Flow of a row through the MAX_C-entry row buffer (a 1W1R memory):
//   FILL  accept C inputs, write them, accumulate Sx and Sxx (one x^2 multiply per element);
//   MEAN  mu by the small divider (9 clocks);  VAR1, VAR2  t, then Var (two small products);
//   SQRT  std by rtl/isqrt.v (21 clocks), DIV  factor by rtl/divu.v (64 clocks), both skipped
//         when Var = 0;
//   OUT   re-read the row: d_i, factor*d_i (63 x 9 bits), y_i*G_i + B_i, requant; one element per
//         clock when accepted. out_last_o marks each row's last output (a flag that travels with
//         the element through the pipeline and beside the requantizer).
// The next row fills the buffer behind the OUT pass (slot i is written only after it was read).
//
// Configuration: the row length C is sampled with the first input of each row (0 counts as 1,
// values above MAX_C as MAX_C). eps_int, M and s must be steady while rows are in flight.
// gamma (G, signed 15) and beta (B, signed 31) are RAMs written through prm_*, once per layer,
// while no row is in flight; they have no reset and survive rst_ni.
// Reset (rst_ni, synchronous, active low) drops any partial row and zeroes the control registers
// (state, counters, valid and last flags, the fill sums) and the requantizer's registers, so
// out_data_o is never X after reset; the data registers a row writes before it reads them (its
// length, row constants, pipeline data) have no reset.

`default_nettype none

module layernorm_ivit #(
  // Longest row (2..4096, the kernel's limit): entries of the row buffer and gamma/beta RAMs.
  parameter integer MAX_C    = 1024,
  // Output width, signed (2..16).
  parameter integer OUT_BITS = 8
) (
  input  wire                       clk_i,
  input  wire                       rst_ni,

  // ---- gamma/beta write port: G[prm_addr_i] = prm_gamma_i, B[prm_addr_i] = prm_beta_i ----
  input  wire                       prm_we_i,
  input  wire [$clog2(MAX_C)-1:0]   prm_addr_i,
  input  wire [14:0]                prm_gamma_i,   // signed, |G| <= 2^14 - 1
  input  wire [30:0]                prm_beta_i,    // signed, |B| <= 2^30 - 1

  // ---- configuration ----
  input  wire [$clog2(MAX_C+1)-1:0] cfg_c_i,       // row length C in [1, MAX_C]
  input  wire [40:0]                cfg_eps_i,     // eps_int, unsigned, <= 2^40 (units of Var)
  input  wire [30:0]                cfg_mult_i,    // requant multiplier M, unsigned
  input  wire [5:0]                 cfg_shift_i,   // requant shift s

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
      $display("ERROR: layernorm_ivit: MAX_C = %0d must be in 2..4096 (Var < 2^41)", MAX_C);
      $finish;
    end
    if (OUT_BITS < 2 || OUT_BITS > 16) begin
      $display("ERROR: layernorm_ivit: OUT_BITS = %0d must be in 2..16", OUT_BITS);
      $finish;
    end
  end
  // verilator coverage_on

  // ---------------------------------------------------------------- widths and constants
  localparam integer AW     = $clog2(MAX_C);      // buffer address
  localparam integer CW     = $clog2(MAX_C + 1);  // row length and element counters
  localparam integer SX_W   = CW + 8;             // |Sx| <= C * 128, signed
  localparam integer SXX_W  = CW + 14;            // Sxx <= C * 2^14, unsigned
  localparam integer MN_W   = CW + 9;             // mean dividend 2 Sx + 257 C <= 511 C, unsigned
  localparam integer MD_W   = CW + 1;             // mean divisor 2C, unsigned
  localparam integer T_W    = CW + 10;            // t = C*mu - 2 Sx, |t| <= 384 C, signed
  localparam integer MT_W   = CW + 17;            // mu * t, |.| <= 49152 C, signed
  localparam integer VAR_W  = 42;                 // Var < 2^41 (isqrt needs an even width)
  localparam integer STD_W  = VAR_W / 2;          // std < 2^21
  localparam integer FAC_W  = 63;                 // factor <= 2^62
  localparam integer PR_W   = 64;                 // |factor * d| <= 2^62, signed (y: bits 63..46)
  localparam integer Y_W    = 18;                 // |y| <= 2^16, signed
  localparam integer ACC_W  = 32;                 // acc_i, signed
  localparam integer YSHIFT = 46;                 // 62 - (17 - 1): IntDiv(d, std, 17)

  localparam [CW:0]      MAX_C_C = MAX_C[CW:0];   // one spare bit: the compare is never constant
  localparam [CW-1:0]    ONE_C   = {{(CW-1){1'b0}}, 1'b1};
  localparam [FAC_W-1:0] TWO62_C = {1'b1, {(FAC_W-1){1'b0}}};                         // 2^62

  localparam [2:0] ST_IDLE = 3'd0;  // no row between FILL and OUT (a filling row may be under way)
  localparam [2:0] ST_MEAN = 3'd1;  // wait for mu + 128 from the mean divider
  localparam [2:0] ST_VAR1 = 3'd2;  // t = C*mu - 2 Sx
  localparam [2:0] ST_VAR2 = 3'd3;  // Var; hand it to the square root (or factor = 0)
  localparam [2:0] ST_SQRT = 3'd4;  // wait for std; hand it to the divider
  localparam [2:0] ST_DIV  = 3'd5;  // wait for factor
  localparam [2:0] ST_OUT  = 3'd6;  // read the row out through the element pipeline

  // ---------------------------------------------------------------- memories
  // verilator coverage_off
  // (no toggle coverage of memories: Verilator instruments only arrays of <= 256 bits)
  reg [7:0]  x_mem [0:MAX_C-1];   // the row, in arrival order
  reg [14:0] g_mem [0:MAX_C-1];   // gamma G per channel
  reg [30:0] b_mem [0:MAX_C-1];   // beta B per channel
  // verilator coverage_on

  // ---------------------------------------------------------------- state
  reg [2:0]                   state_q;
  // filling row
  reg [CW-1:0]                wr_cnt_q;      // inputs taken
  reg [CW-1:0]                len_q;         // its length (valid once wr_cnt_q > 0)
  reg                         full_q;        // all its inputs taken
  reg signed [SX_W-1:0]       sx_acc_q;      // Sx
  reg [SXX_W-1:0]             sxx_acc_q;     // Sxx
  // row in MEAN..OUT (written only after the previous row has left stage 3)
  reg [7:0]                   mu_q;          // mu, signed
  reg signed [T_W-1:0]        t_q;           // C*mu - 2 Sx
  reg [FAC_W-1:0]             fac_q;         // factor
  reg [CW-1:0]                c_row_q;       // C of the row being read out
  reg [CW-1:0]                rd_cnt_q;      // buffer reads issued in OUT
  // element pipeline: 1 buffer data, 2 d_i, 3 y_i with G_i, B_i, 4 acc_i (into requant);
  // l*_q: the element is its row's last
  reg                         v1_q, v2_q, v3_q, v4_q;
  reg                         l1_q, l2_q, l3_q, l4_q;
  reg [AW-1:0]                idx1_q, idx2_q;
  reg [7:0]                   x1_q;
  reg signed [8:0]            d2_q;
  reg signed [Y_W-1:0]        y3_q;
  reg [14:0]                  g3_q;
  reg [30:0]                  b3_q;
  reg [ACC_W-1:0]             acc4_q;
  // the last flag beside the requantizer's two stages (they advance exactly as its own)
  reg                         lr1_q, lr2_q;

  // ---------------------------------------------------------------- pipeline enables
  wire rq_in_ready;
  wire s4_en = !v4_q || rq_in_ready;
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

  // ---------------------------------------------------------------- mean: mu + 128 = floor((2 Sx + 257 C) / 2C)
  // The row is complete and the previous one past stage 2 (it still reads mu_q, and stage 3 fac_q).
  wire              row_go       = (state_q == ST_IDLE) && full_q && !v1_q && !v2_q;
  wire              mdiv_in_ready;
  wire              mdiv_out_valid;
  wire [7:0]        mdiv_quo;
  wire [MD_W-1:0]   mdiv_rem_unused;   // the remainder is not needed
  wire [MN_W-1:0]   c257         = {{(MN_W-CW){1'b0}}, len_q} * 9'd257;
  wire [MN_W-1:0]   mdividend    = {sx_acc_q, 1'b0} + c257;     // >= 0 (Sx >= -128 C)
  wire [MD_W-1:0]   mdivisor     = {len_q, 1'b0};

  divu #(
    .N_BITS (MN_W),
    .D_BITS (MD_W),
    .Q_BITS (8)
  ) u_divu_mean (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .in_valid_i      (row_go),
    .in_ready_o      (mdiv_in_ready),
    .in_dividend_i   (mdividend),
    .in_divisor_i    (mdivisor),
    .out_valid_o     (mdiv_out_valid),
    .out_ready_i     (state_q == ST_MEAN),
    .out_quotient_o  (mdiv_quo),
    .out_remainder_o (mdiv_rem_unused)
  );

  // ---------------------------------------------------------------- variance
  // VAR1: t = C*mu - 2 Sx.  VAR2: Var = Sxx + mu*t + eps_int (sum (x - mu)^2 >= 0, exact).
  wire signed [T_W-1:0]   c_s    = $signed({{(T_W-CW){1'b0}}, len_q});
  wire signed [T_W-1:0]   mu_s   = $signed({{(T_W-8){mu_q[7]}}, mu_q});
  wire signed [T_W-1:0]   sx2_s  = $signed({{(T_W-SX_W-1){sx_acc_q[SX_W-1]}}, sx_acc_q, 1'b0});
  wire signed [T_W-1:0]   t_d    = c_s * mu_s - sx2_s;
  wire signed [MT_W-1:0]  mu_t   = $signed({{(MT_W-8){mu_q[7]}}, mu_q})
                                 * $signed({{(MT_W-T_W){t_q[T_W-1]}}, t_q});
  wire [MT_W-1:0]         ssq    = $signed({{(MT_W-SXX_W){1'b0}}, sxx_acc_q}) + mu_t;  // sum (x - mu)^2
  wire [VAR_W-1:0]        var_d  = {{(VAR_W-MT_W){1'b0}}, ssq} + {1'b0, cfg_eps_i};
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
    .in_dividend_i   (TWO62_C),
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
  // Stage 2: d_i = x_i - mu.
  wire signed [8:0] d2_d = $signed({x1_q[7], x1_q}) - $signed({mu_q[7], mu_q});
  // Stage 3: y_i = (factor * d_i) >>> 46 (floor), the product exact in 64 bits.
  wire signed [PR_W-1:0] fac_ext = $signed({{(PR_W-FAC_W){1'b0}}, fac_q});
  wire signed [PR_W-1:0] d_ext   = $signed({{(PR_W-9){d2_q[8]}}, d2_q});
  wire signed [PR_W-1:0] prod    = fac_ext * d_ext;
  wire signed [Y_W-1:0]  y3_d    = prod[YSHIFT+Y_W-1:YSHIFT];
  // Stage 4: acc_i = y_i*G_i + B_i in 32 bits.
  wire [ACC_W-1:0] y_ext  = {{(ACC_W-Y_W){y3_q[Y_W-1]}}, y3_q};
  wire [ACC_W-1:0] g_ext  = {{(ACC_W-15){g3_q[14]}}, g3_q};
  wire [ACC_W-1:0] b_ext  = {{(ACC_W-31){b3_q[30]}}, b3_q};
  wire [ACC_W-1:0] acc4_d = y_ext * g_ext + b_ext;

  // Bits that are dropped by construction (the product's floored-off fraction, the divider
  // remainders, x^2's always-zero top bit).
  wire unused_bits = ^{prod[YSHIFT-1:0], div_rem_unused, mdiv_rem_unused, x_sq[15]};

  requant #(
    .ACC_BITS (ACC_W),
    .OUT_BITS (OUT_BITS)
  ) u_requant (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .in_valid_i  (v4_q),
    .in_ready_o  (rq_in_ready),
    .in_acc_i    (acc4_q),
    .in_mult_i   (cfg_mult_i),
    .in_shift_i  (cfg_shift_i),
    .out_valid_o (out_valid_o),
    .out_ready_i (out_ready_i),
    .out_data_o  (out_data_o)
  );

  assign out_last_o = lr2_q;

  // ---------------------------------------------------------------- memories (no reset)
  always @(posedge clk_i) begin
    if (in_fire) begin
      x_mem[wr_cnt_q[AW-1:0]] <= in_data_i;
    end
    if (issue) begin
      x1_q <= x_mem[rd_cnt_q[AW-1:0]];
    end
    if (prm_we_i) begin
      g_mem[prm_addr_i] <= prm_gamma_i;
      b_mem[prm_addr_i] <= prm_beta_i;
    end
    if (s3_en && v2_q) begin
      g3_q <= g_mem[idx2_q];
      b3_q <= b_mem[idx2_q];
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
      l1_q      <= 1'b0;
      l2_q      <= 1'b0;
      l3_q      <= 1'b0;
      l4_q      <= 1'b0;
      lr1_q     <= 1'b0;
      lr2_q     <= 1'b0;
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
            mu_q    <= {~mdiv_quo[7], mdiv_quo[6:0]};   // q - 128
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
          d2_q   <= d2_d;
          idx2_q <= idx1_q;
        end
      end
      if (s3_en) begin
        v3_q <= v2_q;
        l3_q <= l2_q;
        if (v2_q) begin
          y3_q <= y3_d;
        end
      end
      if (s4_en) begin
        v4_q <= v3_q;
        l4_q <= l3_q;
        if (v3_q) begin
          acc4_q <= acc4_d;
        end
      end
      // beside the requantizer: its stage 1 loads when it is ready, its output register when it is
      // empty or taken
      if (rq_in_ready) begin
        lr1_q <= l4_q;   // 0 unless stage 4 holds a row's last element
      end
      if (!out_valid_o || out_ready_i) begin
        lr2_q <= lr1_q;
      end
    end
  end

endmodule

`default_nettype wire
