"""Reference of CMSIS-NN's int8 convolutions: arm_convolve_s8 (and its wrapper's fast paths, which compute
the same bytes: 1x1, 1xN) and arm_depthwise_conv_s8 (and its _opt / 3x3 variants).

Arithmetic per output element, as the C does it:
    acc = bias[o] + sum((x + input_offset) * w)          int32, padding contributes 0
    out = clamp(requantize(acc, multiplier[o], shift[o]) + output_offset, act_min, act_max)
The sum is computed as an im2col matrix product in float64: every operand and every partial sum is an
integer below 2^53 (|x + offset| <= 255, |w| <= 128, so K products stay below 2^15 * K), hence exact,
and BLAS makes it fast. The result is then wrapped to int32 as C's accumulator would be.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from quantcore.kernels._int import INT8_MAX, INT8_MIN, INT32_MAX, INT32_MIN, Args, wrap32
from quantcore.kernels.requantize import Rounding, requantize
from quantcore.kernels.window import Window, check_window

Int8Array = npt.NDArray[np.int8]
Pair = tuple[int, int]

# Bound on the float64 im2col matrix built at once; larger batches are processed in slices.
_IM2COL_BYTES = 64 * 2**20


def convolve_s8(
    x: Int8Array,
    weights: Int8Array,
    bias: npt.NDArray[np.int32] | None,
    *,
    multiplier: npt.NDArray[np.int32],
    shift: npt.NDArray[np.int32],
    input_offset: int,
    output_offset: int,
    stride: Pair = (1, 1),
    padding: Pair = (0, 0),
    dilation: Pair = (1, 1),
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
    output_hw: Pair | None = None,
    rounding: Rounding = Rounding.DOUBLE,
) -> Int8Array:
    """arm_convolve_s8: x NHWC, weights OHWI (grouped when C is a multiple of I), per-channel requant."""
    args = Args("arm_convolve_s8")
    x = args.array("input", x, np.int8, ndim=4)
    weights = args.array("weights", weights, np.int8, ndim=4)
    out_ch, kh, kw, group_ch = weights.shape
    in_ch = x.shape[3]
    if group_ch == 0 or in_ch % group_ch:
        raise args.fail("weights", f"input depth {group_ch} must divide the input's {in_ch} channels")
    groups = in_ch // group_ch
    if out_ch % groups:
        raise args.fail("weights", f"output channels {out_ch} must be a multiple of the {groups} groups")
    if groups > 1 and bias is None:
        # arm_convolve_s8 advances the bias pointer per group and reads through it: NULL crashes.
        raise args.fail("bias", "is required for a grouped convolution (pass zeros for none)")
    quant = channel_quant(args, bias, multiplier, shift, out_ch)
    offsets = check_offsets(args, input_offset, output_offset)
    clamp = args.activation(act_min, act_max, INT8_MIN, INT8_MAX)
    window, hw = check_window(args, (kh, kw), stride, padding, dilation, (x.shape[1], x.shape[2]), output_hw)

    acc = _conv_accumulate(x, weights, groups, window, hw, offsets[0])
    return finish_s8(acc, quant, offsets[1], clamp, rounding)


def depthwise_conv_s8(
    x: Int8Array,
    weights: Int8Array,
    bias: npt.NDArray[np.int32] | None,
    *,
    multiplier: npt.NDArray[np.int32],
    shift: npt.NDArray[np.int32],
    input_offset: int,
    output_offset: int,
    stride: Pair = (1, 1),
    padding: Pair = (0, 0),
    dilation: Pair = (1, 1),
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
    output_hw: Pair | None = None,
    rounding: Rounding = Rounding.DOUBLE,
) -> Int8Array:
    """arm_depthwise_conv_s8: weights (1, kh, kw, C*ch_mult); output channel c*ch_mult+m reads channel c."""
    args = Args("arm_depthwise_conv_s8")
    x = args.array("input", x, np.int8, ndim=4)
    weights = args.array("weights", weights, np.int8, ndim=4)
    one, kh, kw, out_ch = weights.shape
    in_ch = x.shape[3]
    if one != 1:
        raise args.fail("weights", f"must have shape (1, kh, kw, C*ch_mult), got {weights.shape}")
    if in_ch == 0 or out_ch % in_ch:
        raise args.fail("weights", f"output channels {out_ch} must be a multiple of the input's {in_ch}")
    quant = channel_quant(args, bias, multiplier, shift, out_ch)
    offsets = check_offsets(args, input_offset, output_offset)
    clamp = args.activation(act_min, act_max, INT8_MIN, INT8_MAX)
    window, hw = check_window(args, (kh, kw), stride, padding, dilation, (x.shape[1], x.shape[2]), output_hw)

    acc = depthwise_accumulate(x, weights[0], out_ch // in_ch, window, hw, offsets[0])
    return finish_s8(acc, quant, offsets[1], clamp, rounding)


def channel_quant(
    args: Args, bias: Any, multiplier: Any, shift: Any, channels: int
) -> tuple[np.ndarray[Any, Any] | None, np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Validate the per-output-channel bias (int32 or None), multiplier and shift."""
    if bias is not None:
        bias = args.array("bias", bias, np.int32, shape=(channels,))
    multiplier = args.array("multiplier", multiplier, np.int32, shape=(channels,))
    shift = args.array("shift", shift, np.int32, shape=(channels,))
    args.int_values("multiplier", multiplier, INT32_MIN + 1, INT32_MAX)
    args.int_values("shift", shift, -31, 30)
    return bias, multiplier, shift


