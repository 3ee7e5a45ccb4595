// team_requant: hwvit's reference requantizer (rtl/requant.v) behind a Vivado-style AXI4-Stream
// shell: active-low aresetn, one 64-bit tdata word per beat holding {1'b0, M[30:0], acc[31:0]}
// and the shift s in tuser, and an input register slice in front (one more pipeline stage).
`default_nettype none

module team_requant #(
  parameter integer OUT_W = 8  // signed output width
) (
  input  wire             aclk,
  input  wire             aresetn,        // synchronous, active low

  input  wire [63:0]      s_axis_tdata,   // [31:0] acc (signed), [62:32] M, [63] reserved
  input  wire [5:0]       s_axis_tuser,   // shift s
  input  wire             s_axis_tvalid,
  output wire             s_axis_tready,

  output wire [OUT_W-1:0] m_axis_tdata,
  output wire             m_axis_tvalid,
  input  wire             m_axis_tready,

  output reg              reserved_set    // sticky: a beat arrived with tdata[63] set
);

  // Input register slice: loads when empty or when its beat moves into the core this clock.
  reg        in_valid_q;
  reg [62:0] in_data_q;
  reg [5:0]  in_shift_q;
  wire       core_ready;
  wire       slice_load = ~in_valid_q | core_ready;

  assign s_axis_tready = slice_load;

  always @(posedge aclk) begin
    if (!aresetn) begin
      in_valid_q   <= 1'b0;
      in_data_q    <= 63'd0;
      in_shift_q   <= 6'd0;
      reserved_set <= 1'b0;
    end else begin
      if (slice_load) begin
        in_valid_q <= s_axis_tvalid;
        if (s_axis_tvalid) begin
          in_data_q  <= s_axis_tdata[62:0];
          in_shift_q <= s_axis_tuser;
        end
      end
      if (s_axis_tvalid && slice_load && s_axis_tdata[63]) reserved_set <= 1'b1;
    end
  end

  requant #(.ACC_BITS(32), .OUT_BITS(OUT_W)) core (
    .clk_i(aclk), .rst_ni(aresetn),
    .in_valid_i(in_valid_q), .in_ready_o(core_ready),
    .in_acc_i(in_data_q[31:0]), .in_mult_i(in_data_q[62:32]), .in_shift_i(in_shift_q),
    .out_valid_o(m_axis_tvalid), .out_ready_i(m_axis_tready), .out_data_o(m_axis_tdata)
  );

endmodule

`default_nettype wire
