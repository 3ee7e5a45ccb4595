// softmax_round_each: softmax with each probability rounded on its own, the bit-exact twin of the
// softmax=round_each variant (hwvit/variants/round_each.py), as a quantized model's runtime rounds it.
//
// Per row of N signed IN_BITS scores x_i (F = 23, the exp table's fraction bits; Qm = round(2^16 / s_p)
// on a configuration port):
//   d_i = max - x_i,  E_i = T[d_i]  (T[0] = 2^23; entries past the set's table are written as 0)
//   S   = sum_i E_i,  R = floor((Qm 2^24 + floor(S/2)) / S)                             (once per row)
//   p_i = sat_[0, 2^OUT_BITS - 1]( round_half_even(E_i R / 2^40) )
// Unlike rtl/softmax.v no prefix sum is kept: a row need not sum to 1 / s_p.
//
// Widths (IN_BITS <= 16, Qm < 2^24, N <= MAX_N <= 4096): E_i < 2^24 (a table entry), so
// S < MAX_N 2^24 (24 + clog2(MAX_N) bits); the row's max has d = 0, so S >= T[0] = 2^23 (the contract's
// T[0], hwvit.quant.params.exp_table; the block trusts it, as the kernel does) and
// R <= (Qm 2^24 + S/2) / S <= 2 Qm + 1/2: R < 2^25 (25 bits, 25 restoring steps); the dividend
// Qm 2^24 + floor(S/2) < 2^48 + 2^35 < 2^49 is an addition (S/2 reaches past bit 24 for long rows);
// E_i R < 2^49: its bits above 40 are below 2^9, one more after the rounding, then the saturation.
//
// On the row engine (rtl/row_stream.v; four stages): FILL takes the max (rtl/row_max.v); PASS re-reads the
// row (stage 1 x_i, stage 2 d_i and the table read) into S; CALC divides for R (rtl/divu.v); OUT reads the
// row again (the table read again: cheaper than 24-bit E_i per slot), stage 3 the product E_i R, then its
// rounded and saturated top bits into the output register. No stage after the division holds per-row state,
// so a row's pass waits only until the row before has left stage 2.
//
// The exp table (2^IN_BITS x 24 bits, unsigned) is a RAM written through tbl_*, without reset (it survives
// rst_ni); it must not be written while a row is in flight. Every d_i indexes it (d < 2^IN_BITS).

