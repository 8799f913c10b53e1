"""finish_s8 as one compiled loop (numba): bias, requantization, output offset, clamp and the int8 narrowing
per element, in one pass.

The arithmetic is `requantize` (kernels/requantize.py) and `clamp_offset_s8` (kernels/conv.py) written
element by element, in int64 as numpy computes it:
    v   = wrap32(acc + bias)                          (a no-op where the numpy path proves no wrap)
    out = requantize(v, multiplier, shift, rounding)  (double rounding with its left shift, or single)
    y   = int8(clamp(wrap32(out + output_offset), act_min, act_max))
numpy's path wraps only when it finds (or cannot rule out) a value outside int32; a wrap of a value in
range changes nothing, so wrapping always gives the same integers. requantize_int32 and BiasedRequantize
are rearrangements of `requantize` for the same values (their docstrings), so this loop matches them
too. numba's int64 arithmetic is two's complement like numpy's, `>>` on a signed integer is arithmetic,
and the int8 cast keeps the low bits (as astype does): tests/kernels/test_compiled.py holds both paths
to the same bytes. The depthwise accumulation, arm_avgpool_s8 and a one-channel input's im2col columns
have a compiled pass here too, held to their numpy references the same way. The loops themselves are in
quantcore.kernels.numba_loops; LOOPS names them and their argument types, under which
quantcore.kernels.jit builds them ahead of time (or, where it cannot, compiles them with numba in the
process). Imported by conv.py and pooling.py where quantcore.kernels.jit says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from quantcore.kernels import jit
from quantcore.kernels.jit import Array, Export
from quantcore.kernels.window import Window

_ROW = 32  # values in a row of the finish loop at least (finish_rows)

LOOPS = jit.Loops(
    "quantcore.kernels.numba_loops",
    (
        *(
            Export(
                f"finish_rows_{sums}",
                (Array(sums, 2), Array("int64", 2), "boolean", "int64", "int64", "int64", Array("int8", 2)),
                function="finish_rows",
            )
            for sums in ("int64", "int32")  # any accumulator; int_gemm's int32 sums as they come
        ),
        Export(
            "depthwise",
            (Array("int8", 4), Array("int8", 3), Array("int64", 1), "int64", Array("int64", 4)),
        ),
        Export("one_channel_columns", (Array("uint8", 3), Array("int64", 1), Array("uint8", 4))),
        Export(
            "average_pool",
            (Array("int8", 4), Array("int64", 1), "int64", "int64", Array("int64", 1), Array("int8", 4)),
        ),
    ),
)


def depthwise_accumulate(
    x: npt.NDArray[np.int8],
    weights: npt.NDArray[np.int8],
    ch_mult: int,
    geometry: tuple[tuple[int, int], tuple[int, int], tuple[int, int]],
    hw: tuple[int, int],
    input_offset: int,
) -> npt.NDArray[np.int64]:
    """conv.depthwise_accumulate's result (weights (kh, kw, C*ch_mult); geometry: stride, padding,
    dilation): each output pixel's taps summed in int64 and wrapped to int32 once - the C accumulator's
    wrap-around is modular, so this equals both numpy paths (float32 where exact, else int32)."""
    (sh, sw), (ph, pw), (dh, dw) = geometry
    acc = np.empty((x.shape[0], hw[0], hw[1], weights.shape[2]), dtype=np.int64)
    numbers = np.array([sh, sw, ph, pw, dh, dw, ch_mult], dtype=np.int64)
    jit.functions(LOOPS).depthwise(
        np.ascontiguousarray(x), np.ascontiguousarray(weights), numbers, int(input_offset), acc
    )
    return acc


def finish_rows(
    rows: npt.NDArray[np.int64] | npt.NDArray[np.int32],
    bias: npt.NDArray[np.integer[Any]] | None,
    multiplier: npt.NDArray[np.integer[Any]],
    shift: npt.NDArray[np.integer[Any]],
    single: bool,
    output_offset: int,
    clamp: tuple[int, int],
) -> npt.NDArray[np.int8]:
    """finish_s8 over accumulators (int64 or int32) laid out (rows, channels): the int8 result, (rows,
    channels)."""
    channels = rows.shape[1]
    shift = shift.astype(np.int64)
    right = np.maximum(-shift, 0)
    constants = np.stack(
        [
            np.zeros(channels, np.int64) if bias is None else bias.astype(np.int64),
            multiplier.astype(np.int64),
            np.maximum(shift, 0),  # double rounding's left shift (C: val * (1 << left), in int32)
            right,  # its rounding right shift
            (np.int64(1) << right) >> 1,  # its nudge 2^(right - 1), 0 without a shift
            -(right > 0).astype(np.int64),  # -1 where a negative x takes one less nudge, else 0
            30 - shift,  # single rounding: (v M) >> (31 - shift - 1), then (x + 1) >> 1
        ]
    )
    sums: npt.NDArray[Any] = np.ascontiguousarray(rows)
    finish = getattr(jit.functions(LOOPS), f"finish_rows_{sums.dtype}")
    out = np.empty(sums.shape, dtype=np.int8)
    limits = (int(output_offset), int(clamp[0]), int(clamp[1]))
    # Few channels make a short inner loop (6 channels: 5.8 ns a value against 0.45 from 16 up): whole
    # groups of `widen` rows run as one row of at least _ROW values, the constants tiled to match.
    widen = max(1, -(-_ROW // max(channels, 1)))
    whole = len(sums) // widen * widen if widen > 1 else 0
    if whole:
        wide = (whole // widen, widen * channels)
        finish(
            sums[:whole].reshape(wide), np.tile(constants, widen), single, *limits, out[:whole].reshape(wide)
        )
    finish(sums[whole:], constants, single, *limits, out[whole:])
    return out


def average_pool_s8(
    x: npt.NDArray[np.int8],
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, int],
    hw: tuple[int, int],
    act: tuple[int, int],
) -> npt.NDArray[np.int8]:
    """arm_avgpool_s8's bytes (a call pooling.py has checked) in one pass."""
    x = np.ascontiguousarray(x)
    geometry = np.array([*kernel, *stride, *padding], dtype=np.int64)
    out = np.empty((x.shape[0], hw[0], hw[1], x.shape[3]), dtype=np.int8)
    scratch = np.empty(x.shape[3], dtype=np.int64)
    jit.functions(LOOPS).average_pool(x, geometry, act[0], act[1], scratch, out)
    return out


def one_channel_columns(
    padded: npt.NDArray[np.uint8], window: Window, hw: tuple[int, int]
) -> npt.NDArray[np.uint8]:
    """Window.im2col's columns of a padded one-channel uint8 input (N, H, W, 1) (an image's first layer,
    on the integer product's path) for a window of unit stride and dilation: (N, oh, ow, kh * kw). numpy
    copies each tap's view into its column of the whole batch, a strided pass per tap; this loop does the
    same per output row, in cache: LeNet-5's first layer (5 x 5 taps over 28 x 28, 10,000 images)
    0.090 -> 0.052 s."""
    assert window.stride == window.dilation == (1, 1), "unit stride and dilation only"
    kernel = np.array(window.kernel, dtype=np.int64)
    out = np.empty((padded.shape[0], hw[0], hw[1], window.kernel[0] * window.kernel[1]), dtype=np.uint8)
    jit.functions(LOOPS).one_channel_columns(np.ascontiguousarray(padded[..., 0]), kernel, out)
    return out
