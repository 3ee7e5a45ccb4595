// team_gelu: GELU by table lookup, written the way another team would: AXI4-Stream ports, its own
// names, an active-high reset and two pipeline stages (table read, then an output register).
// Arithmetic (docs/arithmetic.md, gelu): y = T[x + 2^(XW-1)]; x + 2^(XW-1) is x with its sign bit
// flipped. The table is a RAM written through cfg_* (one entry per clock, no reset).
`default_nettype none

module team_gelu #(
  parameter integer XW = 8,  // signed input width (2..16)
  parameter integer YW = 8   // signed table entry / output width
) (
  input  wire          aclk,
  input  wire          areset,        // synchronous, active high

  input  wire          cfg_wr,
  input  wire [XW-1:0] cfg_addr,
  input  wire [YW-1:0] cfg_data,

  input  wire [XW-1:0] s_axis_tdata,
  input  wire          s_axis_tvalid,
  output wire          s_axis_tready,

  output reg  [YW-1:0] m_axis_tdata,
  output reg           m_axis_tvalid,
  input  wire          m_axis_tready
);

  reg [YW-1:0] lut [0:(1 << XW) - 1];

  always @(posedge aclk) begin
    if (cfg_wr) lut[cfg_addr] <= cfg_data;
  end

  // Stage 1 holds the table read, stage 2 is the output register; each loads when it is empty or
  // its contents move on in the same clock, so the pair streams one beat per clock.
  reg          s1_valid;
  reg [YW-1:0] s1_y;
  wire         s2_load = ~m_axis_tvalid | m_axis_tready;
  wire         s1_load = ~s1_valid | s2_load;
  wire [XW-1:0] idx = s_axis_tdata;  // BUG (deliberate): the 2^(XW-1) offset is missing

  assign s_axis_tready = s1_load;

  always @(posedge aclk) begin
    if (s1_load && s_axis_tvalid) s1_y <= lut[idx];
  end

  always @(posedge aclk) begin
    if (areset) begin
      s1_valid      <= 1'b0;
      m_axis_tvalid <= 1'b0;
      m_axis_tdata  <= {YW{1'b0}};
    end else begin
      if (s1_load) s1_valid <= s_axis_tvalid;
      if (s2_load) begin
        m_axis_tvalid <= s1_valid;
        if (s1_valid) m_axis_tdata <= s1_y;
      end
    end
  end

endmodule

`default_nettype wire
