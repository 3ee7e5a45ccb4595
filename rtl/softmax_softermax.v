// softmax_softermax: Softermax over a streamed row, the bit-exact twin of the softermax kernel
// (hwvit/variants/hwsoftmax.py; docs/variants/hwsoftmax.md; Stevens et al., DAC 2021).
//
// Per row of N signed IN_BITS inputs x_0 .. x_(N-1) in stream order, K = mult_i (the base-2 slope s_in *
// log2(e) * 2^16, 1..2^31-1), C = pow2 table, R = recip table (17 entries each):
//   u_j = x_j * K                          base-2 exponent with 16 fraction bits
//   c_j = ceil(u_j / 2^16)                 IntMax: the integer part, rounded up
//   m_j = max(m_(j-1), c_j)   (m_0 = c_0)  running max
//   d_j = (d_(j-1) >> (m_j - m_(j-1))) + pow2(u_j - m_j * 2^16)          (d_0 = pow2(u_0 - m_0 2^16))
//   pow2(v) = LPW(v mod 2^16) >> -floor(v / 2^16),   v <= 0
//   LPW(f)  = C[s] + ((C[s+1] - C[s]) * r >> 12),    s = f[15:12], r = f[11:0]
//   ex = bitlen(d) - 1,  mq = (d << 15) >> ex,  rec = R[s] - ((R[s] - R[s+1]) * r >> 11),
//        s = mq[14:11], r = mq[10:0]                                     (once per row, m = m_(N-1))
//   e_i = pow2(u_i - m * 2^16),  y_i = min((e_i * rec + 2^(sh-1)) >> sh, 2^OUT_BITS - 1),
//        sh = 16 + ex - OUT_BITS.
// Since v = u - m * 2^16 with m an integer, v mod 2^16 = u[15:0] and -floor(v / 2^16) = m - floor(u /
// 2^16): pow2 reads the low 16 bits of u and shifts by m - (u >>> 16), so no wide subtract is needed. The
// rounding is done as ((e * rec) >> (sh - 1)) + 1) >> 1, which equals (e * rec + 2^(sh-1)) >> sh for sh >=
// 1 (a multiple of 2^(sh-1) passes through the floor).
//
// Widths (the kernel's WIDTHS at IN_BITS = 16, N = 4096):
//   u  IN_BITS + 31 signed: |x| <= 2^(IN_BITS-1), K < 2^31, so |u| < 2^(IN_BITS+30);
//   u >>> 16 and c  IN_BITS + 15 signed: c <= ceil((2^(IN_BITS+30) - 2^31) / 2^16) < 2^(IN_BITS+14)
//      and c >= u >>> 16 >= -2^(IN_BITS+14); m likewise; m_j - m_(j-1) and m - (u >>> 16) are
//      >= 0 and < 2^(IN_BITS+15), so their IN_BITS + 15-bit differences (mod 2^(IN_BITS+15)) are
//      exact; they drive right shifts directly (a shift by the width or more gives 0);
//   tables 17 bits unsigned: prepare gives C[s] = round(2^15 2^(s/16)) and R[s] = round(2^16 /
//      (1 + s/16)), both in [2^15, 2^16], C rising by < 2^11 a step, R falling by < 2^12 a step;
//   LPW: (C[s+1] - C[s]) * r < 2^11 * 2^12, LPW in [2^15, C[s+1]) so < 2^16 (s <= 15): 16 bits;
//   e = pow2(v) <= 2^15 (v = 0 gives C[0]; v < 0 shifts by >= 1): 16 bits; a shift >= 16 gives 0;
//   d <= N * 2^15 <= 2^(15 + clog2(MAX_N)): D_BITS = 17 + clog2(MAX_N) (a spare bit; 29 at 4096); the
//      element that sets the final max adds pow2 of v in (-2^16, 0], >= C[0] / 2 = 2^14, after
//      the last shift, so d >= 2^14 and ex in [14, D_BITS - 1] (the search starts at bit 14),
//      sh - 1 = 15 + ex - OUT_BITS >= 13;
//   mq = the 16 bits of d below and at its leading one, in [2^15, 2^16) (d << 15 < 2^(D_BITS+15));
//   (R[s] - R[s+1]) * r < 2^12 * 2^11, rec in (2^15, 2^16]: 17 bits;
//   e * rec <= 2^15 * 2^16 = 2^31: 32 bits; >> (sh - 1) leaves < 2^(32-13) = 2^19, so + 1 does
//      not carry out; y_i saturates to 2^OUT_BITS - 1 when any bit above OUT_BITS is set (a lone
//      dominant element reaches it).
//
// On the row engine (rtl/row_stream.v; four stages): PASS re-reads the filled row through the online
// recurrence (stage 1 x_i, stage 2 u = x * K, then m and d: c, the new max, pow2, the shifted sum); CALC,
// one clock, lets ex, mq and rec follow d; OUT reads the row again: u (the same multiplier), e = pow2(u - m
// 2^16) (the same LPW unit) into stage 3, y = rounded e * rec into the output register. A row's pass waits
// until the row before has left stage 3 (rec follows d). Per element: one IN_BITS x 31 multiply, one 11 x
// 12 multiply (LPW), an add and a shift (d), in OUT one 16 x 17. The pow2 and recip tables are 17-entry
// register files written together through tbl_* (address 0..16; a write to 17..31 has no effect), once per
// layer, while no row is in flight; no reset. mult_i must be steady while rows are in flight.

