// softmax_log2_exact: FQ-ViT's log-int-softmax over a streamed row, the bit-exact twin of the softmax=log2
// variant (hwvit/variants/hwsoftmax.py _log2_kernel).
//
// Per row of N signed IN_BITS scores x_i, with I-BERT's constants at the working scale s_in / 2^k on
// configuration ports (k = in_shift, q_ln2, q_b, q_c, n = exp_shift; docs/variants/hwsoftmax.md; M =
// OUT_BITS - 1):
//   i-exp   a_i = (max - x_i) << k = -d_i,  z_i = floor(a_i / q_ln2),  rem_i = a_i - z_i q_ln2
//           in [0, q_ln2) (the kernel's q_p = -rem),  L_i = (q_b - rem_i)^2 + q_c,
//           E_i = floor(L_i 2^(n - z_i)) = L_i << (n - z_i) or L_i >> (z_i - n)
//   sum     S = sum E_i,  S2 = S^2                                                (once per row)
//   log2    code_i = #{j in 1..M+1 : floor(S2 / 2^(2j-1)) >= E_i^2}  (= round(log2(S / E_i)), capped)
//           p_i = 2^M >> code_i                    (0 at code M + 1; scale 2^-M)
// L_i < 2^50, so z_i - n >= 50 gives E_i = 0: with n <= 11 every z >= 64 does, and the division needs z
// only below 64: the test a >= 64 q_ln2, then six restoring steps.
//
// Widths (IN_BITS <= 16, s_in in [2^-24, 2^16] so k <= 19, 5 <= q_ln2 <= ln2 2^24 < 2^24, q_b <= 1.353 2^24
// < 2^25, q_c <= 0.96 2^48 < 2^48, n in [-31, 11], N <= MAX_N <= 4096):
//   a_i < 2^16 2^19 = 2^35 (36-bit arithmetic); 64 q_ln2 < 2^30; rem_i < q_ln2 < 2^24;
//   q_b - rem_i in [1, q_b] (q_b >= q_ln2 > rem: 1.353 > ln 2), 25 bits; L_i <= q_b^2 + q_c
//   < 2.79 / s^2 <= 2^50; z_i - n in [-11, 94] (8 bits signed); E_i <= L(0) 2^n < 2^19 (n is
//   chosen so: n = 19 - bitlen(q_b^2 + q_c)), formed in 64 bits (L << 11 < 2^61) and cut to 19;
//   S < MAX_N 2^19 <= 2^31 (19 + clog2(MAX_N) bits), S2 < 2^62; E_i^2 < 2^38.
//
// On the row engine (rtl/row_stream.v; three stages): FILL takes the max (rtl/row_max.v); PASS re-reads the
// row (stage 1 x_i, stage 2 E_i: the shift, the test and six restoring steps, the square, the shift by z -
// n) into S; CALC, one clock, squares S; OUT computes E_i again (cheaper than storing 19-bit E_i), E_i^2
// and OUT_BITS comparisons with the shifts of S2, p_i into the output register. A row's pass waits until
// the row before has left stage 2. The configuration ports must be steady while a row is in flight.

