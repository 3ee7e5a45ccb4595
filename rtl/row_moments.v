// row_moments: Sz = sum z_i and Szz = sum z_i^2 of a filling row of signed ZB-bit values, the statistics
// every LayerNorm block takes as a row fills (from rtl/row_stream.v's fill side). For C < 2^CW: |Sz| <= C
// 2^(ZB-1), signed CW + ZB bits; Szz <= C 2^(2ZB-2), CW + 2 ZB - 2 bits (z^2: the low 2 ZB - 1 bits of the
// square). clear_i (the row enters OUT) and reset zero both for the next row.

`default_nettype none

module row_moments #(
  parameter integer CW = 11,  // row length bits: C < 2^CW
  parameter integer ZB = 8    // element width, signed
) (
  input  wire                   clk_i,
  input  wire                   rst_ni,
  input  wire                   clear_i,
  input  wire                   fill_i,   // z_i is taken this clock
  input  wire [ZB-1:0]          z_i,
  output wire [CW+ZB-1:0]       sz_o,     // signed
  output wire [CW+2*ZB-3:0]     szz_o     // unsigned
);

  localparam integer SZ_W  = CW + ZB;
  localparam integer SZZ_W = CW + 2 * ZB - 2;
  reg  [SZ_W-1:0]   sz_q;
  reg  [SZZ_W-1:0]  szz_q;
  wire [2*ZB-1:0]   z_ext = {{ZB{z_i[ZB-1]}}, z_i};
  wire [2*ZB-1:0]   z_sq  = z_ext * z_ext;   // z^2 <= 2^(2ZB-2): the low bits are exact

  always @(posedge clk_i) begin
    if (!rst_ni || clear_i) begin
      sz_q  <= {SZ_W{1'b0}};
      szz_q <= {SZZ_W{1'b0}};
    end else if (fill_i) begin
      sz_q  <= sz_q + {{(SZ_W-ZB){z_i[ZB-1]}}, z_i};
      szz_q <= szz_q + {{(SZZ_W-2*ZB+1){1'b0}}, z_sq[2*ZB-2:0]};
    end
  end

  wire unused_bits = z_sq[2*ZB-1];  // 0: z^2 <= 2^(2ZB-2)

  assign sz_o  = sz_q;
  assign szz_o = szz_q;

endmodule

`default_nettype wire
