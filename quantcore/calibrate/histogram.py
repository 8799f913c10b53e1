"""Mergeable histograms: a tensor's value counts on its canonical power-of-two grid (see grid.py).

The merge protocol is single-pass. A histogram's grid is a function of its exact [min, max] and its
resolution `bins` only (the smallest power-of-two width for which [min, max] spans at most 2 * bins
bins, so more than `bins` of them). Adding a batch or merging another histogram computes the grid of the
union range, coarsens each part onto it by integer factors of two (exact: bin k -> k >> shift) and adds
integer counts. Every step is exact integer arithmetic on a grid fixed by the union's range, so any
split of the data into batches, processes and merge orders gives bit-identical counts, min, max and
zeros, and equal to observing everything in one process.

Exact zeros are counted apart (they sit at the left edge of bin 0): ReLU outputs put a large share of
their mass there, and zero is always represented exactly, which entropy and MSE take into account.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from quantcore.calibrate.errors import ObserverFormatError
from quantcore.calibrate.grid import Counts, bin_of, bin_values, coarsen, grid_exponent, place

DEFAULT_BINS = 2048
Floats = npt.NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class Histogram:
    """The counts of one tensor's values on its canonical grid; immutable, validated on construction."""

    bins: int
    """Resolution: [min, max] spans more than `bins` and at most 2 * bins grid bins."""
    exponent: int
    """The grid: bins are 2^exponent wide."""
    first: int
    """Grid index of counts[0], the bin holding min; counts[-1] holds max."""
    counts: Counts
    """int64 counts of bins first .. first + len(counts) - 1."""
    zeros: int
    """How many of the values are exactly zero (they are also counted in bin 0)."""
    min: float
    max: float

    def __post_init__(self) -> None:
        if np.asarray(self.counts).dtype.kind not in "iu":
            raise ObserverFormatError("malformed histogram: counts must be integers")
        counts = np.array(self.counts, dtype=np.int64)
        counts.flags.writeable = False
        object.__setattr__(self, "counts", counts)
        problem = histogram_problem(self)
        if problem is not None:
            raise ObserverFormatError(f"malformed histogram: {problem}")

    @property
    def total(self) -> int:
        """How many values were counted."""
        return int(self.counts.sum())

    @property
    def width(self) -> float:
        """The width of one grid bin."""
        return math.ldexp(1.0, self.exponent)

    def same_as(self, other: Histogram) -> bool:
        """Bit-identical: same grid, counts, zeros and extremes."""
        fields = (self.bins, self.exponent, self.first, self.zeros, self.min, self.max)
        return fields == (other.bins, other.exponent, other.first, other.zeros, other.min, other.max) and (
            np.array_equal(self.counts, other.counts)
        )


def histogram_problem(h: Histogram) -> str | None:
    """What makes `h` inconsistent (a merge could then not be exact), or None."""
    if h.bins < 1:
        return f"bins must be >= 1, got {h.bins}"
    if h.counts.ndim != 1 or h.counts.size == 0 or bool((h.counts < 0).any()):
        return "counts must be a non-empty 1-D array of non-negative integers"
    if not (math.isfinite(h.min) and math.isfinite(h.max) and h.min <= h.max):
        return f"min {h.min} and max {h.max} must be finite with min <= max"
    if h.exponent != grid_exponent(h.min, h.max, 2 * h.bins):
        return f"exponent {h.exponent} is not the canonical grid of [{h.min}, {h.max}] at {h.bins} bins"
    if (h.first, h.first + h.counts.size - 1) != (bin_of(h.min, h.exponent), bin_of(h.max, h.exponent)):
        return "counts must run exactly from the bin of min to the bin of max"
    if h.counts[0] == 0 or h.counts[-1] == 0:
        return "the bins holding min and max cannot be empty"
    return _zeros_problem(h)


def _zeros_problem(h: Histogram) -> str | None:
    if h.zeros == 0:
        return None
    if h.zeros < 0 or not h.min <= 0 <= h.max or h.zeros > h.counts[-h.first]:
        return f"{h.zeros} zeros do not fit in bin 0 of [{h.min}, {h.max}]"
    return None


def histogram_of(
    values: npt.NDArray[np.float32], vmin: float, vmax: float, bins: int, base: Histogram | None = None
) -> Histogram:
    """`base` (if any) plus a flat, finite, non-empty float32 array of values whose extremes are given."""
    lo, hi = (vmin, vmax) if base is None else (min(vmin, base.min), max(vmax, base.max))
    exponent = grid_exponent(lo, hi, 2 * bins)
    vfirst = bin_of(vmin, exponent)
    counts, zeros = bin_values(values, exponent, vfirst, bin_of(vmax, exponent) - vfirst + 1, vmin < 0)
    parts = [(counts, vfirst, exponent)]
    if base is not None:
        parts.append((base.counts, base.first, base.exponent))
        zeros += base.zeros
    return _assemble(parts, bins, exponent, lo, hi, zeros)


def merge_histograms(a: Histogram, b: Histogram) -> Histogram:
    """The histogram of both data sets: the same whichever order, bit for bit (a.bins must equal b.bins)."""
    lo, hi = min(a.min, b.min), max(a.max, b.max)
    exponent = grid_exponent(lo, hi, 2 * a.bins)
    parts = [(h.counts, h.first, h.exponent) for h in (a, b)]
    return _assemble(parts, a.bins, exponent, lo, hi, a.zeros + b.zeros)


def _assemble(
    parts: list[tuple[Counts, int, int]], bins: int, exponent: int, lo: float, hi: float, zeros: int
) -> Histogram:
    """Coarsen every part onto the grid `exponent` and add them up."""
    first = bin_of(lo, exponent)
    length = bin_of(hi, exponent) - first + 1
    total = np.zeros(length, dtype=np.int64)
    for counts, part_first, part_exponent in parts:
        coarse, coarse_first = coarsen(counts, part_first, exponent - part_exponent)
        total += place(coarse, coarse_first, first, length)
    return Histogram(bins, exponent, first, total, zeros, lo, hi)


def value_bins(h: Histogram) -> tuple[Floats, Counts]:
    """(edges, counts) for methods that treat each bin's mass as uniform between its edges: the outer
    edges are clamped to [min, max], and exact zeros become a zero-width bin [0, 0] of their own."""
    edges = np.arange(h.first, h.first + h.counts.size + 1, dtype=np.float64) * h.width
    edges[0], edges[-1] = h.min, h.max
    counts = h.counts.copy()
    if h.zeros:
        zero_bin = -h.first
        counts[zero_bin] -= h.zeros
        edges = np.insert(edges, zero_bin, 0.0)
        counts = np.insert(counts, zero_bin, h.zeros)
    return edges, counts
