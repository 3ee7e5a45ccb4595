// layernorm_ivit_exact: hwvit's corrected I-LayerNorm over a streamed row, the twin of layernorm=ivit_exact
// (hwvit/variants/ivit.py, layernorm_stages; Li & Gu, I-ViT, ICCV 2023, Sec. 3.5 Eq. 19 with IntDiv of Eq.
// 15; docs/variants/ivit.md).
//
// Per row of C signed 8-bit inputs x_i:
//   mu  = floor((2 Sx + C) / 2C)                 the mean rounded half up (rtl/row_meanvar.v)
//   Var = sum (x_i - mu)^2 + eps_int,  std = sqrt_iter(Var),  factor = floor(2^62 / std)   once per row
//   d_i = x_i - mu,  y_i = (factor * d_i) >>> 46,  acc_i = y_i*G_i + B_i,  out_i = requant(acc_i, M, s)
// The kernel's 10-step bit-shift Newton square root (I_0 = 2^floor(bitlen/2), I_(k+1) = (I_k +
// floor(Var/I_k)) >> 1, kept while it falls) returns floor(sqrt(Var)) on its whole domain: I_0 is within a
// factor sqrt(2) of sqrt(Var), each Newton step squares the relative error (0.41, 0.061, 0.0018, 1.5e-6,
// 1e-12 after four: below one unit for Var < 2^41), and the integer iteration from above stops exactly at
// floor(sqrt) (the kernel's docstring; tests compare it with math.isqrt). So std is rtl/isqrt.v's exact
// floor root (rtl/inv_sqrt.v, 21 + 64 clocks). Var = 0 (a constant row without eps) gives every d_i = 0, so
// y_i = 0 whatever factor: the root and the division are skipped with factor = 0, as the kernel has it.
//
// Widths (C <= MAX_C < 2^CW, C <= 4096; the kernel's docstring): sum (x_i - mu)^2 <= 255^2 C < 2^28, +
// eps_int (<= 2^40, the kernel's bound): Var < 2^41, a 42-bit radicand, std < 2^21; factor <= 2^62:
// unsigned 63; d_i in [-255, 255]: signed 9, and |d_i| <= std (d_i^2 <= Var), so |factor*d_i| <= 2^62: the
// product fits signed 64; y_i = its bits 63..46, |y_i| <= 2^16: signed 18 (y = +2^16 occurs: a row [0, 2]
// has mu = 1, std = 1, d = 1); |y_i*G_i| <= 2^16 (2^14 - 1) and |B_i| < 2^30, so acc_i fits signed 32
// (rtl/ln_affine.v); requant: |acc_i*M| < 2^62.
//
// On the row engine (rtl/row_stream.v; six stages): FILL sums x_i and x_i^2 (rtl/row_moments.v); CALC finds
// mu (9 clocks), t and Var (2 clocks), std and factor (skipped when Var = 0); OUT: stage 1 x_i, 2 d_i, 3
// factor*d_i (63 x 9 bits) to y_i, then G_i, B_i and requant (rtl/ln_affine.v). A row's CALC waits until
// the row before has left stage 2 (it reads mu, then factor). eps_int, M and s must be steady while rows
// are in flight; gamma and beta are written through prm_* (no reset).

