// gemm_out: the GEMM engine's output path for one row of COLS accumulators per beat.
//
//   acc[j] = res[j] + bias[j]                      (int32, exact: docs/arithmetic.md "gemm")
//   y[j]   = requant(acc[j], M[j], s[j], OUT_BITS)  (COLS rtl/requant.v instances in parallel)
//
// Stage 0 registers the biased accumulators with their multipliers and shifts, then the
// requantizers (2-cycle pipelines) produce y. The accumulators also leave the engine (out_acc_o,
// so testbenches check acc and y bit for bit); a small FIFO carries them, with the row/column
// indices, beside the requantizers: a beat enters the FIFO when it enters the requantizers and
// leaves when the requantized row is accepted downstream, so the two stay aligned under any
// pattern of stalls. All COLS requantizers see identical handshakes, so they advance in lockstep.

`default_nettype none

module gemm_out #(
  parameter integer COLS     = 8,   // lanes (output channels) per beat
  parameter integer ACC_BITS = 32,  // accumulator and bias width (signed)
  parameter integer OUT_BITS = 8,   // requantized output width (signed)
  parameter integer M_BITS   = 9,   // width of the row index carried with a beat
  parameter integer N_BITS   = 13,  // width of the column index carried with a beat
  parameter integer ROUNDING = 0,   // requant variant (rtl/requant.v): 0 half_up .. 4 gemmlowp
  parameter integer WRAP     = 0    // requant overflow: 0 saturate, 1 wrap
) (
  input  wire                     clk_i,
  input  wire                     rst_ni,  // synchronous, active low: empties the pipeline

  // ---- input stream: one row of raw accumulators and its per-column parameters ----
  input  wire                     in_valid_i,
  output wire                     in_ready_o,
  input  wire [COLS*ACC_BITS-1:0] in_res_i,    // sum_k a*w, lane j at [j*ACC_BITS +: ACC_BITS]
  input  wire [COLS*ACC_BITS-1:0] in_bias_i,   // bias of lane j (signed)
  input  wire [COLS*31-1:0]       in_mult_i,   // requant multiplier M of lane j (unsigned 31)
  input  wire [COLS*6-1:0]        in_shift_i,  // requant shift s of lane j
  input  wire [M_BITS-1:0]        in_m_i,      // output row of this beat
  input  wire [N_BITS-1:0]        in_n_i,      // output column of lane 0
  output wire                     busy_o,      // a beat is somewhere inside

  // ---- output stream: the same row, biased and requantized ----
  output wire                     out_valid_o,
  input  wire                     out_ready_i,
  output wire [M_BITS-1:0]        out_m_o,
  output wire [N_BITS-1:0]        out_n_o,
  output wire [COLS*ACC_BITS-1:0] out_acc_o,   // acc = res + bias (int32)
  output wire [COLS*OUT_BITS-1:0] out_data_o   // y = requant(acc) (signed OUT_BITS)
);

  // 4 entries: the requantizers hold at most 2 beats, so the FIFO never throttles them.
  localparam integer DEPTH = 4;
  localparam integer EW    = COLS * ACC_BITS + M_BITS + N_BITS;  // FIFO entry {acc, m, n}

  // ---------------------------------------------------------------- stage 0: bias add
  reg                     st_valid_q;
  reg [COLS*ACC_BITS-1:0] st_acc_q;
  reg [COLS*31-1:0]       st_mult_q;
  reg [COLS*6-1:0]        st_shift_q;
  reg [M_BITS-1:0]        st_m_q;
  reg [N_BITS-1:0]        st_n_q;

  wire [COLS-1:0] rq_in_ready;
  wire [COLS-1:0] rq_out_valid;
  reg  [2:0]      cnt_q;                         // FIFO occupancy, 0..DEPTH
  wire            fifo_full = (cnt_q == 3'd4);
  // A beat enters the requantizers when all are ready (they are identical) and the FIFO has room.
  wire            go   = st_valid_q & (&rq_in_ready) & ~fifo_full;
  wire            pop  = out_valid_o & out_ready_i;
  wire            load = ~st_valid_q | go;

  assign in_ready_o = load;

  wire [COLS*ACC_BITS-1:0] acc_d;
  genvar j;
  generate
    for (j = 0; j < COLS; j = j + 1) begin : g_lane
      assign acc_d[j*ACC_BITS +: ACC_BITS] = in_res_i[j*ACC_BITS +: ACC_BITS]
                                             + in_bias_i[j*ACC_BITS +: ACC_BITS];
      requant #(
        .ACC_BITS(ACC_BITS),
        .OUT_BITS(OUT_BITS),
        .ROUNDING(ROUNDING),
        .WRAP    (WRAP)
      ) u_requant (
        .clk_i      (clk_i),
        .rst_ni     (rst_ni),
        .in_valid_i (go),
        .in_ready_o (rq_in_ready[j]),
        .in_acc_i   (st_acc_q[j*ACC_BITS +: ACC_BITS]),
        .in_mult_i  (st_mult_q[j*31 +: 31]),
        .in_shift_i (st_shift_q[j*6 +: 6]),
        .out_valid_o(rq_out_valid[j]),
        .out_ready_i(out_ready_i),
        .out_data_o (out_data_o[j*OUT_BITS +: OUT_BITS])
      );
    end
  endgenerate

  // ---------------------------------------------------------------- sideband FIFO
  reg [EW-1:0] fifo_q [0:DEPTH-1];
  reg [1:0]    wp_q, rp_q;
  reg [1:0]    wp_d, rp_d;
  reg [2:0]    cnt_d;
  reg          st_valid_d;
  reg [COLS*ACC_BITS-1:0] st_acc_d;
  reg [COLS*31-1:0]       st_mult_d;
  reg [COLS*6-1:0]        st_shift_d;
  reg [M_BITS-1:0]        st_m_d;
  reg [N_BITS-1:0]        st_n_d;

  // ---------------------------------------------------------------- next state
  always @* begin
    st_valid_d = st_valid_q;
    st_acc_d   = st_acc_q;
    st_mult_d  = st_mult_q;
    st_shift_d = st_shift_q;
    st_m_d     = st_m_q;
    st_n_d     = st_n_q;
    wp_d       = wp_q;
    rp_d       = rp_q;
    cnt_d      = cnt_q;
    if (load) begin
      st_valid_d = in_valid_i;
      if (in_valid_i) begin
        st_acc_d   = acc_d;
        st_mult_d  = in_mult_i;
        st_shift_d = in_shift_i;
        st_m_d     = in_m_i;
        st_n_d     = in_n_i;
      end
    end
    if (go)             wp_d  = wp_q + 2'd1;
    if (pop)            rp_d  = rp_q + 2'd1;
    if (go & ~pop)      cnt_d = cnt_q + 3'd1;
    else if (pop & ~go) cnt_d = cnt_q - 3'd1;
  end

  // ---------------------------------------------------------------- registers
  always @(posedge clk_i) begin
    if (!rst_ni) begin
      st_valid_q <= 1'b0;
      st_acc_q   <= {(COLS*ACC_BITS){1'b0}};
      st_mult_q  <= {(COLS*31){1'b0}};
      st_shift_q <= {(COLS*6){1'b0}};
      st_m_q     <= {M_BITS{1'b0}};
      st_n_q     <= {N_BITS{1'b0}};
      wp_q       <= 2'd0;
      rp_q       <= 2'd0;
      cnt_q      <= 3'd0;
    end else begin
      st_valid_q <= st_valid_d;
      st_acc_q   <= st_acc_d;
      st_mult_q  <= st_mult_d;
      st_shift_q <= st_shift_d;
      st_m_q     <= st_m_d;
      st_n_q     <= st_n_d;
      wp_q       <= wp_d;
      rp_q       <= rp_d;
      cnt_q      <= cnt_d;
    end
  end

  // FIFO storage: the write port stays in its own clocked block (the RAM exception of
  // docs/rtl.md), so yosys keeps it a memory ($mem_v2).
  integer e;
  always @(posedge clk_i) begin
    if (!rst_ni) begin
      for (e = 0; e < DEPTH; e = e + 1) fifo_q[e] <= {EW{1'b0}};
    end else if (go) begin
      fifo_q[wp_q] <= {st_acc_q, st_m_q, st_n_q};
    end
  end

  wire [EW-1:0] head = fifo_q[rp_q];
  assign busy_o      = st_valid_q | (cnt_q != 3'd0);
  assign out_valid_o = &rq_out_valid;
  assign out_acc_o   = head[EW-1 -: COLS*ACC_BITS];
  assign out_m_o     = head[N_BITS +: M_BITS];
  assign out_n_o     = head[N_BITS-1:0];

endmodule

`default_nettype wire
