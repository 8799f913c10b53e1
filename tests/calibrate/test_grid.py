"""The power-of-two grid: exact bin indices, exact coarsening, the canonical exponent."""

from __future__ import annotations

import math

import numpy as np
import pytest

from quantcore.calibrate.grid import (
    MIN_EXPONENT,
    bin_of,
    bin_values,
    bins_spanned,
    coarsen,
    grid_exponent,
)


@pytest.mark.parametrize(
    ("value", "index"),
    [(0.0, 0), (-0.0, 0), (0.5, 0), (1.0, 1), (1.5, 1), (-0.5, -1), (-1.0, -2), (-1.5, -2), (-2.0, -3)],
)
def test_bin_of_at_width_one(value: float, index: int) -> None:
    # [k, k+1) right of zero, (k, k+1] left of it: mirror images, zero in bin 0.
    assert bin_of(value, 0) == index


def reference_counts(values: np.ndarray, exponent: int) -> tuple[np.ndarray, int]:
    """Counts from the scalar definition, one value at a time."""
    indices = [bin_of(float(v), exponent) for v in values]
    first = min(indices)
    return np.bincount(np.array(indices) - first), first


def awkward_values(seed: int) -> np.ndarray:
    """Signed values with exact bin edges, -0.0, float32 subnormals and a wide spread of magnitudes."""
    rng = np.random.default_rng(seed)
    spread = rng.standard_normal(4000) * np.exp2(rng.integers(-30, 10, 4000))
    edges = np.arange(-40, 41) * 2.0**-3
    special = [0.0, -0.0, 1e-45, -1e-45, 1.2e-38, -1.2e-38, 2.0**-149, -(2.0**-149)]
    return np.concatenate([spread, edges, special]).astype(np.float32)


@pytest.mark.parametrize("exponent", [-3, 0, 5])
@pytest.mark.parametrize("seed", [0, 1])
def test_vectorised_binning_matches_the_scalar_definition(exponent: int, seed: int) -> None:
    values = awkward_values(seed)
    if exponent < 0:
        values = values[np.abs(values) < 2.0**20]  # keep the indices small enough for the array
    expected, first = reference_counts(values, exponent)
    counts, zeros = bin_values(values, exponent, first, expected.size, signed=True)
    np.testing.assert_array_equal(counts, expected)
    assert zeros == int(np.count_nonzero(values == 0)) == 3  # 0.0, -0.0 and the edge at 0


def test_non_negative_path_matches_the_signed_path() -> None:
    values = np.abs(awkward_values(2))
    expected, first = reference_counts(values, 0)
    counts, _ = bin_values(values, 0, first, expected.size, signed=False)
    np.testing.assert_array_equal(counts, expected)


@pytest.mark.parametrize("shift", [1, 2, 7, 40, 70])
def test_coarsening_equals_binning_at_the_coarser_width(shift: int) -> None:
    values = awkward_values(3)
    fine, fine_first = reference_counts(values, -2)
    coarse, coarse_first = reference_counts(values, -2 + shift)
    got, got_first = coarsen(fine, fine_first, shift)
    assert got_first == coarse_first
    np.testing.assert_array_equal(got, coarse)


@pytest.mark.parametrize(
    ("lo", "hi", "capacity"),
    [(-1.0, 1.0, 4096), (0.0, 3.5, 4), (1000.0, 1001.0, 4096), (-7e-3, 2e5, 100), (-3.0, -2.9, 64)],
)
def test_grid_exponent_is_the_smallest_that_fits(lo: float, hi: float, capacity: int) -> None:
    exponent = grid_exponent(lo, hi, capacity)
    assert bins_spanned(lo, hi, exponent) <= capacity
    floor = max(MIN_EXPONENT, math.frexp(max(abs(lo), abs(hi)))[1] - 24)
    assert exponent == floor or bins_spanned(lo, hi, exponent - 1) > capacity


def test_precision_floor_for_a_constant_far_from_zero() -> None:
    # A range of one value needs one bin at any width; the floor keeps bins no finer than float32's ulp.
    assert grid_exponent(1000.0, 1000.0, 4096) == math.frexp(1000.0)[1] - 24 == -14
    assert grid_exponent(0.0, 0.0, 4096) == MIN_EXPONENT


def test_grid_exponent_grows_with_the_range() -> None:
    rng = np.random.default_rng(4)
    for _ in range(200):
        lo, hi = sorted(rng.standard_normal(2) * 10.0 ** rng.integers(-3, 4))
        wider_lo, wider_hi = lo - abs(rng.standard_normal()), hi + abs(rng.standard_normal())
        assert grid_exponent(lo, hi, 256) <= grid_exponent(wider_lo, wider_hi, 256)
