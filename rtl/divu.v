// divu: unsigned restoring divider, one quotient bit per clock.
//
// quotient = floor(dividend / divisor), remainder = dividend - quotient * divisor, for a
// quotient known to fit Q_BITS bits: the caller guarantees dividend < divisor * 2^Q_BITS
// (always true when Q_BITS = N_BITS and divisor > 0). The dividend's top N_BITS - Q_BITS bits
// (fewer than the divisor's, so < divisor) then seed the partial remainder and only Q_BITS
// steps are needed: a known-narrow quotient costs no clocks for its zero bits.
//
// A request is taken on (in_valid_i & in_ready_o); the result appears Q_BITS + 1 clocks later
// on out_valid_o and is held until out_ready_i. One request at a time: in_ready_o is high only
// while the unit is idle. The datapath is one (D_BITS + 1)-bit compare and one D_BITS-bit
// subtract; the low dividend bits and the quotient share one Q_BITS shift register (dividend
// bits leave at the top as quotient bits enter at the bottom).
//
// Not trapped: divisor = 0 (every trial subtraction succeeds: quotient all ones) and a quotient
// wider than Q_BITS (the result is wrong). Both are the caller's preconditions.
//
// Users: softmax (R = floor((Q * 2^32 + floor(S/2)) / S) once per row: 40-bit dividend,
// 25-bit quotient for 8-bit outputs) and the LayerNorm helper; see docs/arithmetic.md.
`default_nettype none

module divu #(
  parameter integer N_BITS = 40,     // dividend width (>= 2)
  parameter integer D_BITS = 24,     // divisor and remainder width (>= N_BITS - Q_BITS, >= 1)
  parameter integer Q_BITS = N_BITS  // quotient width (2..N_BITS); also the clocks per division
) (
  input  wire              clk_i,
  input  wire              rst_ni,           // synchronous, active low

  // Request: dividend and divisor, taken when in_valid_i & in_ready_o
  input  wire              in_valid_i,
  output wire              in_ready_o,
  input  wire [N_BITS-1:0] in_dividend_i,
  input  wire [D_BITS-1:0] in_divisor_i,

  // Result: held from out_valid_o until out_ready_i
  output wire              out_valid_o,
  input  wire              out_ready_i,
  output wire [Q_BITS-1:0] out_quotient_o,
  output wire [D_BITS-1:0] out_remainder_o
);

  // ---------------------------------------------------------------- parameter checks
  // Verilog-2005 has no elaboration-time assertion: Icarus and Verilator stop at time 0,
  // yosys stops synthesis ("System task `$finish' executed").
  // verilator coverage_off
  // (the parameter checks run only on a bad parameter: no valid build can cover them)
  initial begin
    if (N_BITS < 2) begin
      $display("ERROR: divu: N_BITS = %0d must be >= 2", N_BITS);
      $finish;
    end
    if (Q_BITS < 2 || Q_BITS > N_BITS) begin
      $display("ERROR: divu: Q_BITS = %0d must be in 2..N_BITS = %0d", Q_BITS, N_BITS);
      $finish;
    end
    if (D_BITS < 1 || D_BITS < N_BITS - Q_BITS) begin
      $display("ERROR: divu: D_BITS = %0d must be >= 1 and >= N_BITS - Q_BITS = %0d", D_BITS, N_BITS - Q_BITS);
      $finish;
    end
  end
  // verilator coverage_on

  localparam integer CW     = $clog2(Q_BITS + 1);  // iteration counter width
  localparam integer H_BITS = N_BITS - Q_BITS;     // dividend bits that seed the remainder

  localparam [1:0] ST_IDLE = 2'd0;  // waiting for a request
  localparam [1:0] ST_RUN  = 2'd1;  // Q_BITS iterations
  localparam [1:0] ST_DONE = 2'd2;  // result valid, waiting for out_ready_i

  reg [1:0]        state_q, state_d;
  reg [CW-1:0]     cnt_q, cnt_d;      // iterations left
  reg [Q_BITS-1:0] quo_q, quo_d;      // dividend bits not yet used (top), quotient bits (bottom)
  reg [D_BITS-1:0] rem_q, rem_d;      // partial remainder, always < divisor
  reg [D_BITS-1:0] div_q, div_d;      // divisor

  // The dividend's top H_BITS bits, zero-extended: the partial remainder before the first step.
  reg [D_BITS-1:0] rem_init;
  integer          i;
  always @* begin
    rem_init = {D_BITS{1'b0}};
    for (i = 0; i < H_BITS; i = i + 1) begin
      rem_init[i] = in_dividend_i[Q_BITS + i];
    end
  end

  // One restoring step: bring down the next dividend bit and subtract the divisor if it fits.
  // rem_q < div_q, so trial < 2 * div_q and the difference always fits D_BITS bits.
  wire [D_BITS:0] trial = {rem_q, quo_q[Q_BITS-1]};
  wire            fits  = trial >= {1'b0, div_q};

  always @* begin
    state_d = state_q;
    cnt_d   = cnt_q;
    quo_d   = quo_q;
    rem_d   = rem_q;
    div_d   = div_q;
    case (state_q)
      ST_IDLE: begin
        if (in_valid_i) begin
          state_d = ST_RUN;
          cnt_d   = Q_BITS[CW-1:0];
          quo_d   = in_dividend_i[Q_BITS-1:0];
          rem_d   = rem_init;
          div_d   = in_divisor_i;
        end
      end
      ST_RUN: begin
        quo_d = {quo_q[Q_BITS-2:0], fits};
        rem_d = fits ? trial[D_BITS-1:0] - div_q : trial[D_BITS-1:0];
        cnt_d = cnt_q - {{(CW-1){1'b0}}, 1'b1};
        if (cnt_q == {{(CW-1){1'b0}}, 1'b1}) begin
          state_d = ST_DONE;
        end
      end
      ST_DONE: begin
        if (out_ready_i) begin
          state_d = ST_IDLE;
        end
      end
      // verilator coverage_off
      // (reached only from a state value that no transition produces)
      default: state_d = ST_IDLE;
      // verilator coverage_on
    endcase
  end

  always @(posedge clk_i) begin
    if (!rst_ni) begin
      state_q <= ST_IDLE;
      cnt_q   <= {CW{1'b0}};
      quo_q   <= {Q_BITS{1'b0}};
      rem_q   <= {D_BITS{1'b0}};
      div_q   <= {D_BITS{1'b0}};
    end else begin
      state_q <= state_d;
      cnt_q   <= cnt_d;
      quo_q   <= quo_d;
      rem_q   <= rem_d;
      div_q   <= div_d;
    end
  end

  assign in_ready_o      = (state_q == ST_IDLE);
  assign out_valid_o     = (state_q == ST_DONE);
  assign out_quotient_o  = quo_q;
  assign out_remainder_o = rem_q;

endmodule

`default_nettype wire
