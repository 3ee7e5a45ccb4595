// gemm_pe: one processing element of the output-stationary GEMM array (rtl/gemm_array.v).
//
// Each beat multiplies one activation a[m, k] by one weight w[n, k] and accumulates the product
// into the PE's int32 accumulator (exact: docs/arithmetic.md "gemm"). The beat flagged `last`
// (k = K-1) completes the dot product: acc + a*w goes to the result register res_o and the
// accumulator restarts at 0, so the next tile accumulates while the array's drain reads res_o
// (double buffering: the array never waits for the output path).
// Operand registers that carry a and w on to the neighbours live in gemm_array.v, not here.

`default_nettype none

module gemm_pe #(
  // Operand a width, signed: 8-bit activations extended by one bit, so unsigned softmax
  // probabilities (0..255) and signed int8 share one signed multiplier.
  parameter integer A_BITS   = 9,
  // Operand w width, signed (int8 weights).
  parameter integer W_BITS   = 8,
  // Accumulator width, signed; 32 in the contract (|acc| < 2^31 is guaranteed by ops.gemm).
  parameter integer ACC_BITS = 32
) (
  input  wire                clk_i,
  input  wire                rst_ni,     // synchronous, active low: acc and res to 0

  // ---- one beat: operands and flags, aligned by the array's skew registers ----
  input  wire                valid_i,    // a beat is present (otherwise a bubble: no update)
  input  wire                last_i,     // the beat is k = K-1 of its tile
  input  wire [A_BITS-1:0]   a_i,        // signed activation
  input  wire [W_BITS-1:0]   w_i,        // signed weight

  // ---- result of the last completed tile (held until the next `last` beat) ----
  output wire [ACC_BITS-1:0] res_o
);

  // a*w is exact in A_BITS + W_BITS signed bits (|a*w| <= 256*128 = 2^15 for 9 x 8 bits).
  localparam integer P_BITS = A_BITS + W_BITS;

  reg [ACC_BITS-1:0] acc_q, acc_d;
  reg [ACC_BITS-1:0] res_q, res_d;

  assign res_o = res_q;

  // ---------------------------------------------------------------- next state
  // acc + a*w. a*w is exact in P_BITS signed bits; the sum is two's-complement modulo
  // 2^ACC_BITS: partial sums may wrap, the final sum is exact because the true result fits
  // ACC_BITS (the contract's bound). Written inline as word arithmetic on regs: Icarus runs it
  // once per input event (a, w and acc change separately), 1.25x slower than the former call
  // from the clocked block; a function call here was 1.6x, continuous assigns 4x (docs/rtl.md).
  reg signed [P_BITS-1:0]   prod;
  reg        [ACC_BITS-1:0] sum;
  always @* begin
    prod  = $signed(a_i) * $signed(w_i);
    sum   = acc_q + {{(ACC_BITS - P_BITS){prod[P_BITS-1]}}, prod};
    acc_d = acc_q;
    res_d = res_q;
    if (valid_i) begin
      if (last_i) begin
        res_d = sum;
        acc_d = {ACC_BITS{1'b0}};
      end else begin
        acc_d = sum;
      end
    end
  end

  // ---------------------------------------------------------------- registers
  always @(posedge clk_i) begin
    if (!rst_ni) begin
      acc_q <= {ACC_BITS{1'b0}};
      res_q <= {ACC_BITS{1'b0}};
    end else begin
      acc_q <= acc_d;
      res_q <= res_d;
    end
  end

endmodule

`default_nettype wire
