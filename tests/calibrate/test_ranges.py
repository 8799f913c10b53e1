"""minmax and percentile: exact numbers on known data and constructed histograms."""

from __future__ import annotations

import numpy as np
import pytest

from quantcore.calibrate import Histogram, minmax_range, percentile_range, quantile
from quantcore.calibrate.histogram import value_bins
from quantcore.errors import CalibrationError
from tests.calibrate.samples import gaussian, observed

# Width-1 bins [0,1) [1,2) [2,3) [3,3.5] (the last clamped to max); canonical at bins=2 (<= 4 bins).
RAMP = Histogram(2, exponent=0, first=0, counts=np.array([10, 20, 30, 40]), zeros=0, min=0.0, max=3.5)
# (-1.5,-1] (-1,0] [0,1) [1,1.75]: a signed tensor.
SIGNED = Histogram(2, exponent=0, first=-2, counts=np.array([5, 45, 40, 10]), zeros=0, min=-1.5, max=1.75)


def test_minmax_of_a_known_array() -> None:
    obs = observed(np.array([0.25, -3.5, 2.0, 11.0], dtype=np.float32))
    assert minmax_range(obs.histogram()) == (-3.5, 11.0)


@pytest.mark.parametrize(
    ("data", "expected"), [([2.0, 5.0], (0.0, 5.0)), ([-4.0, -1.0], (-4.0, 0.0)), ([0.0, 0.0], (0.0, 0.0))]
)
def test_minmax_contains_zero(data: list[float], expected: tuple[float, float]) -> None:
    assert minmax_range(observed(data).histogram()) == expected


@pytest.mark.parametrize(
    ("percentile", "hi"),
    [
        (90.0, 3.375),  # target 90: 60 below bin 3, 30 of its 40 -> 3 + 0.75 * 0.5
        (60.0, 3.0),  # target 60: exactly the end of bin 2
        (50.0, 2 + 20 / 30),
        (100.0, 3.5),
    ],
)
def test_percentile_on_a_constructed_histogram(percentile: float, hi: float) -> None:
    assert percentile_range(RAMP, percentile) == (0.0, hi)  # non-negative: upper tail only


def test_two_sided_percentile_on_a_constructed_histogram() -> None:
    # 5% below: all of bin (-1.5, -1]; 95% below: 90 + half of the last bin's 10 -> 1 + 0.5 * 0.75.
    assert percentile_range(SIGNED, 95.0) == (-1.0, 1.375)


def test_quantile_ends_are_the_exact_extremes() -> None:
    assert (quantile(SIGNED, 0.0), quantile(SIGNED, 1.0)) == (-1.5, 1.75)


def test_exact_zeros_are_a_point_mass() -> None:
    # 6 zeros among 10 values: the 60% quantile is 0 itself, not interpolated into [0, w).
    obs = observed([0.0] * 6 + [1.0, 2.0, 3.0, 4.0])
    edges, counts = value_bins(obs.histogram())
    assert counts[0] == 6 and edges[0] == edges[1] == 0.0
    assert quantile(obs.histogram(), 0.6) == 0.0


def test_one_sided_percentile_of_a_non_positive_tensor() -> None:
    x = -np.abs(gaussian(200_000))
    lo, hi = percentile_range(observed(x).histogram(), 99.0)
    assert hi == 0.0
    assert abs(lo - np.percentile(x, 1.0)) < 0.01


@pytest.mark.parametrize("percentile", [99.0, 99.9, 99.99])
def test_percentile_agrees_with_the_samples_to_a_bin(percentile: float) -> None:
    # Interpolation assumes uniform mass inside a bin: it can be off by at most one bin width.
    x = gaussian(500_000, seed=3)
    h = observed(x).histogram()
    lo, hi = percentile_range(h, percentile)
    assert abs(hi - np.percentile(x, percentile)) <= h.width
    assert abs(lo - np.percentile(x, 100 - percentile)) <= h.width


@pytest.mark.parametrize("percentile", [49.0, 100.5])
def test_percentile_outside_50_100_is_rejected(percentile: float) -> None:
    with pytest.raises(CalibrationError, match="percentile must be in"):
        percentile_range(RAMP, percentile)
