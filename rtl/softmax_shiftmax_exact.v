// softmax_shiftmax_exact: hwvit's corrected Shiftmax over a streamed row, the bit-exact twin of the
// softmax=shiftmax_exact variant (hwvit/variants/ivit.py softmax_stages).
//
// Per row of N signed IN_BITS scores x_i, with I_0 = floor(1 / s_in) on a configuration port
// (docs/variants/ivit.md; k = OUT_BITS):
//   ShiftExp  a_i = max - x_i = -delta_i,  m_i = -P_i = a_i + ceil(a_i / 2) - ceil(a_i / 16)
//             (P = delta + (delta >> 1) - (delta >> 4) with floor shifts of delta <= 0),
//             q_i = floor(m_i / I_0),  r_i = m_i - q_i I_0 in [0, I_0),
//             v_i = I_0 + ((-r_i) >> 1) = I_0 - ceil(r_i / 2),  E_i = (v_i << 15) >> q_i
//   IntDiv    S = sum E_i,  F = floor(2^62 / S)                                     (once per row)
//             p_i = (F E_i) >> (63 - k)                                   in [0, 2^(k-1)]
// v << 15 <= 2^31 < 2^32, so every q >= 32 gives E = 0 (the kernel's clamp of q at 40 changes nothing): the
// division needs q only below 32, five restoring steps after the test m >= 32 I_0.
//
// Widths (IN_BITS <= 16, 1 <= I_0 <= 2^16, N <= MAX_N <= 4096):
//   a_i <= 2^16 - 1; m_i <= a + a/2 + 1 < 2^17 (18-bit arithmetic); 32 I_0 <= 2^21 (22 bits);
//   r_i < I_0 <= 2^16 (17 bits); v_i in [ceil(I_0/2), I_0] (17 bits); E_i <= I_0 2^15 <= 2^31
//   (32 bits); S <= N 2^31 < 2^(32 + clog2(MAX_N)) <= 2^44, and S >= E(max) = I_0 2^15 >= 2^15
//   (the row max has m = 0, q = 0, r = 0, v = I_0), so F <= 2^47: 48 bits, and 2^62 < S 2^48 as
//   rtl/divu.v needs (63-bit dividend, 48 quotient bits, 48 clocks); F E_i <= F S <= 2^62
//   (E_i <= S): the product is formed in 63 bits, and p_i = its bits [62 : 63 - k].
//
// On the row engine (rtl/row_stream.v; two stages): FILL takes the max (rtl/row_max.v); PASS re-reads the
// row (stage 1 x_i, E_i: one compare, five restoring steps, a shift) into S; CALC divides for F
// (rtl/divu.v); OUT computes E_i again (cheaper than storing 32-bit E_i), p_i = F E_i >> (63 - k) into the
// output register. A row's pass waits until the row before has left stage 1. I_0 must be steady while a row
// is in flight.

