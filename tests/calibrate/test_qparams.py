"""quant_params: literal scales and zero points, the tie rule, widening, degenerate ranges."""

from __future__ import annotations

import numpy as np
import pytest

from quantcore.errors import CalibrationError
from quantcore.scheme.qparams import DEGENERATE_SCALE, quant_params, representable_range


@pytest.mark.parametrize(
    ("lo", "hi", "expected"),
    [
        # 2.55 has no exact binary form: the correctly rounded quotient (double 2.55) / 255 is one ulp
        # below the double 0.01. Exact in binary: [0, 255/64] -> 1/64.
        (0.0, 2.55, (0.009999999999999998, -128)),
        (0.0, 3.984375, (0.015625, -128)),
        (-2.55, 0.0, (0.009999999999999998, 127)),
        (-1.0, 1.0, (2 / 255, 0)),  # -128 + 127.5 = -0.5 exactly: half to even gives 0
        (-1.0, 3.0, (4 / 255, -64)),  # -128 + 63.75 = -64.25
        (-129.0, 381.0, (2.0, -64)),  # -128 + 64.5 = -63.5: a tie, to even
        (-127.0, 383.0, (2.0, -64)),  # -128 + 63.5 = -64.5: a tie, to even
        (0.5, 2.0, (2 / 255, -128)),  # widened to [0, 2]
        (-3.0, -1.0, (3 / 255, 127)),  # widened to [-3, 0]
    ],
)
def test_int8_literals(lo: float, hi: float, expected: tuple[float, int]) -> None:
    assert quant_params(lo, hi) == expected
    assert 2 / 255 == 0.00784313725490196  # the literal the [-1, 1] case is compared with


def test_every_symmetric_range_gets_zero_point_zero() -> None:
    # Computing -128 - lo / scale in floats lands on either side of -0.5, depending on how scale rounded;
    # the exact computation always sees the tie.
    for a in np.random.default_rng(0).uniform(1e-3, 1e3, 2000):
        assert quant_params(-a, a)[1] == 0


def test_representable_range_covers_the_range_to_half_a_step() -> None:
    rng = np.random.default_rng(1)
    for _ in range(2000):
        lo, hi = -abs(rng.standard_normal()) * 10.0 ** rng.integers(-3, 3), abs(rng.standard_normal())
        scale, zero_point = quant_params(lo, hi)
        low, high = representable_range(scale, zero_point)
        assert -128 <= zero_point <= 127
        assert low <= lo + scale / 2 and high >= hi - scale / 2
        assert low <= 0.0 <= high


def test_int16_is_symmetric() -> None:
    assert quant_params(-1.0, 0.5, "int16") == (1 / 32767, 0)
    assert quant_params(-0.25, 2.0, "int16") == (2 / 32767, 0)
    assert quant_params(3.0, 4.0, "int16") == (4 / 32767, 0)
    assert representable_range(1 / 32767, 0, "int16") == (-32768 / 32767, 1.0)


@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_all_zero_range_gets_the_documented_scale(dtype: str) -> None:
    assert quant_params(0.0, 0.0, dtype) == (DEGENERATE_SCALE, 0) == (2.0**-16, 0)  # type: ignore[arg-type]


def test_tiny_ranges_keep_a_normal_float32_scale() -> None:
    scale, _ = quant_params(0.0, 1e-40)
    assert scale == 2.0**-126 and np.float32(scale) > 0


@pytest.mark.parametrize(
    ("lo", "hi", "dtype"), [(1.0, -1.0, "int8"), (float("nan"), 1.0, "int8"), (0.0, float("inf"), "int8")]
)
def test_bad_ranges_are_rejected(lo: float, hi: float, dtype: str) -> None:
    with pytest.raises(CalibrationError, match="finite with lo <= hi"):
        quant_params(lo, hi, dtype)  # type: ignore[arg-type]


def test_unknown_dtype_is_rejected() -> None:
    with pytest.raises(CalibrationError, match="'uint8'"):
        quant_params(0.0, 1.0, "uint8")  # type: ignore[arg-type]