`default_nettype none

module softmax_log2_exact #(
  parameter integer MAX_N    = 256,  // longest row (2..4096); the row buffer has MAX_N entries
  parameter integer IN_BITS  = 8,    // signed input width (2..16)
  parameter integer OUT_BITS = 8     // unsigned probability width (1..16), scale 2^-(OUT_BITS-1)
) (
  input  wire clk_i, input wire rst_ni,  // rst_ni: synchronous, active low
  // Configuration (hwvit/variants/hwsoftmax.py _log2_prepare)
  input  wire [$clog2(MAX_N+1)-1:0]   row_len_i,    // N in [1, MAX_N], sampled with a row's first input
  input  wire [4:0]                   in_shift_i,   // k <= 19
  input  wire [23:0]                  q_ln2_i,      // q_ln2 = floor(ln2 / s) >= 5
  input  wire [24:0]                  q_b_i,        // q_b = floor(1.353 / s)
  input  wire [47:0]                  q_c_i,        // q_c = floor(0.344 / (0.3585 s^2))
  input  wire [5:0]                   exp_shift_i,  // n, signed, in [-31, 11]
  input  wire in_valid_i, output wire in_ready_o, input wire [IN_BITS-1:0] in_data_i,  // x_i, signed
  output wire out_valid_o, input wire out_ready_i, output wire out_last_o,  // with each row's last
  output wire [OUT_BITS-1:0] out_data_o  // p_i, unsigned (p_i / 2^(OUT_BITS-1))
);

  localparam integer AW = $clog2(MAX_N), LW = $clog2(MAX_N + 1);  // buffer address, row length
  localparam integer EB      = 19;                  // E_i < 2^19
  localparam integer S_BITS  = EB + AW;             // S < MAX_N 2^19
  localparam integer S2_BITS = 62;                  // S2 < 2^62
  localparam [OUT_BITS-1:0] TOP_C = {1'b1, {(OUT_BITS-1){1'b0}}};   // 2^M

  // ---------------------------------------------------------------- the engine and the max
  wire                fill, first, go, calc, pass, enter_unused, passed_unused, start_unused;
  wire [IN_BITS-1:0]  x1, mx, fill_max_unused;
  wire [3:1]          ld;
  wire [OUT_BITS-1:0] out_d;
  wire [AW-1:0]       fill_addr_unused, rd_addr_unused, idx_unused;
  wire [LW-1:0]       len_unused, row_len_unused;
  row_stream #(
    .NAME("softmax_log2_exact"), .MAX_N(MAX_N), .LIMIT(4096), .W(IN_BITS), .OUT_BITS(OUT_BITS), .OUT_MIN(1), .DEPTH(3),
    .PASS(1), .PASS_EXIT(2), .PRE_CALC(0), .GO_AFTER(2)) u_stream (
    .clk_i(clk_i), .rst_ni(rst_ni), .len_i(row_len_i), .in_valid_i(in_valid_i), .in_ready_o(in_ready_o),
    .in_data_i(in_data_i), .out_valid_o(out_valid_o), .out_ready_i(out_ready_i), .out_data_o(out_data_o),
    .out_last_o(out_last_o), .fill_o(fill), .first_o(first), .fill_addr_o(fill_addr_unused), .len_o(len_unused),
    .go_o(go), .calc_o(calc), .enter_o(enter_unused), .passed_o(passed_unused), .done_i(1'b1), .pass_o(pass),
    .start_o(start_unused), .row_len_o(row_len_unused), .rd_addr_o(rd_addr_unused), .idx_o(idx_unused), .x1_o(x1),
    .ld_o(ld), .out_i(out_d)
  );

  row_max #(.W(IN_BITS)) u_max (.clk_i(clk_i), .fill_i(fill), .first_i(first), .data_i(in_data_i), .go_i(go),
                                 .fill_max_o(fill_max_unused), .max_o(mx));

  // ---------------------------------------------------------------- i-exp of x1 (PASS and OUT)
  wire [IN_BITS:0] dfull = {mx[IN_BITS-1], mx} - {x1[IN_BITS-1], x1};            // max - x >= 0
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

  // ---------------------------------------------------------------- S, S2 and the log2 code of E_i
  reg  [EB-1:0]      e2_q;   // stage 2: E_i
  reg  [S_BITS-1:0]  sum_q;  // S
  reg  [S2_BITS-1:0] s2_q;   // S2
  always @(posedge clk_i) begin
    if (ld[2]) begin
      e2_q <= ew[EB-1:0];
    end
    if (go) begin
      sum_q <= {S_BITS{1'b0}};
    end else if (pass && ld[3]) begin  // a pass element leaves stage 2
      sum_q <= sum_q + {{AW{1'b0}}, e2_q};
    end
    if (calc) begin
      s2_q <= {{(S2_BITS-S_BITS){1'b0}}, sum_q} * {{(S2_BITS-S_BITS){1'b0}}, sum_q};
    end
  end

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
  assign out_d = TOP_C >> code;

  wire unused_bits = ^{ew[63:EB], t[35:25], fill_max_unused, fill_addr_unused, rd_addr_unused, idx_unused,
                       len_unused, row_len_unused, enter_unused, passed_unused, start_unused, ld[1]};

endmodule

`default_nettype wire
