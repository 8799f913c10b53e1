"""Adapters for CMSIS-NN's int8 convolution, depthwise and fully-connected test cases.

The wiring follows CMSIS-NN's unit tests (Tests/UnitTest/TestCases/test_arm_convolve_s8 and friends):
filter X/Y are width/height, PAD_X/PAD_Y the "before" pads, OUTPUT_W/H the output size the caller gives.
The kernel variants (1x1 fast, 1xN, 3x3 and _opt depthwise, grouped) compute the same bytes as the generic
kernel, so each is checked against the one reference; the vectors still exercise the shapes those
variants exist for.
"""

from __future__ import annotations

from typing import TypedDict

from quantcore.conformance.cases import Array, VectorCase
from quantcore.conformance.registry import Outcome, adapter, outcome
from quantcore.kernels.conv import convolve_s8, depthwise_conv_s8
from quantcore.kernels.fully_connected import fully_connected_s8
from quantcore.kernels.requantize import Rounding


class Window(TypedDict):
    """The window keywords of the reference convolutions, as the unit tests fill cmsis_nn_conv_params."""

    stride: tuple[int, int]
    padding: tuple[int, int]
    output_hw: tuple[int, int]


class PerChannel(Window):
    """The keywords every per-channel int8 / int4 convolution case passes besides its dilation (which
    arm_depthwise_conv_s4_opt does not take)."""

    multiplier: Array
    shift: Array
    input_offset: int
    output_offset: int
    act_min: int
    act_max: int
    rounding: Rounding


def _geometry(case: VectorCase) -> Window:
    return {
        "stride": (case.define("STRIDE_Y"), case.define("STRIDE_X")),
        "padding": (case.define("PAD_Y"), case.define("PAD_X")),
        "output_hw": (case.define("OUTPUT_H"), case.define("OUTPUT_W")),
    }


def _dilation(case: VectorCase) -> tuple[int, int]:
    return (case.define("DILATION_Y", 1), case.define("DILATION_X", 1))


def _common(case: VectorCase, rounding: Rounding) -> PerChannel:
    return {
        "multiplier": case.array("output_mult", "output_multiplier"),
        "shift": case.array("output_shift"),
        "input_offset": case.define("INPUT_OFFSET"),
        "output_offset": case.define("OUTPUT_OFFSET"),
        "act_min": case.define("OUT_ACTIVATION_MIN"),
        "act_max": case.define("OUT_ACTIVATION_MAX"),
        "rounding": rounding,
        **_geometry(case),
    }


@adapter("arm_convolve_s8", "arm_convolve_1x1_s8_fast", "arm_convolve_1_x_n_s8", "arm_grouped_convolve_s8")
def conv_s8(case: VectorCase, rounding: Rounding) -> Outcome:
    filter_ch = case.define("FILTER_CH", case.define("IN_CH"))
    weights = case.array("weights").reshape(
        case.define("OUT_CH"), case.define("FILTER_Y"), case.define("FILTER_X"), filter_ch
    )
    bias = case.array("biases", "bias", required=False)
    out = convolve_s8(case.nhwc_input(), weights, bias, dilation=_dilation(case), **_common(case, rounding))
    return outcome(out, case.array("output_ref", "output"))


@adapter("arm_depthwise_conv_s8", "arm_depthwise_conv_s8_opt", "arm_depthwise_conv_3x3_s8")
def depthwise_s8(case: VectorCase, rounding: Rounding) -> Outcome:
    weights = case.array("weights").reshape(
        1, case.define("FILTER_Y"), case.define("FILTER_X"), case.define("OUT_CH")
    )
    bias = case.array("biases", "bias", required=False)
    out = depthwise_conv_s8(
        case.nhwc_input(), weights, bias, dilation=_dilation(case), **_common(case, rounding)
    )
    return outcome(out, case.array("output_ref", "output"))


@adapter("arm_fully_connected_s8")
def fully_connected(case: VectorCase, rounding: Rounding) -> Outcome:
    depth = case.define("ACCUMULATION_DEPTH")
    x = case.array("input").reshape(case.define("INPUT_BATCHES"), depth)
    weights = case.array("weights").reshape(case.define("OUT_CH"), depth)
    multiplier: int | Array
    shift: int | Array
    if case.has_define("OUTPUT_MULTIPLIER"):
        multiplier, shift = case.define("OUTPUT_MULTIPLIER"), case.define("OUTPUT_SHIFT")
    else:  # per-channel case: the multipliers and shifts are arrays
        multiplier, shift = case.array("output_mult", "output_multiplier"), case.array("output_shift")
    out = fully_connected_s8(
        x,
        weights,
        case.array("biases", "bias", required=False),
        multiplier=multiplier,
        shift=shift,
        input_offset=case.define("INPUT_OFFSET"),
        output_offset=case.define("OUTPUT_OFFSET"),
        filter_offset=case.define("FILTER_OFFSET", 0),
        act_min=case.define("OUT_ACTIVATION_MIN"),
        act_max=case.define("OUT_ACTIVATION_MAX"),
        rounding=rounding,
    )
    return outcome(out, case.array("output_ref", "output"))
