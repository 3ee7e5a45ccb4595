// layernorm: integer LayerNorm over a streamed row, the bit-exact twin of ops.layernorm; with EPS = 0 of
// the variant layernorm=no_eps (ops.layernorm at eps_int = 0), with PTF = 1 of layernorm=ptf (FQ-ViT's
// power-of-two factors, hwvit/variants/layernorm_forms.py; IJCAI 2022, Sec. 3.2).
//
// Per row of C signed 8-bit inputs x_i (docs/arithmetic.md, "layernorm"; K = 43, F = 10):
//   z_i = x_i << alpha_i  (PTF; else z_i = x_i),  Sx = sum z_i,  Sxx = sum z_i^2,  V = C*Sxx - Sx^2
//   Ve  = (V << 2T) + eps_int  (EPS = 0: V << 2T),  sig = isqrt(Ve),  inv = floor((2^43 + floor(sig/2)) / sig)
//   d_i = C*z_i - Sx,  y_i = (d_i*inv + 2^(S-1)) >>> S,  acc_i = y_i*G_i + B_i,  out_i = requant(acc_i, M, s)
// with T = 11 (PTF: 8, so that V << 2T of 11-bit z stays below 2^60) and S = K - T - F = 22 (PTF: 25). A
// constant row (all z_i equal) has V = 0 and every d_i = 0, so y_i = 0 whatever inv: the square root and
// the division are skipped with inv = 0 (the kernels' inv = 0 at sig = 0 agrees; with eps_int > 0 their inv
// differs but multiplies only zeros). Any other row has V >= C - 1 >= 1 (V is the sum over pairs of (z_i -
// z_j)^2), so sig >= 2^T and inv <= 2^(43-T).
//
// Widths (C <= MAX_C < 2^CW, C <= 4096; ZB = 8, PTF: 11 bits of z, z_i in [-1024, 1016]):
//   |Sx| <= C 2^(ZB-1): signed CW + ZB;  Sxx <= C 2^(2ZB-2): CW + 2 ZB - 2 (rtl/row_moments.v);
//   V = C^2 var(z) <= 2^24 (2^(ZB-1))^2: V_W = 2 ZB + 22 (38; PTF 44);  Ve < 2^62 (the contract's and
//   the kernels' bound on eps_int; EPS = 0: V << 2T < 2^60, two radicand bits and the adder less):
//   sig < 2^31;  2^43 + floor(sig/2) < 2^44 (rtl/inv_sqrt.v: isqrt, then divu 44 bits, 44 clocks);
//   inv <= 2^(43-T): 44 - T bits;  |d_i| <= (2^ZB - 1)(C - 1): signed CW + ZB + 1;  d_i*inv on the
//   shared (CW+ZB+1) x (45-T)-bit multiplier, exact;  |y_i| <= sqrt(C-1) 2^10 (1 + 2^-T) + 1 since
//   d_i^2 <= (C-1) V and sig >= 2^T sqrt(V) - 1: Y_W = ceil(CW/2) + 12 bits;  acc_i in 32 bits
//   (rtl/ln_affine.v).
//
// On the row engine (rtl/row_stream.v; six stages): FILL sums z_i and z_i^2 (rtl/row_moments.v; PTF: alpha
// read at the filling channel); CALC forms C*Sxx then Sx^2 on the shared multiplier (2 clocks), then sig
// and inv (rtl/inv_sqrt.v: 31 + 44 clocks, EPS = 0: 30 + 44; skipped when V = 0); OUT: stage 1 x_i (PTF:
// and alpha_i), 2 d_i, 3 d_i*inv (the shared multiplier) to y_i, then G_i, B_i and requant
// (rtl/ln_affine.v: stages 3 to 6). A row's CALC waits until the row before has left stage 2 (it reads
// c_row, Sx, inv, the multiplier). Unstalled, rows of C follow each other every C + 82 clocks, a row's
// first output 88 clocks after its last input (11 for a constant row) (docs/rtl.md). eps_int, M and s must
// be steady while rows are in flight; gamma (G, signed 15), beta (B, signed 31) and with PTF alpha
// (unsigned 2) are written through prm_* while no row is in flight (no reset).

