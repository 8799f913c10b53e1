"""Hand-checked cases for the softmax reference (arm_softmax_s8, arm_softmax_s8_s16, arm_softmax_s16).

With mult = 2^30 (0.5 in Q31) and shift = 21 an int8 difference d reaches exp_on_negative_values as
d * 2^21 * 0.5 / 2^26 = d / 64 in real terms, so [0, -64] is softmax of [0, -1]: 0.7311 and 0.2689, i.e.
187.1 and 68.8 steps of 1/256 (s8, zero point -128) and 47911.3 and 17624.7 of 1/65536 (s16, zero point
-32768). Probabilities of exactly 1/2^k come out exact. The softmax_s16 expectations that depend on its
lookup tables were read from the pure-C build of arm_softmax_s16 with CMSIS-NN's own test tables.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from quantcore.errors import KernelArgumentError
from quantcore.kernels.requantize import Rounding
from quantcore.kernels.softmax import exp_lut, one_by_one_lut, softmax_s8, softmax_s8_s16, softmax_s16

HALF = 1 << 30  # 0.5 in Q31
# The CMSIS-NN unit test's arm_softmax_s8 parameters (input scale 1/256 folded with beta 1).
TEST_MULT, TEST_SHIFT, TEST_DIFF_MIN = 1077952640, 19, -3968


def s8(rows: list[list[int]]) -> np.ndarray[Any, Any]:
    return np.array(rows, dtype=np.int8)


def s16(rows: list[list[int]]) -> np.ndarray[Any, Any]:
    return np.array(rows, dtype=np.int16)


# --- arm_softmax_s8 / arm_softmax_s8_s16 ------------------------------------------------------------------


def test_s8_softmax_of_zero_and_minus_one() -> None:
    assert softmax_s8(s8([[0, -64]]), mult=HALF, shift=21, diff_min=-4000).tolist() == [[59, -59]]
    assert softmax_s8_s16(s8([[0, -64]]), mult=HALF, shift=21, diff_min=-4000).tolist() == [[15143, -15143]]


def test_s8_near_tie_is_decided_by_mul_sat_truncating_toward_zero() -> None:
    # Real difference -160 * 2^15 * 0.9004 / 2^26 = -0.0703: p = 0.51758 / 0.48242, i.e. 4.50 / -4.50 steps
    # off the zero point. The compiled C gives [4, -4]; a MUL_SAT that floors (>> 31) instead of C's
    # truncating '/' gives [4, -5].
    x = s8([[92, -68]])
    assert softmax_s8(x, mult=1933531737, shift=15, diff_min=-4000).tolist() == [[4, -4]]


def test_s8_softmax_depends_only_on_differences() -> None:
    assert softmax_s8(s8([[100, 36]]), mult=HALF, shift=21, diff_min=-4000).tolist() == [[59, -59]]


@pytest.mark.parametrize(
    ("row", "expected_s8", "expected_s16"),
    [
        ([3], 127, 32767),  # p = 1: 256 - 128 = 128 and 65536 - 32768 = 32768, both clamped
        ([1, 1], 0, 0),  # p = 1/2: 128 - 128, 32768 - 32768
        ([-7, -7, -7, -7], -64, -16384),  # p = 1/4
    ],
)
def test_s8_uniform_rows(row: list[int], expected_s8: int, expected_s16: int) -> None:
    params = {"mult": TEST_MULT, "shift": TEST_SHIFT, "diff_min": TEST_DIFF_MIN}
    assert softmax_s8(s8([row]), **params).tolist() == [[expected_s8] * len(row)]
    assert softmax_s8_s16(s8([row]), **params).tolist() == [[expected_s16] * len(row)]


def test_s8_differences_below_diff_min_give_the_minimum() -> None:
    # -100 < diff_min: it is left out of the sum (the max then has p = 1) and written as the minimum.
    assert softmax_s8(s8([[0, -100]]), mult=HALF, shift=21, diff_min=-50).tolist() == [[127, -128]]
    assert softmax_s8_s16(s8([[0, -100]]), mult=HALF, shift=21, diff_min=-50).tolist() == [[32767, -32768]]


def test_s8_positive_diff_min_gives_all_minimum() -> None:
    # CMSIS-NN's softmax_invalid_diff_min test: diff_min 0x7FFFFFFF excludes every element (sum 0).
    x = s8([[5, -3, 100], [0, 0, 0]])
    assert softmax_s8(x, mult=TEST_MULT, shift=TEST_SHIFT, diff_min=0x7FFFFFFF).tolist() == [[-128] * 3] * 2
    assert (
        softmax_s8_s16(x, mult=TEST_MULT, shift=TEST_SHIFT, diff_min=0x7FFFFFFF).tolist()
        == [[-32768] * 3] * 2
    )


def test_s8_rows_are_the_last_axis_of_any_shape() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, size=(2, 3, 7)).astype(np.int8)
    params = {"mult": TEST_MULT, "shift": TEST_SHIFT, "diff_min": TEST_DIFF_MIN}
    result = softmax_s8(x, **params)
    assert result.shape == x.shape and result.dtype == np.int8
    row = softmax_s8(x[1, 2][None], **params)[0]
    np.testing.assert_array_equal(result[1, 2], row)
    assert softmax_s8_s16(x, **params).dtype == np.int16


def test_s8_rows_of_511_equal_values_are_fine_but_512_are_undefined_in_c() -> None:
    # 512 exponentials of 2^19 sum to 2^28, so arm_nn_softmax_common_s8 would shift by 32 bits.
    params = {"mult": TEST_MULT, "shift": TEST_SHIFT, "diff_min": TEST_DIFF_MIN}
    assert set(softmax_s8(np.zeros((1, 511), np.int8), **params).ravel().tolist()) == {-127}  # 256/511 -> 1
    with pytest.raises(KernelArgumentError) as excinfo:
        softmax_s8(np.zeros((1, 512), np.int8), **params)
    check_error(excinfo, "x")
    # The int16 output shifts 8 bits less, so the same row is defined there: 65536/512 = 128.
    assert set(softmax_s8_s16(np.zeros((1, 512), np.int8), **params).ravel().tolist()) == {-32768 + 128}


# --- arm_softmax_s16 --------------------------------------------------------------------------------------


def test_s16_lookup_tables_match_cmsis_nn_test_tables() -> None:
    # Entries from Tests/UnitTest/TestCases/Common/Softmax/{exp,one_by_one}_lut_data.h. one_by_one 160 and
    # 294 differ when the table is generated in float64 instead of TFLite Micro's float32.
    assert exp_lut().shape == one_by_one_lut().shape == (513,)
    assert exp_lut()[[0, 1, 256, 511, 512]].tolist() == [2, 2, 221, 32133, 32767]
    assert one_by_one_lut()[[0, 160, 294, 512]].tolist() == [32767, 24966, 20816, 16384]
    assert exp_lut().dtype == np.int16 and not exp_lut().flags.writeable


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ([0, 0], [16384, 16384]),  # 1/2 in Q15
        ([7, 7, 7, 7], [8192] * 4),  # 1/4
        ([0, -1000, 100, 100], [8313, 7702, 8376, 8376]),  # from the C build
    ],
)
def test_s16_softmax(row: list[int], expected: list[int]) -> None:
    for rounding in Rounding:
        assert softmax_s16(s16([row]), mult=HALF, shift=0, rounding=rounding).tolist() == [expected]


def test_s16_single_element_row_wraps_like_the_c() -> None:
    # p = 1 rounds to 32768 and arm_softmax_s16 stores it in an int16_t without clamping (TFLite clamps
    # to 32767).
    assert softmax_s16(s16([[5]]), mult=HALF, shift=0).tolist() == [[-32768]]


def test_s16_sum_just_below_a_power_of_two_doubles_like_the_c() -> None:
    # These exponentials sum to 2^18 - 1: the normalised sum (2^17) minus 98304 wraps to -32768 in C's
    # int16_t and reads 1/(1+0) instead of 1/(1+1), so every output is twice TFLite's (4095 for the max).
    row = [32767] * 7 + [-32487, 32695]
    expected = [8190] * 7 + [56, 8146]
    assert softmax_s16(s16([row]), mult=HALF, shift=0).tolist() == [expected]


def test_s16_scaling_follows_the_build_rounding() -> None:
    # arm_nn_requantize(-70, 2^30, -1) is -17.5: DOUBLE rounds it away from zero to -18, SINGLE
    # ((-70 * 2^30 >> 31) + 1) >> 1 gives -17. Outputs from the two C builds (default and
    # CMSIS_NN_USE_SINGLE_ROUNDING).
    x = s16([[0, -70]])
    assert softmax_s16(x, mult=HALF, shift=-1, rounding=Rounding.DOUBLE).tolist() == [[16406, 16361]]
    assert softmax_s16(x, mult=HALF, shift=-1, rounding=Rounding.SINGLE).tolist() == [[16405, 16363]]


# --- bad arguments ----------------------------------------------------------------------------------------


def check_error(excinfo: pytest.ExceptionInfo[KernelArgumentError], argument: str) -> None:
    assert excinfo.value.argument == argument
    assert f"'{argument}'" in str(excinfo.value)


@pytest.mark.parametrize("kernel", [softmax_s8, softmax_s8_s16])
@pytest.mark.parametrize(
    ("argument", "x", "params"),
    [
        ("x", np.zeros((1, 4), np.int16), {}),
        ("x", np.zeros((), np.int8), {}),
        ("x", np.zeros((3, 0), np.int8), {}),
        ("x", [[1, 2]], {}),
        ("shift", np.zeros((1, 4), np.int8), {"shift": 32}),
        ("shift", np.zeros((1, 4), np.int8), {"shift": -1}),
        ("mult", np.zeros((1, 4), np.int8), {"mult": -5}),
        ("diff_min", np.zeros((1, 4), np.int8), {"diff_min": 2**31}),
    ],
)
def test_s8_rejects(kernel: Any, argument: str, x: Any, params: dict[str, Any]) -> None:
    call = {"mult": TEST_MULT, "shift": TEST_SHIFT, "diff_min": TEST_DIFF_MIN, **params}
    with pytest.raises(KernelArgumentError) as excinfo:
        kernel(x, **call)
    check_error(excinfo, argument)


@pytest.mark.parametrize(
    ("argument", "x", "params"),
    [
        ("x", np.zeros((1, 4), np.int8), {}),
        ("x", np.zeros((2, 0), np.int16), {}),
        ("shift", np.zeros((1, 4), np.int16), {"shift": 31}),
        ("mult", np.zeros((1, 4), np.int16), {"mult": -(2**31)}),
    ],
)
def test_s16_rejects(argument: str, x: Any, params: dict[str, Any]) -> None:
    call = {"mult": HALF, "shift": -2, **params}
    with pytest.raises(KernelArgumentError) as excinfo:
        softmax_s16(x, **call)
    check_error(excinfo, argument)
