// gemm: int8 GEMM engine, the Verilog twin of hwvit.ops.gemm followed by hwvit.ops.requant.
//
//   acc[m, n] = bias[n] + sum_k a[m, k] * w[n, k]        (int32, exact)
//   y[m, n]   = requant(acc[m, n], M[n], s[n], OUT_BITS)  (docs/arithmetic.md "gemm", "requant")
//               (or a requant variant: ROUNDING, WRAP below)
//
// a is 8-bit signed or unsigned (a_signed_i; unsigned = softmax probabilities for P x V), w int8.
// ZERO_POINTS = 1 (an imported model's asymmetric activations, docs/onnx.md) adds three job
// parameters, sampled at start_i like M, K, N:
//   acc[m, n] = bias[n] + sum_k (a[m, k] - za) * (w[n, k] - zw)
//   y[m, n]   = sat_OUT_BITS( requant_(OUT_BITS+1)(acc[m, n], M[n], s[n]) + zy )
// za and zw are subtracted at the array's edge (the PEs then multiply 10 x 9 bits); zy is added
// after the requant's rounding, which is done one bit wider so that one saturation after the add
// gives sat(round(acc M / 2^s) + zy): a rounded value clipped to OUT_BITS + 1 bits lies at least
// 2^(OUT_BITS-1) beyond the OUT_BITS range, past any zero point's reach. Lanes past N add no zero
// point (they stay 0). ZERO_POINTS = 0 leaves the engine as it was; its zero ports are unused.
// One job computes the whole (M x N) output from operands in external memories:
//   - start_i (while idle) samples M, K, N (1..MAX_*) and a_signed; busy_o stays high until the
//     last output row is accepted, then done_o pulses for one cycle;
//   - a ROWS x COLS output-stationary systolic array (gemm_array) computes one ROWS x COLS tile
//     per K beats; tiles run n-fastest: (m0, n0) = (0, 0), (0, COLS), ... then m0 += ROWS;
//   - tile results are double-buffered in the PEs, so the drain (one row of COLS per cycle:
//     bias add, requant, output stream; gemm_out) overlaps the next tile: with no output stalls
//     the array takes a beat every cycle when K >= 2*ROWS + COLS (a tile's results are read out
//     2*ROWS + COLS cycles after its last beat issued; see docs/rtl.md);
//   - cycles_o counts the cycles of the last job, beats_o the beats issued to the array
//     (both 0 after reset, until a job starts): utilization = M*K*N / (cycles_o * ROWS * COLS).
//
// Memory ports (synchronous reads, 1 cycle latency, no handshake):
//   operand port: for rd_en_o at cycle t, the cycle t+1 must present rd_a_i lane i =
//     a[rd_m_o + i, rd_k_o] and rd_w_i lane j = w[rd_n_o + j, rd_k_o]. Lanes past M or N may hold
//     anything: the engine zeroes them.
//   parameter port: prm_*_i lane j = bias/M/s of column prm_n_o + j, at most 1 cycle after
//     prm_n_o changes (it is held for >= ROWS + COLS cycles before a read).
// Output stream (valid/ready): row out_m_o, columns out_n_o + j for lane j; lanes past N are 0.
// Requires MAX_M >= ROWS, MAX_N >= COLS, ACC_BITS >= 18 (a 17-bit product plus sign extension;
// 20 with ZERO_POINTS: a 19-bit product), OUT_BITS <= 15 with ZERO_POINTS: checked at time 0 by
// the initial block below.

