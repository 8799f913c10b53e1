"""Reference of CMSIS-NN's int8 transposed convolution: arm_transpose_conv_s8 and the wrapper that CMSIS-NN's
unit tests call, arm_transpose_conv_wrapper_s8 (which runs the "reverse" convolution when it can).

Input row i, column j with kernel tap (ky, kx) lands on row i*stride_h + ky, column j*stride_w + kx of a
full output; the result is that full output cropped from (pad_h, pad_w) to output_hw:
    full[y, x, o] = bias[o] + sum((input[i, j, c] + input_offset) * w[o, ky, kx, c])   over the taps that land
    out = clamp(requantize(full, multiplier[o], shift[o]) + output_offset, act_min, act_max)
in int32 arithmetic; positions no tap reaches hold the bias alone. Weights are (C_OUT, kh, kw, C_IN). The C
ignores transpose_conv_params.dilation and .padding_offsets, so neither is taken.

The two C paths compute those same bytes, each only for some geometries, and the reference rejects the
others rather than return bytes the C would not write:
- arm_transpose_conv_s8 accumulates into a rolling buffer of max(kh, stride_h) rows of
  (in_w - 1) * stride_w + max(kw, stride_w) columns and writes finished rows out as it goes. It writes
  in_h*stride_h - pad_h rows before the tail, so the output must have at least that many, and it can only
  produce rows and columns that its buffer holds (see `_check_rolling_buffer`). Its buffer-size function,
  arm_transpose_conv_s8_get_buffer_size, takes max(kw, stride_h) for the columns: with stride_w above both,
  the kernel writes past the buffer that function asks for, so size it from the formula here.
- With both strides at most 2 and more than 16 input channels, the wrapper instead calls arm_convolve_s8 on
  the input upscaled by the stride (gaps read as the zero point), with the kernel rotated by 180 degrees and
  padding kernel - 1 - pad; that padding is a uint16_t there, so pad must not exceed kernel - 1.
The products are summed by a float64 matrix product per batch slice, exact as in conv.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from quantcore.kernels._int import INT8_MAX, INT8_MIN, Args
from quantcore.kernels.conv import channel_quant, check_offsets, finish_s8
from quantcore.kernels.requantize import Rounding

Int8Array = npt.NDArray[np.int8]
I64 = npt.NDArray[np.int64]
Pair = tuple[int, int]

REVERSE_TCOL_EFFICIENT_THRESHOLD = 16
"""arm_nnsupportfunctions.h: the wrapper takes the reverse-conv path above this many input channels."""
# Bound on the float64 per-tap products built at once; larger batches are processed in slices.
_PRODUCT_BYTES = 64 * 2**20


@dataclass(frozen=True)
class _Geometry:
    input_hw: Pair
    kernel: Pair
    stride: Pair
    padding: Pair
    output_hw: Pair


def transpose_conv_s8(
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
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
    output_hw: Pair | None = None,
    rounding: Rounding = Rounding.DOUBLE,
) -> Int8Array:
    """arm_transpose_conv_s8: x NHWC, weights (C_OUT, kh, kw, C_IN), per-channel requantization.

    `output_hw` defaults to (in - 1) * stride + kernel - 2 * pad per axis.
    """
    args = Args("arm_transpose_conv_s8")
    x, weights = _operands(args, x, weights)
    quant = channel_quant(args, bias, multiplier, shift, weights.shape[0])
    offsets = check_offsets(args, input_offset, output_offset)
    clamp = args.activation(act_min, act_max)
    geo = _geometry(args, x, weights, stride, padding, output_hw)
    _check_rolling_buffer(args, geo)

    return finish_s8(_accumulate(x, weights, geo, offsets[0]), quant, offsets[1], clamp, rounding)


def transpose_conv_wrapper_s8(
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
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
    output_hw: Pair | None = None,
    rounding: Rounding = Rounding.DOUBLE,
) -> Int8Array:
    """arm_transpose_conv_wrapper_s8: transpose_conv_s8's arguments and bytes, with the argument checks of
    the path the wrapper takes for them (`uses_reverse_conv`)."""
    args = Args("arm_transpose_conv_wrapper_s8")
    x, weights = _operands(args, x, weights)
    quant = channel_quant(args, bias, multiplier, shift, weights.shape[0])
    offsets = check_offsets(args, input_offset, output_offset)
    clamp = args.activation(act_min, act_max)
    geo = _geometry(args, x, weights, stride, padding, output_hw)
    if uses_reverse_conv(geo.stride, x.shape[3]):
        _check_reverse_conv(args, geo, x.shape[3], weights.shape[0])
    else:
        _check_rolling_buffer(args, geo)

    return finish_s8(_accumulate(x, weights, geo, offsets[0]), quant, offsets[1], clamp, rounding)


def uses_reverse_conv(stride: Pair, in_ch: int) -> bool:
    """Whether arm_transpose_conv_wrapper_s8 runs arm_convolve_s8 on the upscaled input (it then needs
    arm_transpose_conv_s8_get_reverse_conv_buffer_size bytes for the rotated kernel)."""
    return max(stride) <= 2 and in_ch > REVERSE_TCOL_EFFICIENT_THRESHOLD


def _operands(args: Args, x: Any, weights: Any) -> tuple[Int8Array, Int8Array]:
    x = args.array("input", x, np.int8, ndim=4)
    weights = args.array("weights", weights, np.int8, ndim=4)
    if weights.shape[3] != x.shape[3] or min(weights.shape[:3]) < 1:
        raise args.fail("weights", f"must be (C_OUT, kh, kw, {x.shape[3]}), got shape {weights.shape}")
    if min(x.shape[1:3]) < 1:
        raise args.fail("input", f"must have at least one row and column, got shape {x.shape}")
    return x, weights


def _geometry(
    args: Args, x: Int8Array, weights: Int8Array, stride: Any, padding: Any, output_hw: Any
) -> _Geometry:
    input_hw, kernel = (x.shape[1], x.shape[2]), (weights.shape[1], weights.shape[2])
    s = args.pair("stride", stride, 1)
    p = args.pair("padding", padding, 0)
    if output_hw is None:
        hw = tuple((i - 1) * st + k - 2 * pd for i, st, k, pd in zip(input_hw, s, kernel, p, strict=True))
        if min(hw) < 1:
            raise args.fail("padding", f"{p} leaves no output for input {input_hw} and kernel {kernel}")
        return _Geometry(input_hw, kernel, s, p, (hw[0], hw[1]))
    return _Geometry(input_hw, kernel, s, p, args.pair("output_hw", output_hw, 1))


def _check_rolling_buffer(args: Args, geo: _Geometry) -> None:
    """The geometries for which arm_transpose_conv_s8's rolling buffer writes exactly the output."""
    (ih, iw), (kh, kw), (sh, sw) = geo.input_hw, geo.kernel, geo.stride
    (ph, pw), (oh, ow) = geo.padding, geo.output_hw
    if ph > ih * sh:
        # Its tail pass assumes the buffer's first row is full row in_h*stride_h; it is row pad_h.
        raise args.fail("padding", f"pad_h {ph} exceeds in_h * stride_h = {ih * sh}")
    if oh < ih * sh - ph:
        # Each input row flushes stride_h finished rows; these would run past the output.
        raise args.fail("output_hw", f"height {oh} is below in_h * stride_h - pad_h = {ih * sh - ph}")
    rows, cols = (ih - 1) * sh + max(kh, sh), (iw - 1) * sw + max(kw, sw)
    if ph + oh > rows:
        raise args.fail("output_hw", f"height {oh} with pad_h {ph} reaches past the {rows} rows computed")
    if pw + ow > cols:
        # Reading past a buffer row takes the next row's (or memory past the buffer's) values.
        raise args.fail("output_hw", f"width {ow} with pad_w {pw} reaches past the {cols} columns computed")


