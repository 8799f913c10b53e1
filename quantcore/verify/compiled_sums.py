"""TensorAccumulator's sums in one compiled pass (numba), with numpy's summation order: the same bits.

For a float reference f and int8 (or int16) values q with d = (q - zero_point) * scale (dequantized in
the loop for one scale; per channel along the last axis, by numpy first), one pass gives
    sum f f,  sum e e,  sum f d,  sum d d  (e = f - d, every product in float64),  max |e|,  max |f|
exactly as metrics._sums computes them with np.sum over the float64 arrays f * f, e * e, f * q, q * q.

np.sum over a float64 array that its reduction sees as one contiguous run adds 0.0 to numpy's pairwise
sum of the run (numpy/_core/src/umath/loops_utils.h.src, pairwise_sum):
    n < 8:          a plain loop;
    8 <= n <= 128:  eight accumulators r[j] += a[i + j] over whole groups of eight, combined as
                    ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the tail added one by one;
    n > 128:        the sums of a[:h] and a[h:] added, h = n // 2 rounded down to a multiple of 8.
Each product here is the same IEEE operation on the same float64 operands as numpy's elementwise pass
(float32 -> float64 is exact; (q - zp) is computed in float64 as numpy does), so the same tree of
additions gives the same bits. Which run numpy's reduction sees: _sums computes f * f in f's own layout
and sums it in memory order (numpy's iterator reduces in the order the elements lie in memory), and e,
f q and q q in C order (q is C-contiguous and a transposed f is copied to C order first). So f f is summed
over `memory` (f's elements in memory order) and the rest over `logical` (f in C order); for a
C-contiguous f the two are the same array (a transposed f is a view in memory order, and a gathered
copy in C order: a copy's pass, a fifth of the loop's time). Layouts this does not cover (f with gaps
or negative strides, q not C-contiguous) return None: the caller keeps numpy's path.
tests/verify/test_compiled_sums.py holds the bits to np.sum's on sizes from 1 to 10^6 and on the
layouts evaluate gives.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from quantcore.kernels import jit

_nb = jit.numba()
_CACHE = jit.caching()

Sums = tuple[tuple[float, float, float, float], float, float]
"""(sum f f, sum e e, sum f d, sum d d), max |e|, max |f|."""

_BLOCK = 128  # numpy's PW_BLOCKSIZE
_STACK = 256  # 3 tasks per halving: enough for any size (2 log2(n) + 3 < 256 for n < 2^63)


Six = tuple[float, float, float, float, float, float]
"""f f, e e, f d, d d summed, and max |e|, max |f|: one element's, or a range's."""


def _at(f: Any, g: Any, value: Any, zero_point: float, scale: float) -> Six:
    """One element's products (f f from g, its value in memory order; the rest from f) and magnitudes,
    in float64 (float32 -> float64 and int -> float64 are exact)."""
    f, g = np.float64(f), np.float64(g)
    d = (np.float64(value) - zero_point) * scale
    e = f - d
    return g * g, e * e, f * d, d * d, abs(e), abs(f)


def _add(a: Six, b: Six) -> Six:
    """a + b for the sums (in this order: numpy's), the larger for the magnitudes (a select, no branch)."""
    return (
        a[0] + b[0],
        a[1] + b[1],
        a[2] + b[2],
        a[3] + b[3],
        a[4] if a[4] > b[4] else b[4],
        a[5] if a[5] > b[5] else b[5],
    )


def _leaf(
    memory: npt.NDArray[np.floating[Any]],
    logical: npt.NDArray[np.floating[Any]],
    q: npt.NDArray[np.number[Any]],
    zero_point: float,
    scale: float,
    start: int,
    n: int,
) -> Six:
    """numpy's pairwise sums over elements [start, start + n), n <= 128 (the module docstring): eight
    accumulators (tuples, kept in registers) over whole groups of eight, then the tail."""
    f, g, v = logical[start : start + n], memory[start : start + n], q[start : start + n]
    total = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    whole = 0
    if n >= 8:
        whole = n - n % 8
        a0 = _at_(f[0], g[0], v[0], zero_point, scale)
        a1 = _at_(f[1], g[1], v[1], zero_point, scale)
        a2 = _at_(f[2], g[2], v[2], zero_point, scale)
        a3 = _at_(f[3], g[3], v[3], zero_point, scale)
        a4 = _at_(f[4], g[4], v[4], zero_point, scale)
        a5 = _at_(f[5], g[5], v[5], zero_point, scale)
        a6 = _at_(f[6], g[6], v[6], zero_point, scale)
        a7 = _at_(f[7], g[7], v[7], zero_point, scale)
        for i in range(8, whole, 8):
            a0 = _add_(a0, _at_(f[i], g[i], v[i], zero_point, scale))
            a1 = _add_(a1, _at_(f[i + 1], g[i + 1], v[i + 1], zero_point, scale))
            a2 = _add_(a2, _at_(f[i + 2], g[i + 2], v[i + 2], zero_point, scale))
            a3 = _add_(a3, _at_(f[i + 3], g[i + 3], v[i + 3], zero_point, scale))
            a4 = _add_(a4, _at_(f[i + 4], g[i + 4], v[i + 4], zero_point, scale))
            a5 = _add_(a5, _at_(f[i + 5], g[i + 5], v[i + 5], zero_point, scale))
            a6 = _add_(a6, _at_(f[i + 6], g[i + 6], v[i + 6], zero_point, scale))
            a7 = _add_(a7, _at_(f[i + 7], g[i + 7], v[i + 7], zero_point, scale))
        total = _add_(_add_(_add_(a0, a1), _add_(a2, a3)), _add_(_add_(a4, a5), _add_(a6, a7)))
    for i in range(whole, n):
        total = _add_(total, _at_(f[i], g[i], v[i], zero_point, scale))
    return total


def _all_sums(
    memory: npt.NDArray[np.floating[Any]],
    logical: npt.NDArray[np.floating[Any]],
    q: npt.NDArray[np.number[Any]],
    zero_point: float,
    scale: float,
) -> tuple[float, float, float, float, float, float]:
    """np.sum's result (0.0 plus the pairwise sum) for each product, then max |e| and max |f|.

    numpy's recursion (sum of the left half, sum of the right half, their sum) runs on explicit stacks:
    numba's cache cannot hold a recursive function. `tasks` holds (start, n, combine) - a range to sum,
    or the addition of the two sums on top of `results` - pushed so that the left half is summed first,
    then the right half, then the two added left + right, as numpy does."""
    tasks = np.empty((_STACK, 3), dtype=np.int64)
    results = np.empty((_STACK, 6))
    tasks[0, 0], tasks[0, 1], tasks[0, 2] = 0, q.size, 0
    pending, done = 1, 0
    while pending:
        pending -= 1
        start, n, combine = tasks[pending, 0], tasks[pending, 1], tasks[pending, 2]
        if combine:
            done -= 1
            for k in range(4):
                results[done - 1, k] = results[done - 1, k] + results[done, k]
            for k in range(4, 6):
                results[done - 1, k] = max(results[done - 1, k], results[done, k])
        elif n <= _BLOCK:
            leaf = _leaf_compiled(memory, logical, q, zero_point, scale, start, n)
            for k in range(6):
                results[done, k] = leaf[k]
            done += 1
        else:
            half = n // 2
            half -= half % 8
            tasks[pending, 0], tasks[pending, 1], tasks[pending, 2] = 0, 0, 1
            tasks[pending + 1, 0], tasks[pending + 1, 1], tasks[pending + 1, 2] = start + half, n - half, 0
            tasks[pending + 2, 0], tasks[pending + 2, 1], tasks[pending + 2, 2] = start, half, 0
            pending += 3
    s = results[0]
    return 0.0 + s[0], 0.0 + s[1], 0.0 + s[2], 0.0 + s[3], s[4], s[5]


_at_: Any = _nb.njit(cache=_CACHE, inline="always")(_at)
_add_: Any = _nb.njit(cache=_CACHE, inline="always")(_add)
_leaf_compiled: Any = _nb.njit(cache=_CACHE, nogil=True)(_leaf)
_all_sums_compiled: Any = _nb.njit(cache=_CACHE, nogil=True)(_all_sums)


def sums(
    reference: np.ndarray[Any, Any],
    q: np.ndarray[Any, Any],
    scale: float | np.ndarray[Any, Any],
    zero_point: int,
) -> Sums | None:
    """The sums and maxima of metrics._sums for `reference` and (q - zero_point) * scale (scale one float,
    or one per channel along the last axis), or None where the layouts are not covered (the module
    docstring) and the caller is to take numpy's path."""
    scales = np.asarray(scale, dtype=np.float64).reshape(-1)
    if (
        reference.dtype not in (np.float32, np.float64)
        or q.dtype.kind not in "iu"
        or q.dtype.itemsize > 4
        or reference.shape != q.shape
        or reference.size == 0
        or not q.flags.c_contiguous
        or (scales.size != 1 and (q.ndim == 0 or scales.size != q.shape[-1]))
    ):
        return None
    memory = _in_memory_order(reference)
    if memory is None:
        return None
    # C order: a transposed reference is gathered at about a copy's speed (much less than the loop)
    logical = memory if reference.flags.c_contiguous else np.ascontiguousarray(reference).reshape(-1)
    values, zero, factor = q.reshape(-1), float(zero_point), float(scales[0])
    if scales.size != 1:
        # per channel: numpy's dequantization first (the same float64 d), then (d - 0.0) * 1.0 = d in the
        # loop - a per-element channel index would cost the loop a division
        values, zero, factor = ((q.astype(np.float64) - zero_point) * scales).reshape(-1), 0.0, 1.0
    ff, ee, fd, dd, max_e, max_f = _all_sums_compiled(memory, logical, values, zero, factor)
    return (ff, ee, fd, dd), max_e, max_f


def _in_memory_order(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any] | None:
    """The elements of a dense array (one block, no gaps, no negative strides) in the order they lie in
    memory, as a 1-D view; None for any other array."""
    if array.flags.c_contiguous:
        return array.reshape(-1)
    order = sorted(range(array.ndim), key=lambda axis: -array.strides[axis])
    view = array.transpose(order)
    return view.reshape(-1) if view.flags.c_contiguous and min(array.strides) >= 0 else None
