"""select_range and Method: dispatch, parameters, invariants of every method, the outlier comparison."""

from __future__ import annotations

import numpy as np
import pytest

from quantcore.calibrate import EmptyObserverError, Method, Observer, RangeMethod, select_range
from quantcore.errors import CalibrationError
from quantcore.scheme.qparams import quant_params
from tests.calibrate.samples import (
    gaussian,
    gaussian_with_outliers,
    gaussian_with_point_outliers,
    observed,
    uniform,
)

ODD_DATA = {
    "signed": gaussian(50_000),
    "relu": np.maximum(gaussian(50_000), 0),
    "negative": -np.abs(gaussian(50_000)) - 1,
    "far from zero": uniform(50_000, lo=1000.0, hi=1001.0),
    "constant": np.full(100, 3.0),
    "negative constant": np.full(100, -2.0),
    "zeros": np.zeros(100),
    "one value": np.array([0.75]),
    "subnormal": np.array([1e-45, -3e-45, 0.0], dtype=np.float32),
    "two points": np.array([-1.0, 5.0] * 50),
}


@pytest.mark.parametrize("method", list(Method))
@pytest.mark.parametrize("kind", list(ODD_DATA))
def test_every_range_contains_zero_and_lies_within_the_data(method: Method, kind: str) -> None:
    obs = observed(ODD_DATA[kind])
    lo, hi = select_range(obs, method)
    assert isinstance(lo, float) and isinstance(hi, float)
    assert min(obs.min, 0.0) <= lo <= 0.0 <= hi <= max(obs.max, 0.0)
    scale, zero_point = quant_params(lo, hi)
    assert scale > 0 and -128 <= zero_point <= 127


def test_outliers_are_clipped_by_percentile_and_mse() -> None:
    obs = observed(gaussian_with_outliers())
    ranges = {m: select_range(obs, m) for m in Method}
    # 0.1% outliers: the default 99.999 keeps them (0.001% per tail); 99.99 is the setting that clips.
    ranges[Method.PERCENTILE] = select_range(obs, RangeMethod(Method.PERCENTILE, percentile=99.99))
    assert ranges[Method.MINMAX] == (obs.min, obs.max)
    # Entropy's KL threshold clips them too (test_entropy.py), but quantizes worse than min/max does.
    assert ranges[Method.ENTROPY] == (obs.min, obs.max)
    assert ranges[Method.PERCENTILE][1] < 0.5 * obs.max
    assert ranges[Method.MSE][1] < 0.75 * obs.max
    for m in (Method.PERCENTILE, Method.MSE):
        assert ranges[m][0] > 0.75 * obs.min


def test_point_outliers_at_one_in_a_thousand_are_kept_except_by_a_wide_percentile() -> None:
    # 0.05% of the values at each of +-30: more than the 0.01% a 99.99 percentile clips, and a mass
    # whose clipping error (30 - t)^2 outweighs any rounding gain (MSE) or KL gain (entropy).
    obs = observed(gaussian_with_point_outliers())
    for method in (Method.MINMAX, Method.PERCENTILE, Method.ENTROPY):
        assert select_range(obs, method) == (-30.0, 30.0)
    assert select_range(obs, Method.MSE)[1] > 29.0
    lo, hi = select_range(obs, RangeMethod(Method.PERCENTILE, percentile=99.9))
    assert -5.0 < lo < -3.0 and 3.0 < hi < 5.0


@pytest.mark.parametrize("method", list(Method))
def test_uniform_data_keeps_nearly_its_range(method: Method) -> None:
    obs = observed(uniform())
    lo, hi = select_range(obs, method)
    assert hi >= 0.99 * obs.max and lo <= 0.99 * obs.min


def test_parameters_reach_the_method() -> None:
    obs = observed(gaussian())
    assert select_range(obs, Method.PERCENTILE) == select_range(obs, RangeMethod(Method.PERCENTILE))
    wide = select_range(obs, RangeMethod(Method.PERCENTILE, percentile=99.0))
    assert wide[1] < select_range(obs, Method.PERCENTILE)[1]
    coarse = select_range(obs, RangeMethod(Method.ENTROPY, levels=64))
    assert coarse[1] < select_range(obs, Method.ENTROPY)[1]


def test_method_metadata_and_labels() -> None:
    assert Method("entropy") is Method.ENTROPY and Method.ENTROPY.parameters == ("levels",)
    assert all(m.summary for m in Method)
    assert RangeMethod(Method.PERCENTILE, percentile=99.9).label == "percentile(percentile=99.9)"
    assert RangeMethod(Method.MSE).label == "mse()"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"percentile": 40.0}, "percentile"), ({"levels": 1}, "levels"), ({"method": "entropy"}, "Method")],
)
def test_bad_parameters_are_rejected(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(CalibrationError, match=message):
        RangeMethod(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("method", list(Method))
def test_an_empty_observer_names_the_tensor(method: Method) -> None:
    with pytest.raises(EmptyObserverError, match=r"'stem\.conv'"):
        select_range(Observer("stem.conv"), method)
