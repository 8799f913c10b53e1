"""Bit-exact reference of CMSIS-NN's elementwise kernels: add and mul (s8, s16), maximum and minimum (s8).

Each function follows the pure-C path (no ARM_MATH_DSP / ARM_MATH_MVEI) of the CMSIS-NN kernel it names and
returns the array the compiled kernel writes. Add and mul requantize through arm_nn_requantize, so their
results depend on the build's rounding (`Rounding.DOUBLE` by default, `Rounding.SINGLE` when the firmware
defines CMSIS_NN_USE_SINGLE_ROUNDING); maximum and minimum only compare, so they have no rounding.

Add (TFLite's scheme): each input is offset, shifted left by `left_shift` for headroom, rescaled to a common
scale, the two are summed and the sum is rescaled to the output. Mul multiplies the offset inputs and
rescales the product once. The int16 variants keep the C signatures' offsets, which CMSIS-NN ignores
(int16 is quantized symmetrically): so does the reference, whatever their value (a zero int16 zero point is
the quant-params schema's rule).

Argument checks keep what the C needs to be defined (shifts it can shift by, a left_shift and input
offsets that keep (x + offset) << left_shift inside int32) and the multiplier range every build computes
alike; the output offset, the clamp and an add's rescaling shift are computed
as the C computes them for any int32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from quantcore.kernels._int import (
    I64,
    INT8_MAX,
    INT8_MIN,
    INT16_MAX,
    INT16_MIN,
    INT32_MAX,
    INT32_MIN,
    Args,
    wrap32,
)
from quantcore.kernels.requantize import Rounding, requantize

# arm_nn_requantize documents multiplier {NN_Q31_MIN + 1, Q32_MAX}: the MVE build's saturating doubling
# multiply parts from the pure-C one at NN_Q31_MIN. Its shift must be in [-31, 30]: 1 << shift and a right
# shift by -shift are undefined beyond.
MULT_RANGE = (INT32_MIN + 1, INT32_MAX)
SHIFT_RANGE = (-31, 30)
# arm_elementwise_add_s8/_s16 note "__SHIFT is expected to be <=0" (TFLite derives every add multiplier with
# QuantizeMultiplierSmallerThanOneExp), but the C runs arm_nn_requantize, defined for any shift in
# SHIFT_RANGE: a positive shift is the quantizer's and the schema's concern, not the kernel's.
ADD_SHIFT_RANGE = SHIFT_RANGE
# Input offsets stay in [-127, 128] (= -zero_point): max_left_shift below is derived from |x + offset| <= 255;
# with a wider offset the add's (x + offset) << left_shift and the mul's product can overflow int32,
# undefined in C. The output offset is any int32 (its C type): the C adds it to the requantized int32 and
# clamps (the schema keeps int8 zero points in [-128, 127]).
S8_INPUT_OFFSET_RANGE = (-127, 128)
S8_OUTPUT_OFFSET_RANGE = (INT32_MIN, INT32_MAX)


@dataclass(frozen=True)
class _Format:
    """An activation type: its exact numpy dtype, its value range and the add kernel's largest left_shift."""

    dtype: type[np.signedinteger[Any]]
    lo: int
    hi: int
    max_left_shift: int
    """The largest shift for which (x + offset) << left_shift still fits the C kernel's int32: |x + offset|
    is at most 255 for s8 (255 << 23 < 2^31) and 32768 for s16 (-32768 << 16 == INT32_MIN). Larger shifts
    overflow a signed int32 in C (undefined behaviour), so they are rejected."""


S8 = _Format(np.int8, INT8_MIN, INT8_MAX, max_left_shift=23)
S16 = _Format(np.int16, INT16_MIN, INT16_MAX, max_left_shift=16)


def elementwise_add_s8(
    a: npt.NDArray[np.int8],
    b: npt.NDArray[np.int8],
    *,
    input_1_offset: int,
    input_1_mult: int,
    input_1_shift: int,
    input_2_offset: int,
    input_2_mult: int,
    input_2_shift: int,
    left_shift: int,
    out_offset: int,
    out_mult: int,
    out_shift: int,
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
    rounding: Rounding = Rounding.DOUBLE,
) -> npt.NDArray[np.int8]:
    """arm_elementwise_add_s8 on two int8 arrays of equal shape; returns int8 of the same shape."""
    args = Args("arm_elementwise_add_s8")
    x1, x2 = _inputs(args, a, b, S8)
    off1 = args.integer("input_1_offset", input_1_offset, *S8_INPUT_OFFSET_RANGE)
    scale1 = _scale(args, "input_1", input_1_mult, input_1_shift, ADD_SHIFT_RANGE)
    off2 = args.integer("input_2_offset", input_2_offset, *S8_INPUT_OFFSET_RANGE)
    scale2 = _scale(args, "input_2", input_2_mult, input_2_shift, ADD_SHIFT_RANGE)
    shift_up = args.integer("left_shift", left_shift, 0, S8.max_left_shift)
    off_out = args.integer("out_offset", out_offset, *S8_OUTPUT_OFFSET_RANGE)
    scale_out = _scale(args, "out", out_mult, out_shift, ADD_SHIFT_RANGE)
    act = args.activation(act_min, act_max)
    total = _rescaled(x1 + off1, shift_up, scale1, rounding) + _rescaled(
        x2 + off2, shift_up, scale2, rounding
    )
    # The C adds two int32s; with extreme multipliers the sum can exceed int32 and wraps on the target.
    return _output(wrap32(total), scale_out, off_out, act, S8, rounding)


