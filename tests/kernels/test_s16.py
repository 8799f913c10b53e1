"""convolve_s16, depthwise_conv_s16 (+ _fast) and fully_connected_s16: outputs worked out by hand from the
pure-C CMSIS-NN arithmetic (int32 vs int64 stages, REDUCE_MULTIPLIER + arm_nn_requantize_s64 vs
arm_nn_requantize), and bad arguments rejected with the argument named."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from quantcore.errors import KernelArgumentError
from quantcore.kernels.requantize import Rounding
from quantcore.kernels.s16 import (
    convolve_s16,
    depthwise_conv_fast_s16,
    depthwise_conv_s16,
    fully_connected_s16,
)

HALF = 1 << 30  # Q31 0.5; REDUCE_MULTIPLIER makes it Q15 16384 = 0.5 exactly


def _scales(*shifts: int, mult: int = HALF) -> dict[str, Any]:
    return {"multiplier": np.full(len(shifts), mult, np.int32), "shift": np.array(shifts, np.int32)}


def _filled(shape: tuple[int, ...], value: int, dtype: type[np.generic]) -> np.ndarray[Any, Any]:
    return np.full(shape, value, dtype)


# --- convolve_s16, int64 bias -------------------------------------------------------------------------


def test_1x1_conv_accumulator_beyond_32_bits_stays_exact_on_the_int64_path() -> None:
    # Two pixels (one pair), 1024 columns of 32767 * 127: acc = 1024 * 4161409 = 4_261_282_816 > 2^32.
    # The first 512 columns (2_130_641_408) fit int32; the rest is added in int64.
    # requantize_s64: acc * 16384 >> (14 + 16) = acc >> 16 = 65022, then (65022 + 1) >> 1 = 32511.
    x = _filled((1, 1, 2, 1024), 32767, np.int16)
    w = _filled((1, 1, 1, 1024), 127, np.int8)
    out = convolve_s16(x, w, np.zeros(1, np.int64), **_scales(-16))
    assert out.dtype == np.int16
    assert out.ravel().tolist() == [32511, 32511]


def test_first_512_columns_of_a_pixel_pair_wrap_in_int32() -> None:
    # 512 products of (-32768) * (-128) = 2^22 sum to 2^31, which arm_nn_mat_mult_kernel_s16 holds in an
    # int32 (wraps to -2^31) before widening: -2^31 * 16384 >> 30 = -32768, (-32768 + 1) >> 1 = -16384.
    x = _filled((1, 1, 2, 512), -32768, np.int16)
    w = _filled((1, 1, 1, 512), -128, np.int8)
    out = convolve_s16(x, w, None, **_scales(-16))
    assert out.ravel().tolist() == [-16384, -16384]


def test_odd_last_pixel_is_accumulated_entirely_in_int32() -> None:
    # Three pixels: 0 and 1 go through the pair kernel (32511 as above); pixel 2 is the leftover, summed in
    # an int32 in arm_convolve_s16: 4_261_282_816 wraps to -33_684_480, >> 16 = -514, (-514 + 1) >> 1 = -257.
    x = _filled((1, 1, 3, 1024), 32767, np.int16)
    w = _filled((1, 1, 1, 1024), 127, np.int8)
    out = convolve_s16(x, w, None, **_scales(-16))
    assert out.ravel().tolist() == [32511, 32511, -257]


def test_leftover_pixel_is_per_image_in_a_batch() -> None:
    # Each image of the batch has its own odd last pixel (lhs_rows restarts per batch).
    x = _filled((2, 1, 3, 1024), 32767, np.int16)
    w = _filled((1, 1, 1, 1024), 127, np.int8)
    out = convolve_s16(x, w, None, **_scales(-16))
    assert out[..., 0].tolist() == [[[32511, 32511, -257]], [[32511, 32511, -257]]]


def test_int64_bias_beyond_32_bits() -> None:
    # acc = 2^40 + 0: 2^40 * 16384 >> (14 + 31) = 2^9 = 512, (512 + 1) >> 1 = 256.
    x = np.zeros((1, 1, 1, 1), np.int16)
    w = np.ones((1, 1, 1, 1), np.int8)
    out = convolve_s16(x, w, np.array([1 << 40], np.int64), **_scales(-31))
    assert out.ravel().tolist() == [256]


def test_per_channel_multiplier_and_shift() -> None:
    # x = [3, -2]; channel 0 weights [1, 1] -> 1 + bias 999 = 1000; channel 1 [2, 3] -> 0 + bias 1000 = 1000;
    # channel 2 [0, 1] -> -2 + bias 2 = 0.
    # ch0: mult 0.5, shift 0: 1000 * 16384 >> 14 = 1000, (1000 + 1) >> 1 = 500.
    # ch1: mult 0.5, shift -2: 1000 * 16384 >> 16 = 250, (250 + 1) >> 1 = 125.
    # ch2: shift 5, but 0 scales to 0.
    x = np.array([3, -2], np.int16).reshape(1, 1, 1, 2)
    w = np.array([[1, 1], [2, 3], [0, 1]], np.int8).reshape(3, 1, 1, 2)
    bias = np.array([999, 1000, 2], np.int64)
    assert convolve_s16(x, w, bias, **_scales(0, -2, 5)).ravel().tolist() == [500, 125, 0]


def test_reduced_q15_multiplier_differs_from_q31_in_the_last_bit() -> None:
    # multiplier 0x40008000 = Q31 0.5 + 2^-16; REDUCE_MULTIPLIER gives Q15 (0x40008000 + 2^15) >> 16 = 16385.
    # acc 20000 (bias only), shift 0:
    #   int64 path: 20000 * 16385 = 327_700_000 >> 14 = 20001, (20001 + 1) >> 1 = 10001;
    #   int32 path: (20000 * 0x40008000 + 2^30) >> 31 = 10000 (double rounding; single gives 10000 too).
    x = np.zeros((1, 1, 1, 1), np.int16)
    w = np.ones((1, 1, 1, 1), np.int8)
    scales = _scales(0, mult=0x40008000)
    assert convolve_s16(x, w, np.array([20000], np.int64), **scales).ravel().tolist() == [10001]
    assert convolve_s16(x, w, np.array([20000], np.int32), int32_bias=True, **scales).ravel().tolist() == [
        10000
    ]


# --- convolve_s16, int32 bias -------------------------------------------------------------------------


@pytest.mark.parametrize("rounding", list(Rounding))
def test_int32_bias_path_wraps_the_accumulator(rounding: Rounding) -> None:
    # bias INT32_MAX + 1 * 1 wraps to -2^31, then scaled by 0.5 * 2^-16:
    #   double: (-2^31 * 2^30 + 2^30) >> 31 = -2^30, divided by 2^16 with rounding: -16384;
    #   single: -2^61 >> (31 + 16 - 1) = -32768, (-32768 + 1) >> 1 = -16384.
    # The int64 path keeps +2^31: 2^31 * 16384 >> 30 = 32768, (32768 + 1) >> 1 = 16384.
    x = np.ones((1, 1, 1, 1), np.int16)
    w = np.ones((1, 1, 1, 1), np.int8)
    top = 2**31 - 1
    out = convolve_s16(x, w, np.array([top], np.int32), int32_bias=True, rounding=rounding, **_scales(-16))
    assert out.ravel().tolist() == [-16384]
    assert convolve_s16(
        x, w, np.array([top], np.int64), rounding=rounding, **_scales(-16)
    ).ravel().tolist() == [16384]


def test_int32_bias_path_follows_the_build_rounding_and_the_int64_path_does_not() -> None:
    # acc 1, mult 0.5, shift -1 (0.25):
    #   int32 path, double rounding: (1 * 2^30 + 2^30) >> 31 = 1, then 1 / 2, midpoint away from 0: 1;
    #   int32 path, single rounding: (1 * 2^30) >> 31 = 0, (0 + 1) >> 1 = 0;
    #   int64 path: 1 * 16384 >> 15 = 0, (0 + 1) >> 1 = 0 whatever the build.
    x = np.ones((1, 1, 1, 1), np.int16)
    w = np.ones((1, 1, 1, 1), np.int8)
    b32, b64 = np.zeros(1, np.int32), np.zeros(1, np.int64)
    for rounding, expected in ((Rounding.DOUBLE, 1), (Rounding.SINGLE, 0)):
        out = convolve_s16(x, w, b32, int32_bias=True, rounding=rounding, **_scales(-1))
        assert out.ravel().tolist() == [expected]
        assert convolve_s16(x, w, b64, rounding=rounding, **_scales(-1)).ravel().tolist() == [0]


def test_int32_path_allows_shifts_up_to_30() -> None:
    # arm_nn_requantize takes shift up to 30 (the int64 path up to 14): 1 << 8 * 0.5 = 128.
    x = np.ones((1, 1, 1, 1), np.int16)
    w = np.ones((1, 1, 1, 1), np.int8)
    assert convolve_s16(x, w, None, int32_bias=True, **_scales(8)).ravel().tolist() == [128]


def test_conv_padding_reads_zero_and_clamps() -> None:
    # 2x2 input [[1, 2], [3, 4]], 3x3 kernel of 2s, pad 1: every output window covers the whole input plus
    # padding, so each sum is 2 * 10 = 20 (padding adds 0).
    # bias 100: 120 * 16384 >> (14 - 1) = 240, (240 + 1) >> 1 = 120, clamped to act_max 100.
    # bias -100: -80 * 16384 >> 13 = -160, (-160 + 1) >> 1 = -80.
    x = np.array([1, 2, 3, 4], np.int16).reshape(1, 2, 2, 1)
    w = _filled((1, 3, 3, 1), 2, np.int8)
    out = convolve_s16(x, w, np.array([100], np.int64), padding=(1, 1), act_min=-5, act_max=100, **_scales(1))
    assert out.shape == (1, 2, 2, 1)
    assert out.ravel().tolist() == [100, 100, 100, 100]
    out = convolve_s16(x, w, np.array([-100], np.int64), padding=(1, 1), **_scales(1))
    assert out.ravel().tolist() == [-80, -80, -80, -80]


# --- depthwise ----------------------------------------------------------------------------------------


def test_depthwise_channel_multiplier_and_per_channel_shift() -> None:
    # x (H=1, W=2, C=2): pixel 0 = [10, 20], pixel 1 = [30, 40]; 1x2 kernel, ch_mult 2.
    # out channel c*2+m reads input channel c:
    #   oc0 = 10*1 + 30*5 = 160 (+6) = 166   oc1 = 10*2 + 30*6 = 200
    #   oc2 = 20*3 + 40*7 = 340              oc3 = 20*4 + 40*8 = 400
    # mult 0.5, shifts [0, -1, 0, 1]: (166+1)>>1 = 83, (100+1)>>1 = 50, (340+1)>>1 = 170, (800+1)>>1 = 400.
    x = np.array([10, 20, 30, 40], np.int16).reshape(1, 1, 2, 2)
    w = np.array([1, 2, 3, 4, 5, 6, 7, 8], np.int8).reshape(1, 1, 2, 4)
    out = depthwise_conv_s16(x, w, np.array([6, 0, 0, 0], np.int64), **_scales(0, -1, 0, 1))
    assert out.ravel().tolist() == [83, 50, 170, 400]


def test_depthwise_taps_outside_the_input_read_zero() -> None:
    # 1x1 input -5 under a 3x3 kernel padded by 1: only the centre tap (3) is inside: -15.
    # -15 * 16384 >> 14 = -15, (-15 + 1) >> 1 = -7.
    x = np.array([-5], np.int16).reshape(1, 1, 1, 1)
    w = np.array([1, 1, 1, 1, 3, 1, 1, 1, 1], np.int8).reshape(1, 3, 3, 1)
    for kernel in (depthwise_conv_s16, depthwise_conv_fast_s16):
        assert kernel(x, w, None, padding=(1, 1), **_scales(0)).ravel().tolist() == [-7]


def test_depthwise_int64_bias_beyond_32_bits() -> None:
    # 3x3 taps of (-32768) * (-128) = 9 * 2^22 = 37_748_736, + bias 2^35 = 34_397_487_104 (beyond 32 bits);
    # * 16384 >> (14 + 20) = acc >> 20 = 32804, (32804 + 1) >> 1 = 16402.
    x = _filled((1, 3, 3, 1), -32768, np.int16)
    w = _filled((1, 3, 3, 1), -128, np.int8)
    out = depthwise_conv_s16(x, w, np.array([1 << 35], np.int64), **_scales(-20))
    assert out.ravel().tolist() == [16402]


# --- fully connected ----------------------------------------------------------------------------------


def test_fully_connected_accumulates_every_column_in_int64() -> None:
    # Unlike conv's int32 stages: 512 products of 2^22 = 2^31 stay positive: 2^31 >> 16 = 32768,
    # (32768 + 1) >> 1 = 16384 (convolve_s16 gives -16384 for the same numbers).
    x = _filled((1, 512), -32768, np.int16)
    w = _filled((1, 512), -128, np.int8)
    assert fully_connected_s16(x, w, None, multiplier=HALF, shift=-16).ravel().tolist() == [16384]


def test_fully_connected_rows_bias_and_batches() -> None:
    # x batch 0 = [1, 2, 3], batch 1 = [-1, 0, 4]; rows [1, 0, -1] and [2, 2, 2]; bias [10, -3].
    # b0: 1 - 3 + 10 = 8 -> (8+1)>>1 = 4;  2+4+6 - 3 = 9 -> (9+1)>>1 = 5
    # b1: -1 - 4 + 10 = 5 -> 3;            -2+0+8 - 3 = 3 -> 2   (mult 0.5, shift 0)
    x = np.array([[1, 2, 3], [-1, 0, 4]], np.int16)
    w = np.array([[1, 0, -1], [2, 2, 2]], np.int8)
    out = fully_connected_s16(x, w, np.array([10, -3], np.int64), multiplier=HALF, shift=0, act_min=3)
    assert out.tolist() == [[4, 5], [3, 3]]  # the 2 is clamped up to act_min 3


# --- bad arguments ------------------------------------------------------------------------------------

X1 = np.ones((1, 1, 1, 1), np.int16)
W1 = np.ones((1, 1, 1, 1), np.int8)


def _rejects(argument: str, call: Any, *args: Any, **kwargs: Any) -> KernelArgumentError:
    with pytest.raises(KernelArgumentError) as info:
        call(*args, **kwargs)
    assert info.value.argument == argument
    assert f"'{argument}'" in str(info.value)
    return info.value


def test_int32_bias_needs_an_explicit_choice() -> None:
    err = _rejects("bias", convolve_s16, X1, W1, np.zeros(1, np.int32), **_scales(0))
    assert "int32_bias=True" in str(err)


def test_int64_bias_on_the_int32_path_is_rejected() -> None:
    _rejects("bias", convolve_s16, X1, W1, np.zeros(1, np.int64), int32_bias=True, **_scales(0))


def test_int32_bias_flag_must_be_a_bool() -> None:
    _rejects("int32_bias", convolve_s16, X1, W1, None, int32_bias=1, **_scales(0))


def test_conv_rejects_int8_activations() -> None:
    _rejects("input", convolve_s16, X1.astype(np.int8), W1, None, **_scales(0))


def test_conv_rejects_grouped_weights() -> None:
    x = np.ones((1, 1, 1, 4), np.int16)
    _rejects("weights", convolve_s16, x, np.ones((2, 1, 1, 2), np.int8), None, **_scales(0, 0))


def test_conv_shift_range_depends_on_the_bias_type() -> None:
    # arm_nn_requantize_s64 shifts right by 14 - shift: defined up to shift 14 (its documented 7 is a policy
    # the quantizer keeps). Shift 8: 1 * 16384 >> 6 = 256, (256 + 1) >> 1 = 128.
    assert convolve_s16(X1, W1, None, **_scales(8)).item() == 128
    _rejects("shift", convolve_s16, X1, W1, None, **_scales(15))
    _rejects("shift", convolve_s16, X1, W1, None, int32_bias=True, **_scales(31))


def test_conv_rejects_the_most_negative_multiplier() -> None:
    _rejects("multiplier", convolve_s16, X1, W1, None, **_scales(0, mult=-(2**31)))


def test_conv_rejects_per_channel_arrays_of_the_wrong_length() -> None:
    _rejects(
        "multiplier",
        convolve_s16,
        X1,
        W1,
        None,
        multiplier=np.full(2, HALF, np.int32),
        shift=np.zeros(1, np.int32),
    )


def test_clamps_are_the_cs_for_any_int32_limits() -> None:
    # The C clamps the requantized int32 with MIN(MAX(v, act_min), act_max) and casts to int16: 1 clamped to
    # [40000, 50000] is 40000, stored as 40000 - 65536; crossed limits give act_max.
    assert convolve_s16(X1, W1, None, act_min=40000, act_max=50000, **_scales(0)).item() == -25536
    assert depthwise_conv_s16(X1, W1, None, act_min=10, act_max=9, **_scales(0)).item() == 9
    _rejects("act_max", convolve_s16, X1, W1, None, act_max=2**31, **_scales(0))


def test_conv_rejects_more_than_65535_columns_with_an_odd_pixel_count() -> None:
    x = np.ones((1, 1, 1, 65536), np.int16)
    w = np.ones((1, 1, 1, 65536), np.int8)
    err = _rejects("weights", convolve_s16, x, w, None, **_scales(0))
    assert "65535" in str(err)


def test_depthwise_bias_must_be_int64() -> None:
    err = _rejects("bias", depthwise_conv_s16, X1, W1, np.zeros(1, np.int32), **_scales(0))
    assert "int64" in str(err)


def test_depthwise_output_channels_must_be_a_multiple_of_the_input() -> None:
    x = np.ones((1, 1, 1, 2), np.int16)
    _rejects("weights", depthwise_conv_s16, x, np.ones((1, 1, 1, 3), np.int8), None, **_scales(0, 0, 0))


def test_depthwise_rejects_dimensions_the_c_truncates_to_uint16() -> None:
    x = np.ones((1, 1, 65536, 1), np.int16)
    _rejects("input", depthwise_conv_s16, x, W1, None, **_scales(0))


def test_fast_depthwise_needs_channel_multiplier_1() -> None:
    w = np.ones((1, 1, 1, 2), np.int8)
    _rejects("weights", depthwise_conv_fast_s16, X1, w, None, **_scales(0, 0))


def test_fast_depthwise_needs_fewer_than_512_taps() -> None:
    x = np.ones((1, 16, 32, 1), np.int16)
    _rejects("weights", depthwise_conv_fast_s16, x, np.ones((1, 16, 32, 1), np.int8), None, **_scales(0))


def test_fully_connected_bad_arguments() -> None:
    x = np.ones((1, 3), np.int16)
    w = np.ones((2, 3), np.int8)
    _rejects("bias", fully_connected_s16, x, w, np.zeros(2, np.int32), multiplier=HALF, shift=0)
    _rejects("shift", fully_connected_s16, x, w, None, multiplier=HALF, shift=15)
    _rejects("multiplier", fully_connected_s16, x, w, None, multiplier=np.full(2, HALF, np.int32), shift=0)
    _rejects("input", fully_connected_s16, np.ones((1, 4), np.int16), w, None, multiplier=HALF, shift=0)
