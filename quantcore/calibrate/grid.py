"""The power-of-two bin grid under every calibration histogram, and the binning of a batch onto it.

A grid is an exponent e: bins have width w = 2^e and edges at integer multiples of w, so zero is always an
edge. Bin k holds x with floor(|x| / w) = k for x >= 0, and floor(|x| / w) = -k - 1 for x < 0; that is
[k*w, (k+1)*w) on the right of zero and (k*w, (k+1)*w] on the left, mirror images of each other.

Why this layout:
- Exact coarsening. Doubling the width maps bin k to k >> 1 (an arithmetic shift, on both sides of
  zero), so counts binned at a fine width and coarsened equal counts binned at the coarse width directly.
- Exact arithmetic. |x| * 2^-e is exact in float32 unless it underflows, and an underflowing product is
  below 1, where truncation gives 0 either way; the signed form trunc(x * 2^-e) - (x < 0) computes the
  same index. The bin of a value is thus a function of the value and e alone, with no rounding.
- A canonical width. For a range [lo, hi] the grid is the smallest e (not below two floors, below)
  whose bins from bin(lo) to bin(hi) number at most `capacity`. That number only falls as e grows and
  only rises as the range widens, so the grid of a union of data sets is the same whatever order, or
  however split, the data arrived in: that makes merging exact (see histogram.py).

The floors keep every product in range: e >= -126 (2^126 is a normal float32) and 2^e >= max|x| * 2^-24
(bins finer than float32's resolution at the largest magnitude would tell nothing), which also bounds
every bin index by 2^25.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

Counts = npt.NDArray[np.int64]

MIN_EXPONENT = -126
PRECISION_BITS = 24
_CHUNK = 1 << 16  # values binned per step: keeps the temporaries in L2 cache
_MAX_SHIFT = 63  # an int64 shifted right by 63 is already 0 or -1, as by any larger amount


def bin_of(value: float, exponent: int) -> int:
    """The index of the bin holding `value` on the grid of width 2^exponent (exact)."""
    magnitude = math.floor(math.ldexp(abs(value), -exponent))
    return magnitude if value >= 0 else -magnitude - 1


def bins_spanned(lo: float, hi: float, exponent: int) -> int:
    """How many bins [lo, hi] covers, from bin(lo) to bin(hi) inclusive."""
    return bin_of(hi, exponent) - bin_of(lo, exponent) + 1


def grid_exponent(lo: float, hi: float, capacity: int) -> int:
    """The canonical grid for data in [lo, hi]: the smallest allowed e spanning at most `capacity` bins."""
    exponent = _lowest_candidate(lo, hi, capacity)
    while bins_spanned(lo, hi, exponent) > capacity:
        exponent += 1
    return exponent


def _lowest_candidate(lo: float, hi: float, capacity: int) -> int:
    """A start for the search no larger than the answer: the floors, or a width known to be too fine."""
    exponent = MIN_EXPONENT
    largest = max(abs(lo), abs(hi))
    if largest > 0:
        exponent = max(exponent, math.frexp(largest)[1] - PRECISION_BITS)
    if hi > lo:
        # 2^(f-2) <= (hi-lo)/capacity / 2, and any width <= (hi-lo)/capacity spans more than capacity bins;
        # the factor 2 absorbs the rounding of the float quotient.
        exponent = max(exponent, math.frexp((hi - lo) / capacity)[1] - 2)
    return exponent


def coarsen(counts: Counts, first: int, shift: int) -> tuple[Counts, int]:
    """Counts of bins first.. regrouped onto the grid 2^shift times wider: (counts, new first index)."""
    if shift == 0 or counts.size == 0:
        return counts, first
    index = np.arange(first, first + counts.size, dtype=np.int64) >> min(shift, _MAX_SHIFT)
    starts = np.flatnonzero(np.diff(index, prepend=index[0] - 1))
    grouped = np.zeros(int(index[-1] - index[0]) + 1, dtype=np.int64)
    grouped[index[starts] - index[0]] = np.add.reduceat(counts, starts)
    return grouped, int(index[0])


def place(counts: Counts, first: int, new_first: int, length: int) -> Counts:
    """Counts of bins first.. written into a zeroed array covering bins new_first..new_first+length-1."""
    out = np.zeros(length, dtype=np.int64)
    start = first - new_first
    out[start : start + counts.size] = counts
    return out


def bin_values(
    values: npt.NDArray[np.float32], exponent: int, first: int, length: int, signed: bool
) -> tuple[Counts, int]:
    """Counts of a flat finite float32 array over bins first..first+length-1 (which must hold every value)
    and how many values are exactly zero; `signed` says whether any value is negative."""
    inverse_width = np.float32(math.ldexp(1.0, -exponent))
    counts = np.zeros(length, dtype=np.int64)
    zeros = 0
    index = np.empty(min(values.size, _CHUNK), dtype=np.intp)
    mask = np.empty(index.size, dtype=np.bool_)
    for start in range(0, values.size, _CHUNK):
        chunk = values[start : start + _CHUNK]
        k, m = index[: chunk.size], mask[: chunk.size]
        # The float32 product is exact and the cast to the index type truncates toward zero.
        np.multiply(chunk, inverse_width, out=k, casting="unsafe")
        if signed:
            np.subtract(k, np.less(chunk, 0, out=m), out=k)
        np.subtract(k, first, out=k)
        counts += np.bincount(k, minlength=length)
        zeros += int(np.count_nonzero(np.equal(chunk, 0, out=m)))
    return counts, zeros
