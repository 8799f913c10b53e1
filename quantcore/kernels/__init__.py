"""Bit-exact numpy reference of CMSIS-NN's integer kernels.

Each kernel takes NHWC int8/int16 numpy arrays and the parameters of its CMSIS-NN counterpart (named after
the C structs' fields) and returns exactly the bytes the compiled kernel writes. Batches run vectorised;
accumulation is exact integer arithmetic.

Argument checks (issue 21's audit). The reference computes what the C computes for any argument the C accepts.
A kernel refuses an argument only where the C's result is not one defined thing: undefined behaviour (a shift
out of range, an index out of bounds, a division by zero, output left unwritten; int32 sums that overflow are
modelled as the targets' two's-complement wrap), a call the C itself rejects (ARM_CMSIS_NN_ARG_ERROR), or a
value for which CMSIS-NN's pure-C, DSP (Cortex-M4) and MVE (Cortex-M55) builds write different bytes, so that
no single answer is "what the C computes" for the firmware being verified. Policy - an int8 zero point in
[-128, 127], a clamp inside the output type, TFLite's shift conventions - belongs to the quantizer, the
quant-params schema (quantcore/schema) and the language server's rules, which explain it to the user.
tests/integration/test_kernel_argument_audit.py holds the formerly refused values to compiled CMSIS-NN.

Kernel(s) | argument | check (before -> after) | kept or removed, and why:
- every kernel | arrays | dtype, rank, shapes that agree | kept: the C reads and writes by the dims it is
    given
- every int8/int16 kernel with a clamp, but the max pools | act_min, act_max | type range, min <= max ->
    any int32 | removed: the C clamps the int32 with MIN(MAX(v, min), max) and casts (low bits)
- max_pool_s8, max_pool_s16 | act_min, act_max | type range (crossed limits now allowed) | kept: s16
    narrows its limits to int16_t, the MVE s8 build to int8 lanes, the pure-C s8 build does not
- conv/depthwise s8 and s4, fc s8 / per-channel / s4, transpose conv s8, batch_matmul_s8, add/mul s8 |
    output_offset / out_offset | [-128, 127] -> any int32 | removed: added to the requantized int32, then
    clamped (an int32 wrap of the sum is modelled)
- fc s8 / per-channel / s4 | input_offset, filter_offset | [-127, 128] -> [-32640, 32640] | widened: the
    DSP build adds them in int16 lanes, so int8 + offset must fit int16
- conv/depthwise s8 and s4, transpose conv s8 | input_offset | [-127, 128] | kept: the im2col buffers pad
    with (int8_t)-input_offset
- batch_matmul_s8 | input_offset, filter_offset | [-127, 128] -> [-32640, 32640] | widened: the same
    arm_nn_vec_mat_mult_t_s8 (and MVE vector sums) as fc s8
- add/mul s8 | input offsets | [-127, 128] | kept: (x + offset) << left_shift and the mul's product
    overflow int32
- add s8/s16 | left_shift | [0, 23] / [0, 16] | kept: int32 shift overflow
- add s8/s16 | rescaling shifts | [-31, 0] -> [-31, 30] | removed: arm_nn_requantize is defined there
- add/mul s16 | offsets | must be 0 -> ignored | removed: the C ignores them
- arm_nn_requantize users | shift | [-31, 30] | kept: 1 << 31 and shifts by 32 are undefined
- arm_nn_requantize users | multiplier | not INT32_MIN | kept: the MVE build's saturating doubling
    multiply differs there (the LSTM gates and SVDF too: arm_nn_vec_mat_mul_result_acc_s8_s16 requantizes
    with arm_requantize_mve on Helium)
- s16 conv/depthwise/fc, batch_matmul_s16 | shift | [-31, 7] -> [-49, 14] | widened:
    arm_nn_requantize_s64's int64 shift by 14 - shift is defined in [0, 63]
- softmax s8 / s8_s16 | shift, mult | [0, 31], >= 0 | kept: 1 << shift; a negative mult is outside
    exp_on_negative_values' domain (a precondition, not shown to be undefined)
- softmax (all) | row length | exponential sum fits | kept: int32 overflow, shifts by more than 31
- avgpool s8/s16 | kernel area | sum fits int32 | kept: int32 overflow
- avg/max pools | padding, output_hw | every window holds input | kept: a division by a zero count; a max
    pool leaves the output unwritten
- pad_s8 | pad_value; pre/post pads | int8; >= 0, size < 2^31 | kept: the C parameter's type; int32 sizes
    overflow
- transpose_s8 | 2-D permutation (0, 1) | refused -> swapped | removed: a 2-D call never reads its
    permutation
- transpose_s8 | 3/4-D permutations | a permutation | kept: repeated axes leave output elements unwritten
- transpose conv s8, s16 depthwise | geometry, dims | fits, <= 65535 | kept: out-of-bounds access,
    uint16_t dims truncate
- conv_s16 | columns (odd pixel count) | <= 65535 | kept, not modelled: a uint16_t counter drops columns
- depthwise_conv_fast_s16 | ch_mult, taps | 1, < 512 | kept: the C returns ARM_CMSIS_NN_ARG_ERROR
- depthwise_conv_s4_opt | batches | 1 | kept: the C writes the first batch only
- svdf_s8, svdf_state_s16_s8 | output_activation | any int32 -> ordered int8 | added: the MVE build
    narrows it to int8 and clamps max-first, the pure-C build min-first
- lstm, svdf (the rest) | shapes, shifts, rank, cell scale | as their modules say | kept: already written
    to this rule
- fixpoint_requantize | output_offset, multiplier, clamp | type range, >= 0 -> any int32 | removed: the
    generated C adds in int64; its clamp order is modelled
- fixpoint_requantize | input_offset | x + offset fits int32 | kept: int32 overflow
"""

from quantcore.kernels.rounding import Rounding  # not via requantize: importing the package needs no numpy

__all__ = ["Rounding"]
