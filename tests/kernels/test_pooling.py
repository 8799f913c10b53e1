"""Hand-checked cases for the pooling reference (arm_avgpool_s8/_s16, arm_max_pool_s8/_s16) and its argument
checks. Expected values are worked out from the C semantics: the average divides by the number of input
pixels in the window (padding excluded), rounds the midpoint away from zero with C's truncating '/', and
clamps; the maximum ignores padding."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from quantcore.errors import KernelArgumentError
from quantcore.kernels.pooling import avgpool_s8, avgpool_s16, max_pool_s8, max_pool_s16

ALL_POOLS = [avgpool_s8, avgpool_s16, max_pool_s8, max_pool_s16]
S8_POOLS = [avgpool_s8, max_pool_s8]


def nhwc(rows: list[list[int]], dtype: type[np.generic] = np.int8) -> np.ndarray[Any, Any]:
    """One image, one channel, from a list of rows."""
    return np.array(rows, dtype=dtype)[None, :, :, None]


def plane(result: np.ndarray[Any, Any]) -> list[list[int]]:
    assert result.shape[0] == 1 and result.shape[3] == 1
    return result[0, :, :, 0].tolist()


# --- average: rounding ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([2, 3], 3),  # 2.5 -> 3: midpoint away from zero
        ([-3, -2], -3),  # -2.5 -> -3 (floor(x + 0.5) would give -2)
        ([-1, 0], -1),  # -0.5 -> -1
        ([1, 0], 1),  # 0.5 -> 1
        ([0, 0], 0),
        ([-1, -1, -2], -1),  # -4/3: (-4 - 1) / 3 truncates to -1 (floor division would give -2)
        ([-2, -2, -1], -2),  # -5/3 = -1.67: (-5 - 1) / 3 = -2
        ([1, 1, 2], 1),  # 4/3: (4 + 1) / 3 = 1
        ([127, 127, 126], 127),  # 380/3 = 126.67
        ([-128, -128, -127], -128),  # -383/3 = -127.67
    ],
)
def test_avgpool_s8_rounds_midpoints_away_from_zero(values: list[int], expected: int) -> None:
    x = nhwc([values])
    assert plane(avgpool_s8(x, kernel=(1, len(values)))) == [[expected]]


def test_avgpool_s16_rounds_sums_beyond_int16() -> None:
    assert plane(avgpool_s16(nhwc([[32767, 32767, 32766]], np.int16), kernel=(1, 3))) == [[32767]]
    assert plane(avgpool_s16(nhwc([[-32768, -32767]], np.int16), kernel=(1, 2))) == [[-32768]]
    assert plane(avgpool_s16(nhwc([[-32768, -32767, -32767]], np.int16), kernel=(1, 3))) == [[-32767]]


# --- average: padding is not counted ----------------------------------------------------------------------


def test_avgpool_excludes_padding_from_the_count() -> None:
    # 3x3 input 1..9, 3x3 kernel, padding 1: corners average 4 pixels, edges 6, the centre 9.
    # e.g. (0, 0): (1+2+4+5)/4 = 3; (0, 1): 21/6 = 3.5 -> 4; (1, 0): 27/6 = 4.5 -> 5; (2, 1): 39/6 = 6.5 -> 7.
    x = nhwc([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    result = avgpool_s8(x, kernel=(3, 3), padding=(1, 1))
    assert plane(result) == [[3, 4, 4], [5, 5, 6], [6, 7, 7]]


def test_avgpool_same_padding_with_larger_after_pad_uses_given_output_size() -> None:
    # TF SAME, width 3, kernel 2, stride 2: pad before 0, after 1. The second window holds one pixel only.
    x = nhwc([[1, 2, -7]])
    assert plane(avgpool_s8(x, kernel=(1, 2), stride=(1, 2), output_hw=(1, 2))) == [[2, -7]]
    # Without output_hw the symmetric formula gives one output.
    assert plane(avgpool_s8(x, kernel=(1, 2), stride=(1, 2))) == [[2]]


def test_avgpool_clamps_to_the_activation_range() -> None:
    x = nhwc([[100, 100, -100, -100, 3, 4]])
    result = avgpool_s8(x, kernel=(1, 2), stride=(1, 2), act_min=-10, act_max=5)
    assert plane(result) == [[5, -10, 4]]


def test_avgpool_keeps_batches_and_channels_apart() -> None:
    x = np.array([[[[1, -1], [3, -4]]], [[[10, 20], [11, 21]]]], dtype=np.int8)  # (2, 1, 2, 2)
    result = avgpool_s8(x, kernel=(1, 2))
    assert result.shape == (2, 1, 1, 2)
    assert result.dtype == np.int8
    # channel 1 of image 0: -5/2 = -2.5 -> -3; image 1: 21/2 -> 11 and 41/2 -> 21.
    assert result.reshape(2, 2).tolist() == [[2, -3], [11, 21]]


def test_avgpool_strides_and_output_size() -> None:
    x = nhwc([[r * 10 + c for c in range(5)] for r in range(4)])
    result = avgpool_s8(x, kernel=(2, 2), stride=(2, 2))
    # windows at rows 0-1 / 2-3 and columns 0-1 / 2-3; column 4 is dropped by the symmetric size formula.
    assert plane(result) == [[6, 8], [26, 28]]  # (0+1+10+11)/4 = 5.5 -> 6, (2+3+12+13)/4 = 7.5 -> 8 ...


# --- maximum ----------------------------------------------------------------------------------------------


def test_max_pool_ignores_padding() -> None:
    # All inputs negative: padding (if it were a zero value) would win everywhere.
    x = nhwc([[-5, -3], [-8, -100]])
    assert plane(max_pool_s8(x, kernel=(3, 3), padding=(1, 1))) == [[-3, -3], [-3, -3]]
    assert plane(max_pool_s8(x, kernel=(2, 2), padding=(1, 1), stride=(2, 2))) == [[-5, -3], [-8, -100]]


def test_max_pool_clamps_like_a_fused_relu6() -> None:
    x = nhwc([[-1, -7, 9, 3], [-2, -3, 1, 2]])
    assert plane(max_pool_s8(x, kernel=(2, 2), stride=(2, 2), act_min=0, act_max=6)) == [[0, 6]]


def test_max_pool_s16_full_range() -> None:
    x = nhwc([[-32768, -30000, 30000, 32767], [-32768, -32768, -1, 0]], np.int16)
    result = max_pool_s16(x, kernel=(2, 2), stride=(2, 2))
    assert result.dtype == np.int16
    assert plane(result) == [[-30000, 32767]]
    assert plane(max_pool_s16(x, kernel=(2, 2), stride=(2, 2), act_min=-100, act_max=100)) == [[-100, 100]]


def test_max_pool_per_channel() -> None:
    x = np.array([[[[1, 9], [5, -3]]]], dtype=np.int8)  # (1, 1, 2, 2)
    assert max_pool_s8(x, kernel=(1, 2)).reshape(-1).tolist() == [5, 9]


# --- bad arguments ----------------------------------------------------------------------------------------


def check_error(excinfo: pytest.ExceptionInfo[KernelArgumentError], argument: str) -> None:
    assert excinfo.value.argument == argument
    assert f"'{argument}'" in str(excinfo.value)


@pytest.mark.parametrize("pool", S8_POOLS)
def test_rejects_wrong_dtype(pool: Any) -> None:
    with pytest.raises(KernelArgumentError) as excinfo:
        pool(np.zeros((1, 2, 2, 1), dtype=np.int16), kernel=(1, 1))
    check_error(excinfo, "x")
    assert "int8" in str(excinfo.value)


@pytest.mark.parametrize("pool", [avgpool_s16, max_pool_s16])
def test_s16_rejects_int8(pool: Any) -> None:
    with pytest.raises(KernelArgumentError) as excinfo:
        pool(np.zeros((1, 2, 2, 1), dtype=np.int8), kernel=(1, 1))
    check_error(excinfo, "x")


@pytest.mark.parametrize("pool", ALL_POOLS)
def test_rejects_wrong_ndim(pool: Any) -> None:
    dtype = np.int8 if pool in S8_POOLS else np.int16
    with pytest.raises(KernelArgumentError) as excinfo:
        pool(np.zeros((2, 2, 1), dtype=dtype), kernel=(1, 1))
    check_error(excinfo, "x")


@pytest.mark.parametrize("pool", ALL_POOLS)
def test_rejects_an_empty_batch(pool: Any) -> None:
    dtype = np.int8 if pool in S8_POOLS else np.int16
    with pytest.raises(KernelArgumentError) as excinfo:
        pool(np.zeros((0, 2, 2, 1), dtype=dtype), kernel=(1, 1))
    check_error(excinfo, "x")


@pytest.mark.parametrize("pool", ALL_POOLS)
def test_crossed_limits_give_act_max(pool: Any) -> None:
    # Every pool clamps with MIN(MAX(v, act_min), act_max): act_min 5 > act_max 4 makes every value 4.
    dtype = np.int8 if pool in S8_POOLS else np.int16
    x = np.array([-100, 0, 3, 100], dtype=dtype).reshape(1, 2, 2, 1)
    assert pool(x, kernel=(1, 1), act_min=5, act_max=4).ravel().tolist() == [4, 4, 4, 4]


def test_avgpool_clamps_wider_than_the_type_are_cast_as_the_c_casts() -> None:
    # arm_avgpool_s8 clamps its int32 average and casts it to int8: with act_min 200 every value becomes
    # 200, stored as 200 - 256 = -56; the s16 kernel likewise (40000 - 65536 = -25536).
    x8 = np.zeros((1, 2, 2, 1), dtype=np.int8)
    assert avgpool_s8(x8, kernel=(1, 1), act_min=200, act_max=300).ravel().tolist() == [-56] * 4
    x16 = np.zeros((1, 2, 2, 1), dtype=np.int16)
    assert avgpool_s16(x16, kernel=(1, 1), act_min=40000, act_max=50000).ravel().tolist() == [-25536] * 4


def test_max_pools_keep_their_clamp_in_the_type() -> None:
    # arm_max_pool_s16 narrows its limits to int16_t and the MVE arm_max_pool_s8 to int8 lanes, where the
    # pure-C s8 build clamps in int32: beyond the type the builds part, so the reference refuses.
    with pytest.raises(KernelArgumentError) as excinfo:
        max_pool_s8(np.zeros((1, 2, 2, 1), dtype=np.int8), kernel=(1, 1), act_max=200)
    check_error(excinfo, "act_max")
    x = np.zeros((1, 1, 1, 1), dtype=np.int16)
    assert max_pool_s16(x, kernel=(1, 1), act_min=-32768, act_max=32767).tolist() == [[[[0]]]]
    with pytest.raises(KernelArgumentError) as excinfo:
        max_pool_s16(x, kernel=(1, 1), act_min=-32769)
    check_error(excinfo, "act_min")


@pytest.mark.parametrize("pool", ALL_POOLS)
def test_rejects_kernel_larger_than_padded_input(pool: Any) -> None:
    dtype = np.int8 if pool in S8_POOLS else np.int16
    x = np.zeros((1, 2, 2, 1), dtype=dtype)
    pool(x, kernel=(4, 4), padding=(1, 1))  # exactly the padded size is fine
    with pytest.raises(KernelArgumentError) as excinfo:
        pool(x, kernel=(5, 4), padding=(1, 1))
    check_error(excinfo, "kernel")


@pytest.mark.parametrize("pool", ALL_POOLS)
def test_rejects_padding_as_large_as_the_kernel(pool: Any) -> None:
    # The first window would hold only padding: arm_avgpool_s8 returns ARM_CMSIS_NN_ARG_ERROR.
    dtype = np.int8 if pool in S8_POOLS else np.int16
    with pytest.raises(KernelArgumentError) as excinfo:
        pool(np.zeros((1, 1, 3, 1), dtype=dtype), kernel=(1, 2), padding=(0, 2))
    check_error(excinfo, "padding")


@pytest.mark.parametrize("pool", ALL_POOLS)
def test_rejects_output_whose_last_window_misses_the_input(pool: Any) -> None:
    dtype = np.int8 if pool in S8_POOLS else np.int16
    x = np.zeros((1, 1, 3, 1), dtype=dtype)
    assert pool(x, kernel=(1, 2), stride=(1, 2), output_hw=(1, 2)).shape == (1, 1, 2, 1)
    with pytest.raises(KernelArgumentError) as excinfo:
        pool(x, kernel=(1, 2), stride=(1, 2), output_hw=(1, 3))  # third window starts at column 4
    check_error(excinfo, "output_hw")


@pytest.mark.parametrize(("name", "kwargs"), [("stride", {"stride": (0, 1)}), ("kernel", {"kernel": (2,)})])
def test_rejects_bad_window_parameters(name: str, kwargs: dict[str, Any]) -> None:
    call: dict[str, Any] = {"kernel": (1, 1), **kwargs}
    with pytest.raises(KernelArgumentError) as excinfo:
        avgpool_s8(np.zeros((1, 2, 2, 1), dtype=np.int8), **call)
    assert name in str(excinfo.value)


def test_avgpool_s16_rejects_kernel_whose_sum_overflows_int32() -> None:
    # 65536 pixels of -32768 sum to -2^31, and the rounding then subtracts half the count: int32 overflow.
    x = np.zeros((1, 256, 256, 1), dtype=np.int16)
    with pytest.raises(KernelArgumentError) as excinfo:
        avgpool_s16(x, kernel=(256, 256))
    check_error(excinfo, "kernel")
    assert avgpool_s16(x, kernel=(256, 255)).shape == (1, 1, 2, 1)
