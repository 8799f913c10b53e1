"""Elementwise add/mul (s8, s16) and maximum/minimum (s8): literal integers worked out from the C arithmetic.

The scales are picked so the hand arithmetic stays exact: a Q31 multiplier of 2^30 is 0.5, so every
intermediate is an exact integer until the last division, and what is left to check is how that division
rounds. Double rounding (the default) rounds a midpoint away from zero; single rounding
(CMSIS_NN_USE_SINGLE_ROUNDING) rounds it towards +inf, so negative midpoints tell the two apart.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from quantcore.errors import KernelArgumentError
from quantcore.kernels.elementwise import (
    elementwise_add_s8,
    elementwise_add_s16,
    elementwise_mul_s8,
    elementwise_mul_s16,
    maximum_s8,
    minimum_s8,
)
from quantcore.kernels.requantize import Rounding

HALF = 1 << 30  # Q31 0.5

# TFLite's int8 add scheme, with input 2's zero point -127 so that (b + 127) can be -1.
ADD_S8 = dict(
    input_1_offset=128, input_1_mult=HALF, input_1_shift=0,
    input_2_offset=127, input_2_mult=HALF, input_2_shift=0,
    left_shift=20, out_offset=0, out_mult=HALF, out_shift=-19,
)  # fmt: skip
ADD_S16 = dict(
    input_1_mult=HALF, input_1_shift=0, input_2_mult=HALF, input_2_shift=0,
    left_shift=15, out_mult=HALF, out_shift=-14,
)  # fmt: skip
MUL_S8 = dict(input_1_offset=3, input_2_offset=-5, out_offset=-10, out_mult=HALF, out_shift=-2)
MUL_S16 = dict(out_mult=HALF, out_shift=-14)


def s8(*values: int) -> np.ndarray[Any, Any]:
    return np.array(values, dtype=np.int8)


def s16(*values: int) -> np.ndarray[Any, Any]:
    return np.array(values, dtype=np.int16)


# ---- add s8 -----------------------------------------------------------------------------------------------
# With u = a + 128 and v = b + 127: each input becomes (u << 20) * 0.5 = u * 2^19 exactly, the sum is
# (u + v) * 2^19, and the output requantization gives (u + v) * 2^19 * 0.5 * 2^-19 = (u + v) / 2.
ADD_A = s8(-118, -128, -128, -123, 127)  # u = 10, 0, 0, 5, 255
ADD_B = s8(-106, -128, -110, -127, 127)  # v = 21, -1, 17, 0, 254
# (u + v) / 2 = 15.5, -0.5, 8.5, 2.5, 254.5 (the last clamps to 127)


def test_add_s8_double_rounding_rounds_midpoints_away_from_zero() -> None:
    out = elementwise_add_s8(ADD_A, ADD_B, **ADD_S8)
    assert out.dtype == np.int8
    assert out.tolist() == [16, -1, 9, 3, 127]


def test_add_s8_single_rounding_rounds_midpoints_up() -> None:
    out = elementwise_add_s8(ADD_A, ADD_B, **ADD_S8, rounding=Rounding.SINGLE)
    assert out.tolist() == [16, 0, 9, 3, 127]


def test_add_s8_adds_out_offset_before_the_activation_clamp() -> None:
    # (u + v) / 2 rounds to 16, -1, 9, 3, 255; + 100 = 116, 99, 109, 103, 355; clamped to [100, 110].
    params = ADD_S8 | {"out_offset": 100}
    out = elementwise_add_s8(ADD_A, ADD_B, **params, act_min=100, act_max=110)
    assert out.tolist() == [110, 100, 109, 103, 110]


def test_add_s8_rounds_each_input_with_the_build_rounding() -> None:
    # Each input is scaled by 0.5 * 2^-1 = x / 4 (no offsets, no left shift); the output multiplier
    # 2^31 - 1 with shift 0 is the identity on small integers under both roundings.
    # Double: floor((x + 1) / 2), then / 2 with midpoints away from zero. Single: (floor(x / 2) + 1) >> 1.
    #   x = 1, 2, -2, 5, -5 -> double 1, 1, -1, 2, -1;  single 0, 1, 0, 1, -1
    #   x = 1, -2, 0, 0, 5  -> double 1, -1, 0, 0, 2;   single 0, 0, 0, 0, 1
    params = dict(
        input_1_offset=0, input_1_mult=HALF, input_1_shift=-1,
        input_2_offset=0, input_2_mult=HALF, input_2_shift=-1,
        left_shift=0, out_offset=0, out_mult=2**31 - 1, out_shift=0,
    )  # fmt: skip
    a, b = s8(1, 2, -2, 5, -5), s8(1, -2, 0, 0, 5)
    assert elementwise_add_s8(a, b, **params).tolist() == [2, 0, -1, 2, 1]
    assert elementwise_add_s8(a, b, **params, rounding=Rounding.SINGLE).tolist() == [0, 1, 0, 1, 0]


def test_add_s8_keeps_the_shape_of_its_inputs() -> None:
    out = elementwise_add_s8(ADD_A[:4].reshape(2, 2), ADD_B[:4].reshape(2, 2), **ADD_S8)
    assert out.shape == (2, 2)
    assert out.tolist() == [[16, -1], [9, 3]]


# ---- add s16 ----------------------------------------------------------------------------------------------
# (x << 15) * 0.5 = x * 2^14 per input; output (x1 + x2) * 2^14 * 0.5 * 2^-14 = (x1 + x2) / 2. No offsets.
ADD16_A = s16(1, -1, -3, 30000, -32768, 32767)
ADD16_B = s16(2, -2, 0, 30000, -32768, 32766)
# (x1 + x2) / 2 = 1.5, -1.5, -1.5, 30000, -32768, 32766.5


def test_add_s16_double_rounding() -> None:
    out = elementwise_add_s16(ADD16_A, ADD16_B, **ADD_S16)
    assert out.dtype == np.int16
    assert out.tolist() == [2, -2, -2, 30000, -32768, 32767]


def test_add_s16_single_rounding() -> None:
    out = elementwise_add_s16(ADD16_A, ADD16_B, **ADD_S16, rounding=Rounding.SINGLE)
    assert out.tolist() == [2, -1, -1, 30000, -32768, 32767]


def test_add_s16_clamps_to_the_activation_range() -> None:
    out = elementwise_add_s16(ADD16_A, ADD16_B, **ADD_S16, act_min=-2000, act_max=1000)
    assert out.tolist() == [2, -2, -2, 1000, -2000, 1000]


# ---- mul s8 -----------------------------------------------------------------------------------------------
# p = (a + 3) * (b - 5); requantize by 0.5 * 2^-2 = p / 8, then + out_offset (-10).
# Double rounding: floor((p + 1) / 2) from the doubling high multiply, then / 4 with midpoints away from 0.
# Single rounding: floor(p / 4), then (t + 1) >> 1.
MUL_A = s8(-2, 0, -5, -8, 127)  # a + 3 = 1, 3, -2, -5, 130
MUL_B = s8(8, 9, 7, -3, -128)  # b - 5 = 3, 4, 2, -8, -133
# p = 3, 12, -4, 40, -17290; p / 8 = 0.375, 1.5, -0.5, 5, -2161.25
# double: 3 -> 2 -> 0.5 -> 1;  12 -> 6 -> 1.5 -> 2;  -4 -> -2 -> -0.5 -> -1;  40 -> 5;  -17290 -> -2161
# single: 3 -> 0 -> 0;  12 -> 3 -> 2;  -4 -> -1 -> 0;  40 -> 5;  -17290 -> -4323 -> -2161


def test_mul_s8_double_rounding() -> None:
    out = elementwise_mul_s8(MUL_A, MUL_B, **MUL_S8)
    assert out.dtype == np.int8
    assert out.tolist() == [-9, -8, -11, -5, -128]


def test_mul_s8_single_rounding() -> None:
    out = elementwise_mul_s8(MUL_A, MUL_B, **MUL_S8, rounding=Rounding.SINGLE)
    assert out.tolist() == [-10, -8, -10, -5, -128]


def test_mul_s8_positive_shift_scales_up() -> None:
    # 0.5 * 2^3 = 4: p * 4 - 10 = 2, 38, -26, 150 -> 127, huge negative -> -128
    out = elementwise_mul_s8(MUL_A, MUL_B, **(MUL_S8 | {"out_shift": 3}))
    assert out.tolist() == [2, 38, -26, 127, -128]


# ---- mul s16 ----------------------------------------------------------------------------------------------
# p = x1 * x2; p * 0.5 * 2^-14 = p / 2^15.
MUL16_A = s16(128, -128, 3, -3, 32767, -32768)
MUL16_B = s16(128, 128, 8192, 16384, 32767, -32768)
# p / 2^15 = 0.5, -0.5, 0.75, -1.5, 32766.00003, 32768 (clamps to 32767)


def test_mul_s16_double_rounding() -> None:
    out = elementwise_mul_s16(MUL16_A, MUL16_B, **MUL_S16)
    assert out.dtype == np.int16
    assert out.tolist() == [1, -1, 1, -2, 32766, 32767]


def test_mul_s16_single_rounding() -> None:
    out = elementwise_mul_s16(MUL16_A, MUL16_B, **MUL_S16, rounding=Rounding.SINGLE)
    assert out.tolist() == [1, 0, 1, -1, 32766, 32767]


# ---- maximum / minimum ------------------------------------------------------------------------------------
def test_maximum_and_minimum_without_broadcast() -> None:
    a = s8(-128, 5, 127, 0).reshape(1, 1, 2, 2)
    b = s8(-127, 5, -128, -1).reshape(1, 1, 2, 2)
    assert maximum_s8(a, b).tolist() == [[[[-127, 5], [127, 0]]]]
    assert minimum_s8(a, b).tolist() == [[[[-128, 5], [-128, -1]]]]


def test_maximum_broadcasts_width_channel_and_scalar() -> None:
    a = s8(1, 2, 3, 4, 5, 6).reshape(1, 1, 2, 3)
    row = s8(3, 0, 9).reshape(1, 1, 1, 3)  # one pixel, every width position
    column = s8(2, 5).reshape(1, 1, 2, 1)  # one channel per pixel, every channel
    assert maximum_s8(a, row).tolist() == [[[[3, 2, 9], [4, 5, 9]]]]
    assert maximum_s8(column, a).tolist() == [[[[2, 2, 3], [5, 5, 6]]]]
    assert maximum_s8(a, s8(4)).tolist() == [[[[4, 4, 4], [4, 5, 6]]]]


def test_minimum_broadcasts_batch_and_height() -> None:
    a = s8(1, 9, -3, 7).reshape(2, 2, 1, 1)
    b = s8(5, 0).reshape(1, 2, 1, 1)
    assert minimum_s8(a, b).tolist() == [[[[1]], [[0]]], [[[-3]], [[0]]]]


def test_maximum_accepts_shorter_shapes_as_right_aligned_nhwc() -> None:
    out = maximum_s8(s8(1, 7, -2), s8(0))
    assert out.shape == (3,)
    assert out.tolist() == [1, 7, 0]


@pytest.mark.parametrize("kernel", [maximum_s8, minimum_s8])
def test_row_scalar_broadcast_that_cmsis_nn_misreads_is_rejected(kernel: Any) -> None:
    # (1, 2, 1, 1) against width 3: the C steps the first tensor's pointer by 2 per row and reads past it.
    with pytest.raises(KernelArgumentError) as err:
        kernel(s8(1, 2).reshape(1, 2, 1, 1), np.zeros((1, 2, 3, 1), np.int8))
    assert err.value.argument == "a"
    assert "'a'" in str(err.value)


# ---- bad arguments ----------------------------------------------------------------------------------------
def add_s8(**overrides: Any) -> Any:
    params: dict[str, Any] = {"a": ADD_A, "b": ADD_B, **ADD_S8, **overrides}
    return elementwise_add_s8(params.pop("a"), params.pop("b"), **params)


def add_s16(**overrides: Any) -> Any:
    params: dict[str, Any] = {"a": ADD16_A, "b": ADD16_B, **ADD_S16, **overrides}
    return elementwise_add_s16(params.pop("a"), params.pop("b"), **params)


def mul_s8(**overrides: Any) -> Any:
    params: dict[str, Any] = {"a": MUL_A, "b": MUL_B, **MUL_S8, **overrides}
    return elementwise_mul_s8(params.pop("a"), params.pop("b"), **params)


def mul_s16(**overrides: Any) -> Any:
    params: dict[str, Any] = {"a": MUL16_A, "b": MUL16_B, **MUL_S16, **overrides}
    return elementwise_mul_s16(params.pop("a"), params.pop("b"), **params)


BAD = [
    (add_s8, "a", {"a": ADD_A.astype(np.int16)}, "int8"),
    (add_s8, "b", {"b": ADD_B.astype(np.uint8)}, "int8"),
    (add_s8, "a", {"a": [1, 2, 3, 4, 5]}, "numpy array"),
    (add_s8, "b", {"b": ADD_B[:4]}, "shape"),
    (add_s8, "b", {"b": ADD_B.reshape(5, 1)}, "shape"),
    (add_s8, "input_1_offset", {"input_1_offset": 129}, "[-127, 128]"),
    (add_s8, "input_2_offset", {"input_2_offset": -128}, "[-127, 128]"),
    (add_s8, "input_2_shift", {"input_2_shift": -32}, "[-31, 30]"),
    (add_s8, "out_shift", {"out_shift": 31}, "[-31, 30]"),
    (add_s8, "left_shift", {"left_shift": 24}, "[0, 23]"),
    (add_s8, "left_shift", {"left_shift": -1}, "[0, 23]"),
    (add_s8, "input_1_mult", {"input_1_mult": -(2**31)}, "must be in"),
    (add_s8, "out_mult", {"out_mult": 2**31}, "must be in"),
    (add_s8, "left_shift", {"left_shift": 20.0}, "integer"),
    (add_s16, "a", {"a": ADD16_A.astype(np.int8)}, "int16"),
    (add_s16, "b", {"b": ADD16_B[:3]}, "shape"),
    (add_s16, "left_shift", {"left_shift": 17}, "[0, 16]"),
    (add_s16, "act_min", {"act_min": -(2**31) - 1}, "[-2147483648, 2147483647]"),
    (mul_s8, "a", {"a": MUL_A.astype(np.int32)}, "int8"),
    (mul_s8, "b", {"b": MUL_B[1:]}, "shape"),
    (mul_s8, "input_1_offset", {"input_1_offset": -128}, "[-127, 128]"),
    (mul_s8, "input_2_offset", {"input_2_offset": 200}, "[-127, 128]"),
    (mul_s8, "out_shift", {"out_shift": 31}, "[-31, 30]"),
    (mul_s8, "out_shift", {"out_shift": -32}, "[-31, 30]"),
    (mul_s16, "b", {"b": MUL16_B.astype(np.int8)}, "int16"),
    (mul_s16, "out_shift", {"out_shift": 31}, "[-31, 30]"),
]


@pytest.mark.parametrize(("call", "argument", "overrides", "hint"), BAD)
def test_bad_argument_is_rejected_by_name(
    call: Any, argument: str, overrides: dict[str, Any], hint: str
) -> None:
    with pytest.raises(KernelArgumentError) as err:
        call(**overrides)
    assert err.value.argument == argument
    assert f"'{argument}'" in str(err.value)
    assert hint in str(err.value)


@pytest.mark.parametrize(
    ("a", "b", "argument", "hint"),
    [
        (np.zeros(3, np.int16), np.zeros(3, np.int8), "a", "int8"),
        (np.zeros((1, 1, 2, 3), np.int8), np.zeros((1, 1, 2, 2), np.int8), "b", "axis C"),
        (np.zeros((2, 1, 1, 1), np.int8), np.zeros((3, 1, 1, 1), np.int8), "b", "axis N"),
        (np.zeros((1, 1, 1, 1, 1), np.int8), np.zeros(1, np.int8), "a", "1 to 4 dimensions"),
        (np.zeros(1, np.int8), np.zeros((0,), np.int8), "b", "non-empty"),
    ],
)
def test_maximum_rejects_bad_tensors_by_name(a: Any, b: Any, argument: str, hint: str) -> None:
    with pytest.raises(KernelArgumentError) as err:
        maximum_s8(a, b)
    assert err.value.argument == argument
    assert f"'{argument}'" in str(err.value)
    assert hint in str(err.value)
