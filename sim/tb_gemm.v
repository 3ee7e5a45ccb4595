// tb_gemm: simulation wrapper of rtl/gemm.v with its operand, parameter and result memories.
//
// The cocotb test (sim/test_gemm.py) links a vector set's `.hex` files into the simulator's
// working directory under fixed names, sets m/k/n/a_signed and pulses load_i: the memories are
// filled by $readmemh (one element per line, row-major, exactly as the set stores them) and the
// result memories are filled with a sentinel. start_i runs the engine with no Python in the
// loop (10-100x faster than driving every cycle); out_ready stalls come from an LFSR
// (probability stall_i / 256). dump_i writes the results with $writememh for numpy to compare.
// Not synthesizable (file I/O); the engine itself is rtl/gemm.v.
// For Verilator this wrapper is built with --no-public-flat-rw (test_gemm.BUILD_ARGS): only signals
// marked public here are visible to cocotb, and the rest of the design is optimized as in a
// plain C++ model (every signal public made the 8 x 8 engine ~5x slower: 0.18 M cycles/s).

`default_nettype none

module tb_gemm #(
  parameter integer ROWS     = 8,     // systolic array rows
  parameter integer COLS     = 8,     // systolic array columns
  parameter integer OUT_BITS = 8,     // requantized output width
  parameter integer MAX_M    = 64,    // memory sizes: largest M, K, N a run may use
  parameter integer MAX_K    = 64,
  parameter integer MAX_N    = 64,
  parameter integer ROUNDING = 0,     // requant variant of the output stage (rtl/requant.v)
  parameter integer WRAP     = 0,     // requant overflow: 0 saturate, 1 wrap
  parameter integer ZERO_POINTS = 0   // operand and output zero points (rtl/gemm.v)
) (
  // Every port is marked public: Verilator builds this wrapper with --no-public-flat-rw.
  input  wire        clk_i       /*verilator public_flat_rw*/,
  input  wire        rst_ni      /*verilator public_flat_rw*/,

  // ---- job (from cocotb) ----
  input  wire [31:0] m_i         /*verilator public_flat_rw*/,
  input  wire [31:0] k_i         /*verilator public_flat_rw*/,
  input  wire [31:0] n_i         /*verilator public_flat_rw*/,
  input  wire        a_signed_i  /*verilator public_flat_rw*/,
  input  wire [7:0]  zero_a_i    /*verilator public_flat_rw*/,  // zero points (ZERO_POINTS = 1)
  input  wire [7:0]  zero_w_i    /*verilator public_flat_rw*/,
  input  wire [15:0] zero_out_i  /*verilator public_flat_rw*/,
  input  wire        load_i      /*verilator public_flat_rw*/,  // $readmemh operands, clear results
  input  wire        start_i     /*verilator public_flat_rw*/,  // start the engine
  input  wire        dump_i      /*verilator public_flat_rw*/,  // $writememh the results
  input  wire [7:0]  stall_i     /*verilator public_flat_rw*/,  // out_ready low w.p. stall_i / 256
  input  wire [15:0] seed_i      /*verilator public_flat_rw*/,  // LFSR seed, taken at load_i

  // ---- status ----
  output wire        busy_o      /*verilator public_flat_rw*/,
  output wire        done_o      /*verilator public_flat_rw*/,
  output wire [39:0] cycles_o    /*verilator public_flat_rw*/,
  output wire [39:0] beats_o     /*verilator public_flat_rw*/,
  output reg  [31:0] out_beats_o /*verilator public_flat_rw*/,  // output rows accepted since load_i
  // ---- output stream and status checks (since load_i; the test asserts each) ----
  output reg  [31:0] bad_beats_o   /*verilator public_flat_rw*/,  // beats with m >= M, n >= N or n not a tile start
  output reg  [31:0] dup_beats_o   /*verilator public_flat_rw*/,  // beats to a (row, column tile) already written
  output reg  [31:0] dirty_lanes_o /*verilator public_flat_rw*/,  // beats with a lane past N not 0 (acc or y)
  output reg  [31:0] out_stalls_o  /*verilator public_flat_rw*/,  // cycles with an output row offered and refused
  output reg  [31:0] done_pulses_o /*verilator public_flat_rw*/,  // cycles with done_o high
  output reg  [31:0] busy_gaps_o   /*verilator public_flat_rw*/,  // cycles between start_i and done_o with busy_o low
  output wire [15:0] rows_o      /*verilator public_flat_rw*/,  // ROWS, COLS for the test's bookkeeping
  output wire [15:0] cols_o      /*verilator public_flat_rw*/
);

  localparam integer M_BITS = $clog2(MAX_M + 1);
  localparam integer K_BITS = $clog2(MAX_K + 1);
  localparam integer N_BITS = $clog2(MAX_N + 1);
  localparam [31:0]  SENTINEL = 32'h8000_0000;  // -2^31: never a valid acc (|acc| < 2^31)

  assign rows_o = ROWS[15:0];
  assign cols_o = COLS[15:0];

  // ---------------------------------------------------------------- memories
  reg [7:0]          a_mem     [0:MAX_M*MAX_K-1];  // a[m, k] at m*K + k
  reg [7:0]          w_mem     [0:MAX_N*MAX_K-1];  // w[n, k] at n*K + k
  reg [31:0]         bias_mem  [0:MAX_N-1];
  reg [31:0]         mult_mem  [0:MAX_N-1];
  reg [7:0]          shift_mem [0:MAX_N-1];
  reg [31:0]         acc_mem   [0:MAX_M*MAX_N-1];  // acc[m, n] at m*N + n
  reg [OUT_BITS-1:0] y_mem     [0:MAX_M*MAX_N-1];
  reg                seen_mem  [0:MAX_M*MAX_N-1];  // a beat starting at (m, n) arrived
  reg [39:0]         when_mem  [0:MAX_M*MAX_N-1];  // clk_count_q of the handshake that wrote (m, n)

  // ---------------------------------------------------------------- engine
  wire                     rd_en /*verilator public_flat_rd*/;
  wire [M_BITS-1:0]        rd_m;
  wire [N_BITS-1:0]        rd_n;
  wire [K_BITS-1:0]        rd_k;
  reg  [ROWS*8-1:0]        rd_a_q;
  reg  [COLS*8-1:0]        rd_w_q;
  wire [N_BITS-1:0]        prm_n /*verilator public_flat_rd*/;
  reg  [COLS*32-1:0]       prm_bias_q;
  reg  [COLS*31-1:0]       prm_mult_q;
  reg  [COLS*6-1:0]        prm_shift_q;
  wire                     out_valid /*verilator public_flat_rd*/;
  wire                     out_ready /*verilator public_flat_rd*/;
  wire [M_BITS-1:0]        out_m /*verilator public_flat_rd*/;
  wire [N_BITS-1:0]        out_n /*verilator public_flat_rd*/;
  wire [COLS*32-1:0]       out_acc /*verilator public_flat_rd*/;
  wire [COLS*OUT_BITS-1:0] out_data /*verilator public_flat_rd*/;

  gemm #(
    .ROWS    (ROWS),
    .COLS    (COLS),
    .ACC_BITS(32),
    .OUT_BITS(OUT_BITS),
    .MAX_M   (MAX_M),
    .MAX_K   (MAX_K),
    .MAX_N   (MAX_N),
    .CNT_BITS(40),
    .ROUNDING(ROUNDING),
    .WRAP    (WRAP),
    .ZERO_POINTS(ZERO_POINTS)
  ) u_gemm (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .start_i    (start_i),
    .m_i        (m_i[M_BITS-1:0]),
    .k_i        (k_i[K_BITS-1:0]),
    .n_i        (n_i[N_BITS-1:0]),
    .a_signed_i (a_signed_i),
    .zero_a_i   (zero_a_i),
    .zero_w_i   (zero_w_i),
    .zero_out_i (zero_out_i[OUT_BITS-1:0]),
    .busy_o     (busy_o),
    .done_o     (done_o),
    .cycles_o   (cycles_o),
    .beats_o    (beats_o),
    .rd_en_o    (rd_en),
    .rd_m_o     (rd_m),
    .rd_n_o     (rd_n),
    .rd_k_o     (rd_k),
    .rd_a_i     (rd_a_q),
    .rd_w_i     (rd_w_q),
    .prm_n_o    (prm_n),
    .prm_bias_i (prm_bias_q),
    .prm_mult_i (prm_mult_q),
    .prm_shift_i(prm_shift_q),
    .out_valid_o(out_valid),
    .out_ready_i(out_ready),
    .out_m_o    (out_m),
    .out_n_o    (out_n),
    .out_acc_o  (out_acc),
    .out_data_o (out_data)
  );

  // ---------------------------------------------------------------- memory ports
  // Lanes past M or N get junk (the engine's port contract: they may hold anything, the engine
  // zeroes them), so a lane the engine fails to mask shows in the results or in dirty_lanes_o.
  integer i, addr;
  always @(posedge clk_i) begin
    if (rd_en) begin
      for (i = 0; i < ROWS; i = i + 1) begin
        addr = (rd_m + i) * k_i + rd_k;
        rd_a_q[i*8 +: 8] <= (rd_m + i < m_i && addr < MAX_M * MAX_K) ? a_mem[addr] : 8'hA5 ^ addr[7:0];
      end
      for (i = 0; i < COLS; i = i + 1) begin
        addr = (rd_n + i) * k_i + rd_k;
        rd_w_q[i*8 +: 8] <= (rd_n + i < n_i && addr < MAX_N * MAX_K) ? w_mem[addr] : 8'h5B ^ addr[7:0];
      end
    end
    // Parameter lanes past N get junk too: the engine masks them (its drain zeroes those lanes).
    for (i = 0; i < COLS; i = i + 1) begin
      addr = prm_n + i;
      prm_bias_q[i*32 +: 32] <= (addr < n_i && addr < MAX_N) ? bias_mem[addr] : 32'h5A5A_0000 ^ addr;
      prm_mult_q[i*31 +: 31] <= (addr < n_i && addr < MAX_N) ? mult_mem[addr][30:0] : 31'h2A5A_0000 ^ addr;
      prm_shift_q[i*6 +: 6]  <= (addr < n_i && addr < MAX_N) ? shift_mem[addr][5:0] : 6'd17;
    end
  end

  // ---------------------------------------------------------------- output sink
  // Rising edges since the simulation began (the edge at t = 10*c ns counts c): a mismatch line
  // gives the clock of the output handshake that wrote the element.
  reg [39:0] clk_count_q = 40'd0;
  always @(posedge clk_i) clk_count_q <= clk_count_q + 40'd1;

  reg [15:0] lfsr_q;
  assign out_ready = (lfsr_q[7:0] >= stall_i);

  integer j, oaddr;
  reg     dirty;
  always @(posedge clk_i) begin
    // 16-bit maximal-length Galois LFSR (x^16 + x^14 + x^13 + x^11 + 1).
    lfsr_q <= {1'b0, lfsr_q[15:1]} ^ (lfsr_q[0] ? 16'hB400 : 16'h0000);
    if (!rst_ni) begin
      lfsr_q      <= 16'd1;
      out_beats_o <= 32'd0;
      bad_beats_o <= 32'd0;
      dup_beats_o <= 32'd0;
      dirty_lanes_o <= 32'd0;
      out_stalls_o  <= 32'd0;
    end else if (out_valid && out_ready) begin
      out_beats_o <= out_beats_o + 32'd1;
      dirty = 1'b0;
      for (j = 0; j < COLS; j = j + 1) begin
        if (out_n + j >= n_i && (out_acc[j*32 +: 32] != 32'd0 || out_data[j*OUT_BITS +: OUT_BITS] != {OUT_BITS{1'b0}})) begin
          dirty = 1'b1;  // the port contract: lanes past N are 0
        end
      end
      if (dirty) dirty_lanes_o <= dirty_lanes_o + 32'd1;
      if (out_m >= m_i || out_n >= n_i || (out_n % COLS) != 0) begin
        bad_beats_o <= bad_beats_o + 32'd1;  // written nowhere: the memories hold rows < M only
      end else begin
        if (seen_mem[out_m * n_i + out_n]) begin
          dup_beats_o <= dup_beats_o + 32'd1;  // the last write would win in the memory image
        end
        seen_mem[out_m * n_i + out_n] <= 1'b1;
        for (j = 0; j < COLS; j = j + 1) begin
          if (out_n + j < n_i) begin
            oaddr = out_m * n_i + out_n + j;
            acc_mem[oaddr]  <= out_acc[j*32 +: 32];
            y_mem[oaddr]    <= out_data[j*OUT_BITS +: OUT_BITS];
            when_mem[oaddr] <= clk_count_q;
          end
        end
      end
    end
    if (rst_ni && out_valid && !out_ready) begin
      out_stalls_o <= out_stalls_o + 32'd1;  // the drain held up by the sink (functional bin out_stall)
    end
    if (load_i) begin
      lfsr_q      <= (seed_i == 16'd0) ? 16'd1 : seed_i;
      out_beats_o <= 32'd0;
      bad_beats_o <= 32'd0;
      dup_beats_o <= 32'd0;
      dirty_lanes_o <= 32'd0;
      out_stalls_o  <= 32'd0;
      $readmemh("gemm_a.hex", a_mem, 0, m_i * k_i - 1);
      $readmemh("gemm_w.hex", w_mem, 0, n_i * k_i - 1);
      $readmemh("gemm_bias.hex", bias_mem, 0, n_i - 1);
      $readmemh("gemm_multiplier.hex", mult_mem, 0, n_i - 1);
      $readmemh("gemm_shift.hex", shift_mem, 0, n_i - 1);
      for (j = 0; j < m_i * n_i; j = j + 1) begin
        acc_mem[j]  <= SENTINEL;
        y_mem[j]    <= {OUT_BITS{1'b0}};
        seen_mem[j] <= 1'b0;
        when_mem[j] <= 40'd0;
      end
    end
    if (dump_i) begin
      $writememh("gemm_acc_out.hex", acc_mem, 0, m_i * n_i - 1);
      $writememh("gemm_y_out.hex", y_mem, 0, m_i * n_i - 1);
      $writememh("gemm_when_out.hex", when_mem, 0, m_i * n_i - 1);
    end
  end

  // ---------------------------------------------------------------- status checks
  // load_i clears the counts but not running_q: a job started in the cycle the previous one
  // ends (done_o high) is loaded one cycle later and still watched from its start.
  reg running_q;  // from start_i to done_o
  always @(posedge clk_i) begin
    if (!rst_ni) begin
      running_q     <= 1'b0;
      done_pulses_o <= 32'd0;
      busy_gaps_o   <= 32'd0;
    end else begin
      if (done_o) begin
        running_q     <= 1'b0;
        done_pulses_o <= done_pulses_o + 32'd1;
      end
      if (start_i) begin
        running_q <= 1'b1;  // after done_o: a start in the done cycle begins the next job
      end
      if (running_q && !busy_o && !done_o) begin
        busy_gaps_o <= busy_gaps_o + 32'd1;
      end
      if (load_i) begin
        done_pulses_o <= 32'd0;
        busy_gaps_o   <= 32'd0;
      end
    end
  end

endmodule

`default_nettype wire
