// gelu_shiftgelu: I-ViT's ShiftGELU as its authors released it (IntGELU and the QuantAct after it,
// zkkli/I-ViT), over a streamed row: the bit-exact twin of gelu=shiftgelu (hwvit/variants/ivit_released.py
// gelu_stages; docs/variants/ivit.md). The sigmoid is taken on the row's maximum, so a row (a token's
// hidden features) streams through the block as a softmax row does.
//
// Per row of N signed IN_BITS inputs x_i, with I_0 = ceil(1 / (1.702 s_in)) and QuantAct's (M, E) on
// configuration ports:
//   ShiftExp(u), u = -P of P = D + (D >> 1) - (D >> 4) (floor shifts: u = a + ceil(a/2) - ceil(a/16) for
//             D = -a), u' = min(u, 23 I_0), q = floor(u' / I_0), r = u' - q I_0 in [0, I_0),
//             E = ((2 I_0 - r) << min(23 - q, 33)) >> 1
//   e1_i = ShiftExp of a_i = max - x_i >= 0 (per element),  e2 = ShiftExp of a = max (per row; a < 0 when
//             the row is negative: q < 0, the long shifts)
//   S'_i = min(e1_i + e2, 2^31 - 1),  factor_i = floor((2^31 - 1) / S'_i)              (per element)
//   sig_i = (e1_i factor_i) >> 24,  t_i = x_i sig_i,  out_i = sat_OUT_BITS(round_half_even(t_i M / 2^E))
//
// Widths (IN_BITS <= 16, 1 <= I_0 <= 2^16):
//   a_i < 2^16, u < 2^17, 23 I_0 < 2^21; q in [0, 23] (five restoring steps), 2 I_0 - r in [I_0 + 1, 2 I_0]
//   (18 bits), so I_0 <= e1_i <= I_0 2^23 <= 2^39 (40 bits; I_0 itself at q = 23, r = 0).
//   e2 only matters through S' = min(e1 + min(e2, 2^31 - 1), 2^31 - 1) (e1 >= 0), so it is kept saturated
//   at 2^31 - 1: with w = u' + 8 I_0 (|u| < 2^16, w <= 31 I_0 < 2^21: signed 22 bits), floor(w / I_0) =
//   q + 8 = q_w; w < 0 means q < -8, a shift 23 - q > 31 (capped at 33 or not), and E >= 2^31 since
//   2 I_0 - r >= 2; otherwise q_w in [0, 31] (five steps) and the shift 31 - q_w in [0, 31] is below the
//   cap: (2 I_0 - r) << 31 - q_w < 2^49, compared with 2^31 - 1.
//   S' >= min(2 I_0, 2^31 - 1) >= 2 (e1, e2 >= I_0), so factor <= 2^30 - 1: of the 31
//   restoring steps of the dividend 2^31 - 1 the first gives 0; the divider runs 32 steps on the 32-bit
//   dividend 0111...1 (four stages of eight) and keeps quotient bits [29:0].
//   Unclamped (e1 + e2 < 2^31 - 1, S' = e1 + e2 > e1): e1 factor <= e1 (2^31 - 1) / S' < 2^31 - 1, formed
//   in 31 bits from e1's low 31 (e1 < S' < 2^31), sig <= 127. Clamped: factor = 1, sig = e1 >> 24 <= 2^15.
//   |t_i| <= 2^15 2^15 = 2^30 (signed 31); M in [2^30, 2^31] (batch_frexp of a positive scale, unsigned
//   32), |t M| <= 2^61: round_half_even by rtl/round_sat.v at 64 bits with E in 0..63; E >= 63 gives 0
//   as the kernel does (|t M| / 2^E <= 1/4), so E is clamped to 63.
//
// On the row engine (rtl/row_stream.v; eight stages): FILL takes the max (rtl/row_max.v); CALC (one clock)
// registers e2; OUT: stage 1 x_i, 2 e1_i and S'_i, 3..6 the division (eight steps each: a divide per
// element at one element per clock, pipelined), 7 t_i, 8 the rounded, saturated output. A row's CALC waits
// until the row before has left stage 1 (the only stage that reads the max and e2). The configuration
// ports (I_0, M, E) must be steady while a row is in flight; E >= 0 (the QuantAct scale s_in 2^-7 / s_out
// below 2^31).

