// row_stream: the row engine every softmax and LayerNorm block is built on (docs/rtl.md, "The row engine").
// A block is this engine plus its arithmetic: statistics taken as a row fills (row_max.v, row_moments.v),
// work once per row (a division, a square root) and a datapath on the pipeline. The engine holds what they
// share:
//   - the row buffer (MAX_N x W, 1W1R, registered read) and its fill side: one element per clock,
//     the row length sampled from len_i with a row's first element (0 read as 1, above MAX_N as MAX_N);
//   - a row's phases after its fill: CALC (the arithmetic's per-row work, until done_i); with PASS = 1
//     a read pass (each element leaves the pipeline at stage PASS_EXIT into the statistics; PRE_CALC = 0:
//     no CALC before it) and a second CALC; then OUT, the row read again through the pipeline;
//   - SEG > 0: a row filled in segments of SEG (ITA's chunks), each through CALC and the pass once in;
//   - the next row filling behind the OUT pass: slot j is written once OUT has read it (at once when
//     OUT does not read it: a longer row behind a shorter one);
//   - the pipeline: DEPTH stages with valid and last flags, stage k taking stage k-1's element when it
//     is empty or hands its own on (out_ready_i backpressure); stage DEPTH is the output register
//     (out_i loaded with ld_o[DEPTH]); ld_o[k] says when the arithmetic's stage-k registers load;
//   - reset (rst_ni, synchronous, active low): the partial row dropped; control, valid flags and the
//     output register zeroed (the buffer and the lengths are written before they are read);
//   - the parameter checks, two of the block's own (A_*, B_*) included.
// A row's CALC (or pass) starts once stages 1..GO_AFTER hold no element of the row before: the per-row
// registers those stages read may change then (the output register, stage DEPTH, reads none).

