// softmax_ita: ITA's streaming integer softmax over a streamed row, the bit-exact twin of the ita
// kernel (hwvit/variants/hwsoftmax.py; docs/variants/hwsoftmax.md; Islamoglu et al., ISLPED 2023).
//
// Per row of N signed IN_BITS inputs x_0 .. x_(N-1) in stream order, K = mult_i (the base-2
// slope s_in * log2(e) * 2^16, 1..2^31-1), in chunks of 16 consecutive elements:
//   sh(d)  = (d * K + 2^15) >> 16                 round half up of d s_in log2(e), d >= 0
//   g      = -2^(IN_BITS-1), sigma = 0            before the first chunk
//   per chunk: cm = max of the chunk; if cm > g: sigma = sigma >> sh(cm - g), g = cm;
//              sigma = sigma + sum over the chunk of (2^8 >> sh(g - x_i))      (0 from shift 9 on)
//   inv    = floor((2^OUT_BITS - 1) * 2^8 / sigma)                              (once per row)
//   y_i    = inv >> sh(g - x_i)                   with the row's final g (its max)
// The kernel adds a chunk's sum to the shifted sigma; adding its elements one by one to the
// shifted sigma gives the same integer.
//
// Widths (the kernel's WIDTHS at IN_BITS = 16, N = 4096):
//   d = g - x or cm - g in [0, 2^IN_BITS - 1]: the IN_BITS-bit difference of the two signed
//      values (taken mod 2^IN_BITS, which holds every d exactly, so no sign extension);
//   d * K + 2^15 <= (2^IN_BITS - 1)(2^31 - 1) + 2^15 < 2^(IN_BITS+31): DK_BITS = IN_BITS + 31,
//      sh = that >> 16 (IN_BITS + 15 significant bits); sh drives right shifts directly (a
//      Verilog shift by the width or more gives 0, as the kernel's clamped shifts do);
//   exp = 2^8 >> sh <= 2^8: 9 bits;
//   sigma <= N * 2^8 <= 2^(8 + clog2(MAX_N)): SG_BITS = 9 + clog2(MAX_N) (21 at 4096); the row's
//      max x_m gives exp 2^8 in its chunk (sh(0) = 0) and no later chunk shifts sigma, so
//      sigma >= 2^8;
//   (2^OUT_BITS - 1) * 2^8 < 2^(OUT_BITS+8): the divider's dividend; inv <= 2^OUT_BITS - 1 since
//      sigma >= 2^8, so rtl/divu.v needs OUT_BITS quotient bits (OUT_BITS clocks);
//   y_i = inv >> sh <= inv: OUT_BITS bits.
//
// Flow of a row through the MAX_N-entry row buffer (a 1W1R memory):
//   LOAD  accept up to 16 inputs (one chunk, one per clock), write them, keep the chunk max cm;
//   GROW  one clock: sh(cm - g) on the shared multiplier, sigma >> it and g = cm where cm > g;
//   CSUM  re-read the chunk: sh(g - x) (multiplier), sigma += 2^8 >> sh; back to LOAD for the
//         next chunk, or on to DIV after the row's last;
//   DIV   inv by rtl/divu.v (OUT_BITS + 1 clocks from request to result);
//   OUT   re-read the row: sh(g - x), y = inv >> sh, streamed out with the output handshake.
// Rows do not overlap: the next row is taken after the last output of this one has left.
// Per element the datapath is one IN_BITS x 31 multiply and two small barrel shifts.
//
// Configuration: mult_i must be steady while rows are in flight. The row length, in 1..MAX_N, is
// sampled with each row's first input. out_last_o marks each row's final output. Reset (rst_ni,
// synchronous, active low) drops any partial row and clears every control and output register;
// the data registers (cm, g, sigma, inv, the stage-2 shift) are loaded before they are used.
`default_nettype none

module softmax_ita #(
  parameter integer MAX_N    = 256,  // longest row (2..65536); the row buffer has MAX_N entries
  parameter integer IN_BITS  = 8,    // signed input width (2..16)
  parameter integer OUT_BITS = 8     // unsigned output width (2..16), scale 1/(2^OUT_BITS - 1)
) (
  input  wire                         clk_i,
  input  wire                         rst_ni,      // synchronous, active low

  // Configuration: K = round(s_in * log2(e) * 2^16), unsigned
  input  wire [30:0]                  mult_i,

  // Row length N in [1, MAX_N], sampled with the first input of each row
  input  wire [$clog2(MAX_N):0]       row_len_i,

  // Input stream: x_i, signed two's complement
  input  wire                         in_valid_i,
  output wire                         in_ready_o,
  input  wire [IN_BITS-1:0]           in_data_i,

  // Output stream: y_i, unsigned (real value y_i / (2^OUT_BITS - 1)); out_last_o on the row's last
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
      $display("ERROR: softmax_ita: MAX_N = %0d must be in 2..65536", MAX_N);
      $finish;
    end
    if (IN_BITS < 2 || IN_BITS > 16) begin
      $display("ERROR: softmax_ita: IN_BITS = %0d must be in 2..16", IN_BITS);
      $finish;
    end
    if (OUT_BITS < 2 || OUT_BITS > 16) begin
      $display("ERROR: softmax_ita: OUT_BITS = %0d must be in 2..16", OUT_BITS);
      $finish;
    end
  end
  // verilator coverage_on

  // ---------------------------------------------------------------- widths and constants
  localparam integer AW      = $clog2(MAX_N);       // row buffer address
  localparam integer LW      = AW + 1;              // row length / element counters (<= MAX_N)
  localparam integer DK_BITS = IN_BITS + 31;        // d * K + 2^15
  localparam integer SG_BITS = 9 + AW;              // sigma <= MAX_N * 2^8
  localparam integer N_BITS  = OUT_BITS + 8;        // dividend (2^OUT_BITS - 1) * 2^8

  localparam [LW-1:0]        ONE_C   = {{(LW-1){1'b0}}, 1'b1};
  localparam [DK_BITS-1:0]   HALF_C  = {{(DK_BITS-16){1'b0}}, 1'b1, 15'd0};            // 2^15
  localparam [IN_BITS-1:0]   MIN_C   = {1'b1, {(IN_BITS-1){1'b0}}};                  // -2^(IN_BITS-1)
  localparam [N_BITS-1:0]    NUM_C   = {{OUT_BITS{1'b1}}, 8'd0};                     // (2^OUT_BITS - 1) 2^8
  localparam [8:0]           EXP_ONE = 9'h100;                                       // 2^8
  // Zero pads (named, so that each extension is one constant).
  localparam [30:0]          Z_31    = 31'd0;
  localparam [IN_BITS-1:0]   Z_IN    = {IN_BITS{1'b0}};
  localparam [SG_BITS-10:0]  Z_SG9   = {(SG_BITS-9){1'b0}};

  localparam [2:0] ST_LOAD = 3'd0;  // take one chunk
  localparam [2:0] ST_GROW = 3'd1;  // the chunk max updates g and shifts sigma
  localparam [2:0] ST_CSUM = 3'd2;  // the chunk's exps into sigma
  localparam [2:0] ST_DIV  = 3'd3;  // inv = floor(Q 2^8 / sigma)
  localparam [2:0] ST_OUT  = 3'd4;  // y_i out

  // ---------------------------------------------------------------- memories
  // verilator coverage_off
  // (no toggle coverage of memories: Verilator instruments only small arrays; the write and
  // read paths are covered)
  reg [IN_BITS-1:0] row_mem [0:MAX_N-1];   // the row, in arrival order
  // verilator coverage_on

  // ---------------------------------------------------------------- state
  reg [2:0]          state_q, state_d;
  reg [LW-1:0]       ld_cnt_q, ld_cnt_d;     // inputs of this row taken
  reg [3:0]          ck_cnt_q, ck_cnt_d;     // inputs of this chunk taken, mod 16
  reg [LW-1:0]       len_q, len_d;           // row length N
  reg [LW-1:0]       rd_cnt_q, rd_cnt_d;     // buffer reads issued (CSUM: of the row so far)
  reg [IN_BITS-1:0]  cm_q, cm_d;             // chunk max
  reg [IN_BITS-1:0]  g_q, g_d;               // running max g
  reg [SG_BITS-1:0]  sigma_q, sigma_d;       // denominator
  reg [OUT_BITS-1:0] inv_q, inv_d;           // inverse
  reg                div_sent_q, div_sent_d; // the divider has taken this row's request

  // Pipeline (CSUM and OUT): stage 1 buffer data, 2 the clamped shift, 3 sigma or the output.
  reg                v1_q, v2_q;             // stage holds an element
  reg                l1_q, l2_q;             // ... which is the row's last (OUT)
  reg [IN_BITS-1:0]  x1_q;                   // x_i read from the row buffer
  reg [DK_BITS-1:0]  sh2_q;                  // sh(g - x_i)
  reg                out_valid_q;
  reg                out_last_q;
  reg [OUT_BITS-1:0] out_data_q;

  // ---------------------------------------------------------------- input side
  wire          first    = (ld_cnt_q == {LW{1'b0}});
  wire [LW-1:0] len_now  = first ? row_len_i : len_q;
  wire          in_ready = (state_q == ST_LOAD);
  wire          in_take  = in_valid_i && in_ready;
  wire          in_last  = (ld_cnt_q == len_now - ONE_C);
  // Buffer addresses: the counters' low AW bits (the counters stay below MAX_N there).
  wire          ld_top_unused, rd_top_unused;
  wire [AW-1:0] ld_addr, rd_addr;
  assign {ld_top_unused, ld_addr} = ld_cnt_q;
  assign {rd_top_unused, rd_addr} = rd_cnt_q;

  // ---------------------------------------------------------------- pipeline control
  // Every stage moves when the output register is empty or being emptied (always in CSUM).
  wire adv    = !out_valid_q || out_ready_i;
  wire rd_end = (state_q == ST_OUT) ? (rd_cnt_q == len_q) : (rd_cnt_q == ld_cnt_q);
  wire issue  = (state_q == ST_CSUM || state_q == ST_OUT) && !rd_end && adv;

  // ---------------------------------------------------------------- the shared shift unit
  // sh(d) = (d * K + 2^15) >> 16 with d = cm - g in GROW (the pipeline is empty then), else
  // d = g - x_i of stage 1.
  wire               grow_now = (state_q == ST_GROW);
  wire [IN_BITS-1:0] dd = grow_now ? cm_q - g_q : g_q - x1_q;
  wire [DK_BITS-1:0] dk = {Z_31, dd} * {Z_IN, mult_i} + HALF_C;
  wire [DK_BITS-1:0] sh = dk >> 16;

  // GROW: where cm > g, sigma >> sh(cm - g) (0 from SG_BITS on) and g = cm.
  wire               grows = $signed(cm_q) > $signed(g_q);
  wire [SG_BITS-1:0] sigma_grow = sigma_q >> sh;

  // Stage 2 -> 3: exp = 2^8 >> sh (0 from 9 on) into sigma; y = inv >> sh (0 from OUT_BITS on).
  wire [8:0]          exp2 = EXP_ONE >> sh2_q;
  wire [OUT_BITS-1:0] y2   = inv_q >> sh2_q;

  // ---------------------------------------------------------------- divider
  wire              div_in_valid = (state_q == ST_DIV) && !div_sent_q;
  wire              div_in_ready;
  wire              div_out_valid;
  wire [OUT_BITS-1:0] div_quotient;
  wire [SG_BITS-1:0] div_rem_unused;  // the remainder is not needed

  divu #(
    .N_BITS (N_BITS),
    .D_BITS (SG_BITS),
    .Q_BITS (OUT_BITS)
  ) u_divu (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .in_valid_i      (div_in_valid),
    .in_ready_o      (div_in_ready),
    .in_dividend_i   (NUM_C),
    .in_divisor_i    (sigma_q),
    .out_valid_o     (div_out_valid),
    .out_ready_i     (1'b1),          // the result is taken in DIV on the clock it is valid
    .out_quotient_o  (div_quotient),
    .out_remainder_o (div_rem_unused)
  );

  // ---------------------------------------------------------------- control
  wire csum_done = (state_q == ST_CSUM) && rd_end && !v1_q && !v2_q;
  wire out_done  = (state_q == ST_OUT) && rd_end && !v1_q && !v2_q && adv;

  always @* begin
    state_d    = state_q;
    ld_cnt_d   = ld_cnt_q;
    ck_cnt_d   = ck_cnt_q;
    len_d      = len_q;
    rd_cnt_d   = rd_cnt_q;
    cm_d       = cm_q;
    g_d        = g_q;
    sigma_d    = sigma_q;
    inv_d      = inv_q;
    div_sent_d = div_sent_q;
    if (issue) begin
      rd_cnt_d = rd_cnt_q + ONE_C;
    end
    case (state_q)
      ST_LOAD: begin
        if (in_take) begin
          len_d    = len_now;
          ld_cnt_d = ld_cnt_q + ONE_C;
          ck_cnt_d = ck_cnt_q + 4'd1;
          if (ck_cnt_q == 4'd0 || $signed(in_data_i) > $signed(cm_q)) begin
            cm_d = in_data_i;
          end
          if (first) begin  // a new row: g and sigma start over
            g_d     = MIN_C;
            sigma_d = {SG_BITS{1'b0}};
          end
          if (ck_cnt_q == 4'd15 || in_last) begin
            ck_cnt_d = 4'd0;
            state_d  = ST_GROW;
          end
        end
      end
      ST_GROW: begin
        if (grows) begin
          g_d     = cm_q;
          sigma_d = sigma_grow;
        end
        state_d = ST_CSUM;
      end
      ST_CSUM: begin
        if (v2_q) begin
          sigma_d = sigma_q + {Z_SG9, exp2};
        end
        if (csum_done) begin
          state_d = (ld_cnt_q == len_q) ? ST_DIV : ST_LOAD;
        end
      end
      ST_DIV: begin
        if (div_in_valid && div_in_ready) begin
          div_sent_d = 1'b1;
        end
        if (div_out_valid) begin
          inv_d      = div_quotient;
          div_sent_d = 1'b0;
          rd_cnt_d   = {LW{1'b0}};
          state_d    = ST_OUT;
        end
      end
      default: begin  // ST_OUT
        if (out_done) begin
          state_d  = ST_LOAD;
          ld_cnt_d = {LW{1'b0}};
          rd_cnt_d = {LW{1'b0}};
        end
      end
    endcase
  end

  // ---------------------------------------------------------------- memory (no reset)
  always @(posedge clk_i) begin
    if (in_take) begin
      row_mem[ld_addr] <= in_data_i;
    end
    if (issue) begin
      x1_q <= row_mem[rd_addr];
    end
  end

  // ---------------------------------------------------------------- registers
  // Control and output: reset.
  always @(posedge clk_i) begin
    if (!rst_ni) begin
      state_q     <= ST_LOAD;
      ld_cnt_q    <= {LW{1'b0}};
      ck_cnt_q    <= 4'd0;
      rd_cnt_q    <= {LW{1'b0}};
      div_sent_q  <= 1'b0;
      v1_q        <= 1'b0;
      v2_q        <= 1'b0;
      out_valid_q <= 1'b0;
      out_data_q  <= {OUT_BITS{1'b0}};
    end else begin
      state_q    <= state_d;
      ld_cnt_q   <= ld_cnt_d;
      ck_cnt_q   <= ck_cnt_d;
      rd_cnt_q   <= rd_cnt_d;
      div_sent_q <= div_sent_d;
      if (adv) begin
        v1_q        <= issue;
        v2_q        <= v1_q;
        out_valid_q <= v2_q && (state_q == ST_OUT);
        if (v2_q) begin  // in CSUM too: out_data_o means something only with out_valid_o
          out_data_q <= y2;
        end
      end
    end
  end

  // Data: no reset. Each is loaded before it is read: len with a row's first input, cm with a
  // chunk's first, g and sigma with a row's first, inv in DIV, sh2 behind v1; the last flags
  // follow the (reset) valid flags, and out_last_o means something only with out_valid_o.
  always @(posedge clk_i) begin
    len_q   <= len_d;
    cm_q    <= cm_d;
    g_q     <= g_d;
    sigma_q <= sigma_d;
    inv_q   <= inv_d;
    if (adv) begin
      l1_q       <= issue && (state_q == ST_OUT) && (rd_cnt_q == len_q - ONE_C);
      l2_q       <= l1_q;
      out_last_q <= l2_q;
      if (v1_q) begin
        sh2_q <= sh;
      end
    end
  end

  assign in_ready_o  = in_ready;
  assign out_valid_o = out_valid_q;
  assign out_data_o  = out_data_q;
  assign out_last_o  = out_last_q;

endmodule

`default_nettype wire
