// vit_core_gemm: the GEMM engine (rtl/gemm.v, unchanged) with the core's operand addressing.
//
//   a[m, k] = act[a_base + m*a_rs + k*a_ks]                    (ROWS read lanes)
//   w[n, k] = (w_act ? act : wgt)[w_base + n*w_rs + k*w_ks]    (COLS read lanes)
//   bias/M/s of column n = prm[p_base + n*p_stride]           (p_stride 0: one per tensor)
//   y[m, n] -> act[d_base + m*d_rs + n*d_cs]                    (COLS write lanes)
// Strided and transposed reads give Q.K^T (w = K rows of the fused qkv buffer), P.V (w = V^T:
// w_rs = 1, w_ks = row pitch) and per-head slices without copies; writes land in any 2-D slice
// (the heads' context columns). The parameter word is {bias[31:0], M[30:0], 3'b0, s[5:0]}.
// Lane addresses are the tile origin's address plus a constant multiple of the stride.

`default_nettype none

module vit_core_gemm #(
  parameter integer ROWS     = 8,
  parameter integer COLS     = 8,
  parameter integer MAX_M    = 256,
  parameter integer MAX_K    = 4096,
  parameter integer MAX_N    = 4096,
  parameter integer AAW      = 16,   // scratchpad address width
  parameter integer WAW      = 16,   // weight memory address width
  parameter integer PAW      = 12,   // parameter memory address width
  parameter integer CNT_BITS = 40,
  parameter integer ROUNDING = 0,    // the requant's rounding (rtl/requant.v): 0 half_up, 2 half_even
  parameter integer ZERO_POINTS = 0, // 1: zeros_i's za, zw, zy (rtl/gemm.v ZERO_POINTS); 0: unread
  parameter integer M_BITS   = $clog2(MAX_M + 1),
  parameter integer K_BITS   = $clog2(MAX_K + 1),
  parameter integer N_BITS   = $clog2(MAX_N + 1)
) (
  input  wire                 clk_i,
  input  wire                 rst_ni,
  input  wire                 start_i,
  input  wire [31:0]          m_i,
  input  wire [31:0]          k_i,
  input  wire [31:0]          n_i,
  input  wire                 a_signed_i,
  input  wire                 w_act_i,     // w from the scratchpad (Q.K^T, P.V) instead of wgt
  input  wire [23:0]          zeros_i,     // {zy, zw, za}, signed (ZERO_POINTS = 1)
  input  wire [95:0]          a_gen_i,     // {k stride, m stride, base}
  input  wire [95:0]          w_gen_i,     // {k stride, n stride, base}
  input  wire [95:0]          d_gen_i,     // {n stride, m stride, base}
  input  wire [63:0]          p_gen_i,     // {n stride, base}
  output wire                 done_o,
  output wire [CNT_BITS-1:0]  beats_o,

  output wire [ROWS*AAW-1:0]  act_a_addr_o,
  input  wire [ROWS*8-1:0]    act_a_data_i,
  output wire [COLS*AAW-1:0]  act_w_addr_o,
  input  wire [COLS*8-1:0]    act_w_data_i,
  output wire [COLS*WAW-1:0]  wgt_addr_o,
  input  wire [COLS*8-1:0]    wgt_data_i,
  output wire [COLS*PAW-1:0]  prm_addr_o,
  input  wire [COLS*72-1:0]   prm_data_i,
  output wire [COLS-1:0]      wr_en_o,
  output wire [COLS*AAW-1:0]  wr_addr_o,
  output wire [COLS*8-1:0]    wr_data_o
);

  wire                     busy_unused, rd_en_unused;
  wire [CNT_BITS-1:0]      cycles_unused;
  wire [M_BITS-1:0]        rd_m, out_m;
  wire [N_BITS-1:0]        rd_n, out_n, prm_n;
  wire [K_BITS-1:0]        rd_k;
  wire [COLS*32-1:0]       bias, acc_unused;
  wire [COLS*31-1:0]       mult;
  wire [COLS*6-1:0]        shift;
  wire                     out_valid;
  wire [COLS*8-1:0]        out_data;

  gemm #(
    .ROWS(ROWS), .COLS(COLS), .ACC_BITS(32), .OUT_BITS(8),
    .MAX_M(MAX_M), .MAX_K(MAX_K), .MAX_N(MAX_N), .CNT_BITS(CNT_BITS), .ROUNDING(ROUNDING),
    .ZERO_POINTS(ZERO_POINTS)
  ) u_gemm (
    .clk_i(clk_i), .rst_ni(rst_ni),
    .start_i(start_i), .m_i(m_i[M_BITS-1:0]), .k_i(k_i[K_BITS-1:0]), .n_i(n_i[N_BITS-1:0]),
    .a_signed_i(a_signed_i), .zero_a_i(zeros_i[7:0]), .zero_w_i(zeros_i[15:8]), .zero_out_i(zeros_i[23:16]),
    .busy_o(busy_unused), .done_o(done_o), .cycles_o(cycles_unused),
    .beats_o(beats_o),
    .rd_en_o(rd_en_unused), .rd_m_o(rd_m), .rd_n_o(rd_n), .rd_k_o(rd_k),
    .rd_a_i(act_a_data_i), .rd_w_i(w_act_i ? act_w_data_i : wgt_data_i),
    .prm_n_o(prm_n), .prm_bias_i(bias), .prm_mult_i(mult), .prm_shift_i(shift),
    .out_valid_o(out_valid), .out_ready_i(1'b1), .out_m_o(out_m), .out_n_o(out_n),
    .out_acc_o(acc_unused), .out_data_o(out_data)
  );

  wire [31:0] m32  = {{(32 - M_BITS){1'b0}}, rd_m};
  wire [31:0] n32  = {{(32 - N_BITS){1'b0}}, rd_n};
  wire [31:0] k32  = {{(32 - K_BITS){1'b0}}, rd_k};
  wire [31:0] pn32 = {{(32 - N_BITS){1'b0}}, prm_n};
  wire [31:0] om32 = {{(32 - M_BITS){1'b0}}, out_m};
  wire [31:0] on32 = {{(32 - N_BITS){1'b0}}, out_n};
  wire [31:0] n_eff = {{(32 - N_BITS){1'b0}}, n_i[N_BITS-1:0]};  // N as the engine reads it
  wire [31:0] a_org = a_gen_i[31:0] + m32 * a_gen_i[63:32] + k32 * a_gen_i[95:64];
  wire [31:0] w_org = w_gen_i[31:0] + n32 * w_gen_i[63:32] + k32 * w_gen_i[95:64];
  wire [31:0] p_org = p_gen_i[31:0] + pn32 * p_gen_i[63:32];
  wire [31:0] d_org = d_gen_i[31:0] + om32 * d_gen_i[63:32] + on32 * d_gen_i[95:64];

  genvar gi;
  generate
    for (gi = 0; gi < ROWS; gi = gi + 1) begin : g_a
      wire [31:0] addr = a_org + gi * a_gen_i[63:32];
      assign act_a_addr_o[gi*AAW +: AAW] = addr[AAW-1:0];
      wire unused_row = ^addr[31:AAW];
    end
    for (gi = 0; gi < COLS; gi = gi + 1) begin : g_c
      wire [31:0] w_addr = w_org + gi * w_gen_i[63:32];
      wire [31:0] p_addr = p_org + gi * p_gen_i[63:32];
      wire [31:0] d_addr = d_org + gi * d_gen_i[95:64];
      wire [31:0] col    = on32 + gi;
      wire [71:0] word   = prm_data_i[gi*72 +: 72];
      assign act_w_addr_o[gi*AAW +: AAW] = w_addr[AAW-1:0];
      assign wgt_addr_o[gi*WAW +: WAW]   = w_addr[WAW-1:0];
      assign prm_addr_o[gi*PAW +: PAW]   = p_addr[PAW-1:0];
      assign bias[gi*32 +: 32]           = word[71:40];
      assign mult[gi*31 +: 31]           = word[39:9];
      assign shift[gi*6 +: 6]            = word[5:0];
      assign wr_en_o[gi]                 = out_valid & (col < n_eff);  // the engine's N, not past it
      assign wr_addr_o[gi*AAW +: AAW]    = d_addr[AAW-1:0];
      assign wr_data_o[gi*8 +: 8]        = out_data[gi*8 +: 8];
      wire unused_lane = ^{w_addr[31:AAW], w_addr[31:WAW], p_addr[31:PAW], d_addr[31:AAW], word[8:6]};
    end
  endgenerate

  wire unused_gemm = ^{busy_unused, rd_en_unused, cycles_unused, acc_unused, m_i[31:M_BITS], k_i[31:K_BITS],
                       n_i[31:N_BITS]};

endmodule

`default_nettype wire