`default_nettype none

module row_stream #(
  parameter          NAME      = "row_stream",  // the block, for the checks' messages
  parameter          LEN_NAME  = "MAX_N",       // what the block calls MAX_N
  parameter integer  MAX_N     = 256,           // longest row: entries of the row buffer (2..LIMIT)
  parameter integer  LIMIT     = 65536,         // the longest row the arithmetic's widths hold
  parameter integer  W         = 8,             // element width, the block's IN_BITS (2..16)
  parameter integer  OUT_BITS  = 8,             // output width (OUT_MIN..16)
  parameter integer  OUT_MIN   = 1,
  parameter integer  DEPTH     = 2,             // pipeline stages, the output register the last (2..8)
  parameter integer  PASS      = 0,             // 1: a read pass before OUT (0, 1)
  parameter integer  PASS_EXIT = 1,             // the stage a pass element leaves from (1..DEPTH-1)
  parameter integer  PRE_CALC  = 1,             // with PASS: 1 a CALC before the pass, 0 none (0, 1)
  parameter integer  GO_AFTER  = 1,             // PASS_EXIT..DEPTH-1 (header)
  parameter integer  SEG       = 0,             // 0, or a power of two: segment length (header)
  parameter          A_NAME    = "A",           // two parameters of the block: A_VAL in A_MIN..A_MAX
  parameter integer  A_VAL     = 0, A_MIN = 0, A_MAX = 0,
  parameter          B_NAME    = "B",           // and B_VAL in B_MIN..B_MAX
  parameter integer  B_VAL     = 0, B_MIN = 0, B_MAX = 0
) (
  input  wire                       clk_i,
  input  wire                       rst_ni,
  // ---- the block's streams ----
  input  wire [$clog2(MAX_N+1)-1:0] len_i,       // row length, sampled with a row's first element
  input  wire                       in_valid_i,
  output wire                       in_ready_o,
  input  wire [W-1:0]               in_data_i,
  output wire                       out_valid_o,
  input  wire                       out_ready_i,
  output wire [OUT_BITS-1:0]        out_data_o,
  output wire                       out_last_o,
  // ---- fill side, to the statistics ----
  output wire                       fill_o,      // in_data_i is taken this clock,
  output wire                       first_o,     // ... as its segment's first (SEG = 0: its row's)
  output wire [$clog2(MAX_N)-1:0]   fill_addr_o, // ... into this slot, its index in the row
  output wire [$clog2(MAX_N+1)-1:0] len_o,       // the filling row's length (from its first element)
  // ---- phases ----
  output wire                       go_o,        // the filled row (segment) leaves FILL this clock
  output wire                       calc_o,      // in CALC,
  output wire                       enter_o,     // ... its first clock,
  output wire                       passed_o,    // ... after the pass (SEG: after the row's last)
  input  wire                       done_i,      // in CALC: the per-row work is done
  output wire                       pass_o,      // in the pass
  output wire                       start_o,     // the row enters OUT this clock
  // ---- read side and pipeline ----
  output wire [$clog2(MAX_N+1)-1:0] row_len_o,   // the length of the row in OUT
  output wire [$clog2(MAX_N)-1:0]   rd_addr_o,   // the slot stage 1 reads with ld_o[1]
  output wire [$clog2(MAX_N)-1:0]   idx_o,       // the index in its row of stage 2's element
  output wire [W-1:0]               x1_o,        // stage 1: the element read
  output wire [DEPTH:1]             ld_o,        // stage k loads this clock
  input  wire [OUT_BITS-1:0]        out_i        // what the output register loads with ld_o[DEPTH]
);

  // ---------------------------------------------------------------- parameter checks
  // Verilog-2005 has no elaboration-time assertion: Icarus and Verilator stop at time 0, yosys stops
  // synthesis ("System task `$finish' executed"). No valid build can cover them:
  // verilator coverage_off
  initial begin
    if (MAX_N < 2 || MAX_N > LIMIT) begin
      $display("ERROR: %0s: %0s = %0d must be in 2..%0d", NAME, LEN_NAME, MAX_N, LIMIT);
      $finish;
    end
    if (W < 2 || W > 16) begin
      $display("ERROR: %0s: IN_BITS = %0d must be in 2..16", NAME, W);
      $finish;
    end
    if (OUT_BITS < OUT_MIN || OUT_BITS > 16) begin
      $display("ERROR: %0s: OUT_BITS = %0d must be in %0d..16", NAME, OUT_BITS, OUT_MIN);
      $finish;
    end
    if (A_VAL < A_MIN || A_VAL > A_MAX) begin
      $display("ERROR: %0s: %0s = %0d must be in %0d..%0d", NAME, A_NAME, A_VAL, A_MIN, A_MAX);
      $finish;
    end
    if (B_VAL < B_MIN || B_VAL > B_MAX) begin
      $display("ERROR: %0s: %0s = %0d must be in %0d..%0d", NAME, B_NAME, B_VAL, B_MIN, B_MAX);
      $finish;
    end
    if (DEPTH < 2 || DEPTH > 8 || PASS < 0 || PASS > 1 || PRE_CALC < 0 || PRE_CALC > 1 || PASS_EXIT < 1
        || GO_AFTER < PASS_EXIT || GO_AFTER >= DEPTH || (SEG != 0 && (SEG & (SEG - 1)) != 0)) begin
      $display("ERROR: %0s: row_stream DEPTH %0d, PASS %0d, PRE_CALC %0d, PASS_EXIT %0d, GO_AFTER %0d, SEG %0d",
               NAME, DEPTH, PASS, PRE_CALC, PASS_EXIT, GO_AFTER, SEG);
      $finish;
    end
  end
  // verilator coverage_on

  // ---------------------------------------------------------------- widths and constants
  localparam integer AW     = $clog2(MAX_N);      // buffer address
  localparam integer LW     = $clog2(MAX_N + 1);  // row length and element counters
  // segment index bits: log2(SEG), no more than the counter has (a segment longer than MAX_N never ends)
  localparam integer SB     = (SEG < 2) ? 1 : ($clog2(SEG) < LW) ? $clog2(SEG) : LW;
  localparam integer SEG_M1 = (SEG > 0) ? SEG - 1 : 0;
  localparam [LW:0]   MAX_C    = MAX_N[LW:0];     // one spare bit: the compare is never constant
  localparam [LW-1:0] ONE      = {{(LW-1){1'b0}}, 1'b1};
  localparam [SB-1:0] SEG_LAST = SEG_M1[SB-1:0];  // the index of a segment's last element, mod SEG
  localparam          SEGS     = (SEG != 0);
  localparam          PASSES   = (PASS != 0);
  localparam [1:0] ST_IDLE = 2'd0;  // filling (or nothing): no row between FILL and OUT
  localparam [1:0] ST_CALC = 2'd1;  // the arithmetic's per-row work
  localparam [1:0] ST_PASS = 2'd2;  // the row read into the statistics
  localparam [1:0] ST_OUT  = 2'd3;  // the row read out

  // ---------------------------------------------------------------- state
  // verilator coverage_off
  reg [W-1:0]        row_mem [0:MAX_N-1];   // the row (no toggle coverage of memories)
  // verilator coverage_on
  reg [1:0]          state_q, state_d;
  reg                passed_q, passed_d;    // the row's pass is done
  reg                enter_q;               // the clock after a transition into CALC
  reg [LW-1:0]       wr_cnt_q, wr_cnt_d;    // elements of the filling row taken
  reg [LW-1:0]       len_q, len_d;          // its length
  reg                full_q, full_d;        // it (SEG: its segment) is complete
  reg [LW-1:0]       rd_cnt_q, rd_cnt_d;    // buffer reads of this pass (SEG: of this row's passes)
  reg [LW-1:0]       c_row_q, c_row_d;      // the length of the row in OUT
  reg [DEPTH:1]      v_q, v_d;              // stage k holds an element
  reg [DEPTH:1]      l_q, l_d;              // ... its row's last
  reg [AW-1:0]       idx1_q, idx2_q;        // the index of stage 1's and stage 2's element
  reg [W-1:0]        x1_q;
  reg [OUT_BITS-1:0] out_q;

  // ---------------------------------------------------------------- pipeline enables
  // en[k]: stage k may load (it is empty or its element moves on); en[DEPTH+1] is the consumer.
  reg [DEPTH+1:1] en;
  integer e, k;
  always @* begin
    en[DEPTH+1] = out_ready_i;
    for (e = DEPTH; e >= 1; e = e - 1) begin
      en[e] = !v_q[e] || en[e+1];
    end
  end
  wire free = !(|v_q[GO_AFTER:1]);  // stages 1..GO_AFTER hold no element

  // ---------------------------------------------------------------- fill side and phases
  wire [LW-1:0] len_in  = (len_i == {LW{1'b0}}) ? ONE : ({1'b0, len_i} > MAX_C) ? MAX_C[LW-1:0] : len_i;
  wire [LW-1:0] len_now = (wr_cnt_q == {LW{1'b0}}) ? len_in : len_q;
  wire          in_last = (wr_cnt_q == len_now - ONE);
  wire          seg_end = SEGS && (wr_cnt_q[SB-1:0] == SEG_LAST);
  // Slot wr_cnt_q is free with no row in CALC or the pass, or in OUT once read or never to be read.
  wire          slot_free = (state_q == ST_IDLE)
                         || ((state_q == ST_OUT) && (wr_cnt_q < rd_cnt_q || wr_cnt_q >= c_row_q));
  wire          fill      = in_valid_i && !full_q && slot_free;
  wire          complete  = !SEGS || (wr_cnt_q == len_q);  // the row is in, not just a segment
  wire issue    = ((state_q == ST_OUT) || (state_q == ST_PASS && rd_cnt_q != wr_cnt_q)) && en[1];
  wire last     = (rd_cnt_q == c_row_q - ONE);
  wire go       = (state_q == ST_IDLE) && full_q && free;
  wire pass_end = (state_q == ST_PASS) && (rd_cnt_q == wr_cnt_q) && !(|v_q[PASS_EXIT:1]);
  wire start    = (state_q == ST_CALC) && done_i && (!PASSES || passed_q);
  wire [DEPTH:1] ld = en[DEPTH:1] & {v_q[DEPTH-1:1], issue};  // stage k loads this clock
  always @* begin
    state_d  = state_q;
    passed_d = passed_q;
    wr_cnt_d = wr_cnt_q;
    len_d    = len_q;
    full_d   = full_q;
    rd_cnt_d = rd_cnt_q;
    c_row_d  = c_row_q;
    if (fill) begin
      wr_cnt_d = wr_cnt_q + ONE;
      len_d    = len_now;
      full_d   = in_last || seg_end;
    end
    if (issue) begin
      rd_cnt_d = rd_cnt_q + ONE;
    end
    case (state_q)
      ST_IDLE: begin
        if (go) begin
          state_d = (PASSES && PRE_CALC == 0) ? ST_PASS : ST_CALC;
          full_d  = complete;  // a segment: the fill resumes after its pass
        end
      end
      ST_CALC: begin
        if (start) begin
          state_d  = ST_OUT;
          passed_d = 1'b0;
          wr_cnt_d = {LW{1'b0}};
          full_d   = 1'b0;
          rd_cnt_d = {LW{1'b0}};
          c_row_d  = len_q;
        end else if (done_i) begin
          state_d = ST_PASS;
        end
      end
      ST_PASS: begin
        if (pass_end) begin
          state_d  = complete ? ST_CALC : ST_IDLE;
          passed_d = complete;
        end
      end
      default: begin  // ST_OUT
        if (issue && last) begin
          state_d  = ST_IDLE;
          rd_cnt_d = {LW{1'b0}};  // the next row's pass reads from slot 0
        end
      end
    endcase
  end

  // A pass element leaves the pipeline at stage PASS_EXIT: only OUT elements pass it.
  always @* begin
    v_d = v_q;
    l_d = l_q;
    for (k = DEPTH; k >= 2; k = k - 1) begin
      if (en[k]) begin
        v_d[k] = v_q[k-1] && !(PASSES && k == PASS_EXIT + 1 && state_q == ST_PASS);
        l_d[k] = l_q[k-1];
      end
    end
    if (en[1]) begin
      v_d[1] = issue;
      l_d[1] = issue && (state_q == ST_OUT) && last;
    end
  end

  // ---------------------------------------------------------------- registers
  always @(posedge clk_i) begin
    if (fill) begin
      row_mem[wr_cnt_q[AW-1:0]] <= in_data_i;
    end
    if (issue) begin
      x1_q   <= row_mem[rd_cnt_q[AW-1:0]];
      idx1_q <= rd_cnt_q[AW-1:0];
    end
    if (ld[2]) begin
      idx2_q <= idx1_q;
    end
  end

  always @(posedge clk_i) begin
    len_q   <= len_d;
    c_row_q <= c_row_d;
    if (!rst_ni) begin
      state_q  <= ST_IDLE;
      passed_q <= 1'b0;
      enter_q  <= 1'b0;
      wr_cnt_q <= {LW{1'b0}};
      full_q   <= 1'b0;
      rd_cnt_q <= {LW{1'b0}};
      v_q      <= {DEPTH{1'b0}};
      l_q      <= {DEPTH{1'b0}};
      out_q    <= {OUT_BITS{1'b0}};
    end else begin
      state_q  <= state_d;
      passed_q <= passed_d;
      enter_q  <= (state_d == ST_CALC) && (state_q != ST_CALC);
      wr_cnt_q <= wr_cnt_d;
      full_q   <= full_d;
      rd_cnt_q <= rd_cnt_d;
      v_q      <= v_d;
      l_q      <= l_d;
      if (ld[DEPTH]) begin
        out_q <= out_i;
      end
    end
  end

  assign ld_o        = ld;
  assign in_ready_o  = !full_q && slot_free;
  assign out_valid_o = v_q[DEPTH];
  assign out_last_o  = l_q[DEPTH];
  assign out_data_o  = out_q;
  assign fill_o      = fill;
  assign first_o     = SEGS ? (wr_cnt_q[SB-1:0] == {SB{1'b0}}) : (wr_cnt_q == {LW{1'b0}});
  assign fill_addr_o = wr_cnt_q[AW-1:0];
  assign len_o       = len_q;
  assign go_o        = go;
  assign calc_o      = (state_q == ST_CALC);
  assign enter_o     = enter_q;
  assign passed_o    = passed_q;
  assign pass_o      = (state_q == ST_PASS);
  assign start_o     = start;
  assign row_len_o   = c_row_q;
  assign rd_addr_o   = rd_cnt_q[AW-1:0];
  assign idx_o       = idx2_q;
  assign x1_o        = x1_q;

endmodule

`default_nettype wire
