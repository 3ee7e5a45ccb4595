// softmax_ita: ITA's streaming integer softmax over a streamed row, the bit-exact twin of the ita kernel
// (hwvit/variants/hwsoftmax.py; docs/variants/hwsoftmax.md; Islamoglu et al., ISLPED 2023).
//
// Per row of N signed IN_BITS inputs x_0 .. x_(N-1) in stream order, K = mult_i (the base-2 slope s_in *
// log2(e) * 2^16, 1..2^31-1), in chunks of 16 consecutive elements:
//   sh(d)  = (d * K + 2^15) >> 16                 round half up of d s_in log2(e), d >= 0
//   g      = -2^(IN_BITS-1), sigma = 0            before the first chunk
//   per chunk: cm = max of the chunk; if cm > g: sigma = sigma >> sh(cm - g), g = cm;
//              sigma = sigma + sum over the chunk of (2^8 >> sh(g - x_i))      (0 from shift 9 on)
//   inv    = floor((2^OUT_BITS - 1) * 2^8 / sigma)                              (once per row)
//   y_i    = inv >> sh(g - x_i)                   with the row's final g (its max)
// The kernel adds a chunk's sum to the shifted sigma; adding its elements one by one to the shifted sigma
// gives the same integer. The first chunk finds g = -2^(IN_BITS-1) and sigma = 0, so it sets g = cm and
// sigma = 0 (cm = -2^(IN_BITS-1) leaves both as they are).
//
// Widths (the kernel's WIDTHS at IN_BITS = 16, N = 4096):
//   d = g - x or cm - g in [0, 2^IN_BITS - 1]: the IN_BITS-bit difference of the two signed
//      values (taken mod 2^IN_BITS, which holds every d exactly, so no sign extension);
//   d * K + 2^15 <= (2^IN_BITS - 1)(2^31 - 1) + 2^15 < 2^(IN_BITS+31): DK_BITS = IN_BITS + 31,
//      sh = that >> 16 (IN_BITS + 15 significant bits); sh drives right shifts directly (a
//      Verilog shift by the width or more gives 0, as the kernel's clamped shifts do);
//   exp = 2^8 >> sh <= 2^8: 9 bits;
//   sigma <= N * 2^8 <= 2^(8 + clog2(MAX_N)): SG_BITS = 9 + clog2(MAX_N) (21 at 4096); the row's
//      max x_m gives exp 2^8 in its chunk (sh(0) = 0) and no later chunk shifts sigma, so
//      sigma >= 2^8;
//   (2^OUT_BITS - 1) * 2^8 < 2^(OUT_BITS+8): the divider's dividend; inv <= 2^OUT_BITS - 1 since
//      sigma >= 2^8, so rtl/divu.v needs OUT_BITS quotient bits (OUT_BITS clocks);
//   y_i = inv >> sh <= inv: OUT_BITS bits.
//
// On the row engine (rtl/row_stream.v; three stages, segments of 16: the chunks): FILL takes a chunk and
// its max cm (rtl/row_max.v); CALC, one clock, grows g and shifts sigma (sh(cm - g) on the shared
// multiplier); PASS re-reads the chunk (stage 1 x_i, stage 2 sh(g - x_i)) into sigma; then the next chunk,
// or after the row's last CALC divides for inv (OUT_BITS + 1 clocks); OUT reads the row again, y = inv >>
// sh into the output register. The next row's first chunk fills behind the OUT pass; its CALC waits until
// the row before has left stage 2 (it reads g, the multiplier, inv). Per element: one IN_BITS x 31 multiply
// and two small barrel shifts. mult_i must be steady while rows are in flight.

