// softmax_shiftmax: I-ViT's Shiftmax as its authors released it (IntSoftmax, zkkli/I-ViT), over a streamed
// row: the bit-exact twin of the softmax=shiftmax variant (hwvit/variants/ivit_released.py softmax_stages).
//
// Per row of N signed IN_BITS scores x_i, with I_0 = ceil(1 / s_in) on a configuration port (k = OUT_BITS;
// docs/variants/ivit.md):
//   ShiftExp  a_i = max - x_i,  m_i = a_i + ceil(a_i / 2) - ceil(a_i / 16)   (-P of P = d + (d >> 1) - (d >> 4),
//             d = -a_i, floor shifts),  m'_i = min(m_i, 15 I_0)              (the exponent clamped at 15),
//             q_i = floor(m'_i / I_0) in [0, 15],  r_i = m'_i - q_i I_0 in [0, I_0),
//             E_i = ((2 I_0 - r_i) << (15 - q_i)) >> 1
//   IntDiv    S = sum E_i,  factor = floor((2^31 - 1) / min(S, 2^31 - 1))               (once per row)
//             p_i = (E_i factor) >> (32 - k)                                  in [0, 2^(k-1)]
//
// Widths (IN_BITS <= 16, 1 <= I_0 <= 2^16, N <= MAX_N <= 4096):
//   a_i <= 2^16 - 1; m_i < 2^17 (18-bit arithmetic); 15 I_0 < 2^20 (21 bits); r_i < I_0 <= 2^16;
//   2 I_0 - r_i in [I_0 + 1, 2 I_0] (18 bits); E_i <= I_0 2^15 <= 2^31 (32 bits);
//   S <= N 2^31 (32 + clog2(MAX_N) bits), and S >= E(max) = I_0 2^15 >= 2^15 (the row max has
//   m = 0), so the clamped S' = min(S, 2^31 - 1) is in [2^15, 2^31 - 1] and factor < 2^16: 2^31 - 1 <
//   S' 2^16 as rtl/divu.v needs (31-bit dividend, 16 quotient bits, 16 clocks); E_i factor <= 2^31
//   (S' = S: E_i factor <= E_i (2^31 - 1) / S; S' < S: factor = 1), so the product is formed in 32
//   bits and p_i = its bits [31 : 32 - k].
//
// On the row engine (rtl/row_stream.v; two stages): FILL takes the max (rtl/row_max.v); PASS re-reads the
// row (stage 1 x_i, E_i: a clamp, four restoring steps, a shift) into S; CALC divides for factor
// (rtl/divu.v); OUT computes E_i again (cheaper than storing 32-bit E_i), p_i = (E_i factor) >> (32 - k)
// into the output register. A row's pass waits until the row before has left stage 1. I_0 must be steady
// while a row is in flight.

