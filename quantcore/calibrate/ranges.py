"""The simple range selections: min/max and percentile. Each returns (lo, hi) with lo <= 0 <= hi.

Percentile reads the histogram as a piecewise-uniform density (histogram.value_bins: outer edges at the
exact min and max, exact zeros a point mass) and interpolates linearly inside the bin where the
cumulative count reaches the target, so the 100th percentile is exactly max. `percentile` p clips
(100 - p)% of the values off each clipped tail: the upper tail of a non-negative tensor, the lower of a
non-positive one, both of a signed one; p therefore means the same for every tensor's upper end.
"""

from __future__ import annotations

import numpy as np

from quantcore.calibrate.histogram import Histogram, value_bins
from quantcore.errors import CalibrationError

DEFAULT_PERCENTILE = 99.999  # ONNX Runtime's default; 99.99 clipped small nets' ReLUs (lenet5: -1.7 dB)


def containing_zero(lo: float, hi: float) -> tuple[float, float]:
    """[lo, hi] widened to contain 0: zero must be exactly representable (and -0.0 reads as 0.0)."""
    return min(float(lo), 0.0) + 0.0, max(float(hi), 0.0) + 0.0


def minmax_range(h: Histogram) -> tuple[float, float]:
    """The observed extremes: nothing is clipped."""
    return containing_zero(h.min, h.max)


def quantile(h: Histogram, fraction: float) -> float:
    """The value below which `fraction` (0..1) of the values lie, interpolated inside its bin."""
    if not 0.0 <= fraction <= 1.0:
        raise CalibrationError(f"quantile: fraction must be in [0, 1], got {fraction}")
    edges, counts = value_bins(h)
    cumulative = np.cumsum(counts)
    target = fraction * float(cumulative[-1])
    i = min(int(np.searchsorted(cumulative, target, side="left")), counts.size - 1)
    below = float(cumulative[i - 1]) if i else 0.0
    inside = (target - below) / float(counts[i]) if counts[i] else 0.0
    return float(edges[i] + min(inside, 1.0) * (edges[i + 1] - edges[i]))


def percentile_range(h: Histogram, percentile: float = DEFAULT_PERCENTILE) -> tuple[float, float]:
    """Clip (100 - percentile)% of the values off each tail that lies beyond zero."""
    if not 50.0 <= percentile <= 100.0:
        raise CalibrationError(f"percentile must be in [50, 100], got {percentile}")
    # (100 - p) / 100 rather than 1 - p / 100: the tail fraction is then correctly rounded.
    lo = quantile(h, (100.0 - percentile) / 100.0) if h.min < 0 else 0.0
    hi = quantile(h, percentile / 100.0) if h.max > 0 else 0.0
    return containing_zero(lo, hi)