def elementwise_add_s16(
    a: npt.NDArray[np.int16],
    b: npt.NDArray[np.int16],
    *,
    input_1_mult: int,
    input_1_shift: int,
    input_2_mult: int,
    input_2_shift: int,
    left_shift: int,
    out_mult: int,
    out_shift: int,
    act_min: int = INT16_MIN,
    act_max: int = INT16_MAX,
    input_1_offset: int = 0,
    input_2_offset: int = 0,
    out_offset: int = 0,
    rounding: Rounding = Rounding.DOUBLE,
) -> npt.NDArray[np.int16]:
    """arm_elementwise_add_s16 on two int16 arrays of equal shape; returns int16 of the same shape.

    The offsets exist only to mirror the C signature: CMSIS-NN documents them as "Not used"."""
    args = Args("arm_elementwise_add_s16")
    x1, x2 = _inputs(args, a, b, S16)
    _unused_offsets(args, input_1_offset=input_1_offset, input_2_offset=input_2_offset, out_offset=out_offset)
    scale1 = _scale(args, "input_1", input_1_mult, input_1_shift, ADD_SHIFT_RANGE)
    scale2 = _scale(args, "input_2", input_2_mult, input_2_shift, ADD_SHIFT_RANGE)
    shift_up = args.integer("left_shift", left_shift, 0, S16.max_left_shift)
    scale_out = _scale(args, "out", out_mult, out_shift, ADD_SHIFT_RANGE)
    act = args.activation(act_min, act_max)
    total = _rescaled(x1, shift_up, scale1, rounding) + _rescaled(x2, shift_up, scale2, rounding)
    return _output(wrap32(total), scale_out, 0, act, S16, rounding)


def elementwise_mul_s8(
    a: npt.NDArray[np.int8],
    b: npt.NDArray[np.int8],
    *,
    input_1_offset: int,
    input_2_offset: int,
    out_offset: int,
    out_mult: int,
    out_shift: int,
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
    rounding: Rounding = Rounding.DOUBLE,
) -> npt.NDArray[np.int8]:
    """arm_elementwise_mul_s8 on two int8 arrays of equal shape; returns int8 of the same shape."""
    args = Args("arm_elementwise_mul_s8")
    x1, x2 = _inputs(args, a, b, S8)
    off1 = args.integer("input_1_offset", input_1_offset, *S8_INPUT_OFFSET_RANGE)
    off2 = args.integer("input_2_offset", input_2_offset, *S8_INPUT_OFFSET_RANGE)
    off_out = args.integer("out_offset", out_offset, *S8_OUTPUT_OFFSET_RANGE)
    scale_out = _scale(args, "out", out_mult, out_shift, SHIFT_RANGE)
    act = args.activation(act_min, act_max)
    # |x + offset| <= 255, so the int32 product in C cannot overflow.
    return _output((x1 + off1) * (x2 + off2), scale_out, off_out, act, S8, rounding)


def elementwise_mul_s16(
    a: npt.NDArray[np.int16],
    b: npt.NDArray[np.int16],
    *,
    out_mult: int,
    out_shift: int,
    act_min: int = INT16_MIN,
    act_max: int = INT16_MAX,
    input_1_offset: int = 0,
    input_2_offset: int = 0,
    out_offset: int = 0,
    rounding: Rounding = Rounding.DOUBLE,
) -> npt.NDArray[np.int16]:
    """arm_elementwise_mul_s16 on two int16 arrays of equal shape; returns int16 of the same shape.

    The offsets exist only to mirror the C signature: CMSIS-NN documents them as "Not used"."""
    args = Args("arm_elementwise_mul_s16")
    x1, x2 = _inputs(args, a, b, S16)
    _unused_offsets(args, input_1_offset=input_1_offset, input_2_offset=input_2_offset, out_offset=out_offset)
    scale_out = _scale(args, "out", out_mult, out_shift, SHIFT_RANGE)
    act = args.activation(act_min, act_max)
    # The largest product, (-32768)^2 = 2^30, still fits the C kernel's int32.
    return _output(x1 * x2, scale_out, 0, act, S16, rounding)


