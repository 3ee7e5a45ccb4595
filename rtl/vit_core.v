// vit_core: a ViT accelerator core executing a compiled program of macro-instructions.
//
// Made of the existing blocks, unchanged: one GEMM engine (ROWS x COLS systolic array with its
// COLS requantizers, vit_core_gemm), and a stream engine (vit_core_stream) holding softmax,
// layernorm, gelu and residual_add. Memories (vit_core_ram, plain arrays):
//   act  ACT_DEPTH x 8   activation scratchpad: input image, constants, every intermediate tensor
//   wgt  WGT_DEPTH x 8   int8 weights
//   prm  PRM_DEPTH x 72  per-channel {bias, M, s} words and the tables (exp, GELU, gamma/beta)
//   prog PROG_DEPTH x 1024  the program: one 32 x 32-bit instruction per word (docs/core.md)
//   perf PROG_DEPTH x 32 cycles each instruction took in the last run, fetch to retire (host reads)
// Instructions: END, GEMM (strided/transposed operands: Q.K^T, P.V, im2col'd patches),
// STREAM (copy, gelu, residual_add, softmax rows, layernorm rows; 4-level strided addressing),
// LOAD (a table from prm into a unit). Each takes fetch + decode + issue + its body + retire;
// the cycle counters split the run by class: ctrl (those 4 cycles), gemm, row (softmax,
// layernorm), elem (copy, gelu, residual_add), load.
// Host interface: one write port into any memory (host_wsel_i: 0 act, 1 wgt, 2 prm, 3 prog),
// one read port (host_rsel_i: 0 act byte, 1 perf word; data the next cycle), start_i (run from
// instruction 0, counters cleared), cont_i (continue from the current pc), stop_pc_i (halt after
// that instruction: single-stepping for the mismatch search), busy_o, done_o (one-cycle pulse).
// The *_INIT parameters name $readmemh images loaded at time 0 (simulation; ROM init in yosys).

