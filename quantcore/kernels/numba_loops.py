"""The loops of quantcore.kernels.compiled, as numba compiles them: finish_s8's requantization and the
depthwise accumulation, element by element (the arithmetic, and why it matches the numpy reference:
compiled.py's docstring).

This module imports numba when it is imported. quantcore.kernels.jit builds its functions ahead of time
into an extension module (compiled.LOOPS names them and their argument types) and imports this module only
to build them, or where they cannot be built, to run them through numba's JIT.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from quantcore.kernels import jit

_nb = jit.numba()
_CACHE = jit.caching()

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
finish_rows = _nb.njit(cache=_CACHE, nogil=True)(_finish_rows)


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


depthwise = _nb.njit(cache=_CACHE, nogil=True)(_depthwise)


def _average_pool(
    x: npt.NDArray[np.int8],
    geometry: npt.NDArray[np.int64],
    act_min: int,
    act_max: int,
    sums: npt.NDArray[np.int64],
    out: npt.NDArray[np.int8],
) -> None:
    """out[n, oy, ox, c] = clamp(the window's sum over its taps inside the input, divided by their count
    as arm_avgpool_s8's C does: the midpoint away from zero), narrowed to int8 as astype does; geometry
    (kh, kw, stride_h, stride_w, pad_h, pad_w); sums: a (C,) scratch. A window holds an input pixel
    (pooling.py checks)."""
    batch, height, width, channels = x.shape
    _, out_h, out_w, _ = out.shape
    kh, kw, sh, sw, ph, pw = geometry[0], geometry[1], geometry[2], geometry[3], geometry[4], geometry[5]
    for n in range(batch):
        for oy in range(out_h):
            for ox in range(out_w):
                sums[:] = 0
                count = 0
                for ky in range(kh):
                    iy = oy * sh - ph + ky
                    if iy < 0 or iy >= height:
                        continue
                    for kx in range(kw):
                        ix = ox * sw - pw + kx
                        if ix < 0 or ix >= width:
                            continue
                        count += 1
                        pixel = x[n, iy, ix]
                        for c in range(channels):
                            sums[c] += pixel[c]
                half = count // 2
                row = out[n, oy, ox]
                for c in range(channels):
                    total = sums[c]
                    value = (total + half) // count if total > 0 else -((half - total) // count)
                    row[c] = min(max(value, act_min), act_max)


average_pool = _nb.njit(cache=_CACHE, nogil=True)(_average_pool)


def _one_channel_columns(
    padded: npt.NDArray[np.uint8], kernel: npt.NDArray[np.int64], out: npt.NDArray[np.uint8]
) -> None:
    """out[n, oy, ox, ky * kw + kx] = padded[n, oy + ky, ox + kx]: a padded one-channel input's im2col
    columns (Window.im2col's, C = 1) for a window of `kernel` (kh, kw) with unit stride and dilation. The
    innermost loop runs along an output row, for one tap, on vector registers; with the strides and
    dilations as variables the compiler kept it scalar (2.3x slower)."""
    batch = padded.shape[0]
    _, out_h, out_w, _ = out.shape
    kh, kw = kernel[0], kernel[1]
    for n in range(batch):
        for oy in range(out_h):
            for ky in range(kh):
                for kx in range(kw):
                    tap = ky * kw + kx
                    for ox in range(out_w):
                        out[n, oy, ox, tap] = padded[n, oy + ky, ox + kx]


one_channel_columns = _nb.njit(cache=_CACHE, nogil=True)(_one_channel_columns)
