"""Entropy calibration: TensorRT's KL-divergence threshold search, fitted to asymmetric int8 ranges.

For each candidate threshold i (in bins, from `levels` up to all of them) the reference distribution P
is the first i bins with everything beyond folded into bin i-1 (clipping); the candidate Q merges
those i bins into `levels` equal groups (bin j -> group j * levels // i), spreads each group's count
evenly over its non-empty bins and is normalised. The threshold with the least KL(P || Q) wins; a
candidate whose last bin is empty while values lie beyond it has Q = 0 where P > 0 (infinite KL) and
never wins. Ties go to the larger threshold (as in TensorRT's pytorch-quantization toolkit).

TensorRT searches one threshold T on |x| for a symmetric range [-T, T] with 128 levels (one sign of
int8). Fixpoint's int8 is asymmetric: [lo, hi] gets all 256 codes, each side of zero its share. So:
- each side of zero is searched on its own histogram (the magnitudes of the positive values, of the
  negative values), with the side's share of `levels` (255 steps in all): hi * levels / (hi - lo) for
  the upper end. A symmetric search on |x| clipped an asymmetric tensor's wide side at the narrow
  side's extent: logits in [-15.9, 20.1] became [-15.3, 15.3]; a normalised image in [-0.81, 2.02]
  with half its pixels at the background -0.81 became [-0.81, 0.81] (31% of the pixels saturated);
- the shares follow the thresholds: clipping one side gives the other more levels, so the search
  repeats (at most ROUNDS times) until neither end moves;
- a side with fewer than MIN_SIDE_LEVELS levels is kept whole: with so few groups Q cannot describe any
  distribution and the search would clip at random;
- the result must not lose to min/max: of the searched range and min/max, the one whose int8 quantizer
  has the smaller expected squared error on the data (mse.mean_squared_error, exact for the histogram's
  density) is returned. KL compares shapes, not magnitudes: it will clip a tail whose values are few
  but far (a network's top logits) when the clipping error outweighs all it saves in rounding.

Differences from the textbook loop, none of which change its result on a histogram without zeros:
- it is vectorised: with prefix sums of c, [c > 0] and c log c, each candidate costs O(levels), not
  O(bins), so a 4096-bin search takes milliseconds;
- exact zeros (counted by the observer) are left out of P and Q: zero is represented exactly whatever
  the threshold, and the spike ReLU puts there would otherwise drag the threshold down (the problem
  pytorch-quantization hides by overwriting bin 0 with bin 1);
- point masses inside the distribution are left out the same way: a bin holding more than SPIKE times
  as many values as either neighbour, both neighbours non-empty, and at least SPIKE_SHARE of all values
  takes the mean of its neighbours. (An isolated mass - empty bins on a side - is an outlier population,
  whose clipping the search must weigh, and stays.) Real data makes
  them (a constant image background gives a conv output equal to its bias at thousands of pixels), the
  quantizer represents such a value to within half a step at any threshold, and left in they decide the
  search: on a Fashion-MNIST conv-BN-ReLU net a spike at 9% of the maximum pulled the threshold onto
  itself (layer SQNR 4.9 dB; 28.5 dB without it; min/max gives 39 dB);
- the search runs on the observer's grid, which gives |x| at least ~bins / 2 bins for a signed tensor
  and more than `bins` for a non-negative one (2048 by default): ONNX Runtime's Entropy default of 128
  histogram bins leaves no candidate but the whole range, so it returns min/max.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from quantcore.calibrate.grid import Counts, coarsen
from quantcore.calibrate.histogram import Histogram, value_bins
from quantcore.calibrate.mse import range_errors
from quantcore.calibrate.ranges import containing_zero
from quantcore.errors import CalibrationError

DEFAULT_LEVELS = 255
"""Steps of the int8 grid over the whole range [lo, hi] (256 codes); each side of zero gets its share."""
MIN_SIDE_LEVELS = 16
ROUNDS = 4
SPIKE = 4
SPIKE_SHARE = 1e-3
_BLOCK = 512  # candidates evaluated at once: bounds the (candidates x levels) temporaries
Floats = npt.NDArray[np.float64]


def entropy_range(h: Histogram, levels: int = DEFAULT_LEVELS) -> tuple[float, float]:
    """The KL-optimal clipping range of the tensor, or min/max where that quantizes the data better."""
    return _better_quantized(h, kl_range(h, levels), containing_zero(h.min, h.max))


def kl_range(h: Histogram, levels: int = DEFAULT_LEVELS) -> tuple[float, float]:
    """The range the KL search picks on each side of zero (before the comparison with min/max)."""
    if levels < 2:
        raise CalibrationError(f"entropy: levels must be >= 2, got {levels}")
    widest = containing_zero(h.min, h.max)
    if widest[0] == widest[1]:
        return widest
    (positive, negative), width = side_histograms(h)
    lo, hi = widest
    for _ in range(ROUNDS):
        share = levels / (hi - lo)
        new_hi = _side_threshold(positive, width, hi * share, widest[1])
        new_lo = -_side_threshold(negative, width, -lo * share, -widest[0])
        if (new_lo, new_hi) == (lo, hi):
            break
        lo, hi = new_lo, new_hi
    return lo, hi


def _side_threshold(counts: Counts, width: float, levels: float, extreme: float) -> float:
    """The threshold of one side's magnitudes, no further than the side's extreme."""
    if extreme == 0.0 or levels < MIN_SIDE_LEVELS:
        return extreme
    return min(kl_threshold_bins(without_point_masses(counts), int(levels)) * width, extreme)


def _better_quantized(
    h: Histogram, searched: tuple[float, float], widest: tuple[float, float]
) -> tuple[float, float]:
    """Of the searched range and min/max, the one with the smaller expected int8 error (ties: searched)."""
    if searched == widest:
        return searched
    error = range_errors(*value_bins(h), [searched, widest])
    return searched if error[0] <= error[1] else widest


def side_histograms(h: Histogram) -> tuple[tuple[Counts, Counts], float]:
    """Counts of the positive values' and of the negative values' magnitudes on bins [m w, (m+1) w)
    from m = 0, exact zeros removed, at most 2 * bins of them per side (the grid is coarsened by a power
    of two if the data lies far from zero): ((positive, negative), w)."""
    last = h.first + h.counts.size - 1
    largest = max(last, -h.first - 1)  # the magnitude index of the bin farthest from zero
    shift = 0
    while (largest >> shift) + 1 > 2 * h.bins:
        shift += 1
    counts, first = coarsen(h.counts, h.first, shift)
    index = np.arange(first, first + counts.size)
    size = (largest >> shift) + 1
    positive = np.zeros(size, dtype=np.int64)
    negative = np.zeros(size, dtype=np.int64)
    right = index >= 0
    positive[index[right]] = counts[right]
    negative[-index[~right] - 1] = counts[~right]
    positive[0] -= h.zeros
    return (positive, negative), h.width * 2.0**shift


def without_point_masses(counts: Counts) -> Counts:
    """Counts with each spike (see the module docstring) replaced by the mean of its two neighbours."""
    left = np.concatenate([[0], counts[:-1]])
    right = np.concatenate([counts[1:], [0]])
    inside = (left > 0) & (right > 0)
    spike = inside & (counts > SPIKE * np.maximum(left, right)) & (counts >= SPIKE_SHARE * counts.sum())
    return np.where(spike, (left + right) // 2, counts)


def kl_threshold_bins(counts: Counts, levels: int) -> int:
    """How many leading bins the KL-optimal threshold keeps (all of them if there is nothing to search)."""
    total = int(counts.sum())
    if counts.size <= levels or total == 0:
        return int(counts.size)
    candidates = np.arange(levels, counts.size + 1)
    blocks = [candidates[start : start + _BLOCK] for start in range(0, candidates.size, _BLOCK)]
    divergence = np.concatenate([kl_divergences(counts, block, levels) for block in blocks])
    best = np.flatnonzero(divergence == divergence.min())[-1]
    return int(candidates[best])


def kl_divergences(counts: Counts, candidates: npt.NDArray[np.int64], levels: int) -> Floats:
    """KL(P || Q) for each candidate number of kept bins (each >= levels)."""
    c = counts.astype(np.float64)
    cum = _prefix(c)
    nonzero = _prefix((c > 0).astype(np.float64))
    total = cum[-1]
    kept = candidates.astype(np.int64)
    group = np.arange(levels + 1, dtype=np.int64)
    starts = (group[None, :] * kept[:, None] + levels - 1) // levels  # first bin of each group
    sums = cum[starts[:, 1:]] - cum[starts[:, :-1]]
    filled = nonzero[starts[:, 1:]] - nonzero[starts[:, :-1]]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(sums > 0, sums / filled, 1.0)  # the level of Q on a group's non-empty bins
        outliers = total - cum[kept]
        last = c[kept - 1]
        p_log_p = _prefix(_xlogx(c))[kept - 1] + _xlogx(last + outliers)
        p_log_q = (sums * np.log(q)).sum(axis=1) + outliers * np.log(q[:, -1])
        divergence = (p_log_p - p_log_q) / total - np.log(total) + np.log(cum[kept])
    return np.where((last == 0) & (outliers > 0), np.inf, divergence)


def _prefix(values: Floats) -> Floats:
    return np.concatenate([[0.0], np.cumsum(values)])


def _xlogx(values: Floats) -> Floats:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(values > 0, values * np.log(values), 0.0)