`default_nettype none

module softmax_ita #(
  parameter integer MAX_N    = 256,  // longest row (2..65536); the row buffer has MAX_N entries
  parameter integer IN_BITS  = 8,    // signed input width (2..16)
  parameter integer OUT_BITS = 8     // unsigned output width (2..16), scale 1/(2^OUT_BITS - 1)
) (
  input  wire clk_i, input wire rst_ni,  // rst_ni: synchronous, active low
  // Configuration: K = round(s_in * log2(e) * 2^16), unsigned
  input  wire [30:0]                  mult_i,
  input  wire [$clog2(MAX_N+1)-1:0]   row_len_i,   // row length N in [1, MAX_N], taken with a row's first
  input  wire in_valid_i, output wire in_ready_o, input wire [IN_BITS-1:0] in_data_i,  // x_i, signed
  output wire out_valid_o, input wire out_ready_i, output wire out_last_o,  // with each row's last
  output wire [OUT_BITS-1:0] out_data_o  // y_i, unsigned (y_i / (2^OUT_BITS - 1))
);

  localparam integer AW = $clog2(MAX_N), LW = $clog2(MAX_N + 1);  // buffer address, row length
  localparam integer DK_BITS = IN_BITS + 31;        // d * K + 2^15
  localparam integer SG_BITS = 9 + AW;              // sigma <= MAX_N * 2^8
  localparam integer N_BITS  = OUT_BITS + 8;        // dividend (2^OUT_BITS - 1) * 2^8
  localparam [DK_BITS-1:0]   HALF_C  = {{(DK_BITS-16){1'b0}}, 1'b1, 15'd0};            // 2^15
  localparam [8:0]           EXP_ONE = 9'h100;                                       // 2^8
  localparam [30:0]          Z_31    = 31'd0;
  localparam [IN_BITS-1:0]   Z_IN    = {IN_BITS{1'b0}};
  localparam [SG_BITS-10:0]  Z_SG9   = {(SG_BITS-9){1'b0}};

  // ---------------------------------------------------------------- the engine and the chunk max
  wire                fill, first, go, calc, enter, passed, pass, start, div_valid;
  wire [IN_BITS-1:0]  x1, cm, max_unused;
  wire [3:1]          ld;
  wire [OUT_BITS-1:0] out_d;
  wire [AW-1:0]       fill_addr_unused, rd_addr_unused, idx_unused;
  wire [LW-1:0]       len_unused, row_len_unused;
  row_stream #(
    .NAME("softmax_ita"), .MAX_N(MAX_N), .LIMIT(65536), .W(IN_BITS), .OUT_BITS(OUT_BITS), .OUT_MIN(2), .DEPTH(3),
    .PASS(1), .PASS_EXIT(2), .PRE_CALC(1), .GO_AFTER(2), .SEG(16)) u_stream (
    .clk_i(clk_i), .rst_ni(rst_ni), .len_i(row_len_i), .in_valid_i(in_valid_i), .in_ready_o(in_ready_o),
    .in_data_i(in_data_i), .out_valid_o(out_valid_o), .out_ready_i(out_ready_i), .out_data_o(out_data_o),
    .out_last_o(out_last_o), .fill_o(fill), .first_o(first), .fill_addr_o(fill_addr_unused), .len_o(len_unused),
    .go_o(go), .calc_o(calc), .enter_o(enter), .passed_o(passed), .done_i(!passed || div_valid), .pass_o(pass),
    .start_o(start), .row_len_o(row_len_unused), .rd_addr_o(rd_addr_unused), .idx_o(idx_unused), .x1_o(x1), .ld_o(ld),
    .out_i(out_d)
  );

  row_max #(.W(IN_BITS)) u_max (.clk_i(clk_i), .fill_i(fill), .first_i(first), .data_i(in_data_i), .go_i(go),
                                 .fill_max_o(cm), .max_o(max_unused));

  // ---------------------------------------------------------------- the shared shift unit
  // sh(d) = (d * K + 2^15) >> 16 with d = cm - g in the chunk's CALC (the pipeline is empty then),
  // else d = g - x_i of stage 1.
  reg  [IN_BITS-1:0]  g_q;                // running max g
  reg  [SG_BITS-1:0]  sigma_q;            // denominator
  reg  [OUT_BITS-1:0] inv_q;
  reg  [DK_BITS-1:0]  sh2_q;              // stage 2: sh(g - x_i)
  reg                 row_first_q;        // the next chunk is its row's first
  wire                grow = calc && !passed;
  wire [IN_BITS-1:0]  dd   = grow ? cm - g_q : g_q - x1;
  wire [DK_BITS-1:0]  dk   = {Z_31, dd} * {Z_IN, mult_i} + HALF_C;
  wire [DK_BITS-1:0]  sh   = dk >> 16;

  // Stage 2 -> 3: exp = 2^8 >> sh (0 from 9 on) into sigma; y = inv >> sh (0 from OUT_BITS on).
  wire [8:0]          exp2 = EXP_ONE >> sh2_q;
  assign out_d = inv_q >> sh2_q;

  // ---------------------------------------------------------------- divider
  wire [OUT_BITS-1:0] div_quo;
  wire                div_ready_unused;  // idle at every request: one division a row
  wire [SG_BITS-1:0]  div_rem_unused;    // the remainder is not needed
  divu #(.N_BITS(N_BITS), .D_BITS(SG_BITS), .Q_BITS(OUT_BITS)) u_divu (
    .clk_i(clk_i), .rst_ni(rst_ni), .in_valid_i(enter && passed), .in_ready_o(div_ready_unused),
    .in_dividend_i({{OUT_BITS{1'b1}}, 8'd0}), .in_divisor_i(sigma_q), .out_valid_o(div_valid),
    .out_ready_i(1'b1), .out_quotient_o(div_quo), .out_remainder_o(div_rem_unused)
  );

  always @(posedge clk_i) begin
    if (!rst_ni || start) begin
      row_first_q <= 1'b1;
    end else if (grow) begin
      row_first_q <= 1'b0;
    end
    if (grow && row_first_q) begin
      g_q     <= cm;
      sigma_q <= {SG_BITS{1'b0}};
    end else if (grow && $signed(cm) > $signed(g_q)) begin
      g_q     <= cm;
      sigma_q <= sigma_q >> sh;
    end else if (pass && ld[3]) begin  // a pass element leaves stage 2
      sigma_q <= sigma_q + {Z_SG9, exp2};
    end
    if (ld[2]) begin
      sh2_q <= sh;
    end
    if (div_valid) begin
      inv_q <= div_quo;
    end
  end

  wire unused_bits = ^{max_unused, fill_addr_unused, rd_addr_unused, idx_unused, len_unused, row_len_unused,
                       ld[1]};

endmodule

`default_nettype wire
