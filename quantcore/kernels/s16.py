"""Reference of CMSIS-NN's int16-activation kernels, the per-layer option for error-sensitive layers:
arm_convolve_s16 (and its wrapper, which always calls it), arm_depthwise_conv_s16, arm_depthwise_conv_fast_s16
and arm_fully_connected_s16, as the pure-C build (neither ARM_MATH_DSP nor ARM_MATH_MVEI) computes them.

Activations are int16 with zero point 0: these kernels read no input or output offset, so none is taken.
Weights are int8. The bias decides the arithmetic, so the caller states its type:
- int64 bias (every kernel): an int64 accumulator, requantized by arm_nn_requantize_s64 with the Q31
  multiplier reduced to Q15 (REDUCE_MULTIPLIER) and one rounding, whichever rounding the build selects;
- int32 bias (arm_convolve_s16 only, cmsis_nn_bias_data.is_int32_bias): an int32 accumulator that wraps,
  requantized by arm_nn_requantize with the build's rounding, like the s8 kernels.
Sums are float64 matrix products or int64 tap sums. The float64 ones are exact: an int16 x int8 product is
at most 2^22 in magnitude, so a partial sum over K columns stays below 2^22 * K, an integer far below
2^53 for any K an array can hold; the int32 wrap-around of the C is then applied where it happens.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from quantcore.kernels._int import INT16_MAX, INT16_MIN, INT32_MAX, INT32_MIN, Args, wrap32
from quantcore.kernels.requantize import Rounding, reduce_multiplier, requantize, requantize_s64
from quantcore.kernels.window import Window, check_window

Int16Array = npt.NDArray[np.int16]
Int8Array = npt.NDArray[np.int8]
I64 = npt.NDArray[np.int64]
Pair = tuple[int, int]
Quant = tuple[I64, I64, I64]  # bias (zeros for NULL), multiplier, shift; all int64, one per output channel

# arm_nnsupportfunctions.h: the columns the s16 matrix kernels accumulate in int32 before going to int64.
MAX_COL_COUNT = 512
# arm_nn_requantize_s64 documents shift in [-31, 7], but it shifts an int64 right by 14 - shift, defined for
# any shift in [-49, 14] (every build runs that one scalar function; the int32 it narrows to keeps the low
# bits, as requantize_s64 models). arm_nn_requantize: 1 << shift and a right shift by -shift need [-31, 30].
SHIFT_S64 = (-49, 14)
SHIFT_S32 = (-31, 30)
# Bound on the float64 im2col matrix built at once; larger batches are processed in slices.
_IM2COL_BYTES = 64 * 2**20


def convolve_s16(
    x: Int16Array,
    weights: Int8Array,
    bias: npt.NDArray[np.int64] | npt.NDArray[np.int32] | None,
    *,
    multiplier: npt.NDArray[np.int32],
    shift: npt.NDArray[np.int32],
    int32_bias: bool = False,
    stride: Pair = (1, 1),
    padding: Pair = (0, 0),
    dilation: Pair = (1, 1),
    act_min: int = INT16_MIN,
    act_max: int = INT16_MAX,
    output_hw: Pair | None = None,
    rounding: Rounding = Rounding.DOUBLE,
) -> Int16Array:
    """arm_convolve_s16: x NHWC int16, weights OHWI int8 (no groups), per-channel requantization.

    `int32_bias` is cmsis_nn_bias_data.is_int32_bias: False takes an int64 `bias` (or None), True an int32
    one (or None); `rounding` only matters for the int32 path, the int64 path rounds once regardless.
    """
    args = Args("arm_convolve_s16")
    x = args.array("input", x, np.int16, ndim=4)
    weights = args.array("weights", weights, np.int8, ndim=4)
    out_ch, kh, kw, filter_ch = weights.shape
    if filter_ch != x.shape[3] or min(weights.shape) < 1:
        raise args.fail(
            "weights", f"must be (O, kh, kw, {x.shape[3]}) (no grouped s16 conv), got {weights.shape}"
        )
    quant = _conv_quant(args, bias, multiplier, shift, out_ch, int32_bias)
    clamp = args.activation(act_min, act_max)
    window, hw = check_window(args, (kh, kw), stride, padding, dilation, (x.shape[1], x.shape[2]), output_hw)
    _check_leftover_count(args, hw, kh * kw * filter_ch)

    acc = _conv_accumulate(x, weights, window, hw, int32_bias) + quant[0]
    if int32_bias:
        out = requantize(wrap32(acc), quant[1], quant[2], rounding)
    else:
        out = requantize_s64(acc, reduce_multiplier(quant[1]), quant[2])
    return _clamp(out, clamp)


def depthwise_conv_s16(
    x: Int16Array,
    weights: Int8Array,
    bias: npt.NDArray[np.int64] | None,
    *,
    multiplier: npt.NDArray[np.int32],
    shift: npt.NDArray[np.int32],
    stride: Pair = (1, 1),
    padding: Pair = (0, 0),
    dilation: Pair = (1, 1),
    act_min: int = INT16_MIN,
    act_max: int = INT16_MAX,
    output_hw: Pair | None = None,
) -> Int16Array:
    """arm_depthwise_conv_s16: weights (1, kh, kw, C*ch_mult); output channel c*ch_mult+m reads channel c."""
    args = Args("arm_depthwise_conv_s16")
    return _depthwise(
        args, x, weights, bias, multiplier, shift, stride, padding, dilation, (act_min, act_max), output_hw
    )


def depthwise_conv_fast_s16(
    x: Int16Array,
    weights: Int8Array,
    bias: npt.NDArray[np.int64] | None,
    *,
    multiplier: npt.NDArray[np.int32],
    shift: npt.NDArray[np.int32],
    stride: Pair = (1, 1),
    padding: Pair = (0, 0),
    act_min: int = INT16_MIN,
    act_max: int = INT16_MAX,
    output_hw: Pair | None = None,
) -> Int16Array:
    """arm_depthwise_conv_fast_s16: depthwise_conv_s16 restricted to ch_mult 1 and kh*kw < 512.

    It takes no dilation: the DSP build of the C ignores dilation while the pure-C build honours it, so
    CMSIS-NN's wrapper only picks this kernel for dilation 1 and so does this reference.
    """
    args = Args("arm_depthwise_conv_fast_s16")
    act = (act_min, act_max)
    return _depthwise(
        args, x, weights, bias, multiplier, shift, stride, padding, (1, 1), act, output_hw, fast=True
    )


def fully_connected_s16(
    x: Int16Array,
    weights: Int8Array,
    bias: npt.NDArray[np.int64] | None,
    *,
    multiplier: int,
    shift: int,
    act_min: int = INT16_MIN,
    act_max: int = INT16_MAX,
) -> Int16Array:
    """arm_fully_connected_s16: x (N, ...) flattening to (N, in), weights [out][in], per-tensor quant."""
    args = Args("arm_fully_connected_s16")
    x = args.array("input", x, np.int16)
    weights = args.array("weights", weights, np.int8, ndim=2)
    out_ch, depth = weights.shape
    if x.ndim < 2 or int(np.prod(x.shape[1:])) != depth:
        raise args.fail("input", f"must be (N, ...) with {depth} values per sample, got shape {x.shape}")
    bias64 = _bias(args, bias, out_ch, np.int64, "arm_fully_connected_s16 takes an int64 bias")
    mult = args.integer("multiplier", multiplier, INT32_MIN + 1, INT32_MAX)
    shft = args.integer("shift", shift, *SHIFT_S64)
    clamp = args.activation(act_min, act_max)

    # arm_nn_vec_mat_mult_t_s16 (pure C) accumulates every column in int64: no int32 stage to wrap.
    acc = _exact_dot(x.reshape(x.shape[0], depth), weights) + bias64
    return _clamp(requantize_s64(acc, reduce_multiplier(mult), shft), clamp)


def _conv_quant(args: Args, bias: Any, multiplier: Any, shift: Any, channels: int, int32_bias: Any) -> Quant:
    """Validate bias against the bias type the caller chose, and the per-channel multiplier and shift."""
    if not isinstance(int32_bias, bool):
        raise args.fail(
            "int32_bias", f"must be True or False (cmsis_nn_bias_data.is_int32_bias), got {int32_bias!r}"
        )
    if int32_bias:
        b = _bias(args, bias, channels, np.int32, "int32_bias=True selects the int32-bias path")
        return (b, *_channel_scales(args, multiplier, shift, channels, SHIFT_S32))
    b = _bias(
        args, bias, channels, np.int64, "pass int32_bias=True to select arm_convolve_s16's int32-bias path"
    )
    return (b, *_channel_scales(args, multiplier, shift, channels, SHIFT_S64))


def _bias(args: Args, bias: Any, channels: int, dtype: type[np.generic], hint: str) -> I64:
    """The bias as int64, zeros for None (a NULL bias adds nothing); its dtype must be the one the C reads."""
    if bias is None:
        return np.zeros(channels, dtype=np.int64)
    if isinstance(bias, np.ndarray) and bias.dtype != dtype:
        raise args.fail("bias", f"must have dtype {np.dtype(dtype).name}, got {bias.dtype.name}; {hint}")
    return args.array("bias", bias, dtype, shape=(channels,)).astype(np.int64)


def _channel_scales(
    args: Args, multiplier: Any, shift: Any, channels: int, shift_range: Pair
) -> tuple[I64, I64]:
    mult = args.array("multiplier", multiplier, np.int32, shape=(channels,))
    shft = args.array("shift", shift, np.int32, shape=(channels,))
    args.int_values("multiplier", mult, INT32_MIN + 1, INT32_MAX)
    args.int_values("shift", shft, *shift_range)
    return mult.astype(np.int64), shft.astype(np.int64)


def _check_leftover_count(args: Args, hw: Pair, depth: int) -> None:
    # With an odd number of output pixels per image, the pure-C arm_convolve_s16 computes the last one in
    # a separate loop whose column counter is a uint16_t: it would silently drop columns beyond 65535.
    if (hw[0] * hw[1]) % 2 and depth > 0xFFFF:
        raise args.fail(
            "weights",
            f"has kh*kw*C = {depth} columns; with an odd number of output pixels ({hw[0]}x{hw[1]}) the C's "
            "uint16_t column counter truncates more than 65535",
        )


def _conv_accumulate(x: Int16Array, weights: Int8Array, window: Window, hw: Pair, int32_bias: bool) -> I64:
    """sum(x * w) per output pixel and channel (padding reads 0). The int64 path's int32 stages are wrapped
    here; the int32 path is wrapped by the caller once the bias is in, as the C adds it in int32."""
    n = x.shape[0]
    out_ch = weights.shape[0]
    w_rows = weights.reshape(out_ch, -1)
    step = max(1, _IM2COL_BYTES // max(hw[0] * hw[1] * w_rows.shape[1] * 8, 1))
    acc = np.empty((n, hw[0] * hw[1], out_ch), dtype=np.int64)
    for start in range(0, n, step):
        padded = window.pad(x[start : start + step], hw, fill=0)
        cols = window.im2col(padded, hw).reshape(-1, hw[0] * hw[1], w_rows.shape[1])
        acc[start : start + step] = _split_sum(cols, w_rows, int32_bias)
    return acc.reshape(n, hw[0], hw[1], out_ch)


def _split_sum(cols: np.ndarray[Any, Any], w_rows: Int8Array, int32_bias: bool) -> I64:
    """The accumulator of each (image, pixel, channel) exactly as arm_convolve_s16 (pure C) builds it."""
    if int32_bias:
        # arm_nn_mat_mult_kernel_s16 keeps every column in int32 on this path; the caller wraps at the end.
        return _exact_dot(cols, w_rows)
    # Pixels go through arm_nn_mat_mult_kernel_s16 two at a time: the first MAX_COL_COUNT columns in int32,
    # the rest in int64.
    head = wrap32(_exact_dot(cols[..., :MAX_COL_COUNT], w_rows[:, :MAX_COL_COUNT]))
    acc = head + _exact_dot(cols[..., MAX_COL_COUNT:], w_rows[:, MAX_COL_COUNT:])
    if cols.shape[1] % 2:
        # The odd last pixel of each image is summed in arm_convolve_s16 itself, all columns in int32.
        acc[:, -1] = wrap32(acc[:, -1])
    return acc


def _depthwise(
    args: Args,
    x: Any,
    weights: Any,
    bias: Any,
    multiplier: Any,
    shift: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    act: tuple[Any, Any],
    output_hw: Any,
    fast: bool = False,
) -> Int16Array:
    """Validate and run a depthwise call; `fast` adds arm_depthwise_conv_fast_s16's argument checks."""
    x = args.array("input", x, np.int16, ndim=4)
    weights = args.array("weights", weights, np.int8, ndim=4)
    one, kh, kw, out_ch = weights.shape
    in_ch = x.shape[3]
    if one != 1 or min(weights.shape) < 1:
        raise args.fail("weights", f"must have shape (1, kh, kw, C*ch_mult), got {weights.shape}")
    if in_ch == 0 or out_ch % in_ch:
        raise args.fail("weights", f"output channels {out_ch} must be a multiple of the input's {in_ch}")
    if fast:
        _check_fast(args, kh * kw, out_ch // in_ch)
    bias64 = _bias(args, bias, out_ch, np.int64, f"{args.kernel} takes an int64 bias")
    mult, shft = _channel_scales(args, multiplier, shift, out_ch, SHIFT_S64)
    clamp = args.activation(act[0], act[1])
    window, hw = check_window(args, (kh, kw), stride, padding, dilation, (x.shape[1], x.shape[2]), output_hw)
    _check_uint16_dims(args, x.shape, (kh, kw, out_ch // in_ch), hw)

    acc = _depthwise_accumulate(x, weights[0], out_ch // in_ch, window, hw) + bias64
    return _clamp(requantize_s64(acc, reduce_multiplier(mult), shft), clamp)


def _check_fast(args: Args, taps: int, ch_mult: int) -> None:
    # The C returns ARM_CMSIS_NN_ARG_ERROR for both; the tap limit keeps the DSP build's int32 sums exact.
    if ch_mult != 1:
        raise args.fail(
            "weights", f"must have as many channels as the input (ch_mult 1), got ch_mult {ch_mult}"
        )
    if taps >= MAX_COL_COUNT:
        raise args.fail(
            "weights", f"kernel has {taps} taps; arm_depthwise_conv_fast_s16 needs fewer than 512"
        )


def _check_uint16_dims(
    args: Args, input_shape: tuple[int, ...], kernel: tuple[int, int, int], hw: Pair
) -> None:
    # depthwise_conv_s16_generic_s16 takes every dimension as a uint16_t: larger ones would be truncated.
    for name, dims in (("input", input_shape), ("weights", kernel), ("output_hw", hw)):
        if max(dims) > 0xFFFF:
            raise args.fail(name, f"dimensions {tuple(dims)} exceed 65535, which the C passes as uint16_t")


def _depthwise_accumulate(x: Int16Array, weights: Int8Array, ch_mult: int, window: Window, hw: Pair) -> I64:
    """Per tap: acc[..., c, m] += x[..., c] * w[ky, kx, c*ch_mult + m], in int64 like the C (taps outside
    the input are skipped by the C, i.e. they read 0)."""
    n, _, _, in_ch = x.shape
    padded = window.pad(x.astype(np.int64), hw, fill=0)
    taps = weights.reshape(weights.shape[0], weights.shape[1], in_ch, ch_mult).astype(np.int64)
    acc = np.zeros((n, hw[0], hw[1], in_ch, ch_mult), dtype=np.int64)
    for ky, kx, view in window.taps(padded, hw):
        acc += view[..., None] * taps[ky, kx]
    return acc.reshape(n, hw[0], hw[1], in_ch * ch_mult)


def _exact_dot(lhs: np.ndarray[Any, Any], rows: Int8Array) -> I64:
    """lhs @ rows.T in float64, exact (see the module docstring), returned as int64."""
    return (lhs.astype(np.float64) @ rows.T.astype(np.float64)).astype(np.int64)


def _clamp(values: I64, clamp: Pair) -> Int16Array:
    return np.clip(values, clamp[0], clamp[1]).astype(np.int16)
