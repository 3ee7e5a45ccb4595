// relu_toy: y = max(x, 0) on BITS-wide signed values (examples/blocks/relu_toy.py is its kind).
//
// One pipeline stage with a valid/ready handshake on both sides: a beat is taken when
// in_valid_i && in_ready_o, and offered until out_ready_i takes it. Negative inputs (sign bit
// set) leave as 0, the others as they are.
module relu_toy #(
    parameter integer BITS = 8
) (
    input  wire            clk_i,
    input  wire            rst_ni,
    input  wire            in_valid_i,
    output wire            in_ready_o,
    input  wire [BITS-1:0] in_data_i,
    output wire            out_valid_o,
    input  wire            out_ready_i,
    output wire [BITS-1:0] out_data_o
);
    reg            valid_q;
    reg [BITS-1:0] data_q;

    assign in_ready_o  = !valid_q || out_ready_i;
    assign out_valid_o = valid_q;
    assign out_data_o  = data_q;

    always @(posedge clk_i) begin
        if (!rst_ni) begin
            valid_q <= 1'b0;
            data_q  <= {BITS{1'b0}};
        end else if (in_ready_o) begin
            valid_q <= in_valid_i;
            if (in_valid_i) data_q <= in_data_i[BITS-1] ? {BITS{1'b0}} : in_data_i;
        end
    end
endmodule
