// softmax_log2: FQ-ViT's log-int-softmax over a streamed row, the bit-exact twin of the
// softmax=log2 variant (hwvit/variants/hwsoftmax.py _log2_kernel).
//
// Per row of N signed IN_BITS scores x_i, with I-BERT's constants at the working scale s_in / 2^k
// on configuration ports (k = in_shift, q_ln2, q_b, q_c, n = exp_shift; docs/variants/hwsoftmax.md;
// M = OUT_BITS - 1):
//   i-exp   a_i = (max - x_i) << k = -d_i,  z_i = floor(a_i / q_ln2),  rem_i = a_i - z_i q_ln2
//           in [0, q_ln2) (the kernel's q_p = -rem),  L_i = (q_b - rem_i)^2 + q_c,
//           E_i = floor(L_i 2^(n - z_i)) = L_i << (n - z_i) or L_i >> (z_i - n)
//   sum     S = sum E_i,  S2 = S^2                                                (once per row)
//   log2    code_i = #{j in 1..M+1 : floor(S2 / 2^(2j-1)) >= E_i^2}  (= round(log2(S / E_i)), capped)
//           p_i = 2^M >> code_i                    (0 at code M + 1; scale 2^-M)
// L_i < 2^50, so z_i - n >= 50 gives E_i = 0: with n <= 11 every z >= 64 does, and the division
// needs z only below 64: the test a >= 64 q_ln2, then six restoring steps.
//
// Widths (IN_BITS <= 16, s_in in [2^-24, 2^16] so k <= 19, 5 <= q_ln2 <= ln2 2^24 < 2^24,
// q_b <= 1.353 2^24 < 2^25, q_c <= 0.96 2^48 < 2^48, n in [-31, 11], N <= MAX_N <= 4096):
//   a_i < 2^16 2^19 = 2^35 (36-bit arithmetic); 64 q_ln2 < 2^30; rem_i < q_ln2 < 2^24;
//   q_b - rem_i in [1, q_b] (q_b >= q_ln2 > rem: 1.353 > ln 2), 25 bits; L_i <= q_b^2 + q_c
//   < 2.79 / s^2 <= 2^50; z_i - n in [-11, 94] (8 bits signed); E_i <= L(0) 2^n < 2^19 (n is
//   chosen so: n = 19 - bitlen(q_b^2 + q_c)), formed in 64 bits (L << 11 < 2^61) and cut to 19;
//   S < MAX_N 2^19 <= 2^31 (19 + clog2(MAX_N) bits), S2 < 2^62; E_i^2 < 2^38.
//
// Flow of a row (one row at a time; the row buffer holds MAX_N scores):
//   LOAD  accept N inputs (one per clock when offered), write them, keep the running max;
//   SUM   re-read the row: E_i (read, then one stage: shift, the test and six restoring steps,
//         the square, the shift by z - n), accumulate S;
//   SQ    S2 = S^2 (one clock);
//   OUT   re-read the row, E_i again (cheaper than storing 19-bit E_i per element), E_i^2,
//         OUT_BITS comparisons with the shifts of S2, p_i into the output register; one per
//         clock when accepted; out_last_o marks the row's last p_i. Then LOAD of the next row.
// The row length N is sampled with the row's first input (0 counts as 1, above MAX_N as MAX_N);
// the other configuration ports must be steady while a row is in flight. Reset (rst_ni,
// synchronous, active low) drops any partial row and clears the state, the valid flags and the
// output register; the row buffer and the data registers each row writes before it reads them
// (N, max, counter, S, S2, E) keep their values.
`default_nettype none

module softmax_log2 #(
  parameter integer MAX_N    = 256,  // longest row (2..4096); the row buffer has MAX_N entries
  parameter integer IN_BITS  = 8,    // signed input width (2..16)
  parameter integer OUT_BITS = 8     // unsigned probability width (1..16), scale 2^-(OUT_BITS-1)
) (
  input  wire                         clk_i,
  input  wire                         rst_ni,       // synchronous, active low

  // Configuration (hwvit/variants/hwsoftmax.py _log2_prepare)
  input  wire [$clog2(MAX_N+1)-1:0]   row_len_i,    // N in [1, MAX_N], sampled with a row's first input
  input  wire [4:0]                   in_shift_i,   // k <= 19
  input  wire [23:0]                  q_ln2_i,      // q_ln2 = floor(ln2 / s) >= 5
  input  wire [24:0]                  q_b_i,        // q_b = floor(1.353 / s)
  input  wire [47:0]                  q_c_i,        // q_c = floor(0.344 / (0.3585 s^2))
  input  wire [5:0]                   exp_shift_i,  // n, signed, in [-31, 11]

  // Input stream: x_i, signed two's complement
  input  wire                         in_valid_i,
  output wire                         in_ready_o,
  input  wire [IN_BITS-1:0]           in_data_i,

  // Output stream: p_i, unsigned; out_last_o on the row's last element
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
    if (MAX_N < 2 || MAX_N > 4096) begin
      $display("ERROR: softmax_log2: MAX_N = %0d must be in 2..4096 (S < 2^31)", MAX_N);
      $finish;
    end
    if (IN_BITS < 2 || IN_BITS > 16) begin
      $display("ERROR: softmax_log2: IN_BITS = %0d must be in 2..16", IN_BITS);
      $finish;
    end
    if (OUT_BITS < 1 || OUT_BITS > 16) begin
      $display("ERROR: softmax_log2: OUT_BITS = %0d must be in 1..16", OUT_BITS);
      $finish;
    end
  end
  // verilator coverage_on

  // ---------------------------------------------------------------- widths and constants
  localparam integer AW     = $clog2(MAX_N);        // row buffer address
  localparam integer LW     = $clog2(MAX_N + 1);    // row length / element counters
  localparam integer EB     = 19;                   // E_i < 2^19
  localparam integer S_BITS = EB + AW;              // S < MAX_N 2^19
  localparam integer S2_BITS = 62;                  // S2 < 2^62

  localparam [LW:0]          MAX_N_C = MAX_N[LW:0]; // one spare bit: comparisons never constant
  localparam [LW-1:0]        ONE_C   = {{(LW-1){1'b0}}, 1'b1};
  localparam [OUT_BITS-1:0]  TOP_C   = {1'b1, {(OUT_BITS-1){1'b0}}};   // 2^M

  localparam [1:0] ST_LOAD = 2'd0;  // taking the row's inputs
  localparam [1:0] ST_SUM  = 2'd1;  // pass 2: S = sum of E_i
  localparam [1:0] ST_SQ   = 2'd2;  // S2 = S^2
  localparam [1:0] ST_OUT  = 2'd3;  // pass 3: p_i out

  // ---------------------------------------------------------------- memories
  // verilator coverage_off
  // (no toggle coverage of memories; their write and read paths are covered)
  reg [IN_BITS-1:0] row_mem [0:MAX_N-1];   // the row, in arrival order
  // verilator coverage_on

  // ---------------------------------------------------------------- state
  reg [1:0]           state_q;
  reg [LW-1:0]        ld_cnt_q;     // inputs taken in this row
  reg [LW-1:0]        len_q;        // row length N
  reg [IN_BITS-1:0]   max_q;        // running max (signed)
  reg [LW-1:0]        rd_cnt_q;     // buffer reads issued in this pass
  reg [S_BITS-1:0]    sum_q;        // S
  reg [S2_BITS-1:0]   s2_q;         // S2
  reg                 v1_q, l1_q;   // x1_q holds an element (the row's last)
  reg [IN_BITS-1:0]   x1_q;         // x_i read from the row buffer
  reg                 v2_q, l2_q;   // e2_q holds an element (the row's last)
  reg [EB-1:0]        e2_q;         // E_i
  reg                 out_valid_q, out_last_q;
  reg [OUT_BITS-1:0]  out_data_q;

  // ---------------------------------------------------------------- input side
  wire [LW-1:0] len_in  = (row_len_i == {LW{1'b0}}) ? ONE_C
                        : ({1'b0, row_len_i} > MAX_N_C) ? MAX_N_C[LW-1:0] : row_len_i;
  wire          first   = (ld_cnt_q == {LW{1'b0}});
  wire [LW-1:0] len_now = first ? len_in : len_q;
  wire          in_ready = (state_q == ST_LOAD);
  wire          in_take  = in_valid_i && in_ready;
  wire          in_last  = (ld_cnt_q == len_now - ONE_C);

  // ---------------------------------------------------------------- i-exp of x1_q (SUM and OUT)
  wire [IN_BITS:0] dfull = {max_q[IN_BITS-1], max_q} - {x1_q[IN_BITS-1], x1_q};  // max - x >= 0
  wire [35:0]      a     = {{(35-IN_BITS){1'b0}}, dfull} << in_shift_i;         // < 2^35
  wire [35:0]      qw    = {12'd0, q_ln2_i};
  wire             big   = a >= (qw << 6);                                      // z >= 64: E = 0
  reg  [35:0]      part;                                                        // ends as rem < q_ln2
  reg  [5:0]       z;
  integer          j;
  always @* begin
    part = a;
    z    = 6'd0;
    for (j = 5; j >= 0; j = j - 1) begin
      if (part >= (qw << j)) begin
        part = part - (qw << j);
        z[j] = 1'b1;
      end
    end
  end
  wire [35:0]      t     = {11'd0, q_b_i} - part;                               // q_b - rem in [1, q_b]
  wire [49:0]      lpoly = t[24:0] * t[24:0] + {2'd0, q_c_i};                   // L < 2^50
  wire [7:0]       sh    = {2'd0, z} - {{2{exp_shift_i[5]}}, exp_shift_i};      // z - n in [-11, 94]
  wire [7:0]       nsh   = 8'd0 - sh;                                           // n - z when z < n
  wire [63:0]      lw    = {14'd0, lpoly};
  wire [63:0]      ew    = big ? 64'd0 : sh[7] ? (lw << nsh) : (lw >> sh);      // floor(L 2^(n-z))
  wire [EB-1:0]    e1    = ew[EB-1:0];                                          // < 2^19

  // ---------------------------------------------------------------- log2 code of e2_q
  wire [37:0]      esq   = {19'd0, e2_q} * {19'd0, e2_q};                       // E^2 < 2^38
  reg  [4:0]       code;
  integer          k;
  always @* begin
    code = 5'd0;
    for (k = 1; k <= OUT_BITS; k = k + 1) begin
      if ((s2_q >> (2 * k - 1)) >= {24'd0, esq}) begin
        code = code + 5'd1;
      end
    end
  end
  wire [OUT_BITS-1:0] p = TOP_C >> code;
  wire unused_bits = ^{ew[63:EB], t[35:25]};  // E < 2^19; q_b - rem < 2^25

  // ---------------------------------------------------------------- read pipeline and output
  // Read stage (x1_q), E stage (e2_q), then the output register; SUM never stalls (the output
  // register is empty outside OUT), OUT moves when the output register is empty or being emptied.
  wire adv   = !out_valid_q || out_ready_i;
  wire pass  = (state_q == ST_SUM) || (state_q == ST_OUT);
  wire issue = pass && (rd_cnt_q != len_q) && adv;
  wire pass_done = (rd_cnt_q == len_q) && !v1_q && !v2_q;
  wire out_done  = (state_q == ST_OUT) && pass_done && adv;

  // ---------------------------------------------------------------- row buffer (no reset)
  always @(posedge clk_i) begin
    if (in_take) begin
      row_mem[ld_cnt_q[AW-1:0]] <= in_data_i;
    end
    if (issue) begin
      x1_q <= row_mem[rd_cnt_q[AW-1:0]];
    end
  end

  // ---------------------------------------------------------------- control
  always @(posedge clk_i) begin
    if (!rst_ni) begin
      state_q     <= ST_LOAD;
      ld_cnt_q    <= {LW{1'b0}};
      v1_q        <= 1'b0;
      v2_q        <= 1'b0;
      out_valid_q <= 1'b0;
      out_last_q  <= 1'b0;
      out_data_q  <= {OUT_BITS{1'b0}};
    end else begin
      if (adv) begin
        v1_q        <= issue;
        l1_q        <= issue && (rd_cnt_q == len_q - ONE_C) && (state_q == ST_OUT);
        v2_q        <= v1_q;
        l2_q        <= l1_q;
        out_valid_q <= v2_q && (state_q == ST_OUT);
        out_last_q  <= l2_q && v2_q;
        if (v1_q) begin
          e2_q <= e1;
        end
        if (v2_q) begin
          out_data_q <= p;
        end
      end
      if (issue) begin
        rd_cnt_q <= rd_cnt_q + ONE_C;
      end
      case (state_q)
        ST_LOAD: begin
          if (in_take) begin
            len_q    <= len_now;
            ld_cnt_q <= ld_cnt_q + ONE_C;
            if (first || $signed(in_data_i) > $signed(max_q)) begin
              max_q <= in_data_i;
            end
            if (in_last) begin
              ld_cnt_q <= {LW{1'b0}};
              rd_cnt_q <= {LW{1'b0}};
              sum_q    <= {S_BITS{1'b0}};
              state_q  <= ST_SUM;
            end
          end
        end
        ST_SUM: begin
          if (v2_q) begin
            sum_q <= sum_q + {{AW{1'b0}}, e2_q};
          end
          if (pass_done) begin
            state_q <= ST_SQ;
          end
        end
        ST_SQ: begin
          s2_q     <= {{(S2_BITS-S_BITS){1'b0}}, sum_q} * {{(S2_BITS-S_BITS){1'b0}}, sum_q};
          rd_cnt_q <= {LW{1'b0}};
          state_q  <= ST_OUT;
        end
        default: begin  // ST_OUT
          if (out_done) begin
            state_q <= ST_LOAD;
          end
        end
      endcase
    end
  end

  assign in_ready_o  = in_ready;
  assign out_valid_o = out_valid_q;
  assign out_data_o  = out_data_q;
  assign out_last_o  = out_last_q;

endmodule

`default_nettype wire
