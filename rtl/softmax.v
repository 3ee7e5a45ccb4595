// softmax: integer softmax over a streamed row, the bit-exact twin of ops.softmax (exp="table").
//
// Per row of N signed IN_BITS inputs x_0 .. x_(N-1) in stream order (docs/arithmetic.md, section "softmax";
// F = EXP_FRAC = 23, Q = 2^OUT_BITS - 1):
//   mx  = max_i x_i,  d_i = mx - x_i,  E_i = T[d_i] if d_i < ENTRIES else 0,  S = sum_i E_i
//   R   = floor((Q * 2^(F+17) + floor(S/2)) / S)                     (once per row)
//   A_i = (E_0 + ... + E_i) * R,  P_i = (A_i + 2^(F+16)) >> (F+17),  p_i = P_i - P_(i-1)
// Rounding the cumulative sum makes every row sum to exactly Q.
//
// On the row engine (rtl/row_stream.v; four stages): FILL takes the max (rtl/row_max.v); PASS re-reads the
// row (stage 1 x_i, stage 2 E_i: d_i, the table read) into S; CALC divides for R (rtl/divu.v, OUT_BITS + 17
// steps); OUT reads the row again (E_i looked up again: cheaper than storing 24-bit E_i), stage 3 E_i * R,
// then A_i into the output register as p_i, the difference of A's top bits (A starts at the rounding
// constant 2^(F+16): the rounding is free). A row's pass waits until the row before has left the pipeline.
// Unstalled, rows follow each other every 2N + OUT_BITS + 26 clocks; on an idle block a row's first p_i
// leaves N + OUT_BITS + 28 clocks after its last x_i (sim/test_softmax.py test_row_period_and_latency;
// docs/rtl.md).
//
// The exp table T (ENTRIES x (F+1) bits, unsigned) is a RAM written through tbl_*; it has no reset, so it
// survives rst_ni, and it must not be written while a row is in flight. The contract fixes T[0] = 2^F
// (ops.softmax rejects any other table), so T[0] is hard-wired and a write to entry 0 has no effect. That
// makes S >= 2^F by construction, so R <= Q * 2^17 fits OUT_BITS + 17 bits (25 for 8-bit outputs) and the
// divider needs only that many steps; A_i <= S * R <= Q * 2^(F+17) + S/2 fits OUT_BITS + F + 17 bits for
// any table contents.