`default_nettype none

module vit_core #(
  parameter integer ROWS       = 8,
  parameter integer COLS       = 8,
  parameter integer ACT_DEPTH  = 16384,
  parameter integer WGT_DEPTH  = 131072,
  parameter integer PRM_DEPTH  = 4096,
  parameter integer PROG_DEPTH = 256,
  parameter integer MAX_M      = 256,   // GEMM rows (tokens)
  parameter integer MAX_K      = 4096,  // GEMM reduction length
  parameter integer MAX_N      = 4096,  // GEMM output channels
  parameter integer MAX_ROW    = 256,   // softmax row length (tokens)
  parameter integer MAX_C      = 1024,  // layernorm channels
  parameter integer CNT_BITS   = 40,
  // Rounding of the GEMM engine's requant (rtl/requant.v's ROUNDING) and of the residual_add unit
  // (rtl/residual_add.v's): 0 half_up, hwvit's own; 2 half_even, an imported ONNX file's (and
  // hwvit's --variant requant=half_even GEMMs). `hwvit compile` names a non-zero one in its sizes.
  parameter integer GEMM_ROUNDING = 0,
  parameter integer ADD_ROUNDING  = 0,
  // Width of the softmax probabilities (rtl/softmax.v's OUT_BITS, 1..8, zero-extended to the
  // scratchpad's bytes): 8, hwvit's; 7, a symmetric int8 ONNX file's (scale 1/127, zero point 0).
  parameter integer SOFTMAX_BITS  = 8,
  // 1: activation zero points (an ONNX file's asymmetric activations, docs/onnx.md): each GEMM and
  // residual_add takes its three from its instruction's f27 (gemm.v's and residual_add.v's
  // ZERO_POINTS); 0: none, f27 unread.
  parameter integer ZERO_POINTS   = 0,
  parameter         ACT_INIT   = "",
  parameter         WGT_INIT   = "",
  parameter         PRM_INIT   = "",
  parameter         PROG_INIT  = ""
) (
  input  wire                clk_i,
  input  wire                rst_ni,

  input  wire                host_we_i,
  input  wire [1:0]          host_wsel_i,
  input  wire [31:0]         host_waddr_i,
  input  wire [1023:0]       host_wdata_i,
  input  wire                host_rsel_i,
  input  wire [31:0]         host_raddr_i,
  output wire [31:0]         host_rdata_o,

  input  wire                start_i,
  input  wire                cont_i,
  input  wire [31:0]         stop_pc_i,
  output wire                busy_o,
  output wire                done_o,
  output wire [31:0]         pc_o,
  output wire [CNT_BITS-1:0] cyc_total_o,
  output wire [CNT_BITS-1:0] cyc_ctrl_o,
  output wire [CNT_BITS-1:0] cyc_gemm_o,
  output wire [CNT_BITS-1:0] cyc_row_o,
  output wire [CNT_BITS-1:0] cyc_elem_o,
  output wire [CNT_BITS-1:0] cyc_load_o,
  output wire [CNT_BITS-1:0] gemm_beats_o
);

  localparam integer AAW = $clog2(ACT_DEPTH);
  localparam integer WAW = $clog2(WGT_DEPTH);
  localparam integer PAW = $clog2(PRM_DEPTH);
  localparam integer GAW = $clog2(PROG_DEPTH);
  localparam [7:0] OP_END = 8'd0, OP_GEMM = 8'd1, OP_STREAM = 8'd2, OP_LOAD = 8'd3;
  localparam [2:0] ST_IDLE = 3'd0, ST_FETCH = 3'd1, ST_DEC = 3'd2, ST_ISSUE = 3'd3, ST_RUN = 3'd4,
                   ST_NEXT = 3'd5;

  // ---------------------------------------------------------------- controller state
  reg  [2:0]          st_q;
  reg  [31:0]         pc_q;
  reg  [1023:0]       ins_q;
  reg                 done_q;
  reg  [31:0]         icyc_q;                 // cycles of the current instruction
  reg  [CNT_BITS-1:0] c_tot_q, c_ctrl_q, c_gemm_q, c_row_q, c_elem_q, c_load_q;
  wire [1023:0]       prog_word;

  // Instruction fields: f(i) = ins_q[32*i +: 32] (docs/core.md)
  wire [7:0]   op       = ins_q[7:0];
  wire [2:0]   unit     = ins_q[10:8];
  wire         a_signed = ins_q[16];
  wire         w_act    = ins_q[17];
  wire [127:0] n_all    = ins_q[32*1 +: 128];
  wire [159:0] a_gen    = ins_q[32*5 +: 160];
  wire [159:0] b_gen    = ins_q[32*10 +: 160];
  wire [159:0] d_gen    = ins_q[32*15 +: 160];
  wire [31:0]  p_base   = ins_q[32*20 +: 32];
  wire [31:0]  p_stride = ins_q[32*21 +: 32];
  wire [30:0]  mult_a   = ins_q[32*22 +: 31];
  wire [30:0]  mult_b   = ins_q[32*23 +: 31];
  wire [5:0]   shift    = ins_q[32*24 +: 6];
  wire [61:0]  eps      = {ins_q[32*26 +: 30], ins_q[32*25 +: 32]};
  wire [31:0]  n0       = ins_q[63:32];
  wire [23:0]  zeros    = ins_q[32*27 +: 24];  // {zy, zw or zb, za} of a GEMM or residual_add

  // ---------------------------------------------------------------- engines
  wire gemm_start = (st_q == ST_ISSUE) & (op == OP_GEMM);
  wire strm_start = (st_q == ST_ISSUE) & (op == OP_STREAM);
  wire gemm_done, strm_done;

  wire [ROWS*AAW-1:0] g_a_addr;
  wire [ROWS*8-1:0]   g_a_data;
  wire [COLS*AAW-1:0] g_wa_addr;
  wire [COLS*8-1:0]   g_wa_data;
  wire [COLS*WAW-1:0] g_w_addr;
  wire [COLS*8-1:0]   g_w_data;
  wire [COLS*PAW-1:0] g_p_addr;
  wire [COLS*72-1:0]  g_p_data;
  wire [COLS-1:0]     g_we;
  wire [COLS*AAW-1:0] g_waddr;
  wire [COLS*8-1:0]   g_wdata;

  vit_core_gemm #(
    .ROWS(ROWS), .COLS(COLS), .MAX_M(MAX_M), .MAX_K(MAX_K), .MAX_N(MAX_N),
    .AAW(AAW), .WAW(WAW), .PAW(PAW), .CNT_BITS(CNT_BITS), .ROUNDING(GEMM_ROUNDING),
    .ZERO_POINTS(ZERO_POINTS)
  ) u_gemm (
    .clk_i(clk_i), .rst_ni(rst_ni), .start_i(gemm_start),
    .m_i(ins_q[32*1 +: 32]), .k_i(ins_q[32*2 +: 32]), .n_i(ins_q[32*3 +: 32]),
    .a_signed_i(a_signed), .w_act_i(w_act), .zeros_i(zeros),
    .a_gen_i(a_gen[95:0]), .w_gen_i(b_gen[95:0]), .d_gen_i(d_gen[95:0]), .p_gen_i({p_stride, p_base}),
    .done_o(gemm_done), .beats_o(gemm_beats_o),
    .act_a_addr_o(g_a_addr), .act_a_data_i(g_a_data), .act_w_addr_o(g_wa_addr), .act_w_data_i(g_wa_data),
    .wgt_addr_o(g_w_addr), .wgt_data_i(g_w_data), .prm_addr_o(g_p_addr), .prm_data_i(g_p_data),
    .wr_en_o(g_we), .wr_addr_o(g_waddr), .wr_data_o(g_wdata)
  );

  // LOAD: copy n0 prm words from p_base into the table of `unit`, one per cycle.
  reg         ld_act_q, ld_we_q;
  reg  [31:0] ld_i_q;
  reg  [15:0] ld_addr_q;
  wire [31:0] ld_prm_addr = p_base + ld_i_q;
  wire [71:0] ld_word;
  wire        ld_last = ld_we_q & ({16'd0, ld_addr_q} + 32'd1 >= n0);

  wire [AAW-1:0] s_a_addr, s_b_addr, s_waddr;
  wire [7:0]     s_a_data, s_b_data, s_wdata;
  wire           s_we;

  vit_core_stream #(.AW(AAW), .MAX_ROW(MAX_ROW), .MAX_C(MAX_C), .ADD_ROUNDING(ADD_ROUNDING),
                    .SOFTMAX_BITS(SOFTMAX_BITS), .ZERO_POINTS(ZERO_POINTS)) u_stream (
    .clk_i(clk_i), .rst_ni(rst_ni), .start_i(strm_start), .unit_i(unit), .n_i(n_all),
    .a_gen_i(a_gen), .b_gen_i(b_gen), .d_gen_i(d_gen),
    .mult_a_i(mult_a), .mult_b_i(mult_b), .shift_i(shift), .eps_i(eps), .zeros_i(zeros), .done_o(strm_done),
    .tbl_we_i(ld_we_q), .tbl_unit_i(unit), .tbl_addr_i(ld_addr_q), .tbl_data_i(ld_word[45:0]),
    .rd_a_addr_o(s_a_addr), .rd_a_data_i(s_a_data), .rd_b_addr_o(s_b_addr), .rd_b_data_i(s_b_data),
    .wr_en_o(s_we), .wr_addr_o(s_waddr), .wr_data_o(s_wdata)
  );

  // ---------------------------------------------------------------- memories
  wire host_act  = host_we_i & (host_wsel_i == 2'd0);
  wire host_wgt  = host_we_i & (host_wsel_i == 2'd1);
  wire host_prm  = host_we_i & (host_wsel_i == 2'd2);
  wire host_prog = host_we_i & (host_wsel_i == 2'd3);
  wire [7:0] h_act_rdata;
  wire [31:0] h_perf_rdata;

  // act read ports: ROWS gemm a lanes, COLS gemm w lanes, stream a, stream b, host
  // act write ports: COLS gemm output lanes, stream, host (the host wins)
  vit_core_ram #(.W(8), .DEPTH(ACT_DEPTH), .NR(ROWS + COLS + 3), .NW(COLS + 2), .INIT(ACT_INIT)) u_act (
    .clk_i(clk_i),
    .raddr_i({host_raddr_i[AAW-1:0], s_b_addr, s_a_addr, g_wa_addr, g_a_addr}),
    .rdata_o({h_act_rdata, s_b_data, s_a_data, g_wa_data, g_a_data}),
    .we_i({host_act, s_we, g_we}),
    .waddr_i({host_waddr_i[AAW-1:0], s_waddr, g_waddr}),
    .wdata_i({host_wdata_i[7:0], s_wdata, g_wdata})
  );

  vit_core_ram #(.W(8), .DEPTH(WGT_DEPTH), .NR(COLS), .NW(1), .INIT(WGT_INIT)) u_wgt (
    .clk_i(clk_i), .raddr_i(g_w_addr), .rdata_o(g_w_data),
    .we_i(host_wgt), .waddr_i(host_waddr_i[WAW-1:0]), .wdata_i(host_wdata_i[7:0])
  );

  vit_core_ram #(.W(72), .DEPTH(PRM_DEPTH), .NR(COLS + 1), .NW(1), .INIT(PRM_INIT)) u_prm (
    .clk_i(clk_i), .raddr_i({ld_prm_addr[PAW-1:0], g_p_addr}), .rdata_o({ld_word, g_p_data}),
    .we_i(host_prm), .waddr_i(host_waddr_i[PAW-1:0]), .wdata_i(host_wdata_i[71:0])
  );

  vit_core_ram #(.W(1024), .DEPTH(PROG_DEPTH), .NR(1), .NW(1), .INIT(PROG_INIT)) u_prog (
    .clk_i(clk_i), .raddr_i(pc_q[GAW-1:0]), .rdata_o(prog_word),
    .we_i(host_prog), .waddr_i(host_waddr_i[GAW-1:0]), .wdata_i(host_wdata_i)
  );

  wire perf_we = (st_q == ST_NEXT);
  vit_core_ram #(.W(32), .DEPTH(PROG_DEPTH), .NR(1), .NW(1)) u_perf (
    .clk_i(clk_i), .raddr_i(host_raddr_i[GAW-1:0]), .rdata_o(h_perf_rdata),
    .we_i(perf_we), .waddr_i(pc_q[GAW-1:0]), .wdata_i(icyc_q + 32'd1)
  );

  reg rsel_q;
  assign host_rdata_o = rsel_q ? h_perf_rdata : {24'd0, h_act_rdata};

  // ---------------------------------------------------------------- controller
  wire run_done = (op == OP_GEMM) ? gemm_done : (op == OP_STREAM) ? strm_done : ld_last;
  wire is_row   = (unit == 3'd3) | (unit == 3'd4);
  wire [CNT_BITS-1:0] one = {{(CNT_BITS-1){1'b0}}, 1'b1};

  always @(posedge clk_i) begin
    if (!rst_ni) begin
      st_q      <= ST_IDLE;
      pc_q      <= 32'd0;
      ins_q     <= 1024'd0;
      done_q    <= 1'b0;
      icyc_q    <= 32'd0;
      rsel_q    <= 1'b0;
      c_tot_q   <= {CNT_BITS{1'b0}};
      c_ctrl_q  <= {CNT_BITS{1'b0}};
      c_gemm_q  <= {CNT_BITS{1'b0}};
      c_row_q   <= {CNT_BITS{1'b0}};
      c_elem_q  <= {CNT_BITS{1'b0}};
      c_load_q  <= {CNT_BITS{1'b0}};
      ld_act_q  <= 1'b0;
      ld_we_q   <= 1'b0;
      ld_i_q    <= 32'd0;
      ld_addr_q <= 16'd0;
    end else begin
      rsel_q <= host_rsel_i;
      done_q <= 1'b0;
      if (st_q != ST_IDLE) begin
        c_tot_q <= c_tot_q + one;
        icyc_q  <= icyc_q + 32'd1;
        if (st_q != ST_RUN)       c_ctrl_q <= c_ctrl_q + one;
        else if (op == OP_GEMM)   c_gemm_q <= c_gemm_q + one;
        else if (op == OP_LOAD)   c_load_q <= c_load_q + one;
        else if (is_row)          c_row_q  <= c_row_q + one;
        else                      c_elem_q <= c_elem_q + one;
      end
      // LOAD datapath: read prm[p_base + i], write the unit's table entry i the cycle after.
      ld_we_q   <= ld_act_q;
      ld_addr_q <= ld_i_q[15:0];
      if (ld_act_q) begin
        if (ld_i_q + 32'd1 >= n0) ld_act_q <= 1'b0;
        ld_i_q <= ld_i_q + 32'd1;
      end
      case (st_q)
        ST_IDLE: begin
          if (start_i | cont_i) begin
            st_q   <= ST_FETCH;
            icyc_q <= 32'd0;
          end
          if (start_i) begin
            pc_q     <= 32'd0;
            c_tot_q  <= {CNT_BITS{1'b0}};
            c_ctrl_q <= {CNT_BITS{1'b0}};
            c_gemm_q <= {CNT_BITS{1'b0}};
            c_row_q  <= {CNT_BITS{1'b0}};
            c_elem_q <= {CNT_BITS{1'b0}};
            c_load_q <= {CNT_BITS{1'b0}};
          end
        end
        ST_FETCH: st_q <= ST_DEC;                   // prog read of pc_q
        ST_DEC: begin
          ins_q <= prog_word;
          st_q  <= ST_ISSUE;
        end
        ST_ISSUE: begin
          if ((op == OP_END) || (op > OP_LOAD)) begin  // END, or an undefined op: halt
            st_q   <= ST_IDLE;
            done_q <= 1'b1;
          end else begin
            st_q <= ST_RUN;
            if (op == OP_LOAD) begin
              ld_act_q <= 1'b1;
              ld_i_q   <= 32'd0;
            end
          end
        end
        ST_RUN: if (run_done) st_q <= ST_NEXT;
        default: begin                               // ST_NEXT: perf[pc] <= icyc (u_perf)
          pc_q   <= pc_q + 32'd1;
          icyc_q <= 32'd0;
          if (pc_q == stop_pc_i) begin
            st_q   <= ST_IDLE;
            done_q <= 1'b1;
          end else begin
            st_q <= ST_FETCH;
          end
        end
      endcase
    end
  end

  wire unused_core = ^{ins_q[31:18], ins_q[15:11], ins_q[32*5-1:32*4], ins_q[1023:32*27+24],
                       ins_q[32*22+31], ins_q[32*23+31], ins_q[32*25-1:32*24+6], ins_q[32*26+30 +: 2],
                       a_gen[159:96], b_gen[159:96], d_gen[159:96], ld_word[71:46], host_raddr_i[31:AAW],
                       host_raddr_i[31:GAW], host_waddr_i[31:AAW], host_waddr_i[31:WAW], host_waddr_i[31:PAW],
                       host_waddr_i[31:GAW], ld_prm_addr[31:PAW], pc_q[31:GAW]};

  assign busy_o      = (st_q != ST_IDLE);
  assign done_o      = done_q;
  assign pc_o        = pc_q;
  assign cyc_total_o = c_tot_q;
  assign cyc_ctrl_o  = c_ctrl_q;
  assign cyc_gemm_o  = c_gemm_q;
  assign cyc_row_o   = c_row_q;
  assign cyc_elem_o  = c_elem_q;
  assign cyc_load_o  = c_load_q;

endmodule

`default_nettype wire