`default_nettype none

module softmax_round_each #(
  parameter integer MAX_N    = 256,  // longest row (2..4096); the row buffer has MAX_N entries
  parameter integer IN_BITS  = 8,    // signed input width (2..16); the table has 2^IN_BITS entries
  parameter integer OUT_BITS = 8     // unsigned probability width (1..16), scale 2^16 / Qm
) (
  input  wire clk_i, input wire rst_ni,  // rst_ni: synchronous, active low
  // Exp table write port: T[tbl_addr_i] = tbl_data_i (between rows)
  input  wire                         tbl_we_i,
  input  wire [IN_BITS-1:0]           tbl_addr_i,
  input  wire [23:0]                  tbl_data_i,
  // Configuration
  input  wire [$clog2(MAX_N+1)-1:0]   row_len_i,   // N in [1, MAX_N], sampled with a row's first input
  input  wire [23:0]                  q_mult_i,    // Qm = round(2^16 / s_p) in [1, 2^24 - 1]
  input  wire in_valid_i, output wire in_ready_o, input wire [IN_BITS-1:0] in_data_i,  // x_i, signed
  output wire out_valid_o, input wire out_ready_i, output wire out_last_o,  // with each row's last
  output wire [OUT_BITS-1:0] out_data_o  // p_i, unsigned
);

  localparam integer AW = $clog2(MAX_N), LW = $clog2(MAX_N + 1);  // buffer address, row length
  localparam integer S_BITS = 24 + AW;               // S < MAX_N 2^24
  localparam integer R_BITS = 25;                    // R < 2^25
  localparam integer N_BITS = 49;                    // Qm 2^24 + floor(S/2) < 2^49
  localparam integer P_BITS = 24 + R_BITS;           // E_i R < 2^49
  localparam integer H_BITS = P_BITS - 40;           // the product's bits above the rounding point
  // The rounded value is below 2^(H_BITS+1); it is held one bit wider, so the saturation's compare is
  // never constant, against 2^OUT_BITS - 1 (above the value's range: 2^(H_BITS+1) - 1).
  localparam integer CB     = (OUT_BITS < H_BITS + 1) ? OUT_BITS : H_BITS + 1;
  localparam [H_BITS+1:0] TOP = {{(H_BITS+2-CB){1'b0}}, {CB{1'b1}}};

  // ---------------------------------------------------------------- row engine (four stages), row max
  wire [4:1]          ld;
  wire                fill, first, go, pass, enter, div_valid;
  wire [IN_BITS-1:0]  mx, x1, fill_max_unused;
  wire [OUT_BITS-1:0] out_d;
  wire                start_unused, calc_unused, passed_unused;
  wire [AW-1:0]       rd_addr_unused, fill_addr_unused, idx_unused;
  wire [LW-1:0]       row_len_unused, len_unused;
  row_stream #(.NAME("softmax_round_each"), .LIMIT(4096), .MAX_N(MAX_N), .OUT_MIN(1), .W(IN_BITS), .OUT_BITS(OUT_BITS),
    .DEPTH(4), .PASS(1), .PASS_EXIT(2), .PRE_CALC(0), .GO_AFTER(2)) u_stream (
    .clk_i(clk_i), .rst_ni(rst_ni), .in_valid_i(in_valid_i), .in_data_i(in_data_i), .in_ready_o(in_ready_o),
    .len_i(row_len_i), .out_valid_o(out_valid_o), .out_data_o(out_data_o), .out_ready_i(out_ready_i),
    .out_last_o(out_last_o), .out_i(out_d), .ld_o(ld), .x1_o(x1), .fill_o(fill), .first_o(first), .go_o(go),
    .pass_o(pass), .enter_o(enter), .done_i(div_valid), .start_o(start_unused), .calc_o(calc_unused),
    .passed_o(passed_unused), .rd_addr_o(rd_addr_unused), .fill_addr_o(fill_addr_unused), .idx_o(idx_unused),
    .row_len_o(row_len_unused), .len_o(len_unused)
  );

  row_max #(.W(IN_BITS)) u_max (.clk_i(clk_i), .first_i(first), .fill_i(fill), .data_i(in_data_i), .go_i(go),
                                 .fill_max_o(fill_max_unused), .max_o(mx));

  // ---------------------------------------------------------------- E_i (stage 2)
  // verilator coverage_off
  reg [23:0]        exp_mem [0:(1<<IN_BITS)-1];  // T
  // verilator coverage_on
  reg [23:0]        e_i;                         // E_i = T[d_i]
  wire [IN_BITS-1:0] dd   = mx - x1;             // d_i in [0, 2^IN_BITS - 1]: exact mod 2^IN_BITS

  // ---------------------------------------------------------------- S and R (PASS, CALC)
  reg  [S_BITS-1:0] s_q;
  reg  [R_BITS-1:0] recip_q;
  wire [R_BITS-1:0] quo;
  wire              div_ready_unused;  // idle at every request: one division a row
  wire [S_BITS-1:0] div_rem_unused;    // R needs no remainder
  wire [N_BITS-1:0] num   = {1'b0, q_mult_i, 24'd0} + {{(N_BITS-S_BITS+1){1'b0}}, s_q[S_BITS-1:1]};
  divu #(.N_BITS(N_BITS), .D_BITS(S_BITS), .Q_BITS(R_BITS)) u_recip (
    .clk_i(clk_i), .rst_ni(rst_ni), .in_valid_i(enter), .in_ready_o(div_ready_unused), .in_dividend_i(num),
    .in_divisor_i(s_q), .out_valid_o(div_valid), .out_ready_i(1'b1), .out_quotient_o(quo),
    .out_remainder_o(div_rem_unused)
  );

  // ---------------------------------------------------------------- p_i (stage 3 -> output)
  reg  [P_BITS-1:0] v3_q;                                              // E_i R
  wire [P_BITS-1:0] v2    = {{R_BITS{1'b0}}, e_i} * {{24{1'b0}}, recip_q};
  wire              odd   = v3_q[40];
  wire              half  = v3_q[39];
  wire              rest  = |v3_q[38:0];
  wire [H_BITS+1:0] rnd   = {2'b0, v3_q[P_BITS-1:40]} + {{(H_BITS+1){1'b0}}, half && (rest || odd)};
  wire [H_BITS+1:0] sat   = (rnd > TOP) ? TOP : rnd;
  wire [H_BITS+17:0] satw = {16'd0, sat};
  assign out_d = satw[OUT_BITS-1:0];

  always @(posedge clk_i) begin
    if (tbl_we_i) begin
      exp_mem[tbl_addr_i] <= tbl_data_i;
    end
    if (ld[2]) begin
      e_i <= exp_mem[dd];
    end
    if (ld[3]) begin
      v3_q <= v2;
    end
    if (go) begin
      s_q <= {S_BITS{1'b0}};
    end else if (pass && ld[3]) begin  // a pass element leaves stage 2
      s_q <= s_q + {{AW{1'b0}}, e_i};
    end
    if (div_valid) begin
      recip_q <= quo;
    end
  end

  wire unused_bits = ^{satw[H_BITS+17:OUT_BITS], fill_max_unused, fill_addr_unused, rd_addr_unused, idx_unused, len_unused,
                       row_len_unused, calc_unused, passed_unused, start_unused, ld[1], ld[4]};

endmodule

`default_nettype wire
