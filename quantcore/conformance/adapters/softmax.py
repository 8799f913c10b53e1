"""Adapters for CMSIS-NN's softmax families: arm_softmax_s8, arm_softmax_s8_s16 and arm_softmax_s16.

Wired as Tests/UnitTest/TestCases/test_arm_softmax_* wire each case into the C call: the input is
NUM_ROWS rows of ROW_SIZE, mult is INPUT_MULT, shift is INPUT_LEFT_SHIFT and (s8 input) diff_min is
DIFF_MIN. The s16 test passes CMSIS-NN's stored exp / one-by-one tables; the reference generates the same
tables itself. Only arm_softmax_s16 requantizes (arm_nn_requantize), so only it takes the build's rounding.
"""

from __future__ import annotations

from quantcore.conformance.cases import Array, VectorCase
from quantcore.conformance.registry import Outcome, adapter, outcome
from quantcore.kernels import softmax
from quantcore.kernels.requantize import Rounding


def _input(case: VectorCase) -> Array:
    x = case.array("input")
    return x.reshape(case.define("NUM_ROWS"), case.define("ROW_SIZE"))


def _s8_params(case: VectorCase) -> dict[str, int]:
    return {
        "mult": case.define("INPUT_MULT"),
        "shift": case.define("INPUT_LEFT_SHIFT"),
        "diff_min": case.define("DIFF_MIN"),
    }


@adapter("arm_softmax_s8")
def softmax_s8(case: VectorCase, rounding: Rounding) -> Outcome:
    actual = softmax.softmax_s8(_input(case), **_s8_params(case))
    return outcome(actual, case.array("output_ref", "output"))


@adapter("arm_softmax_s8_s16")
def softmax_s8_s16(case: VectorCase, rounding: Rounding) -> Outcome:
    actual = softmax.softmax_s8_s16(_input(case), **_s8_params(case))
    return outcome(actual, case.array("output_ref", "output"))


@adapter("arm_softmax_s16")
def softmax_s16(case: VectorCase, rounding: Rounding) -> Outcome:
    mult, shift = case.define("INPUT_MULT"), case.define("INPUT_LEFT_SHIFT")
    actual = softmax.softmax_s16(_input(case), mult=mult, shift=shift, rounding=rounding)
    return outcome(actual, case.array("output_ref", "output"))
