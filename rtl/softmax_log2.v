// softmax_log2: FQ-ViT's log-int-softmax as its authors released it (QIntSoftmax, megvii-research/FQ-ViT),
// over a streamed row: the bit-exact twin of the softmax=log2 variant (hwvit/variants/fqvit_released.py
// log2_stages, round_ratio, log_code).
//
// Per row of N signed IN_BITS scores x_i, with I-BERT's constants at s_in on configuration ports (X = -x0 =
// ceil(0.6931 / s_in), b, c; M = OUT_BITS - 1; docs/variants/hwsoftmax.md):
//   i-exp   a_i = min(max - x_i, 30 X),  q_i = floor(a_i / X) in [0, 30],  rem_i = a_i - q_i X in [0, X),
//           poly_i = c - rem_i (b - rem_i)  (the kernel's (r + b) r + c at r = -rem),
//           E_i = poly_i << (30 - q_i)
//   sum     S = sum E_i                                                                (once per row)
//   ratio   S = Q_i E_i + R_i;  v_i = round_half_even(fl(S / E_i)): the double of S / E_i is Q + 1/2
//           exactly where |2 R - E| 2^(52 - t) < E (or = E, E's low 52 - t bits zero), t = floor(log2 Q),
//           and then rounds to the even of Q, Q + 1; elsewhere v = Q + [2 R > E]
//   log2    code_i = floor(log2 v_i) + (bit below v_i's leading one),  p_i = 2^M >> code_i
// Only Q < 2^OUT_BITS can give code <= M (v >= Q, and v >= 2^(M + 1) has code > M: p = 0), so the
// per-element division has OUT_BITS quotient bits and saturates: S >= E 2^OUT_BITS gives p = 0. Then
// t <= 15, so 52 - t >= 37 and FQ-ViT's 53-bit rounding case t >= 51 never arises here.
//
// Port contract (the variant's prepare, s_in in [2^-9, 1.67): X <= 355, b <= 1387, c <= 731935; IN_BITS
// <= 16, N <= MAX_N <= 4096): X < 2^9, b < 2^11, c < 2^20 and poly(rem) in [1, c] for every rem < X, so
// every E_i >= 1 (at a scale: rem <= X - 1 < 0.6931 / s and b <= 2.7073 / s, so poly > 0.9157 / s^2 - 1,
// above 0 for s < 0.6931; from s = 0.6931 on, X = 1 and rem = 0, poly = c).
// Widths: max - x_i < 2^16, 30 X < 2^14; poly_i < 2^20; E_i < 2^50; S < MAX_N 2^50 <= 2^62 (50 +
// clog2(MAX_N) bits); Q_i < 2^OUT_BITS, R_i < E_i, |2 R - E| <= E.
//
// On the row engine (rtl/row_stream.v; three stages): FILL takes the max (rtl/row_max.v); PASS re-reads the
// row (stage 1 x_i, stage 2 E_i: a clamp, five restoring steps, the polynomial, a shift) into S; OUT
// computes E_i again (cheaper than storing 50-bit E_i), divides S by it (OUT_BITS restoring steps in one
// clock: a divide per element at one element per clock, paid in logic depth), rounds, takes the code and
// p_i into the output register. CALC has nothing to do: S stays in its accumulator through the row's OUT,
// since the next row's pass starts only once the row before has left stage 2. The configuration ports
// must be steady while a row is in flight.

