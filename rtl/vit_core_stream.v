// vit_core_stream: the core's stream engine: row and element-wise operations over the scratchpad.
//
// One job reads elements a (and b) at the addresses of two vit_core_agu generators, feeds them
// to one unit and writes each unit output at the address of a third generator (same loop counts,
// its own strides). Units (unit_i): 0 copy, 1 gelu, 2 residual_add (a + b), 3 softmax (rows of
// n0 elements), 4 layernorm (rows of n0 channels). The blocks are the existing rtl/ blocks, not
// changed; their tables (exp table, GELU table, gamma/beta) are written through tbl_* by the
// controller's LOAD instruction.
//
// Read side: a read issues when the 4-entry FIFO behind the scratchpad (1-cycle read latency)
// will have room: occupancy + in-flight <= 2 keeps one read per cycle in steady state and never
// overflows when the unit stalls (softmax and layernorm take a whole row before they output).
// Write side: the writer is always ready, so the units never see back-pressure. done_o pulses
// in the cycle after the last element is written.

`default_nettype none

module vit_core_stream #(
  parameter integer AW      = 16,   // scratchpad address width
  parameter integer MAX_ROW = 256,  // longest softmax row (tokens)
  parameter integer MAX_C   = 1024, // longest layernorm row (channels)
  parameter integer ADD_ROUNDING = 0, // residual_add's rounding (rtl/residual_add.v): 0 half_up, 2 half_even
  parameter integer SOFTMAX_BITS = 8, // probability width (rtl/softmax.v OUT_BITS, 1..8), zero-extended
  parameter integer ZERO_POINTS  = 0  // 1: residual_add's zero points from zeros_i; 0: unread
) (
  input  wire          clk_i,
  input  wire          rst_ni,

  input  wire          start_i,
  input  wire [2:0]    unit_i,
  input  wire [127:0]  n_i,         // n0..n3, 32 bits each (n0 innermost, also the row length)
  input  wire [159:0]  a_gen_i,     // {s3, s2, s1, s0, base} of source a
  input  wire [159:0]  b_gen_i,     // the same for source b (residual_add)
  input  wire [159:0]  d_gen_i,     // the same for the destination
  input  wire [30:0]   mult_a_i,    // residual_add Ma; layernorm M
  input  wire [30:0]   mult_b_i,    // residual_add Mb
  input  wire [5:0]    shift_i,     // residual_add / layernorm shift
  input  wire [23:0]   zeros_i,     // residual_add {zy, zb, za}, signed (ZERO_POINTS = 1)
  input  wire [61:0]   eps_i,       // layernorm eps_int
  output wire          done_o,

  // table writes (controller LOAD): unit, entry index, data (layout: docs/core.md)
  input  wire          tbl_we_i,
  input  wire [2:0]    tbl_unit_i,
  input  wire [15:0]   tbl_addr_i,
  input  wire [45:0]   tbl_data_i,

  // scratchpad: two read ports (data one cycle after the address), one write port
  output wire [AW-1:0] rd_a_addr_o,
  input  wire [7:0]    rd_a_data_i,
  output wire [AW-1:0] rd_b_addr_o,
  input  wire [7:0]    rd_b_data_i,
  output wire          wr_en_o,
  output wire [AW-1:0] wr_addr_o,
  output wire [7:0]    wr_data_o
);

  // unit 0 is copy (the default case below)
  localparam [2:0] U_GELU = 3'd1, U_ADD = 3'd2, U_SMAX = 3'd3, U_LN = 3'd4;
  localparam integer RL_W = $clog2(MAX_ROW + 1);
  localparam integer C_W  = $clog2(MAX_C + 1);
  localparam integer CA_W = $clog2(MAX_C);

  // ---------------------------------------------------------------- read side
  reg        rd_act_q, pend_q, wr_act_q, done_q;
  reg [2:0]  cnt_q;                      // FIFO occupancy 0..4
  reg [15:0] fifo_q [0:3];               // {b, a}
  reg [1:0]  wp_q, rp_q;
  wire [31:0] a_addr, b_addr, d_addr;
  wire        a_last, b_last_unused, d_last;
  wire        issue = rd_act_q & ({1'b0, cnt_q} + {3'd0, pend_q} <= 4'd2);

  vit_core_agu u_agu_a (
    .clk_i(clk_i), .rst_ni(rst_ni), .init_i(start_i), .step_i(issue),
    .n0_i(n_i[31:0]), .n1_i(n_i[63:32]), .n2_i(n_i[95:64]), .n3_i(n_i[127:96]),
    .base_i(a_gen_i[31:0]), .s0_i(a_gen_i[63:32]), .s1_i(a_gen_i[95:64]), .s2_i(a_gen_i[127:96]),
    .s3_i(a_gen_i[159:128]), .addr_o(a_addr), .last_o(a_last)
  );
  vit_core_agu u_agu_b (
    .clk_i(clk_i), .rst_ni(rst_ni), .init_i(start_i), .step_i(issue),
    .n0_i(n_i[31:0]), .n1_i(n_i[63:32]), .n2_i(n_i[95:64]), .n3_i(n_i[127:96]),
    .base_i(b_gen_i[31:0]), .s0_i(b_gen_i[63:32]), .s1_i(b_gen_i[95:64]), .s2_i(b_gen_i[127:96]),
    .s3_i(b_gen_i[159:128]), .addr_o(b_addr), .last_o(b_last_unused)
  );

  wire [15:0] head = fifo_q[rp_q];
  wire        head_valid = (cnt_q != 3'd0);

  // ---------------------------------------------------------------- units
  wire       gelu_ready, add_ready, smax_ready, ln_ready;
  wire       gelu_ov, add_ov, smax_ov, ln_ov;
  wire [7:0] gelu_y, add_y, smax_y, ln_y;
  wire       smax_last_unused, ln_last_unused;
  reg        unit_ready;
  reg        out_valid;
  reg  [7:0] out_data;
  wire       consume = head_valid & unit_ready;

  always @(*) begin
    case (unit_i)
      U_GELU:  begin unit_ready = gelu_ready; out_valid = gelu_ov; out_data = gelu_y; end
      U_ADD:   begin unit_ready = add_ready;  out_valid = add_ov;  out_data = add_y;  end
      U_SMAX:  begin unit_ready = smax_ready; out_valid = smax_ov; out_data = smax_y; end
      U_LN:    begin unit_ready = ln_ready;   out_valid = ln_ov;   out_data = ln_y;   end
      default: begin unit_ready = 1'b1;       out_valid = head_valid; out_data = head[7:0]; end
    endcase
  end

  gelu #(.IN_BITS(8), .OUT_BITS(8)) u_gelu (
    .clk_i(clk_i), .rst_ni(rst_ni),
    .tbl_we_i(tbl_we_i & (tbl_unit_i == U_GELU)), .tbl_addr_i(tbl_addr_i[7:0]), .tbl_data_i(tbl_data_i[7:0]),
    .in_valid_i(head_valid & (unit_i == U_GELU)), .in_ready_o(gelu_ready), .in_data_i(head[7:0]),
    .out_valid_o(gelu_ov), .out_ready_i(1'b1), .out_data_o(gelu_y)
  );

  residual_add #(.IN_BITS(8), .OUT_BITS(8), .ROUNDING(ADD_ROUNDING), .ZERO_POINTS(ZERO_POINTS)) u_add (
    .clk_i(clk_i), .rst_ni(rst_ni),
    .cfg_zero_a_i(zeros_i[7:0]), .cfg_zero_b_i(zeros_i[15:8]), .cfg_zero_out_i(zeros_i[23:16]),
    .cfg_mult_a_i(mult_a_i), .cfg_mult_b_i(mult_b_i), .cfg_shift_i(shift_i),
    .in_valid_i(head_valid & (unit_i == U_ADD)), .in_ready_o(add_ready),
    .in_a_i(head[7:0]), .in_b_i(head[15:8]),
    .out_valid_o(add_ov), .out_ready_i(1'b1), .out_data_o(add_y)
  );

  wire [SOFTMAX_BITS-1:0] smax_p;
  generate
    if (SOFTMAX_BITS < 8) begin : g_smax_narrow
      assign smax_y = {{(8 - SOFTMAX_BITS){1'b0}}, smax_p};
    end else begin : g_smax_byte
      assign smax_y = smax_p;
    end
  endgenerate

  softmax #(.MAX_N(MAX_ROW), .IN_BITS(8), .OUT_BITS(SOFTMAX_BITS), .ENTRIES(256), .EXP_FRAC(23)) u_smax (
    .clk_i(clk_i), .rst_ni(rst_ni),
    .tbl_we_i(tbl_we_i & (tbl_unit_i == U_SMAX)), .tbl_addr_i(tbl_addr_i[7:0]), .tbl_data_i(tbl_data_i[23:0]),
    .row_len_i(n_i[RL_W-1:0]),
    .in_valid_i(head_valid & (unit_i == U_SMAX)), .in_ready_o(smax_ready), .in_data_i(head[7:0]),
    .out_valid_o(smax_ov), .out_ready_i(1'b1), .out_data_o(smax_p), .out_last_o(smax_last_unused)
  );

  layernorm #(.MAX_C(MAX_C), .OUT_BITS(8)) u_ln (
    .clk_i(clk_i), .rst_ni(rst_ni), .prm_alpha_i(2'd0),
    .prm_we_i(tbl_we_i & (tbl_unit_i == U_LN)), .prm_addr_i(tbl_addr_i[CA_W-1:0]),
    .prm_gamma_i(tbl_data_i[14:0]), .prm_beta_i(tbl_data_i[45:15]),
    .cfg_c_i(n_i[C_W-1:0]), .cfg_eps_i(eps_i), .cfg_mult_i(mult_a_i), .cfg_shift_i(shift_i),
    .in_valid_i(head_valid & (unit_i == U_LN)), .in_ready_o(ln_ready), .in_data_i(head[7:0]),
    .out_valid_o(ln_ov), .out_ready_i(1'b1), .out_data_o(ln_y), .out_last_o(ln_last_unused)
  );

  // ---------------------------------------------------------------- write side
  wire wr_en = wr_act_q & out_valid;

  vit_core_agu u_agu_d (
    .clk_i(clk_i), .rst_ni(rst_ni), .init_i(start_i), .step_i(wr_en),
    .n0_i(n_i[31:0]), .n1_i(n_i[63:32]), .n2_i(n_i[95:64]), .n3_i(n_i[127:96]),
    .base_i(d_gen_i[31:0]), .s0_i(d_gen_i[63:32]), .s1_i(d_gen_i[95:64]), .s2_i(d_gen_i[127:96]),
    .s3_i(d_gen_i[159:128]), .addr_o(d_addr), .last_o(d_last)
  );

  integer e;
  always @(posedge clk_i) begin
    if (!rst_ni) begin
      rd_act_q <= 1'b0;
      wr_act_q <= 1'b0;
      pend_q   <= 1'b0;
      done_q   <= 1'b0;
      cnt_q    <= 3'd0;
      wp_q     <= 2'd0;
      rp_q     <= 2'd0;
      for (e = 0; e < 4; e = e + 1) fifo_q[e] <= 16'd0;
    end else begin
      done_q <= 1'b0;
      if (start_i) begin
        rd_act_q <= 1'b1;
        wr_act_q <= 1'b1;
      end else begin
        if (issue & a_last) rd_act_q <= 1'b0;
        if (wr_en & d_last) begin
          wr_act_q <= 1'b0;
          done_q   <= 1'b1;
        end
      end
      pend_q <= issue;
      if (pend_q) begin
        fifo_q[wp_q] <= {rd_b_data_i, rd_a_data_i};
        wp_q         <= wp_q + 2'd1;
      end
      if (consume) rp_q <= rp_q + 2'd1;
      if (pend_q & ~consume)      cnt_q <= cnt_q + 3'd1;
      else if (consume & ~pend_q) cnt_q <= cnt_q - 3'd1;
    end
  end

  wire unused_stream = ^{a_addr[31:AW], b_addr[31:AW], d_addr[31:AW], b_last_unused, smax_last_unused,
                         n_i[31:RL_W], n_i[31:C_W], tbl_addr_i[15:8], tbl_addr_i[15:CA_W], tbl_data_i[45:24]};

  assign rd_a_addr_o = a_addr[AW-1:0];
  assign rd_b_addr_o = b_addr[AW-1:0];
  assign wr_en_o     = wr_en;
  assign wr_addr_o   = d_addr[AW-1:0];
  assign wr_data_o   = out_data;
  assign done_o      = done_q;

endmodule

`default_nettype wire
