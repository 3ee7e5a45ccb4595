// residual_add_channels: the residual add with its constants per channel, the bit-exact twin of the
// kind residual_add_channels (hwvit/blocks/residual_add_channels.py: hwvit.ops.residual_add with one
// multiplier pair and shift per channel along the last axis).
//
//   y[t][c] = sat_OUT_BITS( (a[t][c] * Ma[c] + b[t][c] * Mb[c] + 2^(s[c]-1)) >>> s[c] )
//
// A residual stream quantized per channel (FQ-ViT's power-of-two factor: channel c at s * 2^alpha_c,
// `--variant layernorm=ptf`) gives every channel its own rescaling; the arithmetic of each beat is
// rtl/residual_add.v's (exact products, one rounding half up, saturation; docs/arithmetic.md
// "residual_add"). Tokens stream one after another, C channels each, channel 0 first; the block
// counts the channels itself and marks each token's last with out_last_o.
//
// The constants are a MAX_C-entry table (Ma, Mb unsigned 31 bits, s in 1..62) written through prm_*,
// one entry per clock, while no token is in flight; the table has no reset and survives rst_ni.
//
// Pipeline: 2 register stages, one beat per cycle, latency 2, bubbles collapse; in_ready_o depends
// combinationally on out_ready_i. Stage 1 reads the beat's channel from the table and forms both
// products (IN_BITS + 31 bits each, exact) and carries the channel's shift and last flag; stage 2
// adds, rounds and saturates (rtl/round_sat.v) with that shift.
// Configuration: C (cfg_c_i) is sampled with each token's first beat (0 counts as 1, values above
// MAX_C as MAX_C).
// Reset (rst_ni, synchronous, active low) empties the pipeline and zeroes every register but the
// table, so the next beat is channel 0 of a new token and out_data_o is never X after reset.