def check_offsets(args: Args, input_offset: Any, output_offset: Any) -> tuple[int, int]:
    # input_offset is the negated input zero point, so it may be +128 but not -128.
    return (
        args.integer("input_offset", input_offset, -127, 128),
        args.integer("output_offset", output_offset, INT8_MIN, INT8_MAX),
    )


def _conv_accumulate(
    x: Int8Array, weights: Int8Array, groups: int, window: Window, hw: Pair, input_offset: int
) -> npt.NDArray[np.int64]:
    """sum((x + input_offset) * w) per output pixel and channel, grouped, in batch slices."""
    n = x.shape[0]
    out_ch, kh, kw, group_ch = weights.shape
    per_sample = hw[0] * hw[1] * kh * kw * x.shape[3] * 8
    step = max(1, _IM2COL_BYTES // max(per_sample, 1))
    out_per_group = out_ch // groups
    # (kh*kw*group_ch, out_ch) with rows in im2col order (ky, kx, c).
    w_cols = weights.reshape(out_ch, -1).T.astype(np.float64)
    acc = np.empty((n, hw[0], hw[1], out_ch), dtype=np.int64)
    for start in range(0, n, step):
        shifted = x[start : start + step].astype(np.float64) + input_offset
        # Padding is filled with -input_offset in the raw domain, i.e. 0 once the offset is added.
        padded = window.pad(shifted, hw, fill=0)
        for g in range(groups):
            part = padded[..., g * group_ch : (g + 1) * group_ch]
            cols = window.im2col(part, hw)
            o = slice(g * out_per_group, (g + 1) * out_per_group)
            acc[start : start + step, ..., o] = (cols @ w_cols[:, o]).astype(np.int64)
    return acc


def depthwise_accumulate(
    x: Int8Array, weights: Int8Array, ch_mult: int, window: Window, hw: Pair, input_offset: int
) -> npt.NDArray[np.int64]:
    """Per tap: acc[..., c, m] += (x[..., c] + input_offset) * w[ky, kx, c*ch_mult + m]."""
    n, _, _, in_ch = x.shape
    padded = window.pad(x.astype(np.int32) + input_offset, hw, fill=0)
    taps = weights.reshape(weights.shape[0], weights.shape[1], in_ch, ch_mult).astype(np.int32)
    # int32 arithmetic wraps exactly like the C accumulator.
    acc = np.zeros((n, hw[0], hw[1], in_ch, ch_mult), dtype=np.int32)
    for ky, kx, view in window.taps(padded, hw):
        acc += view[..., None] * taps[ky, kx]
    return acc.reshape(n, hw[0], hw[1], in_ch * ch_mult).astype(np.int64)


def finish_s8(
    acc: npt.NDArray[np.int64],
    quant: tuple[np.ndarray[Any, Any] | None, np.ndarray[Any, Any], np.ndarray[Any, Any]],
    output_offset: int,
    clamp: Pair,
    rounding: Rounding,
) -> Int8Array:
    """Add bias, requantize per channel (the last axis), add the output offset, clamp, narrow to int8."""
    bias, multiplier, shift = quant
    acc = wrap32(acc if bias is None else acc + bias.astype(np.int64))
    out = requantize(acc, multiplier, shift, rounding) + output_offset
    return np.clip(out, clamp[0], clamp[1]).astype(np.int8)
