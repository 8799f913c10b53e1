"""Adapters for CMSIS-NN's int8 transposed-convolution test cases: arm_transpose_conv_s8 and
arm_reverse_transpose_conv_s8.

Both unit tests (Tests/UnitTest/TestCases/test_arm_transpose_conv_s8, test_arm_reverse_transpose_conv_s8)
call arm_transpose_conv_wrapper_s8, which picks the reverse-conv path by stride and input depth, not by the
test's name (reverse_transpose_conv_4, with one input channel, runs arm_transpose_conv_s8), so both are
checked against the wrapper's reference. Filter X/Y are width/height and PAD_X/Y the padding; the C reads
neither DILATION_X/Y nor PAD_X/Y_WITH_OFFSET (padding_offsets), so they are not wired. A case without a
biases array is one whose test passes a NULL bias.
"""

from __future__ import annotations

from quantcore.conformance.cases import Array, VectorCase
from quantcore.conformance.registry import Outcome, adapter, outcome
from quantcore.kernels.requantize import Rounding
from quantcore.kernels.transpose_conv import transpose_conv_wrapper_s8


def _weights(case: VectorCase) -> Array:
    shape = (case.define("OUT_CH"), case.define("FILTER_Y"), case.define("FILTER_X"), case.define("IN_CH"))
    return case.array("weights").reshape(shape)


@adapter("arm_transpose_conv_s8", "arm_reverse_transpose_conv_s8")
def transpose_conv(case: VectorCase, rounding: Rounding) -> Outcome:
    actual = transpose_conv_wrapper_s8(
        case.nhwc_input(),
        _weights(case),
        case.array("biases", "bias", required=False),
        multiplier=case.array("output_mult", "output_multiplier"),
        shift=case.array("output_shift"),
        input_offset=case.define("INPUT_OFFSET"),
        output_offset=case.define("OUTPUT_OFFSET"),
        stride=(case.define("STRIDE_Y"), case.define("STRIDE_X")),
        padding=(case.define("PAD_Y"), case.define("PAD_X")),
        act_min=case.define("OUT_ACTIVATION_MIN"),
        act_max=case.define("OUT_ACTIVATION_MAX"),
        output_hw=(case.define("OUTPUT_H"), case.define("OUTPUT_W")),
        rounding=rounding,
    )
    return outcome(actual, case.array("output_ref", "output"))