`default_nettype none

module residual_add_channels #(
  // Input activation width (signed), 8 in the contract.
  parameter integer IN_BITS  = 8,
  // Output width (signed), 2..16.
  parameter integer OUT_BITS = 8,
  // Most channels per token (2..4096, the contract's limit): entries of the constant table.
  parameter integer MAX_C    = 1024
) (
  input  wire                       clk_i,
  input  wire                       rst_ni,

  // ---- constant table: channel prm_addr_i gets (Ma, Mb, s) ----
  input  wire                       prm_we_i,
  input  wire [$clog2(MAX_C)-1:0]   prm_addr_i,
  input  wire [30:0]                prm_mult_a_i,  // Ma, unsigned [0, 2^31-1]
  input  wire [30:0]                prm_mult_b_i,  // Mb, unsigned [0, 2^31-1]
  input  wire [5:0]                 prm_shift_i,   // s, in 1..62

  // ---- configuration ----
  input  wire [$clog2(MAX_C+1)-1:0] cfg_c_i,       // channels per token C in [1, MAX_C]

  // ---- input stream: one (a, b) pair per beat, channel after channel ----
  input  wire                       in_valid_i,
  output wire                       in_ready_o,
  input  wire [IN_BITS-1:0]         in_a_i,        // signed
  input  wire [IN_BITS-1:0]         in_b_i,        // signed

  // ---- output stream: y, signed OUT_BITS; out_last_o with each token's last channel ----
  output wire                       out_valid_o,
  input  wire                       out_ready_i,
  output wire [OUT_BITS-1:0]        out_data_o,
  output wire                       out_last_o
);

  // ---------------------------------------------------------------- parameter checks
  // Verilog-2005 has no elaboration-time assertion: Icarus and Verilator stop at time 0,
  // yosys stops synthesis ("System task `$finish' executed").
  // verilator coverage_off
  // (the parameter checks run only on a bad parameter: no valid build can cover them)
  initial begin
    if (IN_BITS < 2) begin
      $display("ERROR: residual_add_channels: IN_BITS = %0d must be >= 2", IN_BITS);
      $finish;
    end
    if (OUT_BITS < 2 || OUT_BITS > 16) begin
      $display("ERROR: residual_add_channels: OUT_BITS = %0d must be in 2..16", OUT_BITS);
      $finish;
    end
    if (MAX_C < 2 || MAX_C > 4096) begin
      $display("ERROR: residual_add_channels: MAX_C = %0d must be in 2..4096", MAX_C);
      $finish;
    end
  end
  // verilator coverage_on

  localparam integer AW        = $clog2(MAX_C);      // channel number, table address
  localparam integer CW        = $clog2(MAX_C + 1);  // channel count
  // a * Ma: signed IN_BITS times unsigned 31 bits is exact in IN_BITS + 31 signed bits.
  localparam integer PROD_BITS = IN_BITS + 31;
  // The sum of the two products needs one bit more; round_sat adds 2^(s-1) <= 2^61: 64 bits hold both.
  localparam integer SUM_BITS  = (PROD_BITS + 2 > 64) ? PROD_BITS + 2 : 64;
  localparam [CW:0]   C_TOP    = MAX_C[CW:0];       // one spare bit: the clamp compare is never constant
  localparam [CW-1:0] C_ONE    = {{(CW-1){1'b0}}, 1'b1};

  // ---------------------------------------------------------------- the constant table
  reg [30:0] ma_mem [0:MAX_C-1];
  reg [30:0] mb_mem [0:MAX_C-1];
  reg [5:0]  sh_mem [0:MAX_C-1];

  always @(posedge clk_i) begin
    if (prm_we_i) begin
      ma_mem[prm_addr_i] <= prm_mult_a_i;
      mb_mem[prm_addr_i] <= prm_mult_b_i;
      sh_mem[prm_addr_i] <= prm_shift_i;
    end
  end

  // ---------------------------------------------------------------- handshake
  reg  s1_valid_q, s1_valid_d;               // stage 1 (products) holds a beat
  reg  out_valid_q, out_valid_d;             // stage 2 (output register) holds a beat
  wire out_en = ~out_valid_q | out_ready_i;  // the output register takes stage 1's beat
  wire s1_en  = ~s1_valid_q | out_en;        // stage 1 takes the input's beat
  wire take   = in_valid_i & s1_en;          // a beat enters

  assign in_ready_o  = s1_en;
  assign out_valid_o = out_valid_q;

  // ---------------------------------------------------------------- channel count
  // The channel number runs in CW bits like the count (below MAX_C, so its low AW bits address the
  // table); the token's last beat is the one whose channel is C - 1.
  reg  [CW-1:0] chan_q, chan_d;              // channel of the next beat
  reg  [CW-1:0] count_q, count_d;            // C of the token in flight
  wire [CW-1:0] count_in = (cfg_c_i == {CW{1'b0}}) ? C_ONE
                         : ({1'b0, cfg_c_i} > C_TOP) ? C_TOP[CW-1:0] : cfg_c_i;
  wire          first    = (chan_q == {CW{1'b0}});
  wire [CW-1:0] count    = first ? count_in : count_q;
  wire          last     = (chan_q == count - C_ONE);
  wire [AW-1:0] addr     = chan_q[AW-1:0];

  // ---------------------------------------------------------------- stage 1: the channel's products
  wire signed [PROD_BITS-1:0] a_wide  = {{31{in_a_i[IN_BITS-1]}}, in_a_i};
  wire signed [PROD_BITS-1:0] b_wide  = {{31{in_b_i[IN_BITS-1]}}, in_b_i};
  // verilator coverage_off
  // (zero-extended copies: the live bits toggle in the table, the rest are 0)
  wire signed [PROD_BITS-1:0] ma_wide = {{IN_BITS{1'b0}}, ma_mem[addr]};
  wire signed [PROD_BITS-1:0] mb_wide = {{IN_BITS{1'b0}}, mb_mem[addr]};
  // verilator coverage_on
  wire        [5:0]           sh_sel  = sh_mem[addr];

  reg signed [PROD_BITS-1:0] pa_q, pa_d;
  reg signed [PROD_BITS-1:0] pb_q, pb_d;
  reg        [5:0]           sh_q, sh_d;     // the channel's shift, with its products
  reg                        s1_last_q, s1_last_d;

  // ---------------------------------------------------------------- stage 2: add, round, saturate
  localparam integer PAD = SUM_BITS - PROD_BITS;
  wire signed [SUM_BITS-1:0] total = {{PAD{pa_q[PROD_BITS-1]}}, pa_q} + {{PAD{pb_q[PROD_BITS-1]}}, pb_q};
  wire        [OUT_BITS-1:0] y;

  round_sat #(
    .IN_BITS  (SUM_BITS),
    .OUT_BITS (OUT_BITS)
  ) u_round_sat (
    .v_i      (total),
    .shift_i  (sh_q),
    .y_o      (y)
  );

  reg [OUT_BITS-1:0] out_q, out_d;
  reg                out_last_q, out_last_d;
  assign out_data_o = out_q;
  assign out_last_o = out_last_q;

  // ---------------------------------------------------------------- next state
  always @* begin
    chan_d      = chan_q;
    count_d     = count_q;
    s1_valid_d  = s1_valid_q;
    pa_d        = pa_q;
    pb_d        = pb_q;
    sh_d        = sh_q;
    s1_last_d   = s1_last_q;
    out_valid_d = out_valid_q;
    out_d       = out_q;
    out_last_d  = out_last_q;
    if (take) begin
      chan_d    = last ? {CW{1'b0}} : chan_q + C_ONE;
      count_d   = count;
      pa_d      = a_wide * ma_wide;
      pb_d      = b_wide * mb_wide;
      sh_d      = sh_sel;
      s1_last_d = last;
    end
    if (s1_en) begin
      s1_valid_d = in_valid_i;
    end
    if (out_en) begin
      out_valid_d = s1_valid_q;
      if (s1_valid_q) begin
        out_d      = y;
        out_last_d = s1_last_q;
      end
    end
  end

  // ---------------------------------------------------------------- registers
  always @(posedge clk_i) begin
    if (!rst_ni) begin
      chan_q      <= {CW{1'b0}};
      count_q     <= {CW{1'b0}};
      s1_valid_q  <= 1'b0;
      pa_q        <= {PROD_BITS{1'b0}};
      pb_q        <= {PROD_BITS{1'b0}};
      sh_q        <= 6'd0;
      s1_last_q   <= 1'b0;
      out_valid_q <= 1'b0;
      out_q       <= {OUT_BITS{1'b0}};
      out_last_q  <= 1'b0;
    end else begin
      chan_q      <= chan_d;
      count_q     <= count_d;
      s1_valid_q  <= s1_valid_d;
      pa_q        <= pa_d;
      pb_q        <= pb_d;
      sh_q        <= sh_d;
      s1_last_q   <= s1_last_d;
      out_valid_q <= out_valid_d;
      out_q       <= out_d;
      out_last_q  <= out_last_d;
    end
  end

endmodule

`default_nettype wire
