"""Adapters for CMSIS-NN's pooling families: arm_avgpool_s8/_s16 and arm_max_pool_s8/_s16.

Wired as Tests/UnitTest/TestCases/test_arm_{avgpool,max_pool}_s{8,16} wire each case into the C call:
input_dims from BATCH_SIZE / INPUT_H / INPUT_W / INPUT_C, filter_dims from FILTER_H / FILTER_W, output_dims
from OUTPUT_H / OUTPUT_W, pool_params from PADDING_*, STRIDE_* and ACTIVATION_MIN / _MAX. Pooling has no
requantization, so the build's rounding does not matter here.
"""

from __future__ import annotations

from typing import Protocol

from quantcore.conformance.cases import Array, VectorCase
from quantcore.conformance.registry import Outcome, adapter, outcome
from quantcore.kernels import pooling
from quantcore.kernels.requantize import Rounding

Pair = tuple[int, int]


class PoolFn(Protocol):
    """The keyword signature the four reference pools share (int8 or int16 in and out)."""

    def __call__(
        self,
        x: Array,
        *,
        kernel: Pair,
        stride: Pair,
        padding: Pair,
        act_min: int,
        act_max: int,
        output_hw: Pair,
    ) -> Array: ...


def _run_pool(case: VectorCase, pool: PoolFn) -> Outcome:
    shape = (
        case.define("BATCH_SIZE"),
        case.define("INPUT_H"),
        case.define("INPUT_W"),
        case.define("INPUT_C"),
    )
    x = case.array("input_tensor", "input")
    actual = pool(
        x.reshape(shape),
        kernel=(case.define("FILTER_H"), case.define("FILTER_W")),
        stride=(case.define("STRIDE_H"), case.define("STRIDE_W")),
        padding=(case.define("PADDING_H"), case.define("PADDING_W")),
        act_min=case.define("ACTIVATION_MIN"),
        act_max=case.define("ACTIVATION_MAX"),
        # The C kernel takes the output size from the caller, never from the padding.
        output_hw=(case.define("OUTPUT_H"), case.define("OUTPUT_W")),
    )
    return outcome(actual, case.array("output_ref", "output"))


@adapter("arm_avgpool_s8")
def avgpool_s8(case: VectorCase, rounding: Rounding) -> Outcome:
    return _run_pool(case, pooling.avgpool_s8)


@adapter("arm_avgpool_s16")
def avgpool_s16(case: VectorCase, rounding: Rounding) -> Outcome:
    return _run_pool(case, pooling.avgpool_s16)


@adapter("arm_max_pool_s8")
def max_pool_s8(case: VectorCase, rounding: Rounding) -> Outcome:
    return _run_pool(case, pooling.max_pool_s8)


@adapter("arm_max_pool_s16")
def max_pool_s16(case: VectorCase, rounding: Rounding) -> Outcome:
    return _run_pool(case, pooling.max_pool_s16)
