// ln_affine: the per-channel output stage of hwvit's LayerNorm and of its corrected I-LayerNorm
// (rtl/layernorm.v, rtl/layernorm_ivit_exact.v), on the engine's stages 3 to 5 (rtl/row_stream.v):
//   stage 3  y_i, with G_i and B_i read from the gamma/beta RAMs at the element's channel;
//   stage 4  acc_i = y_i G_i + B_i in 32 bits (|y G| < 2^30 and |B| < 2^30 in both blocks);
//   stage 5  acc_i M, exact in 63 bits;  out_o = sat((acc_i M + 2^(s-1)) >>> s) to the output
//            register: rtl/requant.v's arithmetic (round half up, saturate; rtl/round_sat.v).
// gamma (G, signed 15) and beta (B, signed 31) are written through prm_*, once per layer, while no row is
// in flight; they have no reset and survive rst_ni.

`default_nettype none

module ln_affine #(
  parameter integer MAX_C    = 1024,  // channels: entries of the gamma/beta RAMs
  parameter integer Y_W      = 18,    // y_i, signed, |y G| < 2^30
  parameter integer OUT_BITS = 8
) (
  input  wire                     clk_i,
  input  wire                     prm_we_i,
  input  wire [$clog2(MAX_C)-1:0] prm_addr_i,
  input  wire [14:0]              prm_gamma_i,
  input  wire [30:0]              prm_beta_i,
  input  wire [$clog2(MAX_C)-1:0] idx_i,     // stage 2's channel
  input  wire [5:3]               ld_i,      // stage k loads this clock
  input  wire [Y_W-1:0]           y_i,       // stage 3's y, signed
  input  wire [30:0]              mult_i,    // requant M, unsigned
  input  wire [5:0]               shift_i,   // requant s
  output wire [OUT_BITS-1:0]      out_o
);

  // verilator coverage_off
  reg [14:0]        g_mem [0:MAX_C-1];
  reg [30:0]        b_mem [0:MAX_C-1];
  // verilator coverage_on
  reg [Y_W-1:0]     y3_q;
  reg [14:0]        g3_q;
  reg [30:0]        b3_q;
  reg [31:0]        acc4_q;
  reg signed [62:0] prod5_q;
  wire [31:0] acc4_d = {{(32-Y_W){y3_q[Y_W-1]}}, y3_q} * {{17{g3_q[14]}}, g3_q} + {b3_q[30], b3_q};
  wire signed [62:0] prod5_d = $signed({{31{acc4_q[31]}}, acc4_q}) * $signed({32'd0, mult_i});

  always @(posedge clk_i) begin
    if (prm_we_i) begin
      g_mem[prm_addr_i] <= prm_gamma_i;
      b_mem[prm_addr_i] <= prm_beta_i;
    end
    if (ld_i[3]) begin
      y3_q <= y_i;
      g3_q <= g_mem[idx_i];
      b3_q <= b_mem[idx_i];
    end
    if (ld_i[4]) begin
      acc4_q <= acc4_d;
    end
    if (ld_i[5]) begin
      prod5_q <= prod5_d;
    end
  end

  round_sat #(.IN_BITS(64), .OUT_BITS(OUT_BITS)) u_round_sat (
    .v_i({prod5_q[62], prod5_q}), .shift_i(shift_i), .y_o(out_o)
  );

endmodule

`default_nettype wire
