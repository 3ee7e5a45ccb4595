// tb_vit_core: simulation wrapper of rtl/vit_core.v for the whole-model test (sim/test_vit_core.py).
//
// The core's memories start from the compiled model's images (core_act.hex, core_wgt.hex,
// core_prm.hex, core_prog.hex: the driver links them into the simulator's working directory
// before the run), or, as a host would load them, through the host write port: preload_i
// $readmemh's host_wgt.hex, host_prm.hex, host_prog.hex and host_act.hex (the driver then puts
// garbage in the core_*.hex images) and writes every word of each memory with its host_wsel_i
// (1 wgt, 2 prm, 3 prog, then 0 act), pulsing preload_done_o. Whenever the wrapper is not
// writing, the host bus carries junk (select, address and data from an LFSR, write enable low):
// a core that wrote on it would corrupt the run. Per image the cocotb test only pulses signals
// and waits for events:
//   load_i  $readmemh core_in.hex (IN_LEN bytes) and writes it through the host port at IN_BASE;
//   start_i / cont_i with stop_pc_i: run the program (or continue it) in the core;
//   dump_i  reads act[dump_base_i .. + dump_len_i) through the host port and $writememh's it to
//           core_dump.hex (dump_perf_i: the per-instruction cycle words instead).
// Not synthesizable (file I/O); the core itself is rtl/vit_core.v.

