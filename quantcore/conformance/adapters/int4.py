"""Adapters for CMSIS-NN's int4-weight (packed s4) convolution, depthwise and fully-connected cases.

The wiring follows CMSIS-NN's unit tests (Tests/UnitTest/TestCases/test_arm_convolve_s4,
test_arm_convolve_1x1_s4_fast, test_arm_depthwise_conv_s4, test_arm_depthwise_conv_s4_opt,
test_arm_fully_connected_s4): the packed bytes they pass go to the kernel as they are, and the unpacked
shape comes from the defines. The strided cases of the 1x1 family call arm_convolve_1x1_s4 and the
wrapper, which compute the bytes of the general convolution, so one reference checks the whole family.

CMSIS-NN's newer generator writes input.h, input_weights.h, input_bias.h, output_multiplier.h,
output_shift.h and output.h, and aliases the names the tests use to them (<case>_weights is
<case>_input_weights, <case>_output_ref is <case>_output, ...). Some case folders still hold the older
generator's input_data.h, weights_data.h, ... beside those, from another configuration, defining the same
names as arrays of their own. A vector converted from every header of such a folder holds both
generations, and of `input` and `output_shift`, which both define, only one: such a case is skipped.
"""

from __future__ import annotations

from quantcore.conformance.adapters.conv import PerChannel, _common, _dilation
from quantcore.conformance.cases import Array, VectorCase
from quantcore.conformance.registry import Outcome, Skip, adapter, outcome
from quantcore.kernels.int4 import (
    convolve_s4,
    depthwise_conv_s4,
    depthwise_conv_s4_opt,
    fully_connected_s4,
)
from quantcore.kernels.requantize import Rounding

# (newer generator's array, the older generator's array in the same role)
_GENERATIONS = (
    ("input_weights", "weights"),
    ("input_bias", "biases"),
    ("output_multiplier", "output_mult"),
    ("output", "output_ref"),
)


def _one_generation(case: VectorCase) -> None:
    both = [(new, old) for new, old in _GENERATIONS if _has(case, new) and _has(case, old)]
    if both:
        raise Skip(
            f"holds both generations of CMSIS-NN's data (e.g. {both[0][0]} and {both[0][1]}), so its input "
            "and output_shift may be either's; convert it again from only the headers test_data.h includes"
        )


def _has(case: VectorCase, suffix: str) -> bool:
    return case.array(suffix, required=False) is not None


def _per_channel(case: VectorCase, rounding: Rounding) -> PerChannel:
    _one_generation(case)
    return _common(case, rounding)


# With one generation in the case, each role below has one array, under either generation's name.
def _weights(case: VectorCase) -> Array:
    return case.array("input_weights", "weights")


def _bias(case: VectorCase) -> Array | None:
    return case.array("input_bias", "biases", "bias", required=False)


def _expected(case: VectorCase) -> Array:
    return case.array("output", "output_ref")


@adapter("arm_convolve_s4", "arm_convolve_1x1_s4_fast")
def conv_s4(case: VectorCase, rounding: Rounding) -> Outcome:
    params = _per_channel(case, rounding)
    shape = (case.define("OUT_CH"), case.define("FILTER_Y"), case.define("FILTER_X"), case.define("IN_CH"))
    x, weights, bias, dilation = case.nhwc_input(), _weights(case), _bias(case), _dilation(case)
    out = convolve_s4(x, weights, bias, weights_shape=shape, dilation=dilation, **params)
    return outcome(out, _expected(case))


@adapter("arm_depthwise_conv_s4")
def depthwise_s4(case: VectorCase, rounding: Rounding) -> Outcome:
    params = _per_channel(case, rounding)
    shape = (1, case.define("FILTER_Y"), case.define("FILTER_X"), case.define("OUT_CH"))
    x, weights, bias, dilation = case.nhwc_input(), _weights(case), _bias(case), _dilation(case)
    out = depthwise_conv_s4(x, weights, bias, weights_shape=shape, dilation=dilation, **params)
    return outcome(out, _expected(case))


@adapter("arm_depthwise_conv_s4_opt")
def depthwise_s4_opt(case: VectorCase, rounding: Rounding) -> Outcome:
    params = _per_channel(case, rounding)  # no dilation: the C ignores it
    shape = (1, case.define("FILTER_Y"), case.define("FILTER_X"), case.define("OUT_CH"))
    out = depthwise_conv_s4_opt(case.nhwc_input(), _weights(case), _bias(case), weights_shape=shape, **params)
    return outcome(out, _expected(case))


@adapter("arm_fully_connected_s4")
def fully_connected(case: VectorCase, rounding: Rounding) -> Outcome:
    _one_generation(case)
    depth, out_ch = case.define("ACCUMULATION_DEPTH"), case.define("OUT_CH")
    out = fully_connected_s4(
        case.array("input").reshape(case.define("INPUT_BATCHES"), depth),
        _weights(case),
        _bias(case),
        weights_shape=(out_ch, depth),
        multiplier=case.define("OUTPUT_MULTIPLIER"),
        shift=case.define("OUTPUT_SHIFT"),
        input_offset=case.define("INPUT_OFFSET"),
        output_offset=case.define("OUTPUT_OFFSET"),
        act_min=case.define("OUT_ACTIVATION_MIN"),
        act_max=case.define("OUT_ACTIVATION_MAX"),
        rounding=rounding,
    )
    return outcome(out, _expected(case))
