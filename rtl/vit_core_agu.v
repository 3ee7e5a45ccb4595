// vit_core_agu: the core's 4-level address generator (nested loops with strides).
//
//   element e = ((i3 * n2 + i2) * n1 + i1) * n0 + i0,   i_l in [0, n_l)
//   addr(e)   = base + i0*s0 + i1*s1 + i2*s2 + i3*s3      (modulo 2^32)
//
// Adders only: the address of the first element of each loop level is kept (b1_q, b2_q, b3_q), so
// a step adds one stride and, on a wrap, restarts from the outer level's next start address.
// init_i loads the first element; step_i moves to the next one (ignored past the last). last_o
// is high while the current element is the last one. Counts of 0 are treated as 1.

`default_nettype none

module vit_core_agu (
  input  wire        clk_i,
  input  wire        rst_ni,
  input  wire        init_i,
  input  wire        step_i,
  input  wire [31:0] n0_i,
  input  wire [31:0] n1_i,
  input  wire [31:0] n2_i,
  input  wire [31:0] n3_i,
  input  wire [31:0] base_i,
  input  wire [31:0] s0_i,
  input  wire [31:0] s1_i,
  input  wire [31:0] s2_i,
  input  wire [31:0] s3_i,
  output wire [31:0] addr_o,
  output wire        last_o
);

  reg [31:0] i0_q, i1_q, i2_q, i3_q;
  reg [31:0] addr_q, b1_q, b2_q, b3_q;

  // i_l is the last index of level l when i_l + 1 >= n_l (so n_l = 0 behaves as 1).
  wire l0 = (i0_q + 32'd1 >= n0_i);
  wire l1 = (i1_q + 32'd1 >= n1_i);
  wire l2 = (i2_q + 32'd1 >= n2_i);
  wire l3 = (i3_q + 32'd1 >= n3_i);

  wire [31:0] nb1 = b1_q + s1_i;
  wire [31:0] nb2 = b2_q + s2_i;
  wire [31:0] nb3 = b3_q + s3_i;

  always @(posedge clk_i) begin
    if (!rst_ni) begin
      i0_q <= 32'd0;  i1_q <= 32'd0;  i2_q <= 32'd0;  i3_q <= 32'd0;
      addr_q <= 32'd0;  b1_q <= 32'd0;  b2_q <= 32'd0;  b3_q <= 32'd0;
    end else if (init_i) begin
      i0_q <= 32'd0;  i1_q <= 32'd0;  i2_q <= 32'd0;  i3_q <= 32'd0;
      addr_q <= base_i;  b1_q <= base_i;  b2_q <= base_i;  b3_q <= base_i;
    end else if (step_i & ~last_o) begin
      if (!l0) begin
        i0_q   <= i0_q + 32'd1;
        addr_q <= addr_q + s0_i;
      end else if (!l1) begin
        i0_q   <= 32'd0;
        i1_q   <= i1_q + 32'd1;
        b1_q   <= nb1;
        addr_q <= nb1;
      end else if (!l2) begin
        i0_q   <= 32'd0;
        i1_q   <= 32'd0;
        i2_q   <= i2_q + 32'd1;
        b2_q   <= nb2;
        b1_q   <= nb2;
        addr_q <= nb2;
      end else begin
        i0_q   <= 32'd0;
        i1_q   <= 32'd0;
        i2_q   <= 32'd0;
        i3_q   <= i3_q + 32'd1;
        b3_q   <= nb3;
        b2_q   <= nb3;
        b1_q   <= nb3;
        addr_q <= nb3;
      end
    end
  end

  assign addr_o = addr_q;
  assign last_o = l0 & l1 & l2 & l3;

endmodule

`default_nettype wire
