// team_softmax: hwvit's reference softmax (rtl/softmax.v) inside another team's AXI4-Stream shell:
// its own port names, an active-high reset, an output register slice (one more pipeline stage)
// and tlast on both sides. Rows are cfg_row_len long; s_axis_tlast must end each row, and a
// tlast in the wrong place sets the sticky row_error flag (the arithmetic does not depend on it).
`default_nettype none

module team_softmax #(
  parameter integer XW     = 8,    // signed input width
  parameter integer PW     = 8,    // unsigned probability width
  parameter integer MAXLEN = 256,  // longest row
  parameter integer LUT_N  = 256   // exp table entries
) (
  input  wire                        aclk,
  input  wire                        areset,       // synchronous, active high

  input  wire [$clog2(MAXLEN+1)-1:0] cfg_row_len,
  input  wire                        cfg_lut_wr,
  input  wire [$clog2(LUT_N)-1:0]    cfg_lut_addr,
  input  wire [23:0]                 cfg_lut_data,

  input  wire [XW-1:0]               s_axis_tdata,
  input  wire                        s_axis_tvalid,
  output wire                        s_axis_tready,
  input  wire                        s_axis_tlast,

  output reg  [PW-1:0]               m_axis_tdata,
  output reg                         m_axis_tvalid,
  input  wire                        m_axis_tready,
  output reg                         m_axis_tlast,

  output reg                         row_error
);

  localparam integer LW = $clog2(MAXLEN + 1);

  wire          core_valid;
  wire          core_ready;
  wire [PW-1:0] core_p;
  wire          core_last;

  softmax #(.MAX_N(MAXLEN), .IN_BITS(XW), .OUT_BITS(PW), .ENTRIES(LUT_N)) core (
    .clk_i(aclk), .rst_ni(~areset),
    .tbl_we_i(cfg_lut_wr), .tbl_addr_i(cfg_lut_addr), .tbl_data_i(cfg_lut_data),
    .row_len_i(cfg_row_len),
    .in_valid_i(s_axis_tvalid), .in_ready_o(s_axis_tready), .in_data_i(s_axis_tdata),
    .out_valid_o(core_valid), .out_ready_i(core_ready), .out_data_o(core_p), .out_last_o(core_last)
  );

  // Output register slice: loads when empty or when its beat leaves in the same clock.
  assign core_ready = ~m_axis_tvalid | m_axis_tready;

  always @(posedge aclk) begin
    if (areset) begin
      m_axis_tvalid <= 1'b0;
      m_axis_tdata  <= {PW{1'b0}};
      m_axis_tlast  <= 1'b0;
    end else if (core_ready) begin
      m_axis_tvalid <= core_valid;
      if (core_valid) begin
        m_axis_tdata <= core_p;
        m_axis_tlast <= core_last;
      end
    end
  end

  // Row-end check: count the beats of the row being taken; tlast must come with the last one
  // (row lengths 0 and > MAXLEN are clamped as the core clamps them).
  reg  [LW-1:0] in_cnt;
  wire [LW-1:0] one = {{(LW-1){1'b0}}, 1'b1};
  wire [LW-1:0] len = (cfg_row_len == {LW{1'b0}}) ? one
                    : (cfg_row_len > MAXLEN[LW-1:0]) ? MAXLEN[LW-1:0] : cfg_row_len;
  wire          row_end = (in_cnt + one == len);

  always @(posedge aclk) begin
    if (areset) begin
      in_cnt    <= {LW{1'b0}};
      row_error <= 1'b0;
    end else if (s_axis_tvalid && s_axis_tready) begin
      in_cnt <= row_end ? {LW{1'b0}} : in_cnt + one;
      if (s_axis_tlast != row_end) row_error <= 1'b1;
    end
  end

endmodule

`default_nettype wire