`default_nettype none

module layernorm #(
  parameter integer MAX_C    = 1024,  // longest row (2..4096, the contract's): row buffer, channel RAMs
  parameter integer OUT_BITS = 8,     // output width, signed (2..16)
  parameter integer EPS      = 1,     // 1: Ve = (V << 2T) + eps_int; 0: no eps, cfg_eps_i unused (no_eps)
  parameter integer PTF      = 0      // 1: alpha per channel (prm_alpha_i), T = 8 (ptf); 0: alpha unused
) (
  input  wire clk_i, input wire rst_ni,  // rst_ni: synchronous, active low
  // ---- channel write port: G, B (and alpha) of channel prm_addr_i ----
  input  wire prm_we_i, input wire [$clog2(MAX_C)-1:0] prm_addr_i,
  input  wire [14:0]                prm_gamma_i,   // signed, |G| <= 2^14 - 1
  input  wire [30:0]                prm_beta_i,    // signed, |B| <= 2^30 - 1
  input  wire [1:0]                 prm_alpha_i,   // PTF: alpha in 0..3
  // ---- configuration ----
  input  wire [$clog2(MAX_C+1)-1:0] cfg_c_i,       // row length C in [1, MAX_C]
  input  wire [61:0]                cfg_eps_i,     // eps_int, unsigned, in units of V << 2T
  input  wire [30:0] cfg_mult_i, input wire [5:0] cfg_shift_i,  // requant multiplier M (unsigned), shift s
  input  wire in_valid_i, output wire in_ready_o, input wire [7:0] in_data_i,  // x_i, signed
  output wire out_valid_o, input wire out_ready_i, output wire out_last_o,  // with each row's last
  output wire [OUT_BITS-1:0] out_data_o  // out_i, signed
);

  localparam integer AW = $clog2(MAX_C), CW = $clog2(MAX_C + 1);  // buffer address, row length
  localparam integer ZB    = (PTF != 0) ? 11 : 8;  // z
  localparam integer T     = (PTF != 0) ? 8 : 11;
  localparam integer SX_W  = CW + ZB;
  localparam integer SXX_W = CW + 2 * ZB - 2;
  localparam integer D_W   = CW + ZB + 1;
  localparam integer INV_W = 44 - T;
  localparam integer MB_W  = INV_W + 1;             // shared multiplier operand b, signed
  localparam integer P_W   = D_W + MB_W;            // shared product, signed
  localparam integer Y_W   = (CW + 1) / 2 + 12;
  localparam integer V_W   = 2 * ZB + 22;
  localparam integer VE_W  = (EPS != 0) ? 62 : 60;   // V << 2T < 2^60, + eps_int < 2^62
  localparam integer S     = 33 - T;                // K - T - F
  localparam [P_W-1:0] HALF_C = {{(P_W-S){1'b0}}, 1'b1, {(S-1){1'b0}}};  // 2^(S-1)
  localparam [1:0] ST_NONE = 2'd0;  // no row in CALC
  localparam [1:0] ST_MUL1 = 2'd1;  // C * Sxx
  localparam [1:0] ST_MUL2 = 2'd2;  // Sx^2, V, Ve: to the square root (or inv = 0)
  localparam [1:0] ST_ROOT = 2'd3;  // waiting for inv

  // ---------------------------------------------------------------- the engine
  wire             fill, go, done, start, first_unused, calc_unused, enter_unused, passed_unused, pass_unused;
  wire [AW-1:0]    fill_addr, rd_addr, idx;
  wire [CW-1:0]    len, c_row;
  wire [7:0]       x1;
  wire [6:1]       ld;
  wire [OUT_BITS-1:0] out_d;
  row_stream #(
    .NAME("layernorm"), .LEN_NAME("MAX_C"), .MAX_N(MAX_C), .LIMIT(4096), .W(8), .OUT_BITS(OUT_BITS), .OUT_MIN(2),
    .DEPTH(6), .GO_AFTER(2), .A_NAME("EPS"), .A_VAL(EPS), .A_MIN(0), .A_MAX(1), .B_NAME("PTF"), .B_VAL(PTF),
    .B_MIN(0), .B_MAX(1)) u_stream (
    .clk_i(clk_i), .rst_ni(rst_ni), .len_i(cfg_c_i), .in_valid_i(in_valid_i), .in_ready_o(in_ready_o),
    .in_data_i(in_data_i), .out_valid_o(out_valid_o), .out_ready_i(out_ready_i), .out_data_o(out_data_o),
    .out_last_o(out_last_o), .fill_o(fill), .first_o(first_unused), .fill_addr_o(fill_addr), .len_o(len), .go_o(go),
    .calc_o(calc_unused), .enter_o(enter_unused), .passed_o(passed_unused), .done_i(done), .pass_o(pass_unused),
    .start_o(start), .row_len_o(c_row), .rd_addr_o(rd_addr), .idx_o(idx), .x1_o(x1), .ld_o(ld), .out_i(out_d)
  );

  // ---------------------------------------------------------------- z = x << alpha
  wire [ZB-1:0] z_in, z1;  // the filling channel's z; stage 1's
  generate
    if (PTF != 0) begin : g_ptf
      // verilator coverage_off
      reg [1:0] a_mem [0:MAX_C-1];
      // verilator coverage_on
      reg [1:0] a1_q;
      always @(posedge clk_i) begin
        if (prm_we_i) begin
          a_mem[prm_addr_i] <= prm_alpha_i;
        end
        if (ld[1]) begin
          a1_q <= a_mem[rd_addr];
        end
      end
      assign z_in = {{3{in_data_i[7]}}, in_data_i} << a_mem[fill_addr];
      assign z1   = {{3{x1[7]}}, x1} << a1_q;
    end else begin : g_plain
      wire unused_alpha = ^{prm_alpha_i, fill_addr, rd_addr, ld[1]};
      assign z_in = in_data_i;
      assign z1   = x1;
    end
  endgenerate

  // ---------------------------------------------------------------- statistics
  wire [SX_W-1:0]  sx;
  wire [SXX_W-1:0] sxx;
  row_moments #(.CW(CW), .ZB(ZB)) u_moments (
    .clk_i(clk_i), .rst_ni(rst_ni), .clear_i(start), .fill_i(fill), .z_i(z_in), .sz_o(sx), .szz_o(sxx)
  );

  reg  [1:0]            step_q;
  reg  signed [P_W-1:0] csxx_q;        // C * Sxx
  reg  [INV_W-1:0]      inv_q;
  reg  [SX_W-1:0]       sx_row_q;      // Sx of the row in OUT
  reg  signed [D_W-1:0] d2_q;

  // The shared multiplier, exact in P_W bits: MUL1 C * Sxx, MUL2 Sx * Sx, else d_i * inv.
  reg signed [D_W-1:0]  ma;
  reg signed [MB_W-1:0] mb;
  always @* begin
    case (step_q)
      ST_MUL1: begin
        ma = $signed({{(D_W-CW){1'b0}}, len});
        mb = $signed({{(MB_W-SXX_W){1'b0}}, sxx});
      end
      ST_MUL2: begin
        ma = $signed({{(D_W-SX_W){sx[SX_W-1]}}, sx});
        mb = $signed({{(MB_W-SX_W){sx[SX_W-1]}}, sx});
      end
      default: begin
        ma = d2_q;
        mb = $signed({1'b0, inv_q});
      end
    endcase
  end
  wire signed [P_W-1:0] prod = $signed({{MB_W{ma[D_W-1]}}, ma}) * $signed({{D_W{mb[MB_W-1]}}, mb});

  // V = C*Sxx - Sx^2 in [0, 2^V_W); Ve = (V << 2T) + eps_int.
  wire [P_W-1:0]  v_full = csxx_q - prod;
  wire            v_zero = (v_full[V_W-1:0] == {V_W{1'b0}});
  wire [VE_W-1:0] ve;
  generate
    if (EPS != 0) begin : g_eps
      assign ve = {2'b00, v_full[V_W-1:0], {(2*T){1'b0}}} + cfg_eps_i;
    end else begin : g_no_eps
      wire unused_eps = ^cfg_eps_i;
      assign ve = {v_full[V_W-1:0], {(2*T){1'b0}}};
    end
  endgenerate

  wire        root_valid, root_ready_unused;  // idle at every MUL2: one root a row
  wire [43:0] root;
  inv_sqrt #(.IN_BITS(VE_W), .K(43), .ROUND(1)) u_inv (
    .clk_i(clk_i), .rst_ni(rst_ni), .in_valid_i((step_q == ST_MUL2) && !v_zero), .in_ready_o(root_ready_unused),
    .in_data_i(ve), .out_valid_o(root_valid), .out_ready_i(step_q == ST_ROOT), .out_data_o(root)
  );
  assign done = ((step_q == ST_MUL2) && v_zero) || ((step_q == ST_ROOT) && root_valid);

  always @(posedge clk_i) begin
    if (!rst_ni || start) begin
      step_q <= ST_NONE;
    end else if (go) begin
      step_q <= ST_MUL1;
    end else if (step_q == ST_MUL1) begin
      csxx_q <= prod;
      step_q <= ST_MUL2;
    end else if (step_q == ST_MUL2) begin
      step_q <= ST_ROOT;
    end
    if (done) begin
      inv_q <= v_zero && (step_q == ST_MUL2) ? {INV_W{1'b0}} : root[INV_W-1:0];
    end
    if (start) begin
      sx_row_q <= sx;
    end
    if (ld[2]) begin
      d2_q <= $signed({{(D_W-CW){1'b0}}, c_row}) * $signed({{(D_W-ZB){z1[ZB-1]}}, z1})
            - $signed({{(D_W-SX_W){sx_row_q[SX_W-1]}}, sx_row_q});
    end
  end

  // ---------------------------------------------------------------- y_i, then G, B and requant
  wire signed [P_W-1:0] y_sum = prod + $signed(HALF_C);  // stage 3: y = (d*inv + 2^(S-1)) >>> S
  wire [Y_W-1:0]        y3_d  = y_sum[S+Y_W-1:S];
  ln_affine #(.MAX_C(MAX_C), .Y_W(Y_W), .OUT_BITS(OUT_BITS)) u_affine (
    .clk_i(clk_i), .prm_we_i(prm_we_i), .prm_addr_i(prm_addr_i), .prm_gamma_i(prm_gamma_i),
    .prm_beta_i(prm_beta_i), .idx_i(idx), .ld_i(ld[5:3]), .y_i(y3_d), .mult_i(cfg_mult_i),
    .shift_i(cfg_shift_i), .out_o(out_d)
  );

  // Dropped: V's and y's sign extensions, y's rounded-off fraction, inv's zero top (inv <= 2^(43-T)).
  wire unused_bits = ^{v_full[P_W-1:V_W], y_sum[P_W-1:S+Y_W], y_sum[S-1:0], root[43:INV_W], first_unused,
                       calc_unused, enter_unused, passed_unused, pass_unused, ld[6]};

endmodule

`default_nettype wire
