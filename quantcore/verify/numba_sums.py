"""The loop of quantcore.verify.compiled_sums, as numba compiles it: the sums and maxima of one pass over
a float reference and int8 (or int16) values (what they are, the layouts, and the order of additions:
compiled_sums.py's docstring).

This module imports numba when it is imported; quantcore.kernels.jit imports it only to build the loop
ahead of time (compiled_sums.SUMS names it and its argument types), or where that cannot be done, to run
it through numba's JIT.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from quantcore.kernels import jit

_nb = jit.numba()
_CACHE = jit.caching()


def _block_py(
    f_row: npt.NDArray[np.floating[Any]],
    q_row: npt.NDArray[np.number[Any]],
    start: int,
    count: int,
    zero_point: float,
    s: float,
    divisor: np.float32,
    lanes: npt.NDArray[np.float64],
) -> None:
    """Elements start .. start + count of a row into lanes 0 .. count: one operation per lane, which the
    compiler runs on vector registers without reordering any addition. f is divided by `divisor` in its
    own type first, as numpy divides it (by 1 where nothing is divided: the same value)."""
    ff_l, ee_l, fd_l, dd_l, max_e_l, max_f_l = lanes[0], lanes[1], lanes[2], lanes[3], lanes[4], lanes[5]
    for lane in range(count):
        f0 = np.float64(f_row[start + lane] / divisor)
        d0 = (np.float64(q_row[start + lane]) - zero_point) * s
        e0 = f0 - d0
        ff_l[lane] += f0 * f0
        ee_l[lane] += e0 * e0
        fd_l[lane] += f0 * d0
        dd_l[lane] += d0 * d0
        # NaN compares false: a NaN leaves the maxima alone (and makes the sums NaN)
        abs_e, abs_f = abs(e0), abs(f0)
        max_e_l[lane] = abs_e if abs_e > max_e_l[lane] else max_e_l[lane]
        max_f_l[lane] = abs_f if abs_f > max_f_l[lane] else max_f_l[lane]


_block = _nb.njit(cache=_CACHE, inline="always")(_block_py)


def _rows(
    f: npt.NDArray[np.floating[Any]],
    q: npt.NDArray[np.number[Any]],
    zero_point: float,
    scales: npt.NDArray[np.float64],
    divisors: npt.NDArray[np.float32],
    lanes: npt.NDArray[np.float64],
) -> tuple[float, float, float, float, float, float]:
    """The sums and maxima over f / divisor and q, both (R, L) in the same order (f[r, i] pairs with
    q[r, i]); row r takes scale scales[r % scales.size] and divisor divisors[r % divisors.size].
    `lanes` (6, LANES) is scratch: the lane accumulators. Each row's elements go to the lanes in turn
    (element i to lane i % LANES, full blocks of LANES first, then the tail to the first lanes), a row's
    total is its lanes added in lane order, and the rows' totals are added in row order (module
    docstring of compiled_sums). The block's loop is one operation per lane on arrays of lanes: LLVM
    runs it on vector registers, without reordering any addition."""
    rows, length = f.shape
    width = lanes.shape[1]
    ff_l, ee_l, fd_l, dd_l = lanes[0], lanes[1], lanes[2], lanes[3]
    lanes[4:] = 0.0  # the maxima
    ff = ee = fd = dd = 0.0
    for r in range(rows):
        s, divisor = scales[r % scales.size], divisors[r % divisors.size]
        f_row, q_row = f[r], q[r]
        lanes[:4] = 0.0  # the row's sums
        start = 0
        while start + width <= length:  # whole blocks: the loop the compiler runs on vector registers
            _block(f_row, q_row, start, width, zero_point, s, divisor, lanes)
            start += width
        _block(f_row, q_row, start, length - start, zero_point, s, divisor, lanes)  # the tail
        row_ff = row_ee = row_fd = row_dd = 0.0
        for lane in range(width):
            row_ff += ff_l[lane]
            row_ee += ee_l[lane]
            row_fd += fd_l[lane]
            row_dd += dd_l[lane]
        ff += row_ff
        ee += row_ee
        fd += row_fd
        dd += row_dd
    max_e = max_f = 0.0
    for lane in range(width):
        max_e = max(max_e, lanes[4, lane])
        max_f = max(max_f, lanes[5, lane])
    return ff, ee, fd, dd, max_e, max_f


rows = _nb.njit(cache=_CACHE, nogil=True)(_rows)
