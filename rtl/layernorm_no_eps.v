// layernorm_no_eps: hwvit's integer LayerNorm without epsilon over a streamed row, the bit-exact
// twin of the variant layernorm=no_eps (hwvit/variants/layernorm_forms.py: ops.layernorm with
// eps_int = 0; docs/variants/ivit.md).
//
// Per row of C signed 8-bit inputs x_i (docs/arithmetic.md, "layernorm"; T=11, K=43, F=10, eps = 0):
//   Sx  = sum x_i,  Sxx = sum x_i^2,  V = C*Sxx - Sx^2,  Ve = V << 22
//   sig = isqrt(Ve),  inv = floor((2^43 + floor(sig/2)) / sig)  (inv = 0 when sig = 0)  once per row
//   d_i = C*x_i - Sx,  y_i = (d_i*inv + 2^21) >>> 22,  acc_i = y_i*G_i + B_i
//   out_i = requant(acc_i, M, s)                     (rtl/requant.v, signed OUT_BITS)
// Without eps a constant row has V = 0, sig = 0 and inv = 0, so every y_i = 0 and out_i =
// requant(B_i): beta alone. Any other row has V >= C - 1 >= 1 (V is the sum over pairs of
// (x_i - x_j)^2, and at least C - 1 pairs differ), so Ve >= 2^22, sig >= 2^11, inv <= 2^32.
//
// Widths (C <= MAX_C < 2^CW, C <= 4096): |Sx| <= 128*C (signed CW + 8), Sxx <= C*2^14 (CW + 14);
// V = C^2 * var(x) <= C^2 * 127.5^2 < 2^38, so Ve < 2^60 (the eps adder of rtl/layernorm.v and two
// radicand bits are gone: isqrt of 60 bits, 30 clocks), sig < 2^30; 2^43 + floor(sig/2) < 2^44
// (divu 44 bits, 44 clocks); |d_i| <= 255*(C-1) (CW + 9 bits); |d_i*inv| fits the shared
// (CW+9)x34-bit product; |y_i| <= sqrt(C-1)*2^10*(1 + 2^-10) since d_i^2 <= (C-1)*V and
// sig >= 2^11*sqrt(V) - 1 (Y_W = ceil(CW/2) + 12 bits); |y_i*G_i| < 2^30 and |B_i| < 2^30, so acc_i
// fits the contract's signed 32 bits.
//
// Flow of a row through the MAX_C-entry row buffer (a 1W1R memory):
//   FILL  accept C inputs, write them, accumulate Sx and Sxx (one x^2 multiply per element);
//   MUL1, MUL2   C*Sxx then Sx^2 on the shared multiplier, V (2 clocks);
//   SQRT  sig by rtl/isqrt.v (30 clocks), DIV  inv by rtl/divu.v (44 clocks);
//         both are skipped when V = 0 (a constant row): there inv = 0, as the kernel has it;
//   OUT   re-read the row: d_i (C*x_i, 13x8 bits), d_i*inv (the shared multiplier), y_i*G_i + B_i,
//         requant; one element per clock when accepted. out_last_o marks each row's last output
//         (a flag that travels with the element through the pipeline and the requantizer).
// The next row fills the buffer behind the OUT pass (slot i is written only after it was read).
//
// Configuration: the row length C is sampled with the first input of each row (0 counts as 1,
// values above MAX_C as MAX_C). M and s must be steady while rows are in flight.
// gamma (G, signed 15) and beta (B, signed 31) are RAMs written through prm_*, once per layer,
// while no row is in flight; they have no reset and survive rst_ni.
// Reset (rst_ni, synchronous, active low) drops any partial row and zeroes the control registers
// (state, counters, valid and last flags, the fill sums) and the requantizer's registers, so
// out_data_o is never X after reset; the data registers a row writes before it reads them (its
// length, row constants, pipeline data) have no reset.

