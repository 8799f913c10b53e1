"""Adapters for CMSIS-NN's int16-activation convolution, depthwise and fully-connected test cases.

The wiring follows CMSIS-NN's unit tests (Tests/UnitTest/TestCases/test_arm_convolve_s16,
test_arm_depthwise_conv_s16, test_arm_depthwise_conv_fast_s16, test_arm_fully_connected_s16). Their
INPUT_OFFSET/OUTPUT_OFFSET defines are not wired: the s16 kernels do not read them. The requantization of
the int64-bias kernels is the same in every build, so `rounding` only reaches the int32-bias convolutions.
"""

from __future__ import annotations

import numpy as np

from quantcore.conformance.adapters.conv import Window, _dilation, _geometry
from quantcore.conformance.cases import Array, VectorCase
from quantcore.conformance.registry import Outcome, Skip, adapter, outcome
from quantcore.errors import VectorCaseError
from quantcore.kernels.requantize import Rounding
from quantcore.kernels.s16 import (
    convolve_s16,
    depthwise_conv_fast_s16,
    depthwise_conv_s16,
    fully_connected_s16,
)

# test_arm_convolve_s16 passes {biases, true} (an int32 bias) in its int16xint8xint32_* tests, {biases,
# false} in the others; the case name is the only record of which C call a bias-less case came from.
_INT32_BIAS_MARK = "xint32"


class PerChannel(Window):
    """The keywords every per-channel int16 convolution case passes besides its bias and dilation."""

    multiplier: Array
    shift: Array
    act_min: int
    act_max: int


def _per_channel(case: VectorCase) -> PerChannel:
    return {
        "multiplier": case.array("output_mult", "output_multiplier"),
        "shift": case.array("output_shift"),
        "act_min": case.define("OUT_ACTIVATION_MIN"),
        "act_max": case.define("OUT_ACTIVATION_MAX"),
        **_geometry(case),
    }


def _conv_bias(case: VectorCase) -> tuple[Array | None, bool]:
    """The bias and cmsis_nn_bias_data.is_int32_bias as the unit test sets them for this case."""
    bias = case.array("biases", "bias", required=False)
    int32_bias = _INT32_BIAS_MARK in case.name
    if bias is not None and (bias.dtype == np.int32) != int32_bias:
        kind = "an int32" if int32_bias else "an int64"
        raise VectorCaseError(
            str(case.npz_path), f"the unit test passes {kind} bias, the array is {bias.dtype}"
        )
    return bias, int32_bias


@adapter("arm_convolve_s16")
def conv_s16(case: VectorCase, rounding: Rounding) -> Outcome:
    weights = case.array("weights").reshape(
        case.define("OUT_CH"), case.define("FILTER_Y"), case.define("FILTER_X"), case.define("IN_CH")
    )
    bias, int32_bias = _conv_bias(case)
    out = convolve_s16(
        case.nhwc_input(),
        weights,
        bias,
        int32_bias=int32_bias,
        dilation=_dilation(case),
        rounding=rounding,
        **_per_channel(case),
    )
    return outcome(out, case.array("output_ref", "output"))


def _dw_weights(case: VectorCase) -> Array:
    return case.array("weights").reshape(
        1, case.define("FILTER_Y"), case.define("FILTER_X"), case.define("OUT_CH")
    )


@adapter("arm_depthwise_conv_s16")
def depthwise_s16(case: VectorCase, rounding: Rounding) -> Outcome:
    bias = case.array("biases", "bias", required=False)
    out = depthwise_conv_s16(
        case.nhwc_input(), _dw_weights(case), bias, dilation=_dilation(case), **_per_channel(case)
    )
    return outcome(out, case.array("output_ref", "output"))


@adapter("arm_depthwise_conv_fast_s16")
def depthwise_fast_s16(case: VectorCase, rounding: Rounding) -> Outcome:
    if _dilation(case) != (1, 1):
        # Its DSP build ignores dilation and its pure-C build honours it: no single answer to check.
        raise Skip("arm_depthwise_conv_fast_s16 with dilation != 1 depends on the build")
    bias = case.array("biases", "bias", required=False)
    # The unit test passes get_bias_s64_address(...): NULL when every bias is zero (the *_null_bias cases).
    if bias is not None and not bias.any():
        bias = None
    out = depthwise_conv_fast_s16(case.nhwc_input(), _dw_weights(case), bias, **_per_channel(case))
    return outcome(out, case.array("output_ref", "output"))


@adapter("arm_fully_connected_s16")
def fully_connected_s16_case(case: VectorCase, rounding: Rounding) -> Outcome:
    depth = case.define("ACCUMULATION_DEPTH")
    out = fully_connected_s16(
        case.array("input").reshape(case.define("INPUT_BATCHES"), depth),
        case.array("weights").reshape(case.define("OUT_CH"), depth),
        case.array("biases", "bias", required=False),
        multiplier=case.define("OUTPUT_MULTIPLIER"),
        shift=case.define("OUTPUT_SHIFT"),
        act_min=case.define("OUT_ACTIVATION_MIN"),
        act_max=case.define("OUT_ACTIVATION_MAX"),
    )
    return outcome(out, case.array("output_ref", "output"))
