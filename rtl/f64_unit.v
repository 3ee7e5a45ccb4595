// f64_unit: IEEE-754 binary64 multiply, divide, square root, subtract and integer-to-double, each correctly
// rounded to nearest, ties to even, one operation at a time (iterative). It is the float arithmetic of
// rtl/layernorm_ptf.v: FQ-ViT's QIntLayerNorm computes its per-row and per-channel constants in floats, and
// equalling it bit for bit means these operations, each rounded as IEEE-754 rounds it.
//
// Operations (op_i, taken with start_i while busy_o is low; y_o holds the result from done_o until the
// next start):
//   0  a * b      53 x 53 shift-and-add product (106 bits): 53 clocks
//   1  a / b      restoring division of the significands, 55 quotient bits and the remainder: 55 clocks
//   2  sqrt(a)    restoring square root of the significand shifted to an even exponent (110 bits), 55 root
//                 bits and the remainder: 55 clocks
//   3  a - b      the smaller operand aligned with guard, round and sticky bits (the bits shifted out ORed
//                 into the lowest), added or subtracted, then normalized one bit a clock: 1 to 54 clocks
//   4  double(a)  a_i a signed integer, |a| < 2^53 (exact): normalized one bit a clock, 1 to 53 clocks
// then rounding: the significand's 53 bits m, the next bit g and the OR s of those below it; m + 1 when g
// and (s or m odd), a carry out of the fraction moving into the exponent field (the packed word + 1).
// Zeros follow IEEE-754 (x * 0, 0 / x signed by the operands' signs; x - x = +0; -0 - +0 = -0).
//
// Domain (the caller's: rtl/layernorm_ptf.v derives it from its operands' ranges): operands zero or normal
// (an exponent field of 0 is read as zero), a divisor nonzero, a square root's operand >= 0, and every
// result normal or zero: no subnormal, infinity or NaN arises, so none is handled. The exponent is carried
// in 13 signed bits, biased by 1023, and only its low 11 bits are packed.

