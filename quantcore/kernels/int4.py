"""Reference of CMSIS-NN's int4-weight kernels: arm_convolve_s4 (and the wrapper's 1x1 and 1xN paths),
arm_depthwise_conv_s4, arm_depthwise_conv_s4_opt and arm_fully_connected_s4.

Weights are packed as TFLite packs int4 tensors: the tensor in the s8 kernel's layout (OHWI, (1, kh, kw,
C*ch_mult), [out][in]) read as one flat stream of two's-complement nibbles, value 2k in the low nibble of
byte k and value 2k+1 in its high nibble. Rows are not padded to a byte, so with an odd row length every
other row starts mid-byte; an odd total leaves the last high nibble unused. Each entry point therefore
takes the packed bytes and `weights_shape`, the shape of the unpacked tensor.

Once unpacked, the C computes what the s8 kernel computes (bias + sum((x + input_offset) * w) in int32,
arm_nn_requantize, output offset, clamp): the convolutions and the fully-connected layer call the s8
reference. One exception follows the C rather than the layout: with an odd number of input channels,
arm_depthwise_conv_s4 does not index the weights but walks them with a nibble cursor, and that walk
reads other weights than TFLite's once ch_mult > 1 or a window is clipped by the input's border (see
`_walked_weights`). arm_depthwise_conv_s4_opt reads the layout as it is.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from quantcore.errors import KernelArgumentError
from quantcore.kernels._int import INT8_MAX, INT8_MIN, Args
from quantcore.kernels.conv import (
    channel_quant,
    check_offsets,
    convolve_s8,
    depthwise_accumulate,
    depthwise_conv_s8,
    finish_s8,
)
from quantcore.kernels.fully_connected import fully_connected_s8
from quantcore.kernels.requantize import Rounding
from quantcore.kernels.window import Window, check_window

Int8Array = npt.NDArray[np.int8]
Pair = tuple[int, int]


def unpack_s4(packed: Int8Array, count: int) -> Int8Array:
    """The first `count` int4 values of `packed` (1-D int8, (count + 1) // 2 bytes) as int8, in order."""
    args = Args("unpack_s4")
    count = args.integer("count", count, 0, 2**31 - 1)
    return _unpack(args, "packed", packed, count)


def convolve_s4(
    x: Int8Array,
    weights: Int8Array,
    bias: npt.NDArray[np.int32] | None,
    *,
    weights_shape: tuple[int, int, int, int],
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
    """arm_convolve_s4: x NHWC, `weights` packed from an (out_ch, kh, kw, in_ch) tensor; no groups."""
    args = Args("arm_convolve_s4")
    x = args.array("input", x, np.int8, ndim=4)
    unpacked = _unpack_shaped(args, weights, weights_shape, 4)
    if unpacked.shape[3] != x.shape[3]:
        # The C takes kh * kw * input channels per filter row and never reads filter_dims->c.
        raise args.fail("weights_shape", f"input depth {unpacked.shape[3]} must be the input's {x.shape[3]}")
    with _reported_as(args.kernel):
        return convolve_s8(
            x,
            unpacked,
            bias,
            multiplier=multiplier,
            shift=shift,
            input_offset=input_offset,
            output_offset=output_offset,
            stride=stride,
            padding=padding,
            dilation=dilation,
            act_min=act_min,
            act_max=act_max,
            output_hw=output_hw,
            rounding=rounding,
        )


def depthwise_conv_s4(
    x: Int8Array,
    weights: Int8Array,
    bias: npt.NDArray[np.int32] | None,
    *,
    weights_shape: tuple[int, int, int, int],
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
    """arm_depthwise_conv_s4: `weights` packed from a (1, kh, kw, C*ch_mult) tensor."""
    args = Args("arm_depthwise_conv_s4")
    x = args.array("input", x, np.int8, ndim=4)
    unpacked = _unpack_shaped(args, weights, weights_shape, 4)
    ch_mult = _ch_mult(args, x, unpacked)
    quant = channel_quant(args, bias, multiplier, shift, unpacked.shape[3])
    offsets = check_offsets(args, input_offset, output_offset)
    clamp = args.activation(act_min, act_max)
    kernel = (unpacked.shape[1], unpacked.shape[2])
    window, hw = check_window(args, kernel, stride, padding, dilation, (x.shape[1], x.shape[2]), output_hw)

    if x.shape[3] % 2:
        acc = _walked_accumulate(x, unpacked, ch_mult, window, hw, offsets[0])
    else:
        acc = depthwise_accumulate(x, unpacked[0], ch_mult, window, hw, offsets[0])
    return finish_s8(acc, quant, offsets[1], clamp, rounding)


def depthwise_conv_s4_opt(
    x: Int8Array,
    weights: Int8Array,
    bias: npt.NDArray[np.int32] | None,
    *,
    weights_shape: tuple[int, int, int, int],
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
    """arm_depthwise_conv_s4_opt: ch_mult 1 and one batch only; the C ignores dilation, so none is taken."""
    args = Args("arm_depthwise_conv_s4_opt")
    x = args.array("input", x, np.int8, ndim=4)
    unpacked = _unpack_shaped(args, weights, weights_shape, 4)
    if unpacked.shape[3] != x.shape[3]:
        raise args.fail("weights_shape", f"must have as many channels as the input ({x.shape[3]}), ch_mult 1")
    if x.shape[0] != 1:
        # The C has no batch loop: it writes the first image's output and nothing else.
        raise args.fail("input", f"must hold one batch, got {x.shape[0]}")
    with _reported_as(args.kernel):
        return depthwise_conv_s8(
            x,
            unpacked,
            bias,
            multiplier=multiplier,
            shift=shift,
            input_offset=input_offset,
            output_offset=output_offset,
            stride=stride,
            padding=padding,
            act_min=act_min,
            act_max=act_max,
            output_hw=output_hw,
            rounding=rounding,
        )


def fully_connected_s4(
    x: Int8Array,
    weights: Int8Array,
    bias: npt.NDArray[np.int32] | None,
    *,
    weights_shape: tuple[int, int],
    multiplier: int,
    shift: int,
    input_offset: int,
    output_offset: int,
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
    rounding: Rounding = Rounding.DOUBLE,
) -> Int8Array:
    """arm_fully_connected_s4: per-tensor requantization, `weights` packed from an [out][in] tensor.

    The C ignores fc_params.filter_offset, so none is taken.
    """
    args = Args("arm_fully_connected_s4")
    unpacked = _unpack_shaped(args, weights, weights_shape, 2)
    multiplier = args.integer("multiplier", multiplier, -(2**31) + 1, 2**31 - 1)
    shift = args.integer("shift", shift, -31, 30)
    with _reported_as(args.kernel):
        return fully_connected_s8(
            x,
            unpacked,
            bias,
            multiplier=multiplier,
            shift=shift,
            input_offset=input_offset,
            output_offset=output_offset,
            act_min=act_min,
            act_max=act_max,
            rounding=rounding,
        )


def _unpack(args: Args, name: str, packed: Any, count: int) -> Int8Array:
    packed = args.array(name, packed, np.int8, ndim=1)
    if packed.size != (count + 1) // 2:
        raise args.fail(
            name, f"must hold {count} int4 values, two per byte: {(count + 1) // 2} bytes, got {packed.size}"
        )
    # Shifts on int8 are arithmetic, as in the C's (int8_t)(b << 4) >> 4 and b >> 4.
    nibbles = np.empty(2 * packed.size, dtype=np.int8)
    nibbles[0::2] = (packed << 4) >> 4
    nibbles[1::2] = packed >> 4
    return nibbles[:count]


def _unpack_shaped(args: Args, packed: Any, shape: Any, ndim: int) -> Int8Array:
    """`packed` unpacked and reshaped to `shape`, the unpacked weights' shape (`ndim` non-negative ints)."""
    if (
        not isinstance(shape, (tuple, list))
        or len(shape) != ndim
        or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in shape)
    ):
        raise args.fail("weights_shape", f"must be {ndim} non-negative integers, got {shape!r}")
    dims = tuple(int(d) for d in shape)
    return _unpack(args, "weights", packed, math.prod(dims)).reshape(dims)


def _ch_mult(args: Args, x: Int8Array, weights: Int8Array) -> int:
    one, _, _, out_ch = weights.shape
    in_ch = x.shape[3]
    if one != 1:
        raise args.fail("weights_shape", f"must be (1, kh, kw, C*ch_mult), got {weights.shape}")
    if in_ch == 0 or out_ch % in_ch:
        raise args.fail("weights_shape", f"output channels {out_ch} must be a multiple of input's {in_ch}")
    return int(out_ch // in_ch)


@contextlib.contextmanager
def _reported_as(kernel: str) -> Iterator[None]:
    """Argument errors of the s8 kernel an s4 one delegates to, reported under the s4 kernel's name."""
    try:
        yield
    except KernelArgumentError as err:
        raise KernelArgumentError(kernel, err.argument, err.problem) from None


def _walked_accumulate(
    x: Int8Array, weights: Int8Array, ch_mult: int, window: Window, hw: Pair, input_offset: int
) -> npt.NDArray[np.int64]:
    """Per tap: acc[..., j] += (x[..., j // ch_mult] + input_offset) * (the weight the C reads there)."""
    out_ch = weights.shape[3]
    table, row_class, col_class = _walked_weights(weights, ch_mult, window, hw, (x.shape[1], x.shape[2]))
    padded = window.pad(x.astype(np.int32) + input_offset, hw, fill=0)
    source = padded[..., np.arange(out_ch) // ch_mult]
    # int32 arithmetic wraps exactly like the C accumulator.
    acc = np.zeros((x.shape[0], hw[0], hw[1], out_ch), dtype=np.int32)
    for ky, kx, view in window.taps(source, hw):
        acc += view * table[row_class[:, None], col_class[None, :], ky, kx]
    return acc.astype(np.int64)


def _walked_weights(
    weights: Int8Array, ch_mult: int, window: Window, hw: Pair, input_hw: Pair
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """The weights arm_depthwise_conv_s4 reads with an odd number of input channels.

    Per output pixel it keeps a low/high flag and, per channel j, a byte pointer that each kernel row
    restarts at t * (in_ch // 2) * ch_mult + j // 2 + the high nibbles read so far (t: the row's first
    visited tap). Each visited tap (taps outside the input are skipped) reads one nibble, flips the flag
    and steps (in_ch // 2) * ch_mult bytes, plus one after a high nibble; between channels the flag
    flips once more unless the kernel has an odd number of taps. Worked out, the r-th tap visited for
    channel j, at tap index t = ky * kw + kx, reads nibble
        2 * t * (in_ch // 2) * ch_mult + 2 * (j // 2) + p + r,  p = j % 2 if V and kh * kw have the
                                                                    same parity, else 0
    where V is the number of taps the pixel visits. That is TFLite's t * C_out + j when ch_mult is 1 and
    the window is whole; otherwise it is another weight. The visited taps depend on the output row and
    column only, so the table holds one (kh, kw, C_out) set per row class and column class. No nibble
    index reaches past kh * kw * C_out - 1, so the unused nibble of an odd count is never read.
    """
    _, kh, kw, out_ch = weights.shape
    rows, row_class = _visited(window, 0, hw[0], input_hw[0])
    cols, col_class = _visited(window, 1, hw[1], input_hw[1])
    inside = rows[:, None, :, None] & cols[None, :, None, :]  # (row class, col class, ky, kx)
    first_y, count_y = rows.argmax(axis=1), rows.sum(axis=1)
    first_x, count_x = cols.argmax(axis=1), cols.sum(axis=1)
    ky = np.arange(kh)[None, None, :, None]
    kx = np.arange(kw)[None, None, None, :]
    rank = (ky - first_y[:, None, None, None]) * count_x[None, :, None, None] + (
        kx - first_x[None, :, None, None]
    )
    visits = count_y[:, None] * count_x[None, :]
    j = np.arange(out_ch)
    phase = (visits % 2 == (kh * kw) % 2)[:, :, None, None, None] * (j % 2)
    step = 2 * (out_ch // ch_mult // 2) * ch_mult
    nibble = (ky * kw + kx)[..., None] * step + 2 * (j // 2) + phase + rank[..., None]
    taken = np.where(inside[..., None], nibble, 0)
    table = np.where(inside[..., None], weights.ravel()[taken], 0).astype(np.int32)
    return table, row_class, col_class


def _visited(
    window: Window, axis: int, out: int, size: int
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.intp]]:
    """Along one axis: the distinct sets of in-bounds taps (class, tap) and each output position's class."""
    start = np.arange(out)[:, None] * window.stride[axis] - window.padding[axis]
    pos = start + np.arange(window.kernel[axis])[None, :] * window.dilation[axis]
    classes, inverse = np.unique((pos >= 0) & (pos < size), axis=0, return_inverse=True)
    return classes, inverse.ravel()
