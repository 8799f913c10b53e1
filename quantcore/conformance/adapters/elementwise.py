"""Adapters for CMSIS-NN's elementwise kernels: add/mul (s8, s16) and maximum/minimum (s8).

Each wires a case's defines into the reference exactly as CMSIS-NN's unit test wires them into the C call
(Tests/UnitTest/TestCases/test_arm_elementwise_*/ and test_arm_maximum_minimum_s8/). The add and mul
tests pass DST_SIZE elements of `<case>_input1` / `<case>_input2`; the maximum/minimum tests build
cmsis_nn_dims from BATCH/HEIGHT/WIDTH/CHANNEL_{1,2} and ignore the case's offsets, multiplier and
activation defines (the C kernels take none of them).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from quantcore.conformance.cases import Array, VectorCase
from quantcore.conformance.registry import Outcome, adapter, outcome
from quantcore.errors import VectorCaseError
from quantcore.kernels import elementwise as ew
from quantcore.kernels.requantize import Rounding


def _vectors(case: VectorCase, dtype: type[np.generic]) -> tuple[Array, ...]:
    """(input1, input2, expected), each the DST_SIZE elements the unit test hands to the C kernel."""
    size = int(case.define("DST_SIZE"))
    arrays = (case.array("input1"), case.array("input2"), case.array("output_ref", "output"))
    for array in arrays:
        if array.size < size:
            raise VectorCaseError(
                str(case.npz_path), f"an array holds {array.size} values, DST_SIZE is {size}"
            )
    return tuple(np.ascontiguousarray(a.ravel()[:size], dtype=dtype) for a in arrays)


def _add_scales(case: VectorCase) -> dict[str, int]:
    return {
        "input_1_mult": int(case.define("INPUT1_MULT")),
        "input_1_shift": int(case.define("INPUT1_SHIFT")),
        "input_2_mult": int(case.define("INPUT2_MULT")),
        "input_2_shift": int(case.define("INPUT2_SHIFT")),
        "left_shift": int(case.define("LEFT_SHIFT")),
    }


def _offsets(case: VectorCase) -> dict[str, int]:
    return {
        "input_1_offset": int(case.define("INPUT1_OFFSET")),
        "input_2_offset": int(case.define("INPUT2_OFFSET")),
        "out_offset": int(case.define("OUTPUT_OFFSET")),
    }


def _output_params(case: VectorCase) -> dict[str, int]:
    return {
        "out_mult": int(case.define("OUTPUT_MULT")),
        "out_shift": int(case.define("OUTPUT_SHIFT")),
        "act_min": int(case.define("OUT_ACTIVATION_MIN")),
        "act_max": int(case.define("OUT_ACTIVATION_MAX")),
    }


@adapter("arm_elementwise_add_s8")
def add_s8(case: VectorCase, rounding: Rounding) -> Outcome:
    a, b, expected = _vectors(case, np.int8)
    params = _add_scales(case) | _offsets(case) | _output_params(case)
    return outcome(ew.elementwise_add_s8(a, b, rounding=rounding, **params), expected)


@adapter("arm_elementwise_add_s16")
def add_s16(case: VectorCase, rounding: Rounding) -> Outcome:
    a, b, expected = _vectors(case, np.int16)
    # The unit test passes the offsets although the C ignores them; the reference rejects non-zero ones.
    params = _add_scales(case) | _offsets(case) | _output_params(case)
    return outcome(ew.elementwise_add_s16(a, b, rounding=rounding, **params), expected)


@adapter("arm_elementwise_mul_s8")
def mul_s8(case: VectorCase, rounding: Rounding) -> Outcome:
    a, b, expected = _vectors(case, np.int8)
    params = _offsets(case) | _output_params(case)
    return outcome(ew.elementwise_mul_s8(a, b, rounding=rounding, **params), expected)


@adapter("arm_elementwise_mul_s16")
def mul_s16(case: VectorCase, rounding: Rounding) -> Outcome:
    a, b, expected = _vectors(case, np.int16)
    params = _offsets(case) | _output_params(case)
    return outcome(ew.elementwise_mul_s16(a, b, rounding=rounding, **params), expected)


def _dims(case: VectorCase, suffix: str) -> tuple[int, int, int, int]:
    """A cmsis_nn_dims (n, h, w, c) from BATCH/HEIGHT/WIDTH/CHANNEL + suffix ('_1', '_2' or none)."""
    prefix = "OUTPUT_" if not suffix else ""
    keys = ("BATCH", "HEIGHT", "WIDTH", "CHANNEL")
    n, h, w, c = (int(case.define(f"{prefix}{key}{suffix}")) for key in keys)
    return n, h, w, c


def _tensor(case: VectorCase, name: str, dims: tuple[int, int, int, int]) -> Array:
    array = case.array(name)
    if array.size != int(np.prod(dims)):
        raise VectorCaseError(
            str(case.npz_path), f"{case.prefix}_{name} has {array.size} values, dims {dims}"
        )
    return array.astype(np.int8).reshape(dims)


def _extremum(case: VectorCase, kernel: Callable[[Array, Array], Array]) -> Outcome:
    a = _tensor(case, "input_tensor_1", _dims(case, "_1"))
    b = _tensor(case, "input_tensor_2", _dims(case, "_2"))
    expected = case.array("output_ref", "output")
    actual = kernel(a, b)
    out_dims = _dims(case, "")
    if actual.shape != out_dims:
        raise VectorCaseError(
            str(case.json_path), f"output dims {out_dims} differ from broadcast {actual.shape}"
        )
    return outcome(actual, expected.ravel()[: int(case.define("DST_SIZE"))])


@adapter("arm_maximum_s8")
def maximum_s8(case: VectorCase, rounding: Rounding) -> Outcome:
    del rounding  # the kernel only compares; no requantization, so the build's rounding cannot matter
    return _extremum(case, ew.maximum_s8)


@adapter("arm_minimum_s8")
def minimum_s8(case: VectorCase, rounding: Rounding) -> Outcome:
    del rounding  # the kernel only compares; no requantization, so the build's rounding cannot matter
    return _extremum(case, ew.minimum_s8)