`default_nettype none

module softmax_shiftmax #(
  parameter integer MAX_N    = 256,  // row buffer entries: rows of 1..MAX_N (MAX_N in 2..4096)
  parameter integer IN_BITS  = 8,    // score width, signed, 2..16
  parameter integer OUT_BITS = 8     // k, the probability's width (2..16), unsigned at 2^-(k-1)
) (
  input  wire                         clk_i, rst_ni,  // rst_ni: synchronous, active low
  input  wire [16:0]                  i0_i,        // I_0 = ceil(1 / s_in), 1..2^16, steady while rows fly
  input  wire [$clog2(MAX_N+1)-1:0]   row_len_i,   // N, 1..MAX_N, taken with each row's first score
  input  wire in_valid_i, input wire [IN_BITS-1:0] in_data_i, output wire in_ready_o,  // x_i
  output wire out_valid_o, output wire [OUT_BITS-1:0] out_data_o, output wire out_last_o,  // p_i
  input  wire out_ready_i
);

  localparam integer S_BITS = 32 + $clog2(MAX_N);                    // S <= MAX_N 2^31
  localparam integer AW = $clog2(MAX_N), LW = $clog2(MAX_N + 1);     // slot index, row length
  localparam [S_BITS-1:0] S_TOP = {{(AW+1){1'b0}}, {31{1'b1}}};  // 2^31 - 1

  // ---------------------------------------------------------------- row engine, row maximum
  wire [2:1]          ld;
  wire [IN_BITS-1:0]  x1, mx;
  wire                fill, first, go, enter, pass, div_valid;
  wire [OUT_BITS-1:0] out_d;
  wire                calc_unused, passed_unused, start_unused;
  wire [LW-1:0]       len_unused, row_len_unused;
  wire [AW-1:0]       idx_unused, fill_addr_unused, rd_addr_unused;
  wire [IN_BITS-1:0]  fill_max_unused;
  row_stream #(.NAME("softmax_shiftmax"), .LIMIT(4096), .MAX_N(MAX_N), .W(IN_BITS), .OUT_MIN(2), .OUT_BITS(OUT_BITS),
    .DEPTH(2), .PASS(1), .PASS_EXIT(1), .PRE_CALC(0), .GO_AFTER(1)) u_stream (
    .clk_i(clk_i), .rst_ni(rst_ni), .len_i(row_len_i), .in_valid_i(in_valid_i), .in_data_i(in_data_i),
    .in_ready_o(in_ready_o), .out_valid_o(out_valid_o), .out_data_o(out_data_o), .out_last_o(out_last_o),
    .out_ready_i(out_ready_i), .fill_o(fill), .first_o(first), .go_o(go), .enter_o(enter), .pass_o(pass),
    .done_i(div_valid), .x1_o(x1), .ld_o(ld), .out_i(out_d), .calc_o(calc_unused), .passed_o(passed_unused),
    .start_o(start_unused), .len_o(len_unused), .row_len_o(row_len_unused), .idx_o(idx_unused),
    .fill_addr_o(fill_addr_unused), .rd_addr_o(rd_addr_unused)
  );

  row_max #(.W(IN_BITS)) u_max (.clk_i(clk_i), .go_i(go), .fill_i(fill), .first_i(first), .data_i(in_data_i),
                                 .max_o(mx), .fill_max_o(fill_max_unused));

  // ---------------------------------------------------------------- ShiftExp of x1, n = 15 (PASS and OUT)
  wire [IN_BITS:0] diff  = {mx[IN_BITS-1], mx} - {x1[IN_BITS-1], x1};       // a in [0, 2^IN_BITS - 1]
  wire [20:0]      aw    = {{(20-IN_BITS){1'b0}}, diff};
  wire [20:0]      mexp  = aw + ((aw + 21'd1) >> 1) - ((aw + 21'd15) >> 4);  // m < 2^17
  wire [20:0]      i0x   = {4'd0, i0_i};
  wire [20:0]      cap   = (i0x << 4) - i0x;                                 // 15 I_0
  wire [20:0]      mcl   = (mexp > cap) ? cap : mexp;                        // m' = min(m, 15 I_0)
  reg  [20:0]      rem;                                                      // ends as r < I_0
  reg  [3:0]       qe;
  integer          b;
  always @* begin
    rem = mcl;
    qe  = 4'd0;
    for (b = 3; b >= 0; b = b - 1) begin
      if (rem >= (i0x << b)) begin
        rem   = rem - (i0x << b);
        qe[b] = 1'b1;
      end
    end
  end
  wire [17:0]      twice = {i0_i, 1'b0} - rem[17:0];                         // 2 I_0 - r in [I_0 + 1, 2 I_0]
  wire [32:0]      wide  = {15'd0, twice} << (4'd15 - qe);                   // (2 I_0 - r) << (15 - q) <= 2^32
  wire [31:0]      e     = wide[32:1];                                       // E = ... >> 1 <= 2^31

  // ---------------------------------------------------------------- S, factor, p
  reg  [S_BITS-1:0] acc_q;
  reg  [15:0]       fac_q;
  wire [15:0]       div_quo;
  wire              div_ready_unused;      // idle at every request: one division a row
  wire [30:0]       div_rem_unused;
  wire [S_BITS-1:0] s_cl = (acc_q > S_TOP) ? S_TOP : acc_q;                 // min(S, 2^31 - 1)

  divu #(.N_BITS(31), .D_BITS(31), .Q_BITS(16)) u_div (
    .clk_i(clk_i), .rst_ni(rst_ni), .in_valid_i(enter), .in_ready_o(div_ready_unused),
    .in_dividend_i({31{1'b1}}), .in_divisor_i(s_cl[30:0]), .out_valid_o(div_valid),
    .out_ready_i(1'b1), .out_quotient_o(div_quo), .out_remainder_o(div_rem_unused)
  );

  always @(posedge clk_i) begin
    if (go) begin
      acc_q <= {S_BITS{1'b0}};
    end else if (pass && ld[2]) begin  // a pass element leaves stage 1
      acc_q <= acc_q + {{AW{1'b0}}, e};
    end
    if (div_valid) begin
      fac_q <= div_quo;
    end
  end

  wire [31:0] prod = e * {16'd0, fac_q};                                    // E_i factor <= 2^31
  assign out_d = prod[31:32-OUT_BITS];                                      // >> (32 - k)

  wire unused_bits = ^{prod[31-OUT_BITS:0], rem[20:18], s_cl[S_BITS-1:31], wide[0], fill_max_unused,
                       fill_addr_unused, rd_addr_unused, idx_unused, len_unused, row_len_unused, calc_unused,
                       passed_unused, start_unused, ld[1]};

endmodule

`default_nettype wire