def _check_reverse_conv(args: Args, geo: _Geometry, in_ch: int, out_ch: int) -> None:
    """The geometries that the wrapper's arm_convolve_s8 call, with its uint16_t dimensions, computes."""
    limit = (geo.kernel[0] - 1, geo.kernel[1] - 1)
    if geo.padding[0] > limit[0] or geo.padding[1] > limit[1]:
        # kernel - 1 - pad is arm_convolve_s8's padding, a uint16_t: a negative one wraps to ~65535.
        raise args.fail("padding", f"{geo.padding} exceeds kernel - 1 = {limit} on the reverse-conv path")
    upscaled = (geo.input_hw[0] * geo.stride[0], geo.input_hw[1] * geo.stride[1])
    for name, dims in (
        ("input", (*upscaled, in_ch)),
        ("weights", (out_ch, *geo.kernel)),
        ("output_hw", geo.output_hw),
    ):
        if max(dims) > 0xFFFF:
            raise args.fail(name, f"dimensions {dims} exceed 65535, which arm_convolve_s8 takes as uint16_t")
    depth = geo.kernel[0] * geo.kernel[1] * in_ch
    if (geo.output_hw[0] * geo.output_hw[1]) % 2 and depth > 0xFFFF:
        # The odd last output pixel is summed in a loop whose uint16_t counter would drop columns.
        raise args.fail("weights", f"has kh*kw*C_IN = {depth} columns, over the 65535 the C can sum")


def _accumulate(x: Int8Array, weights: Int8Array, geo: _Geometry, input_offset: int) -> I64:
    """The cropped full output per image, pixel and channel, without the bias, in int64."""
    n, ih, iw, in_ch = x.shape
    out_ch, kh, kw, _ = weights.shape
    (sh, sw), (ph, pw), (oh, ow) = geo.stride, geo.padding, geo.output_hw
    rows = max((ih - 1) * sh + kh, ph + oh)
    cols = max((iw - 1) * sw + kw, pw + ow)
    # (C_IN, kh*kw*C_OUT): one matrix product yields every tap's contribution of every input pixel.
    taps = weights.transpose(3, 1, 2, 0).reshape(in_ch, kh * kw * out_ch).astype(np.float64)
    step = max(1, _PRODUCT_BYTES // max(ih * iw * taps.shape[1] * 8, 1))
    out = np.empty((n, oh, ow, out_ch), dtype=np.int64)
    for start in range(0, n, step):
        batch = x[start : start + step]
        shifted = batch.reshape(-1, in_ch).astype(np.float64) + input_offset
        products = (shifted @ taps).astype(np.int64).reshape(batch.shape[0], ih, iw, kh, kw, out_ch)
        full = np.zeros((batch.shape[0], rows, cols, out_ch), dtype=np.int64)
        for ky in range(kh):
            for kx in range(kw):
                hit_rows = slice(ky, ky + (ih - 1) * sh + 1, sh)
                hit_cols = slice(kx, kx + (iw - 1) * sw + 1, sw)
                full[:, hit_rows, hit_cols] += products[:, :, :, ky, kx]
        out[start : start + step] = full[:, ph : ph + oh, pw : pw + ow]
    return out