`default_nettype none

module layernorm_no_eps #(
  // Longest row (2..4096, the contract's limit): entries of the row buffer and gamma/beta RAMs.
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
      $display("ERROR: layernorm_no_eps: MAX_C = %0d must be in 2..4096 (V < 2^38)", MAX_C);
      $finish;
    end
    if (OUT_BITS < 2 || OUT_BITS > 16) begin
      $display("ERROR: layernorm_no_eps: OUT_BITS = %0d must be in 2..16", OUT_BITS);
      $finish;
    end
  end
  // verilator coverage_on

  // ---------------------------------------------------------------- widths and constants
  localparam integer AW    = $clog2(MAX_C);       // buffer address
  localparam integer CW    = $clog2(MAX_C + 1);   // row length and element counters
  localparam integer SX_W  = CW + 8;              // |Sx| <= C * 128 < 2^(CW+7), signed
  localparam integer SXX_W = CW + 14;             // Sxx <= C * 2^14, unsigned
  localparam integer D_W   = CW + 9;              // |d| <= 255 * (C-1), signed
  localparam integer INV_W = 33;                  // inv <= 2^32 (V > 0, so sig >= 2^11)
  localparam integer MB_W  = INV_W + 1;           // shared multiplier operand b, signed
  localparam integer P_W   = D_W + MB_W;          // shared product, signed
  localparam integer Y_W   = (CW + 1) / 2 + 12;   // |y| <= sqrt(C-1) * 2^10 * (1 + 2^-10)
  localparam integer ACC_W = 32;                  // acc_i, signed (contract)
  localparam integer V_W   = 38;                  // V < 2^38 (C <= 4096)
  localparam integer VE_W  = V_W + 22;            // Ve = V << 22 < 2^60
  localparam integer SIG_W = VE_W / 2;            // sig < 2^30
  localparam integer DIV_W = 44;                  // dividend 2^43 + floor(sig/2) < 2^44
  localparam integer SHIFT = 22;                  // K - T - F

  localparam [CW:0]       MAX_C_C = MAX_C[CW:0];  // one spare bit: the compare is never constant
  localparam [CW-1:0]     ONE_C   = {{(CW-1){1'b0}}, 1'b1};
  localparam [P_W-1:0]    HALF_C  = {{(P_W-SHIFT){1'b0}}, 1'b1, {(SHIFT-1){1'b0}}};  // 2^21
  localparam [DIV_W-1:0]  TWO43_C = {1'b1, {(DIV_W-1){1'b0}}};                        // 2^43

  localparam [2:0] ST_IDLE = 3'd0;  // no row between FILL and OUT (a filling row may be under way)
  localparam [2:0] ST_MUL1 = 3'd1;  // C * Sxx
  localparam [2:0] ST_MUL2 = 3'd2;  // Sx^2, V; hand Ve to the square root (or inv = 0)
  localparam [2:0] ST_SQRT = 3'd3;  // wait for sig; hand it to the divider
  localparam [2:0] ST_DIV  = 3'd4;  // wait for inv
  localparam [2:0] ST_OUT  = 3'd5;  // read the row out through the element pipeline

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
  // row in MUL..OUT
  reg signed [P_W-1:0]        csxx_q;        // C * Sxx
  reg [INV_W-1:0]             inv_q;         // inv
  reg [CW-1:0]                c_row_q;       // C of the row being read out
  reg signed [SX_W-1:0]       sx_row_q;      // Sx of the row being read out
  reg [CW-1:0]                rd_cnt_q;      // buffer reads issued in OUT
  // element pipeline: 1 buffer data, 2 d_i, 3 y_i with G_i, B_i, 4 acc_i (into requant);
  // l*_q: the element is its row's last
  reg                         v1_q, v2_q, v3_q, v4_q;
  reg                         l1_q, l2_q, l3_q, l4_q;
  reg [AW-1:0]                idx1_q, idx2_q;
  reg [7:0]                   x1_q;
  reg signed [D_W-1:0]        d2_q;
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

  // ---------------------------------------------------------------- shared multiplier
  // MUL1: C * Sxx; MUL2: Sx * Sx; OUT: d_i * inv. Operands sign-extended to P_W, so the P_W-bit
  // product is exact.
  reg signed [D_W-1:0]  ma;
  reg signed [MB_W-1:0] mb;
  always @* begin
    case (state_q)
      ST_MUL1: begin
        ma = $signed({{(D_W-CW){1'b0}}, len_q});
        mb = $signed({{(MB_W-SXX_W){1'b0}}, sxx_acc_q});
      end
      ST_MUL2: begin
        ma = $signed({{(D_W-SX_W){sx_acc_q[SX_W-1]}}, sx_acc_q});
        mb = $signed({{(MB_W-SX_W){sx_acc_q[SX_W-1]}}, sx_acc_q});
      end
      default: begin
        ma = d2_q;
        mb = $signed({1'b0, inv_q});
      end
    endcase
  end
  wire signed [P_W-1:0] ma_ext = {{MB_W{ma[D_W-1]}}, ma};
  wire signed [P_W-1:0] mb_ext = {{D_W{mb[MB_W-1]}}, mb};
  wire signed [P_W-1:0] prod   = ma_ext * mb_ext;

  // V = C*Sxx - Sx^2, >= 0 and < 2^38; Ve = V << 22 < 2^60.
  wire [P_W-1:0]  v_full = csxx_q - prod;
  wire            v_zero = (v_full[V_W-1:0] == {V_W{1'b0}});
  wire [VE_W-1:0] ve     = {v_full[V_W-1:0], {SHIFT{1'b0}}};

  // ---------------------------------------------------------------- square root and divider
  wire             sq_in_ready;
  wire             sq_out_valid;
  wire [SIG_W-1:0] sig;
  wire             div_in_valid = (state_q == ST_SQRT) && sq_out_valid;
  wire             div_in_ready;
  wire             div_out_valid;
  wire [DIV_W-1:0] div_quo;
  wire [SIG_W-1:0] div_rem_unused;   // the remainder is not needed for inv
  wire [DIV_W-1:0] dividend = TWO43_C + {{(DIV_W-SIG_W+1){1'b0}}, sig[SIG_W-1:1]};
  wire             sq_out_ready = (state_q == ST_SQRT) && div_in_ready;

  isqrt #(
    .IN_BITS (VE_W)
  ) u_isqrt (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .in_valid_i  ((state_q == ST_MUL2) && !v_zero),
    .in_ready_o  (sq_in_ready),
    .in_data_i   (ve),
    .out_valid_o (sq_out_valid),
    .out_ready_i (sq_out_ready),
    .out_data_o  (sig)
  );

  divu #(
    .N_BITS (DIV_W),
    .D_BITS (SIG_W)
  ) u_divu (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .in_valid_i      (div_in_valid),
    .in_ready_o      (div_in_ready),
    .in_dividend_i   (dividend),
    .in_divisor_i    (sig),
    .out_valid_o     (div_out_valid),
    .out_ready_i     (state_q == ST_DIV),
    .out_quotient_o  (div_quo),
    .out_remainder_o (div_rem_unused)
  );

  // The row enters OUT: its length and Sx move to the OUT registers, the fill side restarts.
  wire row_start = ((state_q == ST_MUL2) && v_zero)
                || ((state_q == ST_DIV) && div_out_valid);

  // ---------------------------------------------------------------- element datapath
  // Stage 2: d_i = C*x_i - Sx.
  wire signed [D_W-1:0] c_s  = $signed({{(D_W-CW){1'b0}}, c_row_q});
  wire signed [D_W-1:0] x_s  = $signed({{(D_W-8){x1_q[7]}}, x1_q});
  wire signed [D_W-1:0] d2_d = c_s * x_s - $signed({{(D_W-SX_W){sx_row_q[SX_W-1]}}, sx_row_q});
  // Stage 3: y_i = (d_i*inv + 2^21) >>> 22.
  wire signed [P_W-1:0] y_sum = prod + $signed(HALF_C);
  wire signed [Y_W-1:0] y3_d  = y_sum[SHIFT+Y_W-1:SHIFT];
  // Stage 4: acc_i = y_i*G_i + B_i in 32 bits (|y*G| < 2^30, |B| < 2^30).
  wire [ACC_W-1:0] y_ext  = {{(ACC_W-Y_W){y3_q[Y_W-1]}}, y3_q};
  wire [ACC_W-1:0] g_ext  = {{(ACC_W-15){g3_q[14]}}, g3_q};
  wire [ACC_W-1:0] b_ext  = {{(ACC_W-31){b3_q[30]}}, b3_q};
  wire [ACC_W-1:0] acc4_d = y_ext * g_ext + b_ext;

  // Bits that are dropped by construction (V's sign extension, y's sign extension and rounded-off
  // fraction, the quotient's always-zero top: inv <= 2^32).
  wire unused_bits = ^{v_full[P_W-1:V_W], y_sum[P_W-1:SHIFT+Y_W], y_sum[SHIFT-1:0],
                       div_quo[DIV_W-1:INV_W], div_rem_unused, x_sq[15]};

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
          // The previous row must be past stage 2: it still uses c_row_q, sx_row_q, inv_q and
          // the shared multiplier.
          if (full_q && !v1_q && !v2_q) begin
            state_q <= ST_MUL1;
          end
        end
        ST_MUL1: begin
          csxx_q  <= prod;
          state_q <= ST_MUL2;
        end
        ST_MUL2: begin
          if (v_zero) begin
            inv_q   <= {INV_W{1'b0}};
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
            inv_q   <= div_quo[INV_W-1:0];
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
        sx_row_q <= sx_acc_q;
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
