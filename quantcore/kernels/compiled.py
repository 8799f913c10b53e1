"""finish_s8 as one compiled loop (numba): bias, requantization, output offset, clamp and the int8 narrowing
per element, with the per-channel constants read once per channel.

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
    """acc (rows, channels) -> out (rows, channels) int8, one row at a time (the constants, one row per
    channel - bias, multiplier, shift, the rounding nudge 2^(-shift - 1) - stay in cache)."""
    rows, channels = acc.shape
    for r in range(rows):
        for c in range(channels):
            m, s = constants[c, 1], constants[c, 2]
            v = _wrap(acc[r, c] + constants[c, 0])
            if single:
                x = _wrap((((v * m) >> (30 - s)) + 1) >> 1)
            else:
                if s > 0:
                    v = _wrap(v << s)
                x = (v * m + (1 << 30)) >> 31
                if s < 0:
                    x = (x + constants[c, 3] - (1 if x < 0 else 0)) >> -s
            out[r, c] = min(max(_wrap(x + output_offset), act_min), act_max)


_wrap = _nb.njit(cache=True, nogil=True)(_wrap32_int)
_finish_compiled: Any = _nb.njit(cache=True, nogil=True)(_finish_rows)


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
    constants = np.zeros((channels, 4), dtype=np.int64)
    if bias is not None:
        constants[:, 0] = bias
    constants[:, 1] = multiplier
    constants[:, 2] = shift
    constants[:, 3] = (np.int64(1) << np.maximum(-constants[:, 2], 0)) >> 1
    out = np.empty(rows.shape, dtype=np.int8)
    _finish_compiled(
        np.ascontiguousarray(rows), constants, single, int(output_offset), int(clamp[0]), int(clamp[1]), out
    )
    return out