`default_nettype none

module layernorm_ivit_exact #(
  parameter integer MAX_C    = 1024,  // longest row (2..4096, the kernel's): row buffer, gamma/beta
  parameter integer OUT_BITS = 8      // output width, signed (2..16)
) (
  input  wire clk_i, input wire rst_ni,  // rst_ni: synchronous, active low
  // ---- gamma/beta write port: G[prm_addr_i] = prm_gamma_i, B[prm_addr_i] = prm_beta_i ----
  input  wire prm_we_i, input wire [$clog2(MAX_C)-1:0] prm_addr_i,
  input  wire [14:0]                prm_gamma_i,   // signed, |G| <= 2^14 - 1
  input  wire [30:0]                prm_beta_i,    // signed, |B| <= 2^30 - 1
  // ---- configuration ----
  input  wire [$clog2(MAX_C+1)-1:0] cfg_c_i,       // row length C in [1, MAX_C]
  input  wire [40:0]                cfg_eps_i,     // eps_int, unsigned, <= 2^40 (units of Var)
  input  wire [30:0] cfg_mult_i, input wire [5:0] cfg_shift_i,  // requant multiplier M (unsigned), shift s
  input  wire in_valid_i, output wire in_ready_o, input wire [7:0] in_data_i,  // x_i, signed
  output wire out_valid_o, input wire out_ready_i, output wire out_last_o,  // with each row's last
  output wire [OUT_BITS-1:0] out_data_o  // out_i, signed
);

  localparam integer AW = $clog2(MAX_C), CW = $clog2(MAX_C + 1);  // buffer address, row length
  localparam integer Y_W   = 18;                 // |y| <= 2^16, signed

  // ---------------------------------------------------------------- the engine
  wire                fill, go, done, start, first_unused, calc_unused, enter_unused, passed_unused, pass_unused;
  wire [AW-1:0]       idx, fill_addr_unused, rd_addr_unused;
  wire [CW-1:0]       len, row_len_unused;
  wire [7:0]          x1;
  wire [6:1]          ld;
  wire [OUT_BITS-1:0] out_d;
  row_stream #(
    .NAME("layernorm_ivit_exact"), .LEN_NAME("MAX_C"), .MAX_N(MAX_C), .LIMIT(4096), .W(8), .OUT_BITS(OUT_BITS), .OUT_MIN(2),
    .DEPTH(6), .GO_AFTER(2)) u_stream (
    .clk_i(clk_i), .rst_ni(rst_ni), .len_i(cfg_c_i), .in_valid_i(in_valid_i), .in_ready_o(in_ready_o),
    .in_data_i(in_data_i), .out_valid_o(out_valid_o), .out_ready_i(out_ready_i), .out_data_o(out_data_o),
    .out_last_o(out_last_o), .fill_o(fill), .first_o(first_unused), .fill_addr_o(fill_addr_unused), .len_o(len),
    .go_o(go), .calc_o(calc_unused), .enter_o(enter_unused), .passed_o(passed_unused), .done_i(done),
    .pass_o(pass_unused), .start_o(start), .row_len_o(row_len_unused), .rd_addr_o(rd_addr_unused), .idx_o(idx),
    .x1_o(x1), .ld_o(ld), .out_i(out_d)
  );

  // ---------------------------------------------------------------- statistics, datapath
  wire [7:0]        mu;
  wire [62:0]       fac;     // factor
  reg  signed [8:0] d2_q;    // stage 2: d_i = x_i - mu
  row_meanvar #(.CW(CW), .VAR_W(42), .EPS_W(41), .K(62), .EVEN(0)) u_stats (
    .clk_i(clk_i), .rst_ni(rst_ni), .clear_i(start), .fill_i(fill), .x_i(in_data_i), .go_i(go), .c_i(len),
    .eps_i(cfg_eps_i), .done_o(done), .mean_o(mu), .factor_o(fac)
  );
  always @(posedge clk_i) begin
    if (ld[2]) begin
      d2_q <= $signed({x1[7], x1}) - $signed({mu[7], mu});
    end
  end
  // Stage 3: y_i = (factor * d_i) >>> 46 (floor), the product exact in 64 bits.
  wire signed [63:0] prod = $signed({1'b0, fac}) * $signed({{55{d2_q[8]}}, d2_q});
  wire [Y_W-1:0]     y3_d = prod[63:46];

  ln_affine #(.MAX_C(MAX_C), .Y_W(Y_W), .OUT_BITS(OUT_BITS)) u_affine (
    .clk_i(clk_i), .prm_we_i(prm_we_i), .prm_addr_i(prm_addr_i), .prm_gamma_i(prm_gamma_i),
    .prm_beta_i(prm_beta_i), .idx_i(idx), .ld_i(ld[5:3]), .y_i(y3_d), .mult_i(cfg_mult_i),
    .shift_i(cfg_shift_i), .out_o(out_d)
  );

  // Bits dropped by construction: the product's floored-off fraction; engine outputs not needed here.
  wire unused_bits = ^{prod[45:0], first_unused, calc_unused, enter_unused, passed_unused, pass_unused,
                       fill_addr_unused, rd_addr_unused, row_len_unused, ld[1], ld[6]};

endmodule

`default_nettype wire
