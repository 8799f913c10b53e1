"""Entropy (KL) calibration: equal to TensorRT's loop on each side of zero, keeps uniform data, ignores zeros
and point masses, and never returns a range that quantizes the data worse than min/max."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from quantcore.calibrate import entropy_range
from quantcore.calibrate.entropy import (
    kl_divergences,
    kl_range,
    kl_threshold_bins,
    side_histograms,
    without_point_masses,
)
from quantcore.errors import CalibrationError
from tests.calibrate.samples import gaussian, gaussian_with_outliers, observed, quantization_mse, uniform


def textbook_kl(bins: np.ndarray, i: int, levels: int) -> float:
    """KL(P || Q) for threshold bin i, transcribed from TensorRT's algorithm (pytorch-quantization's
    _compute_amax_entropy) with its explicit loops."""
    bins = bins.astype(np.float64)
    p = bins[:i].copy()
    p[i - 1] += bins[i:].sum()
    group = np.digitize(np.arange(i), np.linspace(0, i, levels + 1)) - 1
    group[bins[:i] == 0] = -1
    density = np.zeros(levels)
    for j, g in enumerate(group):
        if g != -1:
            density[g] += bins[j]
    for level, members in Counter(group.tolist()).items():
        if level != -1:
            density[level] /= members
    q = np.array([density[g] if g != -1 else 0.0 for g in group])
    p, q = p / p.sum(), q / q.sum()
    if np.any((p > 0) & (q == 0)):
        return float("inf")
    used = p > 0
    return float((p[used] * np.log(p[used] / q[used])).sum())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vectorised_search_equals_the_textbook_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    counts = rng.poisson(rng.uniform(0, 50, 400) * np.exp(-np.arange(400) / 80)).astype(np.int64)
    counts[rng.choice(400, 60, replace=False)] = 0  # empty bins: the infinite-KL candidates
    counts[399] = 3
    levels = 64
    candidates = np.arange(levels, counts.size + 1)
    ours = kl_divergences(counts, candidates, levels)
    theirs = np.array([textbook_kl(counts, int(i), levels) for i in candidates])
    np.testing.assert_array_equal(np.isinf(ours), np.isinf(theirs))
    finite = np.isfinite(theirs)
    # Same quantities summed in another order (prefix sums): agreement to float64 rounding.
    np.testing.assert_allclose(ours[finite], theirs[finite], rtol=1e-9, atol=1e-12)
    best = candidates[finite][np.flatnonzero(theirs[finite] == theirs[finite].min())[-1]]
    assert kl_threshold_bins(counts, levels) == best


def test_the_search_clips_rare_wide_outliers_but_min_max_quantizes_them_better() -> None:
    x = gaussian_with_outliers()
    h = observed(x).histogram()
    lo, hi = kl_range(h)
    assert 3.0 < hi < 0.25 * h.max and -0.25 * abs(h.min) < lo < -3.0
    # KL compares shapes: clipping 0.1% of the values at 30 sigma costs far more squared error than the
    # finer step saves (measured: 0.31 against 0.047), so the method returns min/max.
    assert quantization_mse(x, lo, hi) > 5 * quantization_mse(x, h.min, h.max)
    assert entropy_range(h) == (h.min, h.max)


def test_a_clipped_gaussian_tail_is_kept_when_it_quantizes_better() -> None:
    x = gaussian(seed=3)
    h = observed(x).histogram()
    lo, hi = entropy_range(h)
    assert (lo, hi) == kl_range(h) and h.min < -5.5 < lo < -4.5 and hi <= h.max  # the far tail is clipped
    assert quantization_mse(x, lo, hi) < quantization_mse(x, h.min, h.max)


def test_keeps_the_range_of_uniform_data() -> None:
    h = observed(uniform()).histogram()
    lo, hi = entropy_range(h)
    assert hi >= 0.99 * h.max and lo <= 0.99 * h.min


def test_needs_a_fine_histogram() -> None:
    # With 128 bins (64 here: ~ONNX Runtime's default) no threshold below the whole range is tried.
    x = gaussian_with_outliers()
    coarse = observed(x, bins=64).histogram()
    (positive, negative), _ = side_histograms(coarse)
    assert positive.size <= 128 and negative.size <= 128
    assert kl_range(coarse) == (coarse.min, coarse.max)
    assert kl_range(observed(x).histogram())[1] < 0.25 * coarse.max


def test_exact_zeros_do_not_move_the_threshold() -> None:
    # A ReLU output and its positive values alone share the grid; with zeros left out of P and Q they
    # give the same threshold (the zero spike would otherwise pull it down).
    x = gaussian(seed=4)
    relu = observed(np.maximum(x, 0)).histogram()
    positive = observed(x[x > 0]).histogram()
    assert (relu.exponent, relu.first) == (positive.exponent, positive.first)
    assert entropy_range(relu) == (0.0, entropy_range(positive)[1])


def test_each_side_is_searched_on_its_own() -> None:
    x = gaussian(seed=5)
    x[x < 0] *= 0.3  # a narrow negative side (min ~ -1.5)
    x = np.concatenate([x, 40 * np.abs(x[:200])])  # outliers on the positive side only
    h = observed(x).histogram()
    lo, hi = kl_range(h)
    assert lo == h.min  # the narrow side has under MIN_SIDE_LEVELS of the int8 steps: kept whole
    assert 3.0 < hi < 0.25 * h.max


def test_an_asymmetric_tensor_keeps_its_wide_side() -> None:
    # Logits: one large positive value per sample. The former symmetric search on |x| cut the positive
    # side at the negative side's extent (a network's [-15.9, 20.1] logits became [-15.3, 15.3]).
    rng = np.random.default_rng(7)
    z = rng.standard_normal((20_000, 10)) * 3
    z[np.arange(20_000), rng.integers(0, 10, 20_000)] += rng.gamma(4, 3, 20_000)
    h = observed(z.ravel()).histogram()
    lo, hi = entropy_range(h)
    assert lo == h.min and hi > 3 * abs(h.min) > 0.0
    assert np.mean(z > hi) < 1e-4


def test_an_image_background_point_mass_saturates_nothing() -> None:
    # A normalised Fashion-MNIST-like input: half the pixels are background (0 -> -0.810 after
    # (x / 255 - 0.286) / 0.353), the rest spread up to 2.023. The symmetric |x| search put the threshold
    # on the background's mass: [-0.810, 0.811], saturating 31% of the pixels.
    rng = np.random.default_rng(8)
    n = 200_000
    pixels = np.where(rng.random(n) < 0.5, 0, rng.integers(1, 256, n)).astype(np.float64)
    x = ((pixels / 255 - 0.2860) / 0.3530).astype(np.float32).astype(np.float64)
    h = observed(x).histogram()
    assert entropy_range(h) == kl_range(h) == (h.min, h.max)
    assert h.min < -0.8 and h.max > 2.0


def test_levels_must_be_at_least_two() -> None:
    with pytest.raises(CalibrationError, match="levels"):
        entropy_range(observed([1.0, 2.0]).histogram(), levels=1)


def test_a_point_mass_does_not_pull_the_threshold_onto_itself() -> None:
    # A constant background makes a conv output repeat one value (its bias) at many pixels: here 20% of
    # the values of a ReLU'd Gaussian sit exactly at 0.3. Without the spike rule the search lands on it.
    x = np.abs(gaussian(seed=6))
    spiked = np.concatenate([x, np.full(x.size // 4, 0.3)])
    lo, hi = entropy_range(observed(spiked).histogram())
    _, clean = entropy_range(observed(x).histogram())
    assert lo == 0.0
    assert abs(hi - clean) < 0.1 * clean  # where the spike-free data puts it (about 2.6)
    (counts, _), _ = side_histograms(observed(spiked).histogram())
    assert kl_threshold_bins(counts, 128) < 0.2 * kl_threshold_bins(without_point_masses(counts), 128)


def test_spikes_are_replaced_by_their_neighbours_mean_and_nothing_else_changes() -> None:
    counts = np.array([100, 90, 2000, 80, 70, 60, 5, 0, 3], dtype=np.int64)
    # 2000 > 4 x 90 and >= 0.1% of the total: a spike. 5 beside 60 and 0 is not 4 x 60.
    assert without_point_masses(counts).tolist() == [100, 90, 85, 80, 70, 60, 5, 0, 3]
    small = np.array([10, 50, 10] + [1000] * 100, dtype=np.int64)
    # 50 is 5 x its neighbours but below 0.1% of the values: noise, kept.
    assert without_point_masses(small)[1] == 50
    isolated = np.array([1000] * 100 + [0, 0, 500, 0], dtype=np.int64)
    # A mass with empty bins beside it is an outlier population: the search weighs its clipping.
    assert without_point_masses(isolated)[102] == 500