`default_nettype none

module gemm #(
  parameter integer ROWS     = 8,     // PE rows: output rows per tile
  parameter integer COLS     = 8,     // PE columns: output channels per tile
  parameter integer ACC_BITS = 32,    // accumulator / bias width (int32 in the contract)
  parameter integer OUT_BITS = 8,     // requantized output width (2..16)
  parameter integer MAX_M    = 256,   // largest M (rows of a) a job may have
  parameter integer MAX_K    = 1024,  // largest K (reduction length)
  parameter integer MAX_N    = 4096,  // largest N (output channels)
  parameter integer CNT_BITS = 40,    // cycle/beat counters: 2^40 cycles = 3 hours at 100 MHz
  // Requant variant of the output stage (rtl/requant.v header): ROUNDING 0 half_up (hwvit's),
  // 1 half_away, 2 half_even (also requant=ibert), 3 floor, 4 gemmlowp; WRAP 0 saturate, 1 wrap.
  parameter integer ROUNDING = 0,
  parameter integer WRAP     = 0,
  // 1: operand and output zero points (zero_*_i, header); 0: none (the ports are unused).
  parameter integer ZERO_POINTS = 0,
  // Derived widths (override only together): M, K, N values up to MAX_* inclusive.
  parameter integer M_BITS   = $clog2(MAX_M + 1),
  parameter integer K_BITS   = $clog2(MAX_K + 1),
  parameter integer N_BITS   = $clog2(MAX_N + 1)
) (
  input  wire                     clk_i,
  input  wire                     rst_ni,       // synchronous, active low: aborts any job

  // ---- control ----
  input  wire                     start_i,      // start a job (ignored while busy_o)
  input  wire [M_BITS-1:0]        m_i,          // rows of a and of the output
  input  wire [K_BITS-1:0]        k_i,          // reduction length
  input  wire [N_BITS-1:0]        n_i,          // output channels (rows of w)
  input  wire                     a_signed_i,   // 1: a is int8; 0: a is uint8
  input  wire [7:0]               zero_a_i,     // za, signed (ZERO_POINTS = 1)
  input  wire [7:0]               zero_w_i,     // zw, signed (ZERO_POINTS = 1)
  input  wire [OUT_BITS-1:0]      zero_out_i,   // zy, signed (ZERO_POINTS = 1)
  output wire                     busy_o,
  output wire                     done_o,       // one-cycle pulse at the end of a job
  output wire [CNT_BITS-1:0]      cycles_o,     // cycles the last job was busy
  output wire [CNT_BITS-1:0]      beats_o,      // beats (k-slices of a tile) it issued

  // ---- operand read port (1-cycle latency) ----
  output wire                     rd_en_o,
  output wire [M_BITS-1:0]        rd_m_o,       // first row of the tile
  output wire [N_BITS-1:0]        rd_n_o,       // first column of the tile
  output wire [K_BITS-1:0]        rd_k_o,
  input  wire [ROWS*8-1:0]        rd_a_i,       // lane i: a[rd_m_o + i, rd_k_o]
  input  wire [COLS*8-1:0]        rd_w_i,       // lane j: w[rd_n_o + j, rd_k_o]

  // ---- per-column parameter read port ----
  output wire [N_BITS-1:0]        prm_n_o,      // first column of the tile being drained
  input  wire [COLS*ACC_BITS-1:0] prm_bias_i,   // lane j: bias[prm_n_o + j] (signed)
  input  wire [COLS*31-1:0]       prm_mult_i,   // lane j: M[prm_n_o + j] (unsigned 31)
  input  wire [COLS*6-1:0]        prm_shift_i,  // lane j: s[prm_n_o + j]

  // ---- output stream: one row of COLS results per beat ----
  output wire                     out_valid_o,
  input  wire                     out_ready_i,
  output wire [M_BITS-1:0]        out_m_o,      // output row
  output wire [N_BITS-1:0]        out_n_o,      // output column of lane 0
  output wire [COLS*ACC_BITS-1:0] out_acc_o,    // lane j: acc[out_m_o, out_n_o + j]
  output wire [COLS*OUT_BITS-1:0] out_data_o    // lane j: y[out_m_o, out_n_o + j]
);

  // ---------------------------------------------------------------- parameter checks
  // Verilog-2005 has no elaboration-time assertion: Icarus and Verilator stop at time 0,
  // yosys stops synthesis ("System task `$finish' executed").
  // verilator coverage_off
  // (the parameter checks run only on a bad parameter: no valid build can cover them)
  initial begin
    if (ROWS < 1 || COLS < 1) begin
      $display("ERROR: gemm: ROWS = %0d and COLS = %0d must be >= 1", ROWS, COLS);
      $finish;
    end
    if (MAX_M < ROWS) begin
      $display("ERROR: gemm: MAX_M = %0d must be >= ROWS = %0d", MAX_M, ROWS);
      $finish;
    end
    if (MAX_N < COLS) begin
      $display("ERROR: gemm: MAX_N = %0d must be >= COLS = %0d", MAX_N, COLS);
      $finish;
    end
    if (MAX_K < 1) begin
      $display("ERROR: gemm: MAX_K = %0d must be >= 1", MAX_K);
      $finish;
    end
    if (ACC_BITS < 18 + 2 * ZERO_POINTS) begin
      $display("ERROR: gemm: ACC_BITS = %0d must be >= %0d (%0d-bit product + sign)", ACC_BITS, 18 + 2 * ZERO_POINTS,
               17 + 2 * ZERO_POINTS);
      $finish;
    end
    if (OUT_BITS < 2 || OUT_BITS > 16 - ZERO_POINTS) begin
      $display("ERROR: gemm: OUT_BITS = %0d must be in 2..%0d", OUT_BITS, 16 - ZERO_POINTS);
      $finish;
    end
    if (ZERO_POINTS < 0 || ZERO_POINTS > 1) begin
      $display("ERROR: gemm: ZERO_POINTS = %0d must be 0 or 1", ZERO_POINTS);
      $finish;
    end
  end
  // verilator coverage_on

  localparam integer ROW_BITS = (ROWS > 1) ? $clog2(ROWS) : 1;
  // 8-bit a, sign- or zero-extended by one bit; minus za: -127..383 for uint8 a, 10 bits
  localparam integer A_BITS   = 9 + ZERO_POINTS;
  localparam integer W_BITS   = 8 + ZERO_POINTS;  // int8 w; minus zw: -255..255, 9 bits
  localparam integer RQ_BITS  = OUT_BITS + ZERO_POINTS;  // the requant's width (header)
  localparam [M_BITS-1:0]   ROWS_M   = ROWS[M_BITS-1:0];
  localparam [N_BITS-1:0]   COLS_N   = COLS[N_BITS-1:0];
  localparam [ROW_BITS-1:0] LAST_ROW = ROWS[ROW_BITS-1:0] - {{(ROW_BITS-1){1'b0}}, 1'b1};

  // ---------------------------------------------------------------- job registers
  reg                busy_q, done_q, iss_q;
  reg                sgn_q;                  // a is signed
  reg [M_BITS-1:0]   m_q;
  reg [N_BITS-1:0]   n_q;
  reg [K_BITS-1:0]   kmax_q;                 // K - 1
  reg [CNT_BITS-1:0] cycles_q, beats_q;

  // ---------------------------------------------------------------- issue: tile and k counters
  reg  [M_BITS-1:0] m0_q;                    // current tile (m0, n0), current k
  reg  [N_BITS-1:0] n0_q;
  reg  [K_BITS-1:0] k_q;
  wire [M_BITS-1:0] m_rem = m_q - m0_q;      // rows left from m0 (>= 1 while issuing)
  wire [N_BITS-1:0] n_rem = n_q - n0_q;
  // verilator coverage_off
  // (zero-extended copies, dr_next32 plus one: live bits toggle in their source, the rest are 0)
  wire [31:0]       m_rem32 = {{(32 - M_BITS){1'b0}}, m_rem};
  wire [31:0]       n_rem32 = {{(32 - N_BITS){1'b0}}, n_rem};
  // verilator coverage_on
  wire              last_k  = (k_q == kmax_q);
  wire              last_mt = (m_rem32 <= ROWS);   // last tile row
  wire              last_nt = (n_rem32 <= COLS);   // last tile of this tile row

  // Shadow (PE result registers) ownership: a tile's last beat overwrites them, so it may issue
  // only once the previous tile has been read out completely (this cycle at the latest).
  reg               sh_busy_q;
  wire              dr_done;
  wire              issue = iss_q & (~last_k | ~sh_busy_q | dr_done);

  // The tile whose results are in (or on their way to) the shadow registers.
  reg  [M_BITS-1:0] sh_m0_q, sh_mrem_q;
  reg  [N_BITS-1:0] sh_n0_q, sh_nrem_q;

  // ---------------------------------------------------------------- read latency stage
  reg               s1_valid_q, s1_last_q;
  reg  [ROWS-1:0]   s1_rmask_q;              // lane i is a row < M
  reg  [COLS-1:0]   s1_cmask_q;              // lane j is a column < N
  wire [ROWS-1:0]   rmask;
  wire [COLS-1:0]   cmask;
  wire [ROWS*A_BITS-1:0] arr_a;
  wire [COLS*W_BITS-1:0] arr_w;
  wire [ROWS*9-1:0]      a9;                 // lane i: a, sign- or zero-extended to 9 bits
  wire [ROWS*A_BITS-1:0] a_op;               // ... minus za (ZERO_POINTS = 1)
  wire [COLS*W_BITS-1:0] w_op;               // lane j: w, minus zw (ZERO_POINTS = 1)

  genvar gi;
  generate
    for (gi = 0; gi < ROWS; gi = gi + 1) begin : g_a_lane
      assign a9[gi*9 +: 9] = {sgn_q & rd_a_i[gi*8 + 7], rd_a_i[gi*8 +: 8]};
      assign rmask[gi] = (m_rem32 > gi);
      assign arr_a[gi*A_BITS +: A_BITS] = s1_rmask_q[gi] ? a_op[gi*A_BITS +: A_BITS] : {A_BITS{1'b0}};
    end
    for (gi = 0; gi < COLS; gi = gi + 1) begin : g_w_lane
      assign cmask[gi] = (n_rem32 > gi);
      assign arr_w[gi*W_BITS +: W_BITS] = s1_cmask_q[gi] ? w_op[gi*W_BITS +: W_BITS] : {W_BITS{1'b0}};
    end
  endgenerate

  // ---------------------------------------------------------------- systolic array
  wire                     fin;              // a tile's results are complete in the shadow
  reg  [ROW_BITS-1:0]      dr_row_q;
  wire [COLS*ACC_BITS-1:0] row_res;

  gemm_array #(
    .ROWS    (ROWS),
    .COLS    (COLS),
    .A_BITS  (A_BITS),
    .W_BITS  (W_BITS),
    .ACC_BITS(ACC_BITS),
    .ROW_BITS(ROW_BITS)
  ) u_array (
    .clk_i     (clk_i),
    .rst_ni    (rst_ni),
    .in_valid_i(s1_valid_q),
    .in_last_i (s1_last_q),
    .in_a_i    (arr_a),
    .in_w_i    (arr_w),
    .fin_o     (fin),
    .row_i     (dr_row_q),
    .row_res_o (row_res)
  );

  // ---------------------------------------------------------------- drain: one row per cycle
  reg                      dr_act_q;
  wire                     out_in_ready;
  wire                     out_busy;
  wire                     dr_go       = dr_act_q & out_in_ready;
  // verilator coverage_off
  // (zero-extended copies, dr_next32 plus one: live bits toggle in their source, the rest are 0)
  wire [31:0]              dr_next32   = {{(32 - ROW_BITS){1'b0}}, dr_row_q} + 32'd1;
  wire [31:0]              sh_mrem32   = {{(32 - M_BITS){1'b0}}, sh_mrem_q};
  wire [31:0]              sh_nrem32   = {{(32 - N_BITS){1'b0}}, sh_nrem_q};
  // verilator coverage_on
  wire                     dr_last_row = (dr_row_q == LAST_ROW) | (dr_next32 >= sh_mrem32);
  assign dr_done = dr_go & dr_last_row;

  // Lanes past N get zero parameters (the memories may hold anything there).
  wire [COLS*ACC_BITS-1:0] dr_bias;
  wire [COLS*31-1:0]       dr_mult;
  wire [COLS*6-1:0]        dr_shift;
  generate
    for (gi = 0; gi < COLS; gi = gi + 1) begin : g_prm_lane
      wire keep = (sh_nrem32 > gi);
      assign dr_bias[gi*ACC_BITS +: ACC_BITS] = keep ? prm_bias_i[gi*ACC_BITS +: ACC_BITS] : {ACC_BITS{1'b0}};
      assign dr_mult[gi*31 +: 31]             = keep ? prm_mult_i[gi*31 +: 31] : 31'd0;
      assign dr_shift[gi*6 +: 6]              = keep ? prm_shift_i[gi*6 +: 6] : 6'd0;
    end
  endgenerate

  wire [COLS*RQ_BITS-1:0] rq_data;

  gemm_out #(
    .COLS    (COLS),
    .ACC_BITS(ACC_BITS),
    .OUT_BITS(RQ_BITS),
    .M_BITS  (M_BITS),
    .N_BITS  (N_BITS),
    .ROUNDING(ROUNDING),
    .WRAP    (WRAP)
  ) u_out (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .in_valid_i (dr_act_q),
    .in_ready_o (out_in_ready),
    .in_res_i   (row_res),
    .in_bias_i  (dr_bias),
    .in_mult_i  (dr_mult),
    .in_shift_i (dr_shift),
    .in_m_i     (sh_m0_q + {{(M_BITS - ROW_BITS){1'b0}}, dr_row_q}),
    .in_n_i     (sh_n0_q),
    .busy_o     (out_busy),
    .out_valid_o(out_valid_o),
    .out_ready_i(out_ready_i),
    .out_m_o    (out_m_o),
    .out_n_o    (out_n_o),
    .out_acc_o  (out_acc_o),
    .out_data_o (rq_data)
  );

  // ---------------------------------------------------------------- zero points
  generate
    if (ZERO_POINTS == 1) begin : g_zero
      // the job's zero points, sampled with M, K, N at start_i
      reg [7:0]          za_q, za_d, zw_q, zw_d;
      reg [OUT_BITS-1:0] zo_q, zo_d;
      always @* begin
        za_d = za_q;
        zw_d = zw_q;
        zo_d = zo_q;
        if (start_i & ~busy_q) begin
          za_d = zero_a_i;
          zw_d = zero_w_i;
          zo_d = zero_out_i;
        end
      end
      always @(posedge clk_i) begin
        if (!rst_ni) begin
          za_q <= 8'd0;
          zw_q <= 8'd0;
          zo_q <= {OUT_BITS{1'b0}};
        end else begin
          za_q <= za_d;
          zw_q <= zw_d;
          zo_q <= zo_d;
        end
      end
      // operands: a - za in 10 bits (-127..383 for uint8 a), w - zw in 9 (-255..255)
      for (gi = 0; gi < ROWS; gi = gi + 1) begin : g_a
        assign a_op[gi*A_BITS +: A_BITS] = {a9[gi*9 + 8], a9[gi*9 +: 9]} - {{2{za_q[7]}}, za_q};
      end
      for (gi = 0; gi < COLS; gi = gi + 1) begin : g_w
        assign w_op[gi*W_BITS +: W_BITS] = {rd_w_i[gi*8 + 7], rd_w_i[gi*8 +: 8]} - {zw_q[7], zw_q};
      end
      // output: the requant's RQ_BITS-wide result plus zy, saturated to OUT_BITS (header)
      // verilator coverage_off
      // (zero-extended copies: live bits toggle in their source, the rest are 0)
      wire [31:0] out_n32 = {{(32 - N_BITS){1'b0}}, out_n_o};
      wire [31:0] n32     = {{(32 - N_BITS){1'b0}}, n_q};
      // verilator coverage_on
      for (gi = 0; gi < COLS; gi = gi + 1) begin : g_y
        wire             live = (out_n32 + gi < n32);  // lanes past N add no zero point: they stay 0
        wire [RQ_BITS:0] r    = {rq_data[gi*RQ_BITS + RQ_BITS - 1], rq_data[gi*RQ_BITS +: RQ_BITS]};
        wire [RQ_BITS:0] z    = live ? {{2{zo_q[OUT_BITS-1]}}, zo_q} : {(RQ_BITS + 1){1'b0}};
        round_sat #(
          .IN_BITS (RQ_BITS + 1),
          .OUT_BITS(OUT_BITS)
        ) u_sat (
          .v_i    (r + z),
          .shift_i(6'd0),
          .y_o    (out_data_o[gi*OUT_BITS +: OUT_BITS])
        );
      end
    end else begin : g_plain
      assign a_op       = a9;
      assign w_op       = rd_w_i;
      assign out_data_o = rq_data;
      wire unused_zero = ^{zero_a_i, zero_w_i, zero_out_i};  // no zero points in this build
    end
  endgenerate

  // ---------------------------------------------------------------- registers
  wire idle = ~iss_q & ~sh_busy_q & ~out_busy;  // every issued tile has left the engine

  // Next values of the registers above (docs/rtl.md "Next state").
  reg                 busy_d;
  reg                 done_d;
  reg                 iss_d;
  reg                 sgn_d;
  reg [M_BITS-1:0]    m_d;
  reg [N_BITS-1:0]    n_d;
  reg [K_BITS-1:0]    kmax_d;
  reg [CNT_BITS-1:0]  cycles_d;
  reg [CNT_BITS-1:0]  beats_d;
  reg [M_BITS-1:0]    m0_d;
  reg [N_BITS-1:0]    n0_d;
  reg [K_BITS-1:0]    k_d;
  reg                 sh_busy_d;
  reg [M_BITS-1:0]    sh_m0_d;
  reg [M_BITS-1:0]    sh_mrem_d;
  reg [N_BITS-1:0]    sh_n0_d;
  reg [N_BITS-1:0]    sh_nrem_d;
  reg                 s1_valid_d;
  reg                 s1_last_d;
  reg [ROWS-1:0]      s1_rmask_d;
  reg [COLS-1:0]      s1_cmask_d;
  reg                 dr_act_d;
  reg [ROW_BITS-1:0]  dr_row_d;

  // ---------------------------------------------------------------- next state
  always @* begin
    busy_d     = busy_q;
    done_d     = done_q;
    iss_d      = iss_q;
    sgn_d      = sgn_q;
    m_d        = m_q;
    n_d        = n_q;
    kmax_d     = kmax_q;
    cycles_d   = cycles_q;
    beats_d    = beats_q;
    m0_d       = m0_q;
    n0_d       = n0_q;
    k_d        = k_q;
    sh_busy_d  = sh_busy_q;
    sh_m0_d    = sh_m0_q;
    sh_mrem_d  = sh_mrem_q;
    sh_n0_d    = sh_n0_q;
    sh_nrem_d  = sh_nrem_q;
    s1_valid_d = s1_valid_q;
    s1_last_d  = s1_last_q;
    s1_rmask_d = s1_rmask_q;
    s1_cmask_d = s1_cmask_q;
    dr_act_d   = dr_act_q;
    dr_row_d   = dr_row_q;

    // -- control
    done_d = 1'b0;
    if (start_i & ~busy_q) begin
      busy_d   = 1'b1;
      // A job with a zero dimension has no tiles: it ends at once.
      iss_d    = (m_i != {M_BITS{1'b0}}) & (k_i != {K_BITS{1'b0}}) & (n_i != {N_BITS{1'b0}});
      sgn_d    = a_signed_i;
      m_d      = m_i;
      n_d      = n_i;
      kmax_d   = k_i - {{(K_BITS-1){1'b0}}, 1'b1};
      cycles_d = {CNT_BITS{1'b0}};
      beats_d  = {CNT_BITS{1'b0}};
      m0_d     = {M_BITS{1'b0}};
      n0_d     = {N_BITS{1'b0}};
      k_d      = {K_BITS{1'b0}};
    end else if (busy_q) begin
      cycles_d = cycles_q + {{(CNT_BITS-1){1'b0}}, 1'b1};
      if (idle) begin
        busy_d = 1'b0;
        done_d = 1'b1;
      end
    end

    // -- issue one beat: a k-slice of tile (m0, n0)
    if (issue) begin
      beats_d = beats_q + {{(CNT_BITS-1){1'b0}}, 1'b1};
      if (last_k) begin
        k_d = {K_BITS{1'b0}};
        if (last_nt) begin
          n0_d = {N_BITS{1'b0}};
          if (last_mt) iss_d = 1'b0;
          else         m0_d  = m0_q + ROWS_M;
        end else begin
          n0_d = n0_q + COLS_N;
        end
      end else begin
        k_d = k_q + {{(K_BITS-1){1'b0}}, 1'b1};
      end
    end
    s1_valid_d = issue;
    s1_last_d  = issue & last_k;
    s1_rmask_d = rmask;
    s1_cmask_d = cmask;

    // -- drain: read the shadow row by row after the array reports the tile complete
    if (fin) begin
      dr_act_d = 1'b1;
      dr_row_d = {ROW_BITS{1'b0}};
    end else if (dr_go) begin
      dr_row_d = dr_row_q + {{(ROW_BITS-1){1'b0}}, 1'b1};
      if (dr_last_row) dr_act_d = 1'b0;
    end

    // -- shadow ownership: released by the drain's last read, taken by a tile's last beat
    if (dr_done) sh_busy_d = 1'b0;
    if (issue & last_k) begin
      sh_busy_d = 1'b1;
      sh_m0_d   = m0_q;
      sh_mrem_d = m_rem;
      sh_n0_d   = n0_q;
      sh_nrem_d = n_rem;
    end
  end

  // ---------------------------------------------------------------- registers
  always @(posedge clk_i) begin
    if (!rst_ni) begin
      busy_q     <= 1'b0;
      done_q     <= 1'b0;
      iss_q      <= 1'b0;
      sgn_q      <= 1'b0;
      m_q        <= {M_BITS{1'b0}};
      n_q        <= {N_BITS{1'b0}};
      kmax_q     <= {K_BITS{1'b0}};
      cycles_q   <= {CNT_BITS{1'b0}};
      beats_q    <= {CNT_BITS{1'b0}};
      m0_q       <= {M_BITS{1'b0}};
      n0_q       <= {N_BITS{1'b0}};
      k_q        <= {K_BITS{1'b0}};
      sh_busy_q  <= 1'b0;
      sh_m0_q    <= {M_BITS{1'b0}};
      sh_mrem_q  <= {M_BITS{1'b0}};
      sh_n0_q    <= {N_BITS{1'b0}};
      sh_nrem_q  <= {N_BITS{1'b0}};
      s1_valid_q <= 1'b0;
      s1_last_q  <= 1'b0;
      s1_rmask_q <= {ROWS{1'b0}};
      s1_cmask_q <= {COLS{1'b0}};
      dr_act_q   <= 1'b0;
      dr_row_q   <= {ROW_BITS{1'b0}};
    end else begin
      busy_q     <= busy_d;
      done_q     <= done_d;
      iss_q      <= iss_d;
      sgn_q      <= sgn_d;
      m_q        <= m_d;
      n_q        <= n_d;
      kmax_q     <= kmax_d;
      cycles_q   <= cycles_d;
      beats_q    <= beats_d;
      m0_q       <= m0_d;
      n0_q       <= n0_d;
      k_q        <= k_d;
      sh_busy_q  <= sh_busy_d;
      sh_m0_q    <= sh_m0_d;
      sh_mrem_q  <= sh_mrem_d;
      sh_n0_q    <= sh_n0_d;
      sh_nrem_q  <= sh_nrem_d;
      s1_valid_q <= s1_valid_d;
      s1_last_q  <= s1_last_d;
      s1_rmask_q <= s1_rmask_d;
      s1_cmask_q <= s1_cmask_d;
      dr_act_q   <= dr_act_d;
      dr_row_q   <= dr_row_d;
    end
  end

  assign busy_o   = busy_q;
  assign done_o   = done_q;
  assign cycles_o = cycles_q;
  assign beats_o  = beats_q;
  assign rd_en_o  = issue;
  assign rd_m_o   = m0_q;
  assign rd_n_o   = n0_q;
  assign rd_k_o   = k_q;
  assign prm_n_o  = sh_n0_q;

endmodule

`default_nettype wire
