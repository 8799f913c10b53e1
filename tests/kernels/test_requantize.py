"""arm_nn_requantize (both roundings) and arm_nn_requantize_s64, with literal integers."""

from __future__ import annotations

import numpy as np
import pytest

from quantcore.kernels.conv import finish_s8
from quantcore.kernels.requantize import (
    BiasedRequantize,
    Rounding,
    divide_by_power_of_two,
    reduce_multiplier,
    requantize,
    requantize_int32,
    requantize_s64,
)

HALF = 1 << 30  # Q31 0.5


def rq(acc: int, mult: int, shift: int, rounding: Rounding = Rounding.DOUBLE) -> int:
    return int(requantize(np.array([acc]), mult, shift, rounding)[0])


@pytest.mark.parametrize(
    ("acc", "expected"),
    [(100, 50), (101, 51), (-101, -50), (-99, -49), (0, 0)],
)
def test_doubling_high_mult_rounds_ties_up(acc: int, expected: int) -> None:
    # (acc * 2^30 + 2^30) >> 31: ties go towards +inf, as in arm_nn_doubling_high_mult_no_sat.
    assert rq(acc, HALF, 0) == expected


@pytest.mark.parametrize(
    ("dividend", "exponent", "expected"), [(-3, 1, -2), (-5, 2, -1), (3, 1, 2), (5, 2, 1)]
)
def test_divide_by_power_of_two_rounds_midpoints_away_from_zero(
    dividend: int, exponent: int, expected: int
) -> None:
    assert int(divide_by_power_of_two(np.array([dividend]), exponent)[0]) == expected


def test_double_and_single_rounding_differ_where_the_first_rounding_creates_a_tie() -> None:
    # 1 * 0.5 / 2 = 0.25: double rounding gives 0.5 -> 1 then 0.5 -> 1; single rounding gives 0.
    assert rq(1, HALF, -1, Rounding.DOUBLE) == 1
    assert rq(1, HALF, -1, Rounding.SINGLE) == 0


def test_single_rounding_rounds_half_up_once() -> None:
    assert rq(3, HALF, -1, Rounding.SINGLE) == 1  # 0.75
    assert rq(6, HALF, -1, Rounding.SINGLE) == 2  # 1.5
    assert rq(-6, HALF, -1, Rounding.SINGLE) == -1  # -1.5 rounds towards +inf


def test_left_shift_wraps_in_int32_before_the_multiply_like_the_c() -> None:
    # C computes val * (1 << 2) in int32: 2^30 * 4 wraps to 0.
    assert rq(1 << 30, HALF, 2) == 0
    assert rq(1 << 28, HALF, 2) == 1 << 29


def test_per_channel_broadcast_along_the_last_axis() -> None:
    acc = np.array([[10, 10, 10], [-10, -10, -10]])
    out = requantize(acc, np.array([HALF, HALF, 3 << 29]), np.array([0, 1, -1]), Rounding.DOUBLE)
    assert out.tolist() == [[5, 10, 4], [-5, -10, -4]]


def test_reduce_multiplier_to_q15() -> None:
    assert reduce_multiplier(np.array([HALF, 0x7FFF0000, 0x7FFEFFFF, 0x7FFFFFFF])).tolist() == [
        16384,
        0x7FFF,
        0x7FFF,
        0x7FFF,
    ]


@pytest.mark.parametrize(
    ("acc", "shift", "expected"),
    [
        (1000, 0, 500),
        (1001, 0, 501),
        (-1001, 0, -500),
        (1 << 40, -12, 1 << 27),
        (-(1 << 40) - 1, -12, -(1 << 27)),
    ],
)
def test_requantize_s64_takes_a_64_bit_accumulator(acc: int, shift: int, expected: int) -> None:
    # Q15 0.5 times 2^shift, rounded once; the 2^40 accumulators would not survive an int32 product.
    assert int(requantize_s64(np.array([acc]), 1 << 14, shift)[0]) == expected


def _multipliers(rng: np.random.Generator, count: int) -> np.ndarray:
    """`count` multipliers over [1, INT32_MAX], the first four the edges: 1, INT32_MAX, 2^30 and 2^30 + 1."""
    mult = rng.integers(1, 2**31, count)
    mult[:4] = [1, 2**31 - 1, 2**30, 2**30 + 1]
    return mult


