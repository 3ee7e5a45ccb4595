// isqrt: exact floor integer square root, bit-serial restoring (twin of hwvit.ops.isqrt).
//
//   out = floor(sqrt(in))       for any unsigned IN_BITS-bit input
//
// One result bit per cycle, most significant first: the partial remainder takes the next two
// radicand bits, and the trial subtrahend is 4*root + 1 (the restoring form of
// (2r+1)^2 - (2r)^2 = 4r + 1). If it fits, it is subtracted and the root bit is 1. The remainder
// n - root^2 never exceeds 2*root, so it needs ROOT_BITS + 1 bits, and one adder of ROOT_BITS + 3
// bits does all the work: no multiplier. LayerNorm uses it once per row on a 62-bit input
// (31 cycles); the testbench checks it at 64 bits against math.isqrt.
//
// Handshake: one operand at a time. in_ready_o is high while idle; the result is held on
// out_data_o with out_valid_o until out_ready_i. Latency from accept to out_valid_o:
// IN_BITS/2 cycles. Reset (rst_ni, synchronous, active low) returns to idle and zeroes every
// register, so nothing is X after reset.

`default_nettype none

module isqrt #(
  // Radicand width in bits; even, >= 4 (tested: 62 for LayerNorm, 64 in the unit test).
  parameter integer IN_BITS = 62
) (
  input  wire                   clk_i,
  input  wire                   rst_ni,

  // ---- input: the radicand, unsigned ----
  input  wire                   in_valid_i,
  output wire                   in_ready_o,
  input  wire [IN_BITS-1:0]     in_data_i,

  // ---- output: floor(sqrt(radicand)) ----
  output wire                   out_valid_o,
  input  wire                   out_ready_i,
  output wire [IN_BITS/2-1:0]   out_data_o
);

  // ---------------------------------------------------------------- parameter checks
  // Verilog-2005 has no elaboration-time assertion: Icarus and Verilator stop at time 0,
  // yosys stops synthesis ("System task `$finish' executed").
  // verilator coverage_off
  // (the parameter checks run only on a bad parameter: no valid build can cover them)
  initial begin
    if (IN_BITS < 4 || IN_BITS % 2 != 0) begin
      $display("ERROR: isqrt: IN_BITS = %0d must be even and >= 4", IN_BITS);
      $finish;
    end
  end
  // verilator coverage_on

  localparam integer ROOT_BITS = IN_BITS / 2;
  // The remainder is at most 2*root < 2^(ROOT_BITS+1).
  localparam integer REM_BITS  = ROOT_BITS + 1;
  // Remainder shifted left by 2 with two new radicand bits: one adder of this width.
  localparam integer TRY_BITS  = REM_BITS + 2;
  localparam integer CNT_BITS  = $clog2(ROOT_BITS + 1);

  localparam [1:0] S_IDLE = 2'd0;  // waiting for an operand
  localparam [1:0] S_RUN  = 2'd1;  // one root bit per cycle
  localparam [1:0] S_DONE = 2'd2;  // result valid, waiting for out_ready_i

  reg  [1:0]           state_q,   state_d;
  reg  [IN_BITS-1:0]   rad_q,     rad_d;     // radicand bits not consumed yet, top-aligned
  reg  [REM_BITS-1:0]  rem_q,     rem_d;     // partial remainder n' - root^2
  reg  [ROOT_BITS-1:0] root_q,    root_d;    // root bits found so far (right-aligned)
  reg  [CNT_BITS-1:0]  cnt_q,     cnt_d;     // root bits still to find

  // Restoring step: bring down two radicand bits, try subtracting 4*root + 1.
  wire [TRY_BITS-1:0] rem_sh = {rem_q, rad_q[IN_BITS-1:IN_BITS-2]};
  wire [TRY_BITS-1:0] trial  = {1'b0, root_q, 2'b01};
  wire [TRY_BITS-1:0] diff   = rem_sh - trial;
  wire                fits   = (rem_sh >= trial);
  // After a successful subtraction the remainder is <= 2*root, so the top two bits of diff are 0;
  // after a failed one rem_sh < 4*root + 1, i.e. rem_sh <= 2*(2*root) fits REM_BITS too.
  wire [1:0]          unused_top = fits ? diff[TRY_BITS-1:TRY_BITS-2] : rem_sh[TRY_BITS-1:TRY_BITS-2];

  assign in_ready_o  = (state_q == S_IDLE);
  assign out_valid_o = (state_q == S_DONE);
  assign out_data_o  = root_q;

  always @* begin
    state_d = state_q;
    rad_d   = rad_q;
    rem_d   = rem_q;
    root_d  = root_q;
    cnt_d   = cnt_q;
    case (state_q)
      S_IDLE: begin
        if (in_valid_i) begin
          state_d = S_RUN;
          rad_d   = in_data_i;
          rem_d   = {REM_BITS{1'b0}};
          root_d  = {ROOT_BITS{1'b0}};
          cnt_d   = ROOT_BITS[CNT_BITS-1:0];
        end
      end
      S_RUN: begin
        rad_d  = rad_q << 2;
        rem_d  = fits ? diff[REM_BITS-1:0] : rem_sh[REM_BITS-1:0];
        root_d = {root_q[ROOT_BITS-2:0], fits};
        cnt_d  = cnt_q - {{(CNT_BITS - 1){1'b0}}, 1'b1};
        if (cnt_q == {{(CNT_BITS - 1){1'b0}}, 1'b1}) begin
          state_d = S_DONE;
        end
      end
      S_DONE: begin
        if (out_ready_i) begin
          state_d = S_IDLE;
        end
      end
      // verilator coverage_off
      // (reached only from a state value that no transition produces)
      default: state_d = S_IDLE;
      // verilator coverage_on
    endcase
  end

  always @(posedge clk_i) begin
    if (!rst_ni) begin
      state_q <= S_IDLE;
      rad_q   <= {IN_BITS{1'b0}};
      rem_q   <= {REM_BITS{1'b0}};
      root_q  <= {ROOT_BITS{1'b0}};
      cnt_q   <= {CNT_BITS{1'b0}};
    end else begin
      state_q <= state_d;
      rad_q   <= rad_d;
      rem_q   <= rem_d;
      root_q  <= root_d;
      cnt_q   <= cnt_d;
    end
  end

endmodule

`default_nettype wire