`default_nettype none

module tb_vit_core #(
  parameter integer ROWS       = 8,
  parameter integer COLS       = 8,
  parameter integer ACT_DEPTH  = 16384,
  parameter integer WGT_DEPTH  = 131072,
  parameter integer PRM_DEPTH  = 4096,
  parameter integer PROG_DEPTH = 256,
  parameter integer MAX_M      = 256,
  parameter integer MAX_K      = 4096,
  parameter integer MAX_N      = 4096,
  parameter integer MAX_ROW    = 256,
  parameter integer MAX_C      = 1024,
  parameter integer GEMM_ROUNDING = 0,
  parameter integer ADD_ROUNDING  = 0,
  parameter integer SOFTMAX_BITS  = 8,
  parameter integer ZERO_POINTS   = 0,
  parameter integer IN_BASE    = 0,
  parameter integer IN_LEN     = 64
) (
  input  wire        clk_i        /*verilator public_flat_rw*/,
  input  wire        rst_ni       /*verilator public_flat_rw*/,
  input  wire        preload_i    /*verilator public_flat_rw*/,
  input  wire        load_i       /*verilator public_flat_rw*/,
  input  wire        start_i      /*verilator public_flat_rw*/,
  input  wire        cont_i       /*verilator public_flat_rw*/,
  input  wire [31:0] stop_pc_i    /*verilator public_flat_rw*/,
  input  wire        dump_i       /*verilator public_flat_rw*/,
  input  wire        dump_perf_i  /*verilator public_flat_rw*/,
  input  wire [31:0] dump_base_i  /*verilator public_flat_rw*/,
  input  wire [31:0] dump_len_i   /*verilator public_flat_rw*/,
  output reg         preload_done_o /*verilator public_flat_rw*/,
  output reg         load_done_o  /*verilator public_flat_rw*/,
  output reg         dump_done_o  /*verilator public_flat_rw*/,
  output wire        busy_o       /*verilator public_flat_rw*/,
  output wire        done_o       /*verilator public_flat_rw*/,
  output wire [31:0] pc_o         /*verilator public_flat_rw*/,
  output wire [39:0] cyc_total_o  /*verilator public_flat_rw*/,
  output wire [39:0] cyc_ctrl_o   /*verilator public_flat_rw*/,
  output wire [39:0] cyc_gemm_o   /*verilator public_flat_rw*/,
  output wire [39:0] cyc_row_o    /*verilator public_flat_rw*/,
  output wire [39:0] cyc_elem_o   /*verilator public_flat_rw*/,
  output wire [39:0] cyc_load_o   /*verilator public_flat_rw*/,
  output wire [39:0] gemm_beats_o /*verilator public_flat_rw*/
);

  localparam integer BUF = (ACT_DEPTH > PROG_DEPTH) ? ACT_DEPTH : PROG_DEPTH;

  reg  [7:0]    in_buf   [0:IN_LEN-1];
  reg  [31:0]   out_buf  [0:BUF-1];
  reg  [7:0]    act_buf  [0:ACT_DEPTH-1];
  reg  [7:0]    wgt_buf  [0:WGT_DEPTH-1];
  reg  [71:0]   prm_buf  [0:PRM_DEPTH-1];
  reg  [1023:0] prog_buf [0:PROG_DEPTH-1];
  reg           ld_q, dp_q, dp_wait_q, sel_q, wr_q, pl_q;
  reg  [1:0]    pl_sel_q;
  reg  [31:0]   i_q, j_q, len_q, pl_i_q, junk_q;
  reg           host_we;
  reg  [1:0]    host_wsel;
  reg  [31:0]   host_waddr, host_raddr;
  reg  [1023:0] host_wdata;
  wire [31:0]   host_rdata;

  // xorshift32: the idle bus's junk
  wire [31:0] junk_a = junk_q ^ (junk_q << 13);
  wire [31:0] junk_b = junk_a ^ (junk_a >> 17);
  wire [31:0] junk_n = junk_b ^ (junk_b << 5);
  wire [31:0] pl_depth = (pl_sel_q == 2'd1) ? WGT_DEPTH : (pl_sel_q == 2'd2) ? PRM_DEPTH :
                         (pl_sel_q == 2'd3) ? PROG_DEPTH : ACT_DEPTH;

  vit_core #(
    .ROWS(ROWS), .COLS(COLS), .ACT_DEPTH(ACT_DEPTH), .WGT_DEPTH(WGT_DEPTH), .PRM_DEPTH(PRM_DEPTH),
    .PROG_DEPTH(PROG_DEPTH), .MAX_M(MAX_M), .MAX_K(MAX_K), .MAX_N(MAX_N), .MAX_ROW(MAX_ROW),
    .MAX_C(MAX_C), .GEMM_ROUNDING(GEMM_ROUNDING), .ADD_ROUNDING(ADD_ROUNDING),
    .SOFTMAX_BITS(SOFTMAX_BITS), .ZERO_POINTS(ZERO_POINTS), .ACT_INIT("core_act.hex"),
    .WGT_INIT("core_wgt.hex"), .PRM_INIT("core_prm.hex"), .PROG_INIT("core_prog.hex")
  ) dut (
    .clk_i(clk_i), .rst_ni(rst_ni),
    .host_we_i(host_we), .host_wsel_i(host_wsel), .host_waddr_i(host_waddr), .host_wdata_i(host_wdata),
    .host_rsel_i(sel_q), .host_raddr_i(host_raddr), .host_rdata_o(host_rdata),
    .start_i(start_i), .cont_i(cont_i), .stop_pc_i(stop_pc_i), .busy_o(busy_o), .done_o(done_o),
    .pc_o(pc_o), .cyc_total_o(cyc_total_o), .cyc_ctrl_o(cyc_ctrl_o), .cyc_gemm_o(cyc_gemm_o),
    .cyc_row_o(cyc_row_o), .cyc_elem_o(cyc_elem_o), .cyc_load_o(cyc_load_o), .gemm_beats_o(gemm_beats_o)
  );

  always @(posedge clk_i) begin
    load_done_o    <= 1'b0;
    dump_done_o    <= 1'b0;
    preload_done_o <= 1'b0;
    host_we        <= 1'b0;
    junk_q         <= junk_n;
    host_wsel      <= junk_q[1:0];
    host_waddr     <= junk_q;
    host_wdata     <= {32{junk_q}};
    if (!rst_ni) begin
      ld_q <= 1'b0;  dp_q <= 1'b0;  wr_q <= 1'b0;  dp_wait_q <= 1'b0;  sel_q <= 1'b0;  pl_q <= 1'b0;
      i_q <= 32'd0;  j_q <= 32'd0;  len_q <= 32'd0;  pl_i_q <= 32'd0;  pl_sel_q <= 2'd1;
      junk_q <= 32'h9e3779b9;  host_raddr <= 32'd0;
    end else begin
      if (preload_i) begin
        $readmemh("host_act.hex", act_buf);
        $readmemh("host_wgt.hex", wgt_buf);
        $readmemh("host_prm.hex", prm_buf);
        $readmemh("host_prog.hex", prog_buf);
        pl_q     <= 1'b1;
        pl_sel_q <= 2'd1;
        pl_i_q   <= 32'd0;
      end else if (pl_q) begin
        host_we    <= 1'b1;
        host_wsel  <= pl_sel_q;
        host_waddr <= pl_i_q;
        case (pl_sel_q)
          2'd1:    host_wdata <= {1016'd0, wgt_buf[pl_i_q]};
          2'd2:    host_wdata <= {952'd0, prm_buf[pl_i_q]};
          2'd3:    host_wdata <= prog_buf[pl_i_q];
          default: host_wdata <= {1016'd0, act_buf[pl_i_q]};
        endcase
        pl_i_q <= pl_i_q + 32'd1;
        if (pl_i_q + 32'd1 == pl_depth) begin
          pl_i_q   <= 32'd0;
          pl_sel_q <= pl_sel_q + 2'd1;
          if (pl_sel_q == 2'd0) begin
            pl_q           <= 1'b0;
            preload_done_o <= 1'b1;
          end
        end
      end
      if (load_i) begin
        $readmemh("core_in.hex", in_buf);
        ld_q <= 1'b1;
        i_q  <= 32'd0;
      end else if (ld_q) begin
        host_we    <= 1'b1;
        host_wsel  <= 2'd0;
        host_waddr <= IN_BASE + i_q;
        host_wdata <= {1016'd0, in_buf[i_q]};
        i_q        <= i_q + 32'd1;
        if (i_q + 32'd1 == IN_LEN) ld_q <= 1'b0;
      end else if (i_q == IN_LEN) begin
        load_done_o <= 1'b1;
        i_q         <= 32'd0;
      end
      if (dump_i) begin
        dp_q       <= 1'b1;
        sel_q      <= dump_perf_i;
        len_q      <= dump_len_i;
        host_raddr <= dump_perf_i ? 32'd0 : dump_base_i;
        j_q        <= 32'd0;
      end else if (dp_q) begin
        // the read of host_raddr issued this cycle is in host_rdata two edges later
        host_raddr <= host_raddr + 32'd1;
        dp_wait_q  <= 1'b1;
        if (dp_wait_q) begin
          out_buf[j_q] <= host_rdata;
          j_q          <= j_q + 32'd1;
          if (j_q + 32'd1 == len_q) begin
            dp_q      <= 1'b0;
            dp_wait_q <= 1'b0;
            wr_q      <= 1'b1;
          end
        end
      end else if (wr_q) begin  // a cycle later: the last out_buf write has landed
        wr_q <= 1'b0;
        $writememh("core_dump.hex", out_buf, 0, len_q - 1);
        dump_done_o <= 1'b1;
      end
    end
  end

endmodule

`default_nettype wire