`default_nettype none

module softmax_shiftmax_exact #(
  parameter integer MAX_N    = 256,  // longest row (2..4096); the row buffer has MAX_N entries
  parameter integer IN_BITS  = 8,    // signed input width (2..16)
  parameter integer OUT_BITS = 8     // unsigned probability width k (2..16), scale 2^-(k-1)
) (
  input  wire clk_i, input wire rst_ni,  // rst_ni: synchronous, active low
  // Configuration
  input  wire [$clog2(MAX_N+1)-1:0]   row_len_i,   // N in [1, MAX_N], sampled with a row's first input
  input  wire [16:0]                  i0_i,        // I_0 = floor(1 / s_in) in [1, 2^16]
  input  wire in_valid_i, output wire in_ready_o, input wire [IN_BITS-1:0] in_data_i,  // x_i, signed
  output wire out_valid_o, input wire out_ready_i, output wire out_last_o,  // with each row's last
  output wire [OUT_BITS-1:0] out_data_o  // p_i, unsigned (p_i / 2^(OUT_BITS-1))
);

  localparam integer AW = $clog2(MAX_N), LW = $clog2(MAX_N + 1);  // buffer address, row length
  localparam integer S_BITS = 32 + AW;              // S <= MAX_N 2^31
  localparam integer F_BITS = 48;                   // F <= 2^47
  localparam integer N_BITS = 63;                   // the dividend 2^62

  // ---------------------------------------------------------------- the engine and the max
  wire                fill, first, go, enter, pass, div_valid, calc_unused, passed_unused, start_unused;
  wire [IN_BITS-1:0]  x1, mx, fill_max_unused;
  wire [2:1]          ld;
  wire [OUT_BITS-1:0] out_d;
  wire [AW-1:0]       fill_addr_unused, rd_addr_unused, idx_unused;
  wire [LW-1:0]       len_unused, row_len_unused;
  row_stream #(
    .NAME("softmax_shiftmax_exact"), .MAX_N(MAX_N), .LIMIT(4096), .W(IN_BITS), .OUT_BITS(OUT_BITS), .OUT_MIN(2), .DEPTH(2),
    .PASS(1), .PASS_EXIT(1), .PRE_CALC(0), .GO_AFTER(1)) u_stream (
    .clk_i(clk_i), .rst_ni(rst_ni), .len_i(row_len_i), .in_valid_i(in_valid_i), .in_ready_o(in_ready_o),
    .in_data_i(in_data_i), .out_valid_o(out_valid_o), .out_ready_i(out_ready_i), .out_data_o(out_data_o),
    .out_last_o(out_last_o), .fill_o(fill), .first_o(first), .fill_addr_o(fill_addr_unused), .len_o(len_unused),
    .go_o(go), .calc_o(calc_unused), .enter_o(enter), .passed_o(passed_unused), .done_i(div_valid), .pass_o(pass),
    .start_o(start_unused), .row_len_o(row_len_unused), .rd_addr_o(rd_addr_unused), .idx_o(idx_unused), .x1_o(x1),
    .ld_o(ld), .out_i(out_d)
  );

  row_max #(.W(IN_BITS)) u_max (.clk_i(clk_i), .fill_i(fill), .first_i(first), .data_i(in_data_i), .go_i(go),
                                 .fill_max_o(fill_max_unused), .max_o(mx));

  // ---------------------------------------------------------------- ShiftExp of x1 (PASS and OUT)
  wire [IN_BITS:0] dfull = {mx[IN_BITS-1], mx} - {x1[IN_BITS-1], x1};        // a in [0, 2^IN_BITS - 1]
  wire [17:0]      a     = {{(17-IN_BITS){1'b0}}, dfull};
  wire [17:0]      m     = a + ((a + 18'd1) >> 1) - ((a + 18'd15) >> 4);     // -P < 2^17
  wire [21:0]      i0w   = {5'd0, i0_i};
  wire             big   = {4'd0, m} >= (i0w << 5);                          // q >= 32: E = 0
  reg  [21:0]      part;                                                     // ends as r < I_0
  reg  [4:0]       q;
  integer          j;
  always @* begin
    part = {4'd0, m};
    q    = 5'd0;
    for (j = 4; j >= 0; j = j - 1) begin
      if (part >= (i0w << j)) begin
        part = part - (i0w << j);
        q[j] = 1'b1;
      end
    end
  end
  wire [21:0]      vw    = i0w - ((part + 22'd1) >> 1);                      // v = I_0 - ceil(r/2)
  wire [31:0]      vsh   = {vw[16:0], 15'd0};                                // v << 15 <= 2^31
  wire [31:0]      e     = big ? 32'd0 : (vsh >> q);

  // ---------------------------------------------------------------- S, F, p
  reg  [S_BITS-1:0] sum_q;
  reg  [F_BITS-1:0] f_q;
  wire [F_BITS-1:0] div_quo;
  wire              div_ready_unused;      // idle at every request: one division a row
  wire [S_BITS-1:0] div_rem_unused;

  divu #(.N_BITS(N_BITS), .D_BITS(S_BITS), .Q_BITS(F_BITS)) u_div (
    .clk_i(clk_i), .rst_ni(rst_ni), .in_valid_i(enter), .in_ready_o(div_ready_unused),
    .in_dividend_i({1'b1, {(N_BITS-1){1'b0}}}), .in_divisor_i(sum_q), .out_valid_o(div_valid),
    .out_ready_i(1'b1), .out_quotient_o(div_quo), .out_remainder_o(div_rem_unused)
  );

  always @(posedge clk_i) begin
    if (go) begin
      sum_q <= {S_BITS{1'b0}};
    end else if (pass && ld[2]) begin  // a pass element leaves stage 1
      sum_q <= sum_q + {{AW{1'b0}}, e};
    end
    if (div_valid) begin
      f_q <= div_quo;
    end
  end

  wire [N_BITS-1:0] prod = {15'd0, f_q} * {31'd0, e};                       // F E_i <= 2^62
  assign out_d = prod[N_BITS-1:N_BITS-OUT_BITS];                            // >> (63 - k)

  wire unused_bits = ^{prod[N_BITS-OUT_BITS-1:0], vw[21:17], fill_max_unused, fill_addr_unused,
                       rd_addr_unused, idx_unused, len_unused, row_len_unused, calc_unused, passed_unused, start_unused,
                       ld[1]};

endmodule

`default_nettype wire
