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
to the same bytes. Imported only by finish_s8, when quantcore.kernels.jit says so (it loads numba).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from quantcore.kernels import jit

_nb = jit.numba()
_CACHE = jit.caching()

_ROW = 32  # values in a row of the finish loop at least (finish_rows)
_INT32_SPAN = 1 << 32
_INT32_BIAS = 1 << 31


def _wrap32_int(value: int) -> int:
    return ((value + _INT32_BIAS) & (_INT32_SPAN - 1)) - _INT32_BIAS


def _finish_rows(
    acc: npt.NDArray[np.int64],
    constants: npt.NDArray[np.int64],
    single: bool,
    output_offset: int,
    act_min: int,
    act_max: int,
    out: npt.NDArray[np.int8],
) -> None:
    """acc (rows, channels) -> out (rows, channels) int8, one row at a time. `constants` holds a row per
    constant and a column per channel (see finish_rows); the loop has no branch on a channel's shift (a
    left shift by 0 and a right shift by 0 with a 0 nudge change nothing), so LLVM vectorizes it."""
    rows, channels = acc.shape
    bias, multiplier, left, right = constants[0], constants[1], constants[2], constants[3]
    nudge, rounds, single_shift = constants[4], constants[5], constants[6]
    for r in range(rows):
        for c in range(channels):
            v = _wrap(acc[r, c] + bias[c])
            if single:
                x = _wrap((((v * multiplier[c]) >> single_shift[c]) + 1) >> 1)
            else:
                v = _wrap(v << left[c])
                x = (v * multiplier[c] + (1 << 30)) >> 31
                # the midpoint away from zero: one less nudge for a negative x where there is a shift
                x = (x + nudge[c] + ((x >> 63) & rounds[c])) >> right[c]
            out[r, c] = min(max(_wrap(x + output_offset), act_min), act_max)


_wrap = _nb.njit(cache=_CACHE, inline="always")(_wrap32_int)
_finish_compiled: Any = _nb.njit(cache=_CACHE, nogil=True)(_finish_rows)


def _depthwise(
    x: npt.NDArray[np.int8],
    weights: npt.NDArray[np.int8],
    geometry: npt.NDArray[np.int64],
    input_offset: int,
    acc: npt.NDArray[np.int64],
) -> None:
    """acc[n, oy, ox, c*ch_mult + m] = wrap32(sum over the taps inside the input of
    (x[n, iy, ix, c] + input_offset) * weights[ky, kx, c*ch_mult + m]); `geometry` is
    (stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, ch_mult)."""
    batch, height, width, channels = x.shape
    kh, kw, _ = weights.shape
    _, out_h, out_w, _ = acc.shape
    sh, sw, ph, pw, dh, dw, ch_mult = geometry
    for n in range(batch):
        for oy in range(out_h):
            for ox in range(out_w):
                row = acc[n, oy, ox]
                row[:] = 0
                for ky in range(kh):
                    iy = oy * sh - ph + ky * dh
                    if iy < 0 or iy >= height:
                        continue  # padding: (fill + offset) * w = 0
                    for kx in range(kw):
                        ix = ox * sw - pw + kx * dw
                        if ix < 0 or ix >= width:
                            continue
                        pixel, tap = x[n, iy, ix], weights[ky, kx]
                        if ch_mult == 1:
                            for c in range(channels):
                                row[c] += (np.int64(pixel[c]) + input_offset) * np.int64(tap[c])
                        else:
                            for c in range(channels):
                                value = np.int64(pixel[c]) + input_offset
                                for m in range(ch_mult):
                                    row[c * ch_mult + m] += value * np.int64(tap[c * ch_mult + m])
                for o in range(row.size):
                    row[o] = _wrap(row[o])


_depthwise_compiled: Any = _nb.njit(cache=_CACHE, nogil=True)(_depthwise)


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
    _depthwise_compiled(
        np.ascontiguousarray(x), np.ascontiguousarray(weights), numbers, int(input_offset), acc
    )
    return acc


def finish_rows(
    rows: npt.NDArray[np.int64],
    bias: npt.NDArray[np.integer[Any]] | None,
    multiplier: npt.NDArray[np.integer[Any]],
    shift: npt.NDArray[np.integer[Any]],
    single: bool,
    output_offset: int,
    clamp: tuple[int, int],
) -> npt.NDArray[np.int8]:
    """finish_s8 over accumulators laid out (rows, channels): the int8 result, (rows, channels)."""
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
    rows = np.ascontiguousarray(rows)
    out = np.empty(rows.shape, dtype=np.int8)
    limits = (int(output_offset), int(clamp[0]), int(clamp[1]))
    # Few channels make a short inner loop (6 channels: 5.8 ns a value against 0.45 from 16 up): whole
    # groups of `widen` rows run as one row of at least _ROW values, the constants tiled to match.
    widen = max(1, -(-_ROW // max(channels, 1)))
    whole = len(rows) // widen * widen if widen > 1 else 0
    if whole:
        wide = (whole // widen, widen * channels)
        _finish_compiled(
            rows[:whole].reshape(wide), np.tile(constants, widen), single, *limits, out[:whole].reshape(wide)
        )
    _finish_compiled(rows[whole:], constants, single, *limits, out[whole:])
    return out
