"""MSE calibration: the closed-form expected error matches the samples, and the search finds its minimum."""

from __future__ import annotations

import numpy as np
import pytest

from quantcore.calibrate import Histogram, mse_range
from quantcore.calibrate.histogram import value_bins
from quantcore.calibrate.mse import mean_squared_error
from quantcore.scheme.qparams import quant_params
from tests.calibrate.samples import (
    gaussian,
    gaussian_with_outliers,
    observed,
    quantization_mse,
    uniform,
)


def histogram_mse(h: Histogram, lo: float, hi: float) -> float:
    scale, zero_point = quant_params(lo, hi)
    edges, counts = value_bins(h)
    return float(mean_squared_error(edges, counts, np.array([scale]), np.array([float(zero_point)]))[0])


@pytest.mark.parametrize("lo_hi", [(-30.0, 30.0), (-68.0, 64.0), (-5.0, 5.0), (-2.0, 90.0), (0.0, 40.0)])
def test_expected_error_matches_the_samples(lo_hi: tuple[float, float]) -> None:
    x = gaussian_with_outliers()
    h = observed(x).histogram()
    # The histogram model spreads each bin's samples uniformly; with >= 2048 bins that moves the mean
    # squared error by well under 0.1% (measured: ~1e-4 relative).
    assert histogram_mse(h, *lo_hi) == pytest.approx(quantization_mse(x, *lo_hi), rel=2e-3)


def test_a_constant_tensor_is_a_point_mass() -> None:
    # min == max: one zero-width bin, whose error is that of the value itself, not of a spread.
    x = np.full(10, 0.3, dtype=np.float32).astype(np.float64)
    h = observed(x).histogram()
    assert histogram_mse(h, 0.0, 1.0) == pytest.approx(quantization_mse(x, 0.0, 1.0), rel=1e-12)
    assert histogram_mse(h, 0.0, 1.0) > 0
    assert mse_range(h) == (0.0, 0.30000001192092896)  # float32(0.3) itself: error 0


def test_beats_every_other_method_and_a_symmetric_grid_on_the_samples() -> None:
    x = gaussian_with_outliers()
    obs = observed(x)
    lo, hi = mse_range(obs.histogram())
    best = quantization_mse(x, lo, hi)
    grid = min(quantization_mse(x, -t, t) for t in np.linspace(10, 98, 89))
    assert best <= grid
    assert best < quantization_mse(x, obs.min, obs.max)


def test_laplace_optimum_matches_the_analytic_clipping_value() -> None:
    # Banner et al. (ACIQ): for Laplace(b = 1) and 8 bits the MSE-optimal clip solves
    # e^-a = a / (3 * 4^8), a ~ 9.89. The error is flat near it and only ~200 samples per side lie
    # beyond it, hence the tolerance.
    x = np.random.default_rng(7).laplace(0.0, 1.0, 4_000_000).astype(np.float32)
    lo, hi = mse_range(observed(x).histogram())
    assert abs(hi - 9.89) < 0.6 and abs(lo + 9.89) < 0.6
    assert hi < 0.8 * float(x.max())


def test_gaussian_is_clipped_a_little() -> None:
    h = observed(gaussian()).histogram()
    lo, hi = mse_range(h)
    assert 3.5 < hi < 0.9 * h.max and 0.9 * h.min < lo < -3.5


def test_uniform_keeps_nearly_the_whole_range() -> None:
    h = observed(uniform()).histogram()
    lo, hi = mse_range(h)
    assert hi >= 0.99 * h.max and lo <= 0.99 * h.min


def test_non_negative_tensor_keeps_lo_at_zero() -> None:
    h = observed(np.maximum(gaussian(), 0)).histogram()
    lo, hi = mse_range(h)
    assert lo == 0.0 and 3.5 < hi < h.max