`default_nettype none

module softmax_log2 #(
  parameter integer MAX_N    = 256,  // row buffer entries: rows of 1..MAX_N (MAX_N in 2..4096)
  parameter integer IN_BITS  = 8,    // score width, signed, 2..16
  parameter integer OUT_BITS = 8     // M + 1, the probability's width (1..16), unsigned at 2^-M
) (
  input  wire                         clk_i, rst_ni,  // rst_ni: synchronous, active low
  input  wire [8:0]                   x0_mag_i,    // X = -x0 = ceil(0.6931 / s_in), 1..355 (steady while rows fly)
  input  wire [10:0]                  b_i,         // b = floor(2.7073 / s_in)
  input  wire [19:0]                  c_i,         // c = floor(2.7921 / s_in^2): c - rem (b - rem) in [1, c]
  input  wire [$clog2(MAX_N+1)-1:0]   row_len_i,   // N, 1..MAX_N, taken with each row's first score
  input  wire in_valid_i, input wire [IN_BITS-1:0] in_data_i, output wire in_ready_o,  // x_i
  output wire out_valid_o, output wire [OUT_BITS-1:0] out_data_o, output wire out_last_o,  // p_i
  input  wire out_ready_i
);

  localparam integer EB     = 50;                                   // E_i < 2^50
  localparam integer AW = $clog2(MAX_N), LW = $clog2(MAX_N + 1);    // slot index, row length
  localparam integer S_BITS = EB + AW;                              // S < MAX_N 2^50
  localparam integer DW     = S_BITS + OUT_BITS;                    // S, and E 2^j for j <= OUT_BITS
  localparam [OUT_BITS-1:0] TOP_C = {1'b1, {(OUT_BITS-1){1'b0}}};   // 2^M

  // ---------------------------------------------------------------- row engine, row maximum
  wire [3:1]          ld;
  wire [IN_BITS-1:0]  x1, mx;
  wire                go, pass, fill, first;
  wire [OUT_BITS-1:0] out_d;
  wire                start_unused, enter_unused, passed_unused, calc_unused;
  wire [AW-1:0]       rd_addr_unused, fill_addr_unused, idx_unused;
  wire [LW-1:0]       row_len_unused, len_unused;
  wire [IN_BITS-1:0]  fill_max_unused;
  row_stream #(.NAME("softmax_log2"), .LIMIT(4096), .MAX_N(MAX_N), .W(IN_BITS), .OUT_MIN(1), .OUT_BITS(OUT_BITS),
    .DEPTH(3), .PASS(1), .PASS_EXIT(2), .PRE_CALC(0), .GO_AFTER(2)) u_stream (
    .clk_i(clk_i), .rst_ni(rst_ni), .len_i(row_len_i), .in_valid_i(in_valid_i), .in_data_i(in_data_i),
    .in_ready_o(in_ready_o), .out_valid_o(out_valid_o), .out_data_o(out_data_o), .out_last_o(out_last_o),
    .out_ready_i(out_ready_i), .go_o(go), .calc_o(calc_unused), .pass_o(pass), .fill_o(fill), .first_o(first),
    .done_i(1'b1), .x1_o(x1), .ld_o(ld), .out_i(out_d), .start_o(start_unused), .enter_o(enter_unused),
    .passed_o(passed_unused), .rd_addr_o(rd_addr_unused), .fill_addr_o(fill_addr_unused), .idx_o(idx_unused),
    .row_len_o(row_len_unused), .len_o(len_unused)
  );

  row_max #(.W(IN_BITS)) u_max (.clk_i(clk_i), .go_i(go), .first_i(first), .fill_i(fill), .data_i(in_data_i),
                                 .max_o(mx), .fill_max_o(fill_max_unused));

  // ---------------------------------------------------------------- i-exp of x1 (PASS and OUT)
  wire [IN_BITS:0] dfull = {mx[IN_BITS-1], mx} - {x1[IN_BITS-1], x1};            // max - x >= 0
  wire [16:0]      dw    = {{(16-IN_BITS){1'b0}}, dfull};
  wire [16:0]      xw    = {8'd0, x0_mag_i};
  wire [16:0]      cap   = (xw << 5) - (xw << 1);                               // 30 X < 2^14
  reg  [16:0]      part;                                                        // ends as rem < X
  reg  [4:0]       qe;
  integer          j;
  always @* begin
    part = (dw > cap) ? cap : dw;
    qe   = 5'd0;
    for (j = 4; j >= 0; j = j - 1) begin
      if (part >= (xw << j)) begin
        part  = part - (xw << j);
        qe[j] = 1'b1;
      end
    end
  end
  wire [31:0]      remw  = {23'd0, part[8:0]};
  wire [31:0]      poly  = {12'd0, c_i} - remw * ({21'd0, b_i} - remw);        // c - rem (b - rem) in [1, c]
  wire [EB-1:0]    ew    = {{(EB-20){1'b0}}, poly[19:0]} << (5'd30 - qe);

  // ---------------------------------------------------------------- S, and v = round(S / E_i)
  reg  [S_BITS-1:0] acc_q;  // S
  reg  [EB-1:0]     e2_q;   // stage 2: E_i
  always @(posedge clk_i) begin
    if (go) begin
      acc_q <= {S_BITS{1'b0}};
    end else if (pass && ld[3]) begin  // a pass element leaves stage 2
      acc_q <= acc_q + {{AW{1'b0}}, e2_q};
    end
    if (ld[2]) begin
      e2_q <= ew;
    end
  end

  wire [DW-1:0]     ed   = {{(DW-EB){1'b0}}, e2_q};
  wire              sat  = {{OUT_BITS{1'b0}}, acc_q} >= (ed << OUT_BITS);          // Q >= 2^OUT_BITS
  reg  [DW-1:0]     rr;                                                          // ends as R < E
  reg  [OUT_BITS-1:0] quo;
  integer           i;
  always @* begin
    rr  = {{OUT_BITS{1'b0}}, acc_q};
    quo = {OUT_BITS{1'b0}};
    for (i = OUT_BITS - 1; i >= 0; i = i - 1) begin
      if (rr >= (ed << i)) begin
        rr     = rr - (ed << i);
        quo[i] = 1'b1;
      end
    end
  end
  wire [EB-1:0]     rem  = rr[EB-1:0];
  wire [EB-1:0]     rest = e2_q - rem;                                           // E - R
  wire [EB-1:0]     gap = (rem >= rest) ? rem - rest : rest - rem;              // |2 R - E|
  reg  [3:0]        t;                                                           // floor(log2 Q)
  integer           m;
  always @* begin
    t = 4'd0;
    for (m = 1; m < OUT_BITS; m = m + 1) begin
      if (quo[m]) begin
        t = m[3:0];
      end
    end
  end
  wire [5:0]        sh    = 6'd52 - {2'd0, t};                                   // 52 - t in [37, 52]
  wire [EB-1:0]     lowm  = ~({EB{1'b1}} << sh);                                 // 2^(52 - t) - 1
  wire              below = gap <= ((e2_q - {{(EB-1){1'b0}}, 1'b1}) >> sh);     // gap 2^(52-t) < E
  wire              at    = ((e2_q & lowm) == {EB{1'b0}}) && (gap == (e2_q >> sh));  // = E: a 53-bit tie
  wire              up    = (below || at) ? quo[0] : (rem > rest);
  wire [OUT_BITS:0] v     = {1'b0, quo} + {{OUT_BITS{1'b0}}, up};

  // ---------------------------------------------------------------- log2 code, p
  reg  [4:0]        code;
  integer           k;
  always @* begin
    code = 5'd0;
    for (k = 1; k <= OUT_BITS; k = k + 1) begin
      if (v[k]) begin
        code = k[4:0] + {4'd0, v[k-1]};
      end
    end
  end
  assign out_d = sat ? {OUT_BITS{1'b0}} : (TOP_C >> code);

  wire unused_bits = ^{rr[DW-1:EB], part[16:9], poly[31:20], ld[1], calc_unused, start_unused, enter_unused,
                       passed_unused, rd_addr_unused, fill_addr_unused, idx_unused, row_len_unused, len_unused,
                       fill_max_unused};

endmodule

`default_nettype wire
