// row_max: the running maximum of a filling row, the statistic the softmax blocks take as a row fills (from
// rtl/row_stream.v's fill side). fill_max_o: the largest signed element taken so far in the row (with SEG,
// the segment; its first element replaces the last maximum); max_o: the row's maximum from go_i (the row
// leaves FILL) on, held while the next row fills. No reset needed.

`default_nettype none

module row_max #(
  parameter integer W = 8  // element width, signed
) (
  input  wire         clk_i,
  input  wire         fill_i,      // data_i is taken this clock,
  input  wire         first_i,     // ... as its row's (segment's) first
  input  wire [W-1:0] data_i,
  input  wire         go_i,        // the row leaves FILL: max_o takes fill_max_o
  output wire [W-1:0] fill_max_o,
  output wire [W-1:0] max_o
);

  reg [W-1:0] fill_q, max_q;

  always @(posedge clk_i) begin
    if (fill_i && (first_i || $signed(data_i) > $signed(fill_q))) begin
      fill_q <= data_i;
    end
    if (go_i) begin
      max_q <= fill_q;
    end
  end

  assign fill_max_o = fill_q;
  assign max_o      = max_q;

endmodule

`default_nettype wire
