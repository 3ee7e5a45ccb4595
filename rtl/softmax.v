// softmax: integer softmax over a streamed row, the bit-exact twin of ops.softmax (exp="table").
//
// Per row of N signed IN_BITS inputs x_0 .. x_(N-1) in stream order (docs/arithmetic.md,
// section "softmax"; F = EXP_FRAC = 23, Q = 2^OUT_BITS - 1):
//   mx  = max_i x_i,  d_i = mx - x_i,  E_i = T[d_i] if d_i < ENTRIES else 0,  S = sum_i E_i
//   R   = floor((Q * 2^(F+17) + floor(S/2)) / S)                     (once per row)
//   A_i = (E_0 + ... + E_i) * R,  P_i = (A_i + 2^(F+16)) >> (F+17),  p_i = P_i - P_(i-1)
// Rounding the cumulative sum makes every row sum to exactly Q.
//
// A row goes through three passes over a MAX_N-entry row buffer (a 1W1R memory):
//   LOAD  accept N inputs (one per clock when offered), write them, keep the running max;
//   SUM   re-read them, look up E_i in the exp table, accumulate S;   then the iterative divider
//   DIV   computes R in OUT_BITS + 17 steps (rtl/divu.v);
//   OUT   re-read them, look up E_i again (cheaper than storing 24-bit E_i per element),
//         multiply by R into a running sum A, and stream p_i = P_i - P_(i-1) out.
// The next row LOADs behind the OUT pass: slot j is written only after OUT has read it (or when
// OUT does not read it at all), so one buffer serves both rows and a row costs 2N + ... clocks.
// Per element the datapath is one subtract (d), one table read, one add (S), one
// 24 x (OUT_BITS + 17) multiply, one (OUT_BITS + 40)-bit accumulate whose top OUT_BITS bits are
// P_i (the accumulator starts at the rounding constant 2^(F+16), so the rounding is free) and one
// OUT_BITS subtract. The division happens once per row.
// Unstalled, rows follow each other every 2N + OUT_BITS + 26 clocks, and on an idle block a row's
// first p_i leaves N + OUT_BITS + 28 clocks after its last x_i (measured: sim/test_softmax.py
// test_row_period_and_latency; see docs/rtl.md).
//
// The exp table T (ENTRIES x (F+1) bits, unsigned) is a RAM written through tbl_*; it has no
// reset, so it survives rst_ni, and it must not be written while a row is in flight. The contract
// fixes T[0] = 2^F (ops.softmax rejects any other table), so T[0] is hard-wired and a write to
// entry 0 has no effect. That makes S >= 2^F by construction, so R <= Q * 2^17 fits OUT_BITS + 17
// bits (25 for 8-bit outputs) and the divider needs only that many steps; A_i <= S * R <=
// Q * 2^(F+17) + S/2 fits OUT_BITS + F + 17 bits for any table contents.
// The row length is sampled with each row's first input; 0 counts as 1 and values above MAX_N
// as MAX_N. out_last_o marks each row's final probability.
`default_nettype none

module softmax #(
  parameter integer MAX_N    = 256,  // longest row (2..65536); the row buffer has MAX_N entries
  parameter integer IN_BITS  = 8,    // signed input width (2..16)
  parameter integer OUT_BITS = 8,    // unsigned probability width (1..16); Q = 2^OUT_BITS - 1
  parameter integer ENTRIES  = 256,  // exp table entries L (2..2^IN_BITS); d >= L gives E = 0
  parameter integer EXP_FRAC = 23    // T[0] = 2^EXP_FRAC, entries EXP_FRAC + 1 bits (contract: 23)
) (
  input  wire                         clk_i,
  input  wire                         rst_ni,      // synchronous, active low

  // Exp table write port: T[tbl_addr_i] = tbl_data_i (load between rows, once per layer)
  input  wire                         tbl_we_i,
  input  wire [$clog2(ENTRIES)-1:0]   tbl_addr_i,
  input  wire [EXP_FRAC:0]            tbl_data_i,

  // Row length N in [1, MAX_N], sampled with the first input of each row
  input  wire [$clog2(MAX_N+1)-1:0]   row_len_i,

  // Input stream: x_i, signed two's complement
  input  wire                         in_valid_i,
  output wire                         in_ready_o,
  input  wire [IN_BITS-1:0]           in_data_i,

  // Output stream: p_i, unsigned (real value p_i / Q); out_last_o on the row's last element
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
      $display("ERROR: softmax: MAX_N = %0d must be in 2..65536", MAX_N);
      $finish;
    end
    if (IN_BITS < 2 || IN_BITS > 16) begin
      $display("ERROR: softmax: IN_BITS = %0d must be in 2..16", IN_BITS);
      $finish;
    end
    if (OUT_BITS < 1 || OUT_BITS > 16) begin
      $display("ERROR: softmax: OUT_BITS = %0d must be in 1..16", OUT_BITS);
      $finish;
    end
    if (ENTRIES < 2 || ENTRIES > (1 << IN_BITS)) begin
      $display("ERROR: softmax: ENTRIES = %0d must be in 2..2^IN_BITS", ENTRIES);
      $finish;
    end
    if (EXP_FRAC < 1) begin
      $display("ERROR: softmax: EXP_FRAC = %0d must be >= 1", EXP_FRAC);
      $finish;
    end
  end
  // verilator coverage_on

  // ---------------------------------------------------------------- widths and constants
  localparam integer E_BITS = EXP_FRAC + 1;              // exp table entry
  localparam integer RS     = EXP_FRAC + 17;             // reciprocal shift: 2^40
  localparam integer AW     = $clog2(MAX_N);             // row buffer address
  localparam integer LW     = $clog2(MAX_N + 1);         // row length / element counters
  localparam integer TW     = $clog2(ENTRIES);           // exp table address
  localparam integer S_BITS = E_BITS + $clog2(MAX_N);    // S <= MAX_N * (2^E_BITS - 1)
  localparam integer N_BITS = OUT_BITS + RS;             // dividend Q * 2^RS + S/2 < 2^N_BITS
  localparam integer R_BITS = OUT_BITS + 17;             // R <= Q * 2^17 since S >= 2^EXP_FRAC
  localparam integer A_BITS = OUT_BITS + RS;             // A_i + 2^(RS-1) <= Q * 2^RS + S/2 + 2^(RS-1)

  localparam [LW:0]          MAX_N_C   = MAX_N[LW:0];        // one spare bit: comparisons never constant
  localparam [IN_BITS:0]     ENTRIES_C = ENTRIES[IN_BITS:0];
  localparam [OUT_BITS-1:0]  Q_C       = {OUT_BITS{1'b1}};
  localparam [A_BITS-1:0]    HALF_C    = {{OUT_BITS{1'b0}}, 1'b1, {(RS-1){1'b0}}};      // 2^(RS-1)
  localparam [E_BITS-1:0]    ONE_E_C   = {1'b1, {EXP_FRAC{1'b0}}};                     // T[0]
  localparam [LW-1:0]        ONE_C     = {{(LW-1){1'b0}}, 1'b1};

  // States of the processing side (the load side only has a counter and a "full" flag).
  localparam [1:0] ST_IDLE = 2'd0;  // waiting for a loaded row
  localparam [1:0] ST_SUM  = 2'd1;  // pass 2: S = sum of E_i
  localparam [1:0] ST_DIV  = 2'd2;  // R = reciprocal of S
  localparam [1:0] ST_OUT  = 2'd3;  // pass 3: p_i out

  // ---------------------------------------------------------------- memories
  // verilator coverage_off
  // (no toggle coverage of memories: Verilator instruments only arrays of <= 256 bits, i.e. only
  // the smallest builds, where the entries a row fills decide it; the write and read paths are covered)
  reg [IN_BITS-1:0] row_mem [0:MAX_N-1];     // the row, in arrival order
  reg [E_BITS-1:0]  tbl_mem [0:ENTRIES-1];   // exp table T (entry 0 unused: hard-wired)
  // verilator coverage_on

  // ---------------------------------------------------------------- control state
  // Load side: the row being written into the buffer.
  reg [LW-1:0]       ld_cnt_q, ld_cnt_d;     // inputs taken in this row
  reg [LW-1:0]       ld_len_q, ld_len_d;     // its length N
  reg [IN_BITS-1:0]  ld_max_q, ld_max_d;     // its running max (signed)
  reg                ld_full_q, ld_full_d;   // it is complete and waits for the processing side
  // Processing side: the row in SUM, DIV or OUT.
  reg [1:0]          state_q, state_d;
  reg [LW-1:0]       rd_cnt_q, rd_cnt_d;     // buffer reads issued in this pass
  reg [LW-1:0]       len_q, len_d;           // row length N
  reg [IN_BITS-1:0]  max_q, max_d;           // row max
  reg [S_BITS-1:0]   sum_q, sum_d;           // S
  reg [R_BITS-1:0]   r_q, r_d;               // R
  reg                div_sent_q, div_sent_d; // the divider has taken this row's request

  // Read pipeline, shared by SUM and OUT: stage 1 buffer data, 2 table data, 3 product, 4 output.
  reg                v1_q, v2_q, v3_q;       // stage holds an element
  reg                l1_q, l2_q, l3_q;       // ... which is the row's last
  reg                inr2_q;                 // d_i < ENTRIES (else E_i = 0)
  reg                zero2_q;                // d_i = 0: E_i = T[0] = 2^EXP_FRAC
  reg [IN_BITS-1:0]  x1_q;                   // x_i read from the row buffer
  reg [E_BITS-1:0]   t2_q;                   // T[d_i] read from the table
  reg [A_BITS-1:0]   prod3_q;                // E_i * R
  reg [A_BITS-1:0]   acc_q;                  // A_(i-1) + 2^(RS-1): top OUT_BITS bits are P_(i-1)
  reg                out_valid_q;
  reg                out_last_q;
  reg [OUT_BITS-1:0] out_data_q;

  // ---------------------------------------------------------------- input side
  // Length sampled with the first input of a row, clamped to [1, MAX_N].
  wire [LW-1:0] len_in  = (row_len_i == {LW{1'b0}}) ? ONE_C
                        : ({1'b0, row_len_i} > MAX_N_C) ? MAX_N_C[LW-1:0] : row_len_i;
  wire [LW-1:0] len_now = (ld_cnt_q == {LW{1'b0}}) ? len_in : ld_len_q;
  // Slot ld_cnt_q is free when nothing is processed, or OUT has issued its read on an earlier
  // clock (ld_cnt_q < rd_cnt_q) or will never read it (ld_cnt_q >= len_q). SUM and DIV still
  // need the whole row.
  wire          slot_free = (state_q == ST_IDLE)
                         || ((state_q == ST_OUT) && (ld_cnt_q < rd_cnt_q || ld_cnt_q >= len_q));
  wire          in_ready  = !ld_full_q && slot_free;
  wire          in_take   = in_valid_i && in_ready;
  wire          in_last   = (ld_cnt_q == len_now - ONE_C);

  // ---------------------------------------------------------------- read pipeline
  // Every stage moves when the output register is empty or being emptied; SUM never stalls
  // because the output register is empty outside OUT.
  wire adv   = !out_valid_q || out_ready_i;
  wire pass  = (state_q == ST_SUM) || (state_q == ST_OUT);
  wire issue = pass && (rd_cnt_q != len_q) && adv;

  // Stage 1: d_i = mx - x_i in [0, 2^IN_BITS - 1], computed one bit wider than the inputs.
  wire [IN_BITS:0] d1    = {max_q[IN_BITS-1], max_q} - {x1_q[IN_BITS-1], x1_q};
  wire             inr1  = d1 < ENTRIES_C;
  wire             zero1 = d1 == {(IN_BITS+1){1'b0}};

  // Stage 2: E_i, and E_i * R (< 2^A_BITS since E_i * R <= A_i: the product is taken mod 2^A_BITS).
  wire [E_BITS-1:0] e2    = zero2_q ? ONE_E_C : inr2_q ? t2_q : {E_BITS{1'b0}};
  wire [A_BITS-1:0] prod2 = {{(A_BITS-E_BITS){1'b0}}, e2} * {{(A_BITS-R_BITS){1'b0}}, r_q};

  // Stage 3: A_i + 2^(RS-1) = acc + E_i * R; p_i = P_i - P_(i-1), the difference of the top bits.
  wire [A_BITS-1:0]   acc3 = acc_q + prod3_q;
  wire [OUT_BITS-1:0] p3   = acc3[A_BITS-1:RS] - acc_q[A_BITS-1:RS];

  // ---------------------------------------------------------------- divider
  // Q * 2^RS + floor(S/2) is a concatenation: S/2 < 2^(S_BITS-1) <= 2^RS for MAX_N <= 65536.
  wire [N_BITS-1:0] div_dividend = {Q_C, {(RS-S_BITS+1){1'b0}}, sum_q[S_BITS-1:1]};
  wire              div_in_valid = (state_q == ST_DIV) && !div_sent_q;
  wire              div_in_ready;
  wire              div_out_valid;
  wire [R_BITS-1:0] div_quotient;
  wire [S_BITS-1:0] div_rem_unused;  // the remainder is not needed for R

  divu #(
    .N_BITS (N_BITS),
    .D_BITS (S_BITS),
    .Q_BITS (R_BITS)
  ) u_divu (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .in_valid_i      (div_in_valid),
    .in_ready_o      (div_in_ready),
    .in_dividend_i   (div_dividend),
    .in_divisor_i    (sum_q),
    .out_valid_o     (div_out_valid),
    .out_ready_i     (state_q == ST_DIV),
    .out_quotient_o  (div_quotient),
    .out_remainder_o (div_rem_unused)
  );

  // ---------------------------------------------------------------- control
  // A loaded row enters SUM when the processing side is idle or finishing OUT.
  wire out_done = (state_q == ST_OUT) && (rd_cnt_q == len_q) && !v1_q && !v2_q && !v3_q && adv;
  wire start    = ld_full_q && ((state_q == ST_IDLE) || out_done);

  // Load side.
  always @* begin
    ld_cnt_d  = ld_cnt_q;
    ld_len_d  = ld_len_q;
    ld_max_d  = ld_max_q;
    ld_full_d = ld_full_q && !start;
    if (in_take) begin
      ld_len_d = len_now;
      ld_cnt_d = ld_cnt_q + ONE_C;
      if (ld_cnt_q == {LW{1'b0}} || $signed(in_data_i) > $signed(ld_max_q)) begin
        ld_max_d = in_data_i;
      end
      if (in_last) begin
        ld_cnt_d  = {LW{1'b0}};
        ld_full_d = 1'b1;
      end
    end
  end

  // Processing side.
  always @* begin
    state_d    = state_q;
    rd_cnt_d   = rd_cnt_q;
    len_d      = len_q;
    max_d      = max_q;
    sum_d      = sum_q;
    r_d        = r_q;
    div_sent_d = div_sent_q;
    case (state_q)
      ST_IDLE: ;
      ST_SUM: begin
        if (issue) begin
          rd_cnt_d = rd_cnt_q + ONE_C;
        end
        if (v2_q) begin
          sum_d = sum_q + {{(S_BITS-E_BITS){1'b0}}, e2};
        end
        if (rd_cnt_q == len_q && !v1_q && !v2_q) begin
          state_d = ST_DIV;
        end
      end
      ST_DIV: begin
        if (div_in_valid && div_in_ready) begin
          div_sent_d = 1'b1;
        end
        if (div_out_valid) begin
          r_d        = div_quotient;
          div_sent_d = 1'b0;
          rd_cnt_d   = {LW{1'b0}};
          state_d    = ST_OUT;
        end
      end
      default: begin  // ST_OUT
        if (issue) begin
          rd_cnt_d = rd_cnt_q + ONE_C;
        end
        if (out_done) begin  // every element has left the pipeline and the last output is taken
          state_d = ST_IDLE;
        end
      end
    endcase
    if (start) begin
      state_d  = ST_SUM;
      len_d    = ld_len_q;
      max_d    = ld_max_q;
      rd_cnt_d = {LW{1'b0}};
      sum_d    = {S_BITS{1'b0}};
    end
  end

  // ---------------------------------------------------------------- memories (no reset)
  always @(posedge clk_i) begin
    if (in_take) begin
      row_mem[ld_cnt_q[AW-1:0]] <= in_data_i;
    end
    if (issue) begin
      x1_q <= row_mem[rd_cnt_q[AW-1:0]];
    end
  end

  always @(posedge clk_i) begin
    if (tbl_we_i) begin
      tbl_mem[tbl_addr_i] <= tbl_data_i;
    end
    if (adv && v1_q) begin
      t2_q <= tbl_mem[d1[TW-1:0]];
    end
  end

  // ---------------------------------------------------------------- registers
  always @(posedge clk_i) begin
    if (!rst_ni) begin
      ld_cnt_q    <= {LW{1'b0}};
      ld_len_q    <= ONE_C;
      ld_max_q    <= {IN_BITS{1'b0}};
      ld_full_q   <= 1'b0;
      state_q     <= ST_IDLE;
      rd_cnt_q    <= {LW{1'b0}};
      len_q       <= ONE_C;
      max_q       <= {IN_BITS{1'b0}};
      sum_q       <= {S_BITS{1'b0}};
      r_q         <= {R_BITS{1'b0}};
      div_sent_q  <= 1'b0;
      v1_q        <= 1'b0;
      v2_q        <= 1'b0;
      v3_q        <= 1'b0;
      l1_q        <= 1'b0;
      l2_q        <= 1'b0;
      l3_q        <= 1'b0;
      inr2_q      <= 1'b0;
      zero2_q     <= 1'b0;
      prod3_q     <= {A_BITS{1'b0}};
      acc_q       <= HALF_C;
      out_valid_q <= 1'b0;
      out_last_q  <= 1'b0;
      out_data_q  <= {OUT_BITS{1'b0}};
    end else begin
      ld_cnt_q   <= ld_cnt_d;
      ld_len_q   <= ld_len_d;
      ld_max_q   <= ld_max_d;
      ld_full_q  <= ld_full_d;
      state_q    <= state_d;
      rd_cnt_q   <= rd_cnt_d;
      len_q      <= len_d;
      max_q      <= max_d;
      sum_q      <= sum_d;
      r_q        <= r_d;
      div_sent_q <= div_sent_d;
      if (state_q == ST_DIV) begin
        acc_q <= HALF_C;  // the OUT pass starts from A_(-1) = 0 plus the rounding constant
      end
      if (adv) begin
        v1_q        <= issue;
        l1_q        <= issue && (rd_cnt_q == len_q - ONE_C);
        v2_q        <= v1_q;
        l2_q        <= l1_q;
        v3_q        <= v2_q && (state_q == ST_OUT);
        l3_q        <= l2_q;
        out_valid_q <= v3_q;
        out_last_q  <= l3_q;
        // Data registers load only behind a valid element: nothing undefined reaches them.
        if (v1_q) begin
          inr2_q  <= inr1;
          zero2_q <= zero1;
        end
        if (v2_q) begin
          prod3_q <= prod2;
        end
        if (v3_q) begin
          acc_q      <= acc3;
          out_data_q <= p3;
        end
      end
    end
  end

  assign in_ready_o  = in_ready;
  assign out_valid_o = out_valid_q;
  assign out_data_o  = out_data_q;
  assign out_last_o  = out_last_q;

endmodule

`default_nettype wire