`default_nettype none

module softmax #(
  parameter integer MAX_N    = 256,  // longest row (2..65536); the row buffer has MAX_N entries
  parameter integer IN_BITS  = 8,    // signed input width (2..16)
  parameter integer OUT_BITS = 8,    // unsigned probability width (1..16); Q = 2^OUT_BITS - 1
  parameter integer ENTRIES  = 256,  // exp table entries L (2..2^IN_BITS); d >= L gives E = 0
  parameter integer EXP_FRAC = 23    // T[0] = 2^EXP_FRAC, entries EXP_FRAC + 1 bits (contract: 23)
) (
  input  wire clk_i, input wire rst_ni,  // rst_ni: synchronous, active low
  // Exp table write port: T[tbl_addr_i] = tbl_data_i (load between rows, once per layer)
  input  wire                         tbl_we_i,
  input  wire [$clog2(ENTRIES)-1:0]   tbl_addr_i,
  input  wire [EXP_FRAC:0]            tbl_data_i,
  input  wire [$clog2(MAX_N+1)-1:0]   row_len_i,   // row length N in [1, MAX_N], taken with a row's first
  input  wire in_valid_i, output wire in_ready_o, input wire [IN_BITS-1:0] in_data_i,  // x_i, signed
  output wire out_valid_o, input wire out_ready_i, output wire out_last_o,  // with each row's last
  output wire [OUT_BITS-1:0] out_data_o  // p_i, unsigned (p_i / Q)
);

  localparam integer E_BITS = EXP_FRAC + 1;              // exp table entry
  localparam integer RS     = EXP_FRAC + 17;             // reciprocal shift: 2^40
  localparam integer AW = $clog2(MAX_N), LW = $clog2(MAX_N + 1);  // buffer address, row length
  localparam integer TW     = $clog2(ENTRIES);           // exp table address
  localparam integer S_BITS = E_BITS + $clog2(MAX_N);    // S <= MAX_N * (2^E_BITS - 1)
  localparam integer N_BITS = OUT_BITS + RS;             // dividend Q * 2^RS + S/2 < 2^N_BITS
  localparam integer R_BITS = OUT_BITS + 17;             // R <= Q * 2^17 since S >= 2^EXP_FRAC
  localparam integer A_BITS = OUT_BITS + RS;             // A_i + 2^(RS-1) <= Q * 2^RS + S/2 + 2^(RS-1)
  localparam [IN_BITS:0]     ENTRIES_C = ENTRIES[IN_BITS:0];
  localparam [OUT_BITS-1:0]  Q_C       = {OUT_BITS{1'b1}};
  localparam [A_BITS-1:0]    HALF_C    = {{OUT_BITS{1'b0}}, 1'b1, {(RS-1){1'b0}}};      // 2^(RS-1)
  localparam [E_BITS-1:0]    ONE_E_C   = {1'b1, {EXP_FRAC{1'b0}}};                     // T[0]

  // ---------------------------------------------------------------- the engine and the max
  wire                fill, first, go, calc, enter, pass, div_valid, passed_unused, start_unused;
  wire [IN_BITS-1:0]  x1, mx, fill_max_unused;
  wire [4:1]          ld;
  wire [OUT_BITS-1:0] out_d;
  wire [AW-1:0]       fill_addr_unused, rd_addr_unused, idx_unused;
  wire [LW-1:0]       len_unused, row_len_unused;
  row_stream #(
    .NAME("softmax"), .MAX_N(MAX_N), .LIMIT(65536), .W(IN_BITS), .OUT_BITS(OUT_BITS), .OUT_MIN(1), .DEPTH(4),
    .PASS(1), .PASS_EXIT(2), .PRE_CALC(0), .GO_AFTER(3), .A_NAME("ENTRIES"), .A_VAL(ENTRIES), .A_MIN(2),
    .A_MAX(1 << IN_BITS), .B_NAME("EXP_FRAC"), .B_VAL(EXP_FRAC), .B_MIN(1), .B_MAX(40)) u_stream (
    .clk_i(clk_i), .rst_ni(rst_ni), .len_i(row_len_i), .in_valid_i(in_valid_i), .in_ready_o(in_ready_o),
    .in_data_i(in_data_i), .out_valid_o(out_valid_o), .out_ready_i(out_ready_i), .out_data_o(out_data_o),
    .out_last_o(out_last_o), .fill_o(fill), .first_o(first), .fill_addr_o(fill_addr_unused), .len_o(len_unused),
    .go_o(go), .calc_o(calc), .enter_o(enter), .passed_o(passed_unused), .done_i(div_valid), .pass_o(pass),
    .start_o(start_unused), .row_len_o(row_len_unused), .rd_addr_o(rd_addr_unused), .idx_o(idx_unused), .x1_o(x1),
    .ld_o(ld), .out_i(out_d)
  );

  row_max #(.W(IN_BITS)) u_max (.clk_i(clk_i), .fill_i(fill), .first_i(first), .data_i(in_data_i), .go_i(go),
                                 .fill_max_o(fill_max_unused), .max_o(mx));

  // ---------------------------------------------------------------- datapath
  // verilator coverage_off
  reg [E_BITS-1:0]  tbl_mem [0:ENTRIES-1];   // exp table T (entry 0 unused: hard-wired)
  // verilator coverage_on
  reg               inr2_q;                  // d_i < ENTRIES (else E_i = 0)
  reg               zero2_q;                 // d_i = 0: E_i = T[0] = 2^EXP_FRAC
  reg [E_BITS-1:0]  t2_q;                    // T[d_i]
  reg [A_BITS-1:0]  prod3_q;                 // E_i * R
  reg [A_BITS-1:0]  acc_q;                   // A_(i-1) + 2^(RS-1): top OUT_BITS bits are P_(i-1)
  reg [S_BITS-1:0]  sum_q;                   // S
  reg [R_BITS-1:0]  r_q;                     // R

  // Stage 1 -> 2: d_i = mx - x_i in [0, 2^IN_BITS - 1], computed one bit wider than the inputs.
  wire [IN_BITS:0]  d1    = {mx[IN_BITS-1], mx} - {x1[IN_BITS-1], x1};
  // Stage 2: E_i, and E_i * R (< 2^A_BITS since E_i * R <= A_i: the product is taken mod 2^A_BITS).
  wire [E_BITS-1:0] e2    = zero2_q ? ONE_E_C : inr2_q ? t2_q : {E_BITS{1'b0}};
  wire [A_BITS-1:0] prod2 = {{(A_BITS-E_BITS){1'b0}}, e2} * {{(A_BITS-R_BITS){1'b0}}, r_q};
  // Stage 3 -> output: A_i + 2^(RS-1) = acc + E_i * R; p_i = P_i - P_(i-1), the difference of the top bits.
  wire [A_BITS-1:0] acc3  = acc_q + prod3_q;
  assign out_d = acc3[A_BITS-1:RS] - acc_q[A_BITS-1:RS];

  // R = floor((Q * 2^RS + floor(S/2)) / S); the dividend is a concatenation: S/2 < 2^(S_BITS-1) <= 2^RS.
  wire [R_BITS-1:0] div_quo;
  wire              div_ready_unused;      // idle at every request: one division a row
  wire [S_BITS-1:0] div_rem_unused;        // the remainder is not needed for R
  divu #(.N_BITS(N_BITS), .D_BITS(S_BITS), .Q_BITS(R_BITS)) u_divu (
    .clk_i(clk_i), .rst_ni(rst_ni), .in_valid_i(enter), .in_ready_o(div_ready_unused),
    .in_dividend_i({Q_C, {(RS-S_BITS+1){1'b0}}, sum_q[S_BITS-1:1]}), .in_divisor_i(sum_q),
    .out_valid_o(div_valid), .out_ready_i(1'b1), .out_quotient_o(div_quo), .out_remainder_o(div_rem_unused)
  );

  always @(posedge clk_i) begin
    if (tbl_we_i) begin
      tbl_mem[tbl_addr_i] <= tbl_data_i;
    end
    if (ld[2]) begin
      t2_q    <= tbl_mem[d1[TW-1:0]];
      inr2_q  <= d1 < ENTRIES_C;
      zero2_q <= d1 == {(IN_BITS+1){1'b0}};
    end
    if (ld[3]) begin
      prod3_q <= prod2;
    end
    if (go) begin
      sum_q <= {S_BITS{1'b0}};
    end else if (pass && ld[3]) begin  // a pass element leaves stage 2
      sum_q <= sum_q + {{(S_BITS-E_BITS){1'b0}}, e2};
    end
    if (div_valid) begin
      r_q <= div_quo;
    end
    if (calc) begin
      acc_q <= HALF_C;  // the OUT pass starts from A_(-1) = 0 plus the rounding constant
    end else if (ld[4]) begin
      acc_q <= acc3;
    end
  end

  wire unused_bits = ^{fill_max_unused, fill_addr_unused, rd_addr_unused, idx_unused, len_unused,
                       row_len_unused, passed_unused, start_unused, ld[1]};

endmodule

`default_nettype wire