`default_nettype none

module gelu_shiftgelu #(
  parameter integer MAX_N    = 256,  // row buffer entries: rows of 1..MAX_N (MAX_N in 2..4096)
  parameter integer IN_BITS  = 8,    // input width, signed, 2..16
  parameter integer OUT_BITS = 8     // output width, signed, 2..16
) (
  input  wire                         clk_i, rst_ni,  // rst_ni: synchronous, active low
  input  wire [16:0]                  i0_i,        // I_0 = ceil(1 / (1.702 s_in)), 1..2^16
  input  wire [31:0]                  multiplier_i,   // QuantAct's M, 2^30..2^31
  input  wire [6:0]                   shift_i,     // QuantAct's E, 0..127
  input  wire [$clog2(MAX_N+1)-1:0]   row_len_i,   // N, 1..MAX_N, taken with each row's first input
  input  wire in_valid_i, input wire [IN_BITS-1:0] in_data_i, output wire in_ready_o,  // x_i
  output wire out_valid_o, output wire [OUT_BITS-1:0] out_data_o, output wire out_last_o,  // out_i, signed
  input  wire out_ready_i
);

  localparam integer AW = $clog2(MAX_N), LW = $clog2(MAX_N + 1);  // slot index, row length
  localparam [30:0]  TOP = {31{1'b1}};                             // 2^31 - 1

  // ---------------------------------------------------------------- row engine, row maximum
  wire [8:1]          ld;
  wire [IN_BITS-1:0]  x1, mx;
  wire                fill, first, go, calc;
  wire [OUT_BITS-1:0] out_d;
  wire                enter_unused, pass_unused, passed_unused, start_unused;
  wire [LW-1:0]       len_unused, row_len_unused;
  wire [AW-1:0]       idx_unused, fill_addr_unused, rd_addr_unused;
  wire [IN_BITS-1:0]  fill_max_unused;
  row_stream #(.NAME("gelu_shiftgelu"), .LIMIT(4096), .MAX_N(MAX_N), .W(IN_BITS), .OUT_MIN(2), .OUT_BITS(OUT_BITS),
    .DEPTH(8), .PASS(0), .PASS_EXIT(1), .PRE_CALC(1), .GO_AFTER(1)) u_stream (
    .clk_i(clk_i), .rst_ni(rst_ni), .len_i(row_len_i), .in_valid_i(in_valid_i), .in_data_i(in_data_i),
    .in_ready_o(in_ready_o), .out_valid_o(out_valid_o), .out_data_o(out_data_o), .out_last_o(out_last_o),
    .out_ready_i(out_ready_i), .fill_o(fill), .first_o(first), .go_o(go), .calc_o(calc), .done_i(1'b1),
    .x1_o(x1), .ld_o(ld), .out_i(out_d), .enter_o(enter_unused), .pass_o(pass_unused),
    .passed_o(passed_unused), .start_o(start_unused), .len_o(len_unused), .row_len_o(row_len_unused),
    .idx_o(idx_unused), .fill_addr_o(fill_addr_unused), .rd_addr_o(rd_addr_unused)
  );

  row_max #(.W(IN_BITS)) u_max (.clk_i(clk_i), .go_i(go), .fill_i(fill), .first_i(first), .data_i(in_data_i),
                                 .max_o(mx), .fill_max_o(fill_max_unused));

  wire [20:0] i0x = {4'd0, i0_i};
  wire [20:0] cap = (i0x << 4) + (i0x << 3) - i0x;  // 23 I_0

  // ShiftExp's q = floor(u / I_0) and r = u - q I_0 for 0 <= u < 32 I_0: five restoring steps, {r, q}.
  function [25:0] qr;
    input [20:0] u;
    input [20:0] i0;
    reg   [20:0] r;
    integer      b;
    begin
      r = u;
      for (b = 4; b >= 0; b = b - 1) begin
        qr[b] = (r >= (i0 << b));
        if (qr[b]) begin
          r = r - (i0 << b);
        end
      end
      qr[25:5] = r;
    end
  endfunction

  // ---------------------------------------------------------------- e2 = ShiftExp of the max (CALC)
  wire signed [21:0] mw   = $signed({{(22-IN_BITS){mx[IN_BITS-1]}}, mx});               // the max
  wire signed [21:0] u2   = mw + ((mw + 22'sd1) >>> 1) - ((mw + 22'sd15) >>> 4);       // m + ceil(m/2) - ceil(m/16)
  wire signed [21:0] capw = $signed({1'b0, cap});
  wire        [21:0] w    = ((u2 > capw) ? capw : u2) + $signed({1'b0, i0x << 3});    // min(u, 23 I_0) + 8 I_0
  wire        [25:0] qr2  = qr(w[20:0], i0x);                                          // {r, q_w}
  wire [17:0] twice2 = {i0_i, 1'b0} - qr2[22:5];                              // 2 I_0 - r
  wire [48:0] val2   = {31'd0, twice2} << (5'd31 - qr2[4:0]);                  // < 2^49
  wire [30:0] e2_d   = (w[21] || val2[48:1] >= {17'd0, TOP}) ? TOP : val2[31:1];  // min(e2, 2^31 - 1)
  reg  [30:0] e2_q;
  always @(posedge clk_i) begin
    if (calc) begin
      e2_q <= e2_d;
    end
  end

  // ---------------------------------------------------------------- stage 2: e1 = ShiftExp of max - x, S'
  wire [IN_BITS:0] diff = {mx[IN_BITS-1], mx} - {x1[IN_BITS-1], x1};          // a in [0, 2^IN_BITS - 1]
  wire [20:0]      aw   = {{(20-IN_BITS){1'b0}}, diff};
  wire [20:0]      u1   = aw + ((aw + 21'd1) >> 1) - ((aw + 21'd15) >> 4);     // u < 2^17
  wire [25:0]      qr1  = qr((u1 > cap) ? cap : u1, i0x);                      // {r, q}
  wire [17:0]  twice1 = {i0_i, 1'b0} - qr1[22:5];                              // 2 I_0 - r
  wire [40:0]  wide1  = {23'd0, twice1} << (5'd23 - qr1[4:0]);                 // e1 = wide1 >> 1 <= 2^39
  wire [31:0]  sum1   = {1'b0, wide1[31:1]} + {1'b0, e2_q};
  wire         clamp1 = (wide1[40:32] != 9'd0) || (sum1 >= {1'b0, TOP});       // e1 + e2 >= 2^31 - 1

  // what stages 2..6 carry, {x, e1, clamped}; S' (stages 2..5); the division's partial remainder
  // (stages 3..5) and quotient bits so far, low-aligned (stages 3..6)
  localparam integer CW = IN_BITS + 41;
  reg [CW-1:0] c2_q, c3_q, c4_q, c5_q, c6_q;
  reg [30:0]   d2_q, d3_q, d4_q, d5_q;
  reg [30:0]   r3_q, r4_q, r5_q;
  reg [5:0]    q3_q;
  reg [13:0]   q4_q;
  reg [21:0]   q5_q;
  reg [29:0]   q6_q;

  // ---------------------------------------------------------------- stages 3..6: factor = (2^31 - 1) / S'
  // Eight restoring steps of the dividend's bits `bits` (high first) into the partial remainder `rem`
  // (< den): {the new remainder, the eight quotient bits}.
  function [38:0] div8;
    input [30:0] rem;
    input [30:0] den;
    input [7:0]  bits;
    reg   [31:0] r;
    integer      s;
    begin
      r = {1'b0, rem};
      for (s = 7; s >= 0; s = s - 1) begin
        r = {r[30:0], bits[s]};
        div8[s] = (r >= {1'b0, den});
        if (div8[s]) begin
          r = r - {1'b0, den};
        end
      end
      div8[38:8] = r[30:0];
    end
  endfunction

  wire [38:0] st3 = div8(31'd0, d2_q, 8'h7f);  // quotient bits 31..24 (31 and 30 are 0)
  wire [38:0] st4 = div8(r3_q, d3_q, 8'hff);   // 23..16
  wire [38:0] st5 = div8(r4_q, d4_q, 8'hff);   // 15..8
  wire [38:0] st6 = div8(r5_q, d5_q, 8'hff);   // 7..0
  always @(posedge clk_i) begin
    if (ld[2]) begin
      {c2_q, d2_q} <= {x1, wide1[40:1], clamp1, clamp1 ? TOP : sum1[30:0]};
    end
    if (ld[3]) begin
      {c3_q, d3_q, r3_q, q3_q} <= {c2_q, d2_q, st3[38:8], st3[5:0]};
    end
    if (ld[4]) begin
      {c4_q, d4_q, r4_q, q4_q} <= {c3_q, d3_q, st4[38:8], q3_q, st4[7:0]};
    end
    if (ld[5]) begin
      {c5_q, d5_q, r5_q, q5_q} <= {c4_q, d4_q, st5[38:8], q4_q, st5[7:0]};
    end
    if (ld[6]) begin
      {c6_q, q6_q} <= {c5_q, q5_q, st6[7:0]};
    end
  end
  wire [IN_BITS-1:0] x6  = c6_q[CW-1:41];
  wire [39:0]        e16 = c6_q[40:1];
  wire               cl6 = c6_q[0];

  // ---------------------------------------------------------------- stage 7: sig, t = x sig
  wire [30:0] prod = e16[30:0] * {1'b0, q6_q};                                // e1 factor < 2^31 - 1
  wire [15:0] sig  = cl6 ? e16[39:24] : {9'd0, prod[30:24]};
  wire [30:0] t_d  = $signed(x6) * $signed({1'b0, sig});                      // |x sig| <= 2^30
  reg  [30:0] t_q;
  always @(posedge clk_i) begin
    if (ld[7]) begin
      t_q <= t_d;
    end
  end

  // ---------------------------------------------------------------- stage 8: round_half_even(t M / 2^E), sat
  wire [63:0] v = $signed(t_q) * $signed({1'b0, multiplier_i});                // |t M| <= 2^61
  round_sat #(.IN_BITS(64), .OUT_BITS(OUT_BITS), .ROUNDING(2), .WRAP(0)) u_round (
    .v_i(v), .shift_i(shift_i[6] ? 6'd63 : shift_i[5:0]), .y_o(out_d)
  );

  wire unused_bits = ^{st3[7:6], qr1[25:23], qr2[25:23], val2[0], wide1[0], sum1[31], prod[23:0],
                       st6[38:8], ld[1], ld[8], enter_unused, pass_unused, passed_unused, start_unused, len_unused,
                       row_len_unused, idx_unused, fill_addr_unused, rd_addr_unused, fill_max_unused};

endmodule

`default_nettype wire
