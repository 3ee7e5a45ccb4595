// gemm_array: ROWS x COLS output-stationary systolic array of gemm_pe, with its input skew.
//
// Each input beat carries one k-slice of a tile: a[m0+i, k] for every row i and w[n0+j, k] for
// every column j. Activations (with the beat's valid/last flags) move one PE to the right per
// cycle, weights one PE down, so PE (i, j) sees a[m0+i, k] and w[n0+j, k] together, i + j
// cycles after the beat entered. The skew registers at the left and top edges (row i delayed
// by i cycles, column j by j cycles) make that alignment hold for whole beats, bubbles included,
// so the array never stalls: a missing beat just travels through as valid = 0.
//
// A tile's results sit in the PEs' res registers from the cycle fin_o is high (its last beat
// has left the bottom-right PE) until the next tile's last beat reaches each PE; the drain reads
// them one row per cycle through row_i / row_res_o.
// Latency: the last beat enters at cycle t, fin_o is high at cycle t + ROWS + COLS - 1.

`default_nettype none

module gemm_array #(
  parameter integer ROWS     = 8,   // PE rows: output rows (m) computed per tile
  parameter integer COLS     = 8,   // PE columns: output channels (n) computed per tile
  parameter integer A_BITS   = 9,   // signed activation width (see gemm_pe)
  parameter integer W_BITS   = 8,   // signed weight width
  parameter integer ACC_BITS = 32,  // accumulator width
  // Width of row_i; $clog2(ROWS), at least 1.
  parameter integer ROW_BITS = (ROWS > 1) ? $clog2(ROWS) : 1
) (
  input  wire                     clk_i,
  input  wire                     rst_ni,  // synchronous, active low

  // ---- input beat (no handshake: the array accepts a beat every cycle) ----
  input  wire                     in_valid_i,  // a beat is present
  input  wire                     in_last_i,   // it is the last k of its tile
  input  wire [ROWS*A_BITS-1:0]   in_a_i,      // row i at [i*A_BITS +: A_BITS]
  input  wire [COLS*W_BITS-1:0]   in_w_i,      // column j at [j*W_BITS +: W_BITS]

  // ---- results of the last completed tile ----
  output wire                     fin_o,       // one-cycle pulse: a tile's results are complete
  input  wire [ROW_BITS-1:0]      row_i,       // row to read
  output reg  [COLS*ACC_BITS-1:0] row_res_o    // column j at [j*ACC_BITS +: ACC_BITS]
);

  // An activation word: {valid, last, a}.
  localparam integer AW = A_BITS + 2;

  // Net arrays, one element per PE (i*COLS + j), rather than flat buses: a simulator then wakes
  // only the PE whose input changed (Icarus: ~10x faster on 8 x 8 than with one flat vector).
  wire [AW-1:0]                 a_net [0:ROWS*COLS-1];  // activation word at the input of PE (i, j)
  wire [W_BITS-1:0]             w_net [0:ROWS*COLS-1];  // weight at the input of PE (i, j)
  wire [ROWS*COLS*ACC_BITS-1:0] res_bus;  // result registers (change once per tile)

  genvar i, j;
  generate
    // ---------------------------------------------------------------- left edge: row skew
    for (i = 0; i < ROWS; i = i + 1) begin : g_row_skew
      wire [AW-1:0] word = {in_valid_i, in_last_i, in_a_i[i*A_BITS +: A_BITS]};
      if (i == 0) begin : g_direct
        assign a_net[0] = word;
      end else begin : g_delay
        // i-cycle delay line, newest word in the low bits.
        reg  [i*AW-1:0] dly_q;
        wire [i*AW-1:0] dly_d;
        if (i == 1) begin : g_one
          assign dly_d = word;
        end else begin : g_many
          assign dly_d = {dly_q[(i-1)*AW-1:0], word};
        end
        always @(posedge clk_i) begin
          if (!rst_ni) dly_q <= {(i*AW){1'b0}};
          else         dly_q <= dly_d;
        end
        assign a_net[i*COLS] = dly_q[(i-1)*AW +: AW];
      end
    end

    // ---------------------------------------------------------------- top edge: column skew
    for (j = 0; j < COLS; j = j + 1) begin : g_col_skew
      wire [W_BITS-1:0] word = in_w_i[j*W_BITS +: W_BITS];
      if (j == 0) begin : g_direct
        assign w_net[0] = word;
      end else begin : g_delay
        reg  [j*W_BITS-1:0] dly_q;
        wire [j*W_BITS-1:0] dly_d;
        if (j == 1) begin : g_one
          assign dly_d = word;
        end else begin : g_many
          assign dly_d = {dly_q[(j-1)*W_BITS-1:0], word};
        end
        always @(posedge clk_i) begin
          if (!rst_ni) dly_q <= {(j*W_BITS){1'b0}};
          else         dly_q <= dly_d;
        end
        assign w_net[j] = dly_q[(j-1)*W_BITS +: W_BITS];
      end
    end

    // ---------------------------------------------------------------- PE grid
    for (i = 0; i < ROWS; i = i + 1) begin : g_pe_row
      for (j = 0; j < COLS; j = j + 1) begin : g_pe_col
        localparam integer P = i * COLS + j;
        wire [AW-1:0]     a_word = a_net[P];
        wire [W_BITS-1:0] w_word = w_net[P];

        // Pass the activation word to the right neighbour, the weight to the one below
        // (plain delays: a_word and w_word are the next values of a_q and w_q).
        if (j < COLS - 1) begin : g_right
          reg [AW-1:0] a_q;
          always @(posedge clk_i) begin
            if (!rst_ni) a_q <= {AW{1'b0}};
            else         a_q <= a_word;
          end
          assign a_net[P+1] = a_q;
        end
        if (i < ROWS - 1) begin : g_down
          reg [W_BITS-1:0] w_q;
          always @(posedge clk_i) begin
            if (!rst_ni) w_q <= {W_BITS{1'b0}};
            else         w_q <= w_word;
          end
          assign w_net[P+COLS] = w_q;
        end

        gemm_pe #(
          .A_BITS  (A_BITS),
          .W_BITS  (W_BITS),
          .ACC_BITS(ACC_BITS)
        ) u_pe (
          .clk_i  (clk_i),
          .rst_ni (rst_ni),
          .valid_i(a_word[AW-1]),
          .last_i (a_word[AW-2]),
          .a_i    (a_word[A_BITS-1:0]),
          .w_i    (w_word),
          .res_o  (res_bus[P*ACC_BITS +: ACC_BITS])
        );
      end
    end
  endgenerate

  // ---------------------------------------------------------------- completion token
  // The bottom-right PE is the last to see a tile's last beat; one cycle later every res holds.
  wire [AW-1:0] corner = a_net[ROWS*COLS-1];
  reg           fin_q, fin_d;
  always @* begin
    fin_d = corner[AW-1] & corner[AW-2];  // valid & last
  end
  always @(posedge clk_i) begin
    if (!rst_ni) fin_q <= 1'b0;
    else         fin_q <= fin_d;
  end
  assign fin_o = fin_q;

  // ---------------------------------------------------------------- row read mux
  integer r;
  always @(*) begin
    row_res_o = {(COLS*ACC_BITS){1'b0}};
    for (r = 0; r < ROWS; r = r + 1) begin
      if (row_i == r[ROW_BITS-1:0]) row_res_o = res_bus[r*COLS*ACC_BITS +: COLS*ACC_BITS];
    end
  end

endmodule

`default_nettype wire
