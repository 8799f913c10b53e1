"""TFLite's QuantizeMultiplier, checked with literal integers, edge cases included."""

from __future__ import annotations

import numpy as np
import pytest

from quantcore.scheme.scaling import ScaleError, quantize_multiplier, quantize_multipliers


@pytest.mark.parametrize(
    ("scale", "expected"),
    [
        (0.5, (1073741824, 0)),
        (1.0, (1073741824, 1)),
        (0.75, (1610612736, 0)),
        (1e-9, (1152921505, -29)),  # 0.536870912 * 2^31 = 1152921504.6 -> rounds up
        (0.0003, (1319413953, -11)),
        (-0.75, (-1610612736, 0)),
        (0.0, (0, 0)),
    ],
)
def test_literal_multipliers(scale: float, expected: tuple[int, int]) -> None:
    assert quantize_multiplier(scale) == expected


def test_mantissa_rounding_up_to_2_pow_31_is_halved_and_shift_incremented() -> None:
    # frexp gives q = 1 - 2^-33; q * 2^31 = 2^31 - 0.25 rounds to 2^31, which does not fit in int32.
    assert quantize_multiplier(0.5 - 2**-34) == (1 << 30, 0)


def test_halves_round_away_from_zero_not_to_even() -> None:
    # q * 2^31 = 2^30 + 2.5 exactly: std::round gives ...3, Python's round() would give ...2.
    assert quantize_multiplier((2**30 + 2.5) / 2**31) == (2**30 + 3, 0)
    assert quantize_multiplier(-(2**30 + 2.5) / 2**31) == (-(2**30 + 3), 0)


def test_tiny_scales_flush_to_zero() -> None:
    assert quantize_multiplier(2**-32) == (1 << 30, -31)  # the smallest shift still represented
    assert quantize_multiplier(2**-33) == (0, 0)  # shift would be -32: every bit shifted out
    assert quantize_multiplier(1e-300) == (0, 0)


def test_huge_scales_saturate_at_shift_30() -> None:
    assert quantize_multiplier(2.0**29) == (1 << 30, 30)  # the largest shift still represented
    assert quantize_multiplier(2.0**30) == (2**31 - 1, 30)
    assert quantize_multiplier(1e12) == (2**31 - 1, 30)


def test_multiplier_reconstructs_the_scale_to_q31_precision() -> None:
    rng = np.random.default_rng(7)
    for scale in 10.0 ** rng.uniform(-8, 2, size=200):
        m, s = quantize_multiplier(scale)
        assert abs(m * 2.0 ** (s - 31) - scale) <= scale * 2**-31


def test_per_channel_arrays_are_int32() -> None:
    mult, shift = quantize_multipliers([0.5, 0.75, 1e-9])
    assert mult.dtype == np.int32 and shift.dtype == np.int32
    assert mult.tolist() == [1073741824, 1610612736, 1152921505]
    assert shift.tolist() == [0, 0, -29]


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_scale_is_rejected_with_its_name(bad: float) -> None:
    with pytest.raises(ScaleError, match=r"conv1\.weight"):
        quantize_multiplier(bad, "conv1.weight")