`default_nettype none

module f64_unit (
  input  wire        clk_i,
  input  wire        rst_ni,     // synchronous, active low: back to idle
  input  wire        start_i,    // take op_i, a_i, b_i (ignored while busy_o)
  input  wire [2:0]  op_i,       // 0 mul, 1 div, 2 sqrt, 3 sub, 4 from integer
  input  wire [63:0] a_i,
  input  wire [63:0] b_i,
  output wire        busy_o,
  output reg         done_o,     // one clock: y_o is the result (held until the next start)
  output wire [63:0] y_o
);

  localparam [2:0] OP_MUL = 3'd0, OP_DIV = 3'd1, OP_SQRT = 3'd2, OP_SUB = 3'd3;  // 4 (any other): int
  localparam [1:0] ST_IDLE = 2'd0, ST_RUN = 2'd1, ST_NORM = 2'd2;
  localparam signed [12:0] BIAS = 13'sd1023;

  reg  [1:0]          st_q;
  reg  [2:0]          op_q;
  reg                 sgn_q, zero_q;
  reg  signed [12:0]  exp_q;    // biased
  reg  [5:0]          cnt_q;    // steps left in ST_RUN
  reg  [52:0]         xm_q;     // mul: the multiplicand; div: the divisor
  reg  [54:0]         q_q;      // mul: the multiplier (its top bit first); div, sqrt: quotient, root bits
  reg  [109:0]        acc_q;    // mul: the product; sqrt: the radicand, two bits a step; sub, int: the sum
  reg  [55:0]         rem_q;    // div, sqrt: the partial remainder

  // ---------------------------------------------------------------- operands
  wire        sa = a_i[63];
  wire        sb = ~b_i[63];                   // sub: a + (-b)
  wire [10:0] ea = a_i[62:52], eb = b_i[62:52];
  wire        za = (ea == 11'd0), zb = (eb == 11'd0);
  wire [52:0] ma = {~za, a_i[51:0]}, mb = {~zb, b_i[51:0]};
  wire signed [12:0] ea_s = $signed({2'b00, ea}), eb_s = $signed({2'b00, eb});

  // sub: the larger magnitude x, the smaller y aligned below it with its shifted-out bits in a sticky bit
  wire        a_big = {ea, ma} >= {eb, mb};
  wire [10:0] ex    = a_big ? ea : eb;
  wire [52:0] mx    = a_big ? ma : mb;
  wire [52:0] my    = a_big ? mb : ma;
  wire [10:0] dexp  = a_big ? ea - eb : eb - ea;
  wire [5:0]  dsh   = (dexp > 11'd56) ? 6'd57 : dexp[5:0];   // past 56 every bit of y is below the sticky
  wire [112:0] wide = {my, 3'b000, 57'd0} >> dsh;
  wire [55:0] y_al  = {wide[112:58], wide[57] | (|wide[56:0])};
  wire [56:0] sum   = (sa ^ sb) ? {1'b0, mx, 3'b000} - {1'b0, y_al} : {1'b0, mx, 3'b000} + {1'b0, y_al};
  wire        s_sub = (sum == 57'd0) ? (za & zb & sa & sb) : (a_big ? sa : sb);
  // from integer: the magnitude
  wire [52:0] mag   = sa ? (~a_i[52:0] + 53'd1) : a_i[52:0];   // |a| < 2^53

  // ---------------------------------------------------------------- one step of div, sqrt
  wire        is_div = (op_q == OP_DIV);
  wire [57:0] w      = is_div ? {4'd0, rem_q[53:0]} : {rem_q, acc_q[109:108]};
  wire [57:0] d      = is_div ? {5'd0, xm_q} : {1'b0, q_q, 2'b01};
  wire        ge     = (w >= d);
  wire [57:0] diff   = ge ? w - d : w;

  always @(posedge clk_i) begin
    done_o <= 1'b0;
    if (!rst_ni) begin
      st_q <= ST_IDLE;
    end else begin
      case (st_q)
        ST_IDLE: begin
          if (start_i) begin
            op_q  <= op_i;
            acc_q <= 110'd0;
            rem_q <= 56'd0;
            q_q   <= 55'd0;
            zero_q <= za;
            sgn_q <= sa ^ ~sb;
            st_q  <= ST_RUN;
            cnt_q <= 6'd55;
            case (op_i)
              OP_MUL: begin
                exp_q  <= ea_s + eb_s - BIAS;
                zero_q <= za | zb;
                xm_q   <= ma;
                q_q    <= {2'b00, mb};
                cnt_q  <= 6'd53;
              end
              OP_DIV: begin
                exp_q <= ea_s - eb_s + BIAS;
                xm_q  <= mb;
                rem_q <= {3'd0, ma};
              end
              OP_SQRT: begin
                sgn_q <= sa;
                exp_q <= (ea_s + BIAS) >>> 1;
                acc_q <= ea[0] ? {1'b0, ma, 56'd0} : {ma, 57'd0};   // an even exponent: 2^56 m or 2^57 m
              end
              OP_SUB: begin
                sgn_q <= s_sub;
                exp_q <= $signed({2'b00, ex});
                acc_q <= {53'd0, sum};
                st_q  <= ST_NORM;
              end
              default: begin  // OP_INT
                sgn_q <= sa;
                exp_q <= BIAS + 13'sd52;
                acc_q <= {53'd0, 1'b0, mag, 3'b000};
                st_q  <= ST_NORM;
              end
            endcase
          end
        end
        ST_RUN: begin
          if (op_q == OP_MUL) begin
            acc_q <= {acc_q[108:0], 1'b0} + {57'd0, q_q[52] ? xm_q : 53'd0};
            q_q   <= {q_q[53:0], 1'b0};
          end else begin
            q_q   <= {q_q[53:0], ge};
            rem_q <= is_div ? {diff[54:0], 1'b0} : diff[55:0];
            acc_q <= {acc_q[107:0], 2'b00};
          end
          cnt_q <= cnt_q - 6'd1;
          if (cnt_q == 6'd1) begin
            st_q   <= ST_IDLE;
            done_o <= 1'b1;
          end
        end
        default: begin  // ST_NORM: the sum's leading one to bit 55
          if (acc_q[56]) begin
            acc_q[56:0] <= {1'b0, acc_q[56:2], acc_q[1] | acc_q[0]};
            exp_q       <= exp_q + 13'sd1;
            st_q        <= ST_IDLE;
            done_o      <= 1'b1;
          end else if (acc_q[55] || acc_q[54:0] == 55'd0) begin
            st_q   <= ST_IDLE;
            done_o <= 1'b1;
          end else begin
            acc_q[56:0] <= {acc_q[55:0], 1'b0};
            exp_q       <= exp_q - 13'sd1;
          end
        end
      endcase
    end
  end

  // ---------------------------------------------------------------- rounding and packing
  reg  [52:0]        m;
  reg                g, s, z;
  reg  signed [12:0] e;
  always @* begin
    z = zero_q;
    e = exp_q;
    case (op_q)
      OP_MUL: begin  // the product in [2^104, 2^106)
        m = acc_q[105] ? acc_q[105:53] : acc_q[104:52];
        g = acc_q[105] ? acc_q[52] : acc_q[51];
        s = (|acc_q[50:0]) | (acc_q[105] & acc_q[51]);
        e = exp_q + {12'd0, acc_q[105]};
      end
      OP_DIV, OP_SQRT: begin  // quotient bits q[54] (1 when the dividend's significand >= the divisor's)
        m = q_q[54] ? q_q[54:2] : q_q[53:1];
        g = q_q[54] ? q_q[1] : q_q[0];
        s = (rem_q != 56'd0) | (q_q[54] & q_q[0]);
        e = exp_q - {12'd0, ~q_q[54]};
      end
      default: begin  // sub, int: normalized, the leading one at bit 55
        m = acc_q[55:3];
        g = acc_q[2];
        s = acc_q[1] | acc_q[0];
        z = ~acc_q[55];
      end
    endcase
  end
  wire up = g & (s | m[0]);
  assign y_o    = z ? {sgn_q, 63'd0} : {sgn_q, e[10:0], m[51:0]} + {63'd0, up};
  assign busy_o = (st_q != ST_IDLE);

  wire unused_bits = ^{acc_q[109:106], e[12:11], m[52], diff[57:56], w[57:56]};

endmodule

`default_nettype wire