`default_nettype none

module softmax_softermax #(
  parameter integer MAX_N    = 256,  // longest row (2..65536); the row buffer has MAX_N entries
  parameter integer IN_BITS  = 8,    // signed input width (2..16)
  parameter integer OUT_BITS = 8     // unsigned output width (1..16), scale 2^-OUT_BITS
) (
  input  wire clk_i, input wire rst_ni,  // rst_ni: synchronous, active low
  // Table write port: C[tbl_addr_i] = tbl_pow2_i, R[tbl_addr_i] = tbl_recip_i (addresses 0..16)
  input  wire                         tbl_we_i,
  input  wire [4:0]                   tbl_addr_i,
  input  wire [16:0]                  tbl_pow2_i,
  input  wire [16:0]                  tbl_recip_i,
  // Configuration: K = round(s_in * log2(e) * 2^16), unsigned
  input  wire [30:0]                  mult_i,
  input  wire [$clog2(MAX_N+1)-1:0]   row_len_i,   // row length N in [1, MAX_N], taken with a row's first
  input  wire in_valid_i, output wire in_ready_o, input wire [IN_BITS-1:0] in_data_i,  // x_i, signed
  output wire out_valid_o, input wire out_ready_i, output wire out_last_o,  // with each row's last
  output wire [OUT_BITS-1:0] out_data_o  // y_i, unsigned (y_i / 2^OUT_BITS)
);

  localparam integer AW = $clog2(MAX_N), LW = $clog2(MAX_N + 1);  // buffer address, row length
  localparam integer U_BITS = IN_BITS + 31;          // u = x * K, signed
  localparam integer C_BITS = IN_BITS + 15;          // u >>> 16, c, m, signed
  localparam integer D_BITS = 17 + AW;               // d <= MAX_N * 2^15 (one spare bit)
  localparam integer X_BITS = $clog2(D_BITS);        // ex in [0, D_BITS - 1]
  localparam integer H_BITS = X_BITS + 1;            // sh - 1 = 15 + ex - OUT_BITS < 2 D_BITS
  localparam integer SH_ADD_I = 15 - OUT_BITS + (1 << H_BITS);  // 15 - OUT_BITS mod 2^H_BITS
  localparam integer EX_LO    = 14;                  // d >= 2^14: ex >= 14
  localparam integer SX       = 31;                  // sign copies that extend x to U_BITS
  localparam [H_BITS-1:0]    SH_ADD = SH_ADD_I[H_BITS-1:0];
  localparam [OUT_BITS-1:0]  Q_C    = {OUT_BITS{1'b1}};               // 2^OUT_BITS - 1
  // Zero pads (named, so that each extension is one constant).
  localparam [IN_BITS-1:0]        Z_IN  = {IN_BITS{1'b0}};
  localparam [C_BITS-2:0]         Z_C1  = {(C_BITS-1){1'b0}};
  localparam [D_BITS-18:0]        Z_D17 = {(D_BITS-17){1'b0}};
  localparam [D_BITS-1:0]         Z_D   = {D_BITS{1'b0}};
  localparam [H_BITS-X_BITS-1:0]  Z_HX  = {(H_BITS-X_BITS){1'b0}};
  localparam [X_BITS-1:0]         Z_X   = {X_BITS{1'b0}};
  localparam [14:0]               Z_15  = 15'd0;
  localparam [11:0]               Z_12  = 12'd0;
  localparam [10:0]               Z_11  = 11'd0;
  localparam [16:0]               Z_17  = 17'd0;

  // ---------------------------------------------------------------- the engine
  wire                go, pass, fill_unused, first_unused, calc_unused, enter_unused, passed_unused, start_unused;
  wire [IN_BITS-1:0]  x1;
  wire [4:1]          ld;
  wire [OUT_BITS-1:0] out_d;
  wire [AW-1:0]       fill_addr_unused, rd_addr_unused, idx_unused;
  wire [LW-1:0]       len_unused, row_len_unused;
  row_stream #(
    .NAME("softmax_softermax"), .MAX_N(MAX_N), .LIMIT(65536), .W(IN_BITS), .OUT_BITS(OUT_BITS), .OUT_MIN(1),
    .DEPTH(4), .PASS(1), .PASS_EXIT(2), .PRE_CALC(0), .GO_AFTER(3)) u_stream (
    .clk_i(clk_i), .rst_ni(rst_ni), .len_i(row_len_i), .in_valid_i(in_valid_i), .in_ready_o(in_ready_o),
    .in_data_i(in_data_i), .out_valid_o(out_valid_o), .out_ready_i(out_ready_i), .out_data_o(out_data_o),
    .out_last_o(out_last_o), .fill_o(fill_unused), .first_o(first_unused), .fill_addr_o(fill_addr_unused),
    .len_o(len_unused), .go_o(go), .calc_o(calc_unused), .enter_o(enter_unused), .passed_o(passed_unused),
    .done_i(1'b1), .pass_o(pass), .start_o(start_unused), .row_len_o(row_len_unused), .rd_addr_o(rd_addr_unused),
    .idx_o(idx_unused), .x1_o(x1), .ld_o(ld), .out_i(out_d)
  );

  // verilator coverage_off
  reg [16:0]        pow2_mem  [0:16];        // C[0..16]
  reg [16:0]        recip_mem [0:16];        // R[0..16]
  // verilator coverage_on
  reg               init_q;                  // the next element out of stage 2 is its row's first
  reg [C_BITS-1:0]  m_q;                     // running max m
  reg [D_BITS-1:0]  d_q;                     // running sum d
  reg [16:0]        rec_q;                   // 1/mq
  reg [X_BITS-1:0]  ex_q;                    // bitlen(d) - 1
  reg [U_BITS-1:0]  u2_q;                    // stage 2: u = x * K
  reg [16:0]        e3_q;                    // stage 3: e = pow2(u - m 2^16) (OUT)

  // Stage 1 -> 2: u = x * K (operands extended to U_BITS: the product is exact mod 2^U_BITS).
  wire [U_BITS-1:0] u1 = {{SX{x1[IN_BITS-1]}}, x1} * {Z_IN, mult_i};

  // Stage 2: c = ceil(u / 2^16), the new max mn, pow2(u - ref 2^16) (ref: mn in the pass, m in OUT).
  wire [C_BITS-1:0] fl2;                                                 // floor(u / 2^16)
  wire [3:0]        seg2;                                                // LPW segment s
  wire [11:0]       r2;                                                  // LPW offset r
  assign {fl2, seg2, r2} = u2_q;
  wire [C_BITS-1:0] c2   = fl2 + {Z_C1, |{seg2, r2}};                     // ceil(u / 2^16)
  wire [C_BITS-1:0] mn2  = (init_q || $signed(c2) > $signed(m_q)) ? c2 : m_q;
  wire [C_BITS-1:0] ref2 = pass ? mn2 : m_q;
  wire [C_BITS-1:0] sv2  = ref2 - fl2;                                     // -floor(v / 2^16)
  wire [C_BITS-1:0] dm2  = mn2 - m_q;                                      // m_j - m_(j-1)

  // LPW(u[15:0]) = C[s] + ((C[s+1] - C[s]) * r >> 12), then >> sv2 (past the width: 0).
  wire [16:0] c0    = pow2_mem[{1'b0, seg2}];
  wire [16:0] c1    = pow2_mem[{1'b0, seg2} + 5'd1];
  wire [16:0] step2 = c1 - c0;
  wire [28:0] lprod = {Z_12, step2} * {Z_17, r2};
  wire [16:0] lint2;                                                     // (C[s+1] - C[s]) * r >> 12
  wire [11:0] lprod_lo_unused;                                           // the floor drops them
  assign {lint2, lprod_lo_unused} = lprod;
  wire [16:0] lpw2  = c0 + lint2;
  wire [16:0] e2    = lpw2 >> sv2;

  // The online sum: d >> (m_j - m_(j-1)) plus e; d starts at e.
  wire [D_BITS-1:0] dsh2  = init_q ? Z_D : d_q >> dm2;
  wire [D_BITS-1:0] dnew2 = dsh2 + {Z_D17, e2};

  // ---------------------------------------------------------------- once per row, from d
  // ex = position of d's leading one; mq = (d << 15) >> ex < 2^16; rec by the R table's LPW.
  reg [X_BITS-1:0] ex_f;
  integer          i;
  always @* begin
    ex_f = Z_X;
    for (i = EX_LO; i != D_BITS; i = i + 1) begin
      if (d_q[i]) begin
        ex_f = i[X_BITS-1:0];
      end
    end
  end
  wire [D_BITS+14:0] dn_f  = {d_q, Z_15} >> ex_f;
  wire [D_BITS-1:0]  dn_hi_unused;                  // mq[15] = 1 and the zeros above it
  wire [3:0]         seg_f;                         // mq[14:11]
  wire [10:0]        r_f;                           // mq[10:0]
  assign {dn_hi_unused, seg_f, r_f} = dn_f;
  wire [16:0]        r0_f  = recip_mem[{1'b0, seg_f}];
  wire [16:0]        r1_f  = recip_mem[{1'b0, seg_f} + 5'd1];
  wire [16:0]        rdf_f = r0_f - r1_f;
  wire [27:0]        rpr_f = {Z_11, rdf_f} * {Z_17, r_f};
  wire [16:0]        rint_f;                        // (R[s] - R[s+1]) * r >> 11
  wire [10:0]        rpr_lo_unused;                 // the floor drops them
  assign {rint_f, rpr_lo_unused} = rpr_f;
  wire [16:0]        rec_f = r0_f - rint_f;

  // ---------------------------------------------------------------- output (stage 3 -> 4)
  // y = min((((e * rec) >> (sh - 1)) + 1) >> 1, 2^OUT_BITS - 1), sh - 1 = 15 + ex - OUT_BITS.
  wire [H_BITS-1:0]   shr3  = SH_ADD + {Z_HX, ex_q};
  wire [33:0]         prod3 = {Z_17, e3_q} * {Z_17, rec_q};
  wire [33:0]         t3    = prod3 >> shr3;
  wire [33:0]         yp3   = (t3 + 34'd1) >> 1;     // t3 < 2^19: no carry out
  wire [33-OUT_BITS:0] yp_hi;
  wire [OUT_BITS-1:0] yp_lo;
  assign {yp_hi, yp_lo} = yp3;
  assign out_d = (|yp_hi) ? Q_C : yp_lo;

  // ---------------------------------------------------------------- registers (rec, ex follow d)
  always @(posedge clk_i) begin
    if (tbl_we_i) begin
      pow2_mem[tbl_addr_i]  <= tbl_pow2_i;
      recip_mem[tbl_addr_i] <= tbl_recip_i;
    end
    if (go) begin
      init_q <= 1'b1;
    end else if (pass && ld[3]) begin  // a pass element leaves stage 2: the recurrence steps
      init_q <= 1'b0;
      m_q    <= mn2;
      d_q    <= dnew2;
    end
    rec_q <= rec_f;
    ex_q  <= ex_f;
    if (ld[2]) begin
      u2_q <= u1;
    end
    if (ld[3]) begin
      e3_q <= e2;
    end
  end

  wire unused_bits = ^{fill_addr_unused, rd_addr_unused, idx_unused, len_unused, row_len_unused, fill_unused,
                       first_unused, calc_unused, enter_unused, passed_unused, start_unused, ld[1], ld[4]};

endmodule

`default_nettype wire