@pytest.mark.parametrize("rounding", list(Rounding))
def test_requantize_int32_equals_requantize_on_the_whole_int32_range(rounding: Rounding) -> None:
    # The fused five-pass form (requantize_int32) against the reference formula, per channel: every shift
    # from -31 to 30, multipliers from 1 to INT32_MAX (and one negative, which takes requantize's path),
    # accumulators spread over int32 with its extremes and the values around each rounding threshold.
    rng = np.random.default_rng(20)
    shifts = np.arange(-31, 31)
    mult = _multipliers(rng, shifts.size)
    mult[20:40] = 2**30  # high = floor((v + 1) / 2): ties at every scale
    acc = rng.integers(-(2**31), 2**31, (4000, shifts.size))
    acc[:6] = np.array([-(2**31), 2**31 - 1, 0, -1, 1, -(2**30)])[:, None]
    threshold = -((1 << 30) // mult)  # where v * M + 2^30 turns negative
    acc[6:9] = threshold + np.array([-1, 0, 1])[:, None]
    # Dense small values: every rounding tie of the small shifts, negative ones included.
    acc = np.concatenate([acc, np.repeat(np.arange(-40000, 40000)[:, None], shifts.size, axis=1)])
    for m in (mult, np.where(shifts == 3, -mult, mult)):
        expected = requantize(acc, m, shifts, rounding)
        np.testing.assert_array_equal(requantize_int32(acc.copy(), m, shifts, rounding), expected)


def test_requantize_int32_per_tensor_scalars() -> None:
    acc = np.arange(-70000, 70000, 7, dtype=np.int64)
    for mult, shift in [(1 << 30, -3), ((1 << 31) - 1, 0), (1_234_567_890, 5), (987_654_321, -31)]:
        np.testing.assert_array_equal(
            requantize_int32(acc.copy(), np.int64(mult), np.int64(shift), Rounding.DOUBLE),
            requantize(acc, mult, shift, Rounding.DOUBLE),
        )


@pytest.mark.parametrize("rounding", list(Rounding))
def test_biased_requantize_equals_requantize_of_acc_plus_bias(rounding: Rounding) -> None:
    # The folded form finish_s8 uses (bias inside the per-channel constants) against the reference on
    # acc + bias: every shift from -31 to 0, multipliers from 1 to INT32_MAX, biases of both signs up to
    # int32's, accumulators whose acc + bias spans int32 (its ends included) and sits on each side of
    # the double rounding's sign threshold.
    rng = np.random.default_rng(24)
    shifts = np.arange(-31, 1)
    mult = _multipliers(rng, shifts.size)
    bias = rng.integers(-(2**31), 2**31, shifts.size)
    bias[:3] = [0, -(2**31), 2**31 - 1]
    v = rng.integers(-(2**31), 2**31, (4000, shifts.size))
    v[:6] = np.array([-(2**31), 2**31 - 1, 0, -1, 1, -(2**30)])[:, None]
    v[6:9] = -((1 << 30) // mult) + np.array([-1, 0, 1])[:, None]
    v = np.concatenate([v, np.repeat(np.arange(-40000, 40000)[:, None], shifts.size, axis=1)])
    acc = v - bias  # acc + bias = v, in int32 by construction
    folded = BiasedRequantize.of(bias.astype(np.int32), mult, shifts, rounding)
    assert folded is not None
    np.testing.assert_array_equal(folded(acc.copy()), requantize(v, mult, shifts, rounding))
    unbiased = BiasedRequantize.of(None, mult, shifts, rounding)
    assert unbiased is not None
    np.testing.assert_array_equal(unbiased(v.copy()), requantize(v, mult, shifts, rounding))


def test_biased_requantize_declines_a_left_shift_and_a_negative_double_rounding_multiplier() -> None:
    mult, bias = np.array([1 << 30, 1 << 30]), np.array([5, -5], dtype=np.int32)
    assert BiasedRequantize.of(bias, mult, np.array([-3, 1]), Rounding.DOUBLE) is None
    assert BiasedRequantize.of(bias, mult, np.array([-3, 1]), Rounding.SINGLE) is None
    assert (
        BiasedRequantize.of(bias, np.array([1 << 30, -(1 << 30)]), np.array([-3, -2]), Rounding.DOUBLE)
        is None
    )
    assert BiasedRequantize.of(bias, np.array([1 << 30, -(1 << 30)]), np.array([-3, -2]), Rounding.SINGLE)


@pytest.mark.parametrize("channels", [1, 3, 96, 1500])
@pytest.mark.parametrize("rounding", list(Rounding))
def test_finish_s8_in_long_rows_equals_requantize_per_channel(channels: int, rounding: Rounding) -> None:
    # finish_s8 lays few channels out as long rows (several pixels a row, constants tiled to match) and
    # keeps the plain layout for a last slice that is not whole long rows: both against the reference.
    rng = np.random.default_rng(channels)
    pixels = 70001 // channels + 7  # not a multiple of the pixels per long row: both layouts run
    acc = rng.integers(-(2**20), 2**20, (pixels, channels))
    bias = rng.integers(-(2**20), 2**20, channels).astype(np.int32)
    mult = rng.integers(1, 2**31, channels).astype(np.int32)
    shift = rng.integers(-20, 1, channels).astype(np.int32)
    expected = np.clip(requantize(acc + bias, mult, shift, rounding) + 3, -128, 127).astype(np.int8)
    got = finish_s8(acc.copy(), (bias, mult, shift), 3, (-128, 127), rounding, bound=2**20)
    np.testing.assert_array_equal(got, expected)