def maximum_s8(a: npt.NDArray[np.int8], b: npt.NDArray[np.int8]) -> npt.NDArray[np.int8]:
    """arm_maximum_s8: the larger of two int8 NHWC tensors, broadcasting size-1 axes as CMSIS-NN does."""
    return _extremum(Args("arm_maximum_s8"), np.maximum, a, b)


def minimum_s8(a: npt.NDArray[np.int8], b: npt.NDArray[np.int8]) -> npt.NDArray[np.int8]:
    """arm_minimum_s8: the smaller of two int8 NHWC tensors, broadcasting size-1 axes as CMSIS-NN does."""
    return _extremum(Args("arm_minimum_s8"), np.minimum, a, b)


def _extremum(args: Args, pick: np.ufunc, a: Any, b: Any) -> npt.NDArray[np.int8]:
    """Both tensors' shapes are (N, H, W, C) or right-aligned shorter (missing axes are 1, as TFLM pads
    them); the kernels take no offsets, multipliers or clamp, so the result is the raw pick."""
    x1 = args.array("a", a, np.int8)
    x2 = args.array("b", b, np.int8)
    dims_1 = _nhwc(args, "a", x1.shape)
    dims_2 = _nhwc(args, "b", x2.shape)
    for axis, (n1, n2) in zip("NHWC", zip(dims_1, dims_2, strict=True), strict=True):
        if n1 != n2 and 1 not in (n1, n2):
            raise args.fail("b", f"shape {x2.shape} does not broadcast against a's {x1.shape} (axis {axis})")
    _check_row_scalar(args, ("a", dims_1), ("b", dims_2))
    result: npt.NDArray[np.int8] = pick(x1, x2)
    return result


def _nhwc(args: Args, name: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    if not 1 <= len(shape) <= 4 or 0 in shape:
        raise args.fail(name, f"must be a non-empty NHWC tensor of 1 to 4 dimensions, got shape {shape}")
    return (1,) * (4 - len(shape)) + shape


def _check_row_scalar(args: Args, *inputs: tuple[str, tuple[int, ...]]) -> None:
    """Reject the one broadcast CMSIS-NN gets wrong: an input with H > 1 but W = C = 1 against one with
    W > 1. arm_maximum_s8/arm_minimum_s8 then treat each of its rows as a scalar but step its pointer by
    2 per row (the ++ and the height step both advance it), reading wrong values and past its end, so no
    reference can reproduce the output. Tiling that input along W (or reshaping it) avoids the path."""
    (name_1, dims_1), (name_2, dims_2) = inputs
    for name, mine, other in ((name_1, dims_1, dims_2), (name_2, dims_2, dims_1)):
        if mine[1] > 1 and mine[2] == 1 and mine[3] == 1 and other[2] > 1:
            raise args.fail(
                name,
                f"with NHWC shape {mine} (H > 1, W = C = 1) against width {other[2]} is mis-read by "
                f"{args.kernel} (it skips rows and reads past the end); tile it along W first",
            )


def _inputs(args: Args, a: Any, b: Any, fmt: _Format) -> tuple[I64, I64]:
    """Both inputs as int64, after checking their dtype exactly and that their shapes are equal (the C kernel
    walks both with one block_size, so it cannot broadcast)."""
    x1 = args.array("a", a, fmt.dtype)
    x2 = args.array("b", b, fmt.dtype, shape=x1.shape)
    return x1.astype(np.int64), x2.astype(np.int64)


def _scale(args: Args, prefix: str, mult: Any, shift: Any, shift_range: tuple[int, int]) -> tuple[int, int]:
    """A validated arm_nn_requantize (multiplier, shift), named `<prefix>_mult` and `<prefix>_shift`."""
    return (
        args.integer(f"{prefix}_mult", mult, *MULT_RANGE),
        args.integer(f"{prefix}_shift", shift, *shift_range),
    )


def _unused_offsets(args: Args, **offsets: Any) -> None:
    """An s16 kernel's offsets: int32s the C takes and ignores, so the reference ignores them too."""
    for name, value in offsets.items():
        args.integer(name, value, INT32_MIN, INT32_MAX)


def _rescaled(x: I64, left_shift: int, scale: tuple[int, int], rounding: Rounding) -> I64:
    """One add input (already offset) moved to the common scale: x << left_shift, then arm_nn_requantize."""
    return requantize(x << left_shift, scale[0], scale[1], rounding)


def _output(
    acc: I64, scale: tuple[int, int], offset: int, act: tuple[int, int], fmt: _Format, rounding: Rounding
) -> npt.NDArray[Any]:
    """arm_nn_requantize to the output scale, add the output offset in int32, clamp, narrow to the type."""
    out = wrap32(requantize(acc, scale[0], scale[1], rounding) + offset)
    return np.clip(out, act[0], act[1]).astype(fmt.dtype)
