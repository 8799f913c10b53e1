"""Which range-selection method calibrates a tensor, with its parameters, and the one entry point.

    lo, hi = select_range(observer, Method.ENTROPY)
    lo, hi = select_range(observer, RangeMethod(Method.PERCENTILE, percentile=99.9))
    scale, zero_point = quant_params(lo, hi)

Every method returns floats with lo <= 0 <= hi, inside [min(min, 0), max(max, 0)] of the data.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from quantcore.calibrate.entropy import DEFAULT_LEVELS, entropy_range
from quantcore.calibrate.histogram import Histogram
from quantcore.calibrate.mse import mse_range
from quantcore.calibrate.observer import Observer
from quantcore.calibrate.ranges import DEFAULT_PERCENTILE, minmax_range, percentile_range
from quantcore.errors import CalibrationError


class Method(enum.Enum):
    """A range-selection method; the value is its name in settings and in the quant-params JSON."""

    MINMAX = "minmax"
    PERCENTILE = "percentile"
    ENTROPY = "entropy"
    MSE = "mse"

    @property
    def summary(self) -> str:
        """One line on what the method does."""
        return _METADATA[self][0]

    @property
    def parameters(self) -> tuple[str, ...]:
        """The RangeMethod fields the method reads."""
        return _METADATA[self][1]


_METADATA: dict[Method, tuple[str, tuple[str, ...]]] = {
    Method.MINMAX: ("the observed min and max: nothing is clipped", ()),
    Method.PERCENTILE: ("clip (100 - percentile)% of the values off each tail", ("percentile",)),
    Method.ENTROPY: (
        "TensorRT's KL-divergence threshold on each side of zero, unless min/max quantizes better",
        ("levels",),
    ),
    Method.MSE: ("least expected squared error of the int8 quantizer, clipping included", ()),
}


@dataclass(frozen=True)
class RangeMethod:
    """A method and its parameters (a setting: bad values raise CalibrationError naming the field)."""

    method: Method = Method.MINMAX
    """The range-selection method."""
    percentile: float = DEFAULT_PERCENTILE
    """PERCENTILE: the share of values kept below the upper end (and above the lower), in [50, 100]."""
    levels: int = DEFAULT_LEVELS
    """ENTROPY: steps of the int8 grid over the range, shared out between the sides of zero (255: all of int8;
    TensorRT's symmetric search gives one side 128)."""

    def __post_init__(self) -> None:
        if not isinstance(self.method, Method):
            raise CalibrationError(f"calibration method must be a Method, got {self.method!r}")
        if not 50.0 <= self.percentile <= 100.0:
            raise CalibrationError(f"calibration percentile must be in [50, 100], got {self.percentile}")
        if isinstance(self.levels, bool) or not isinstance(self.levels, int) or self.levels < 2:
            raise CalibrationError(f"calibration levels must be an integer >= 2, got {self.levels!r}")

    @property
    def label(self) -> str:
        """e.g. 'percentile(percentile=99.99)', for the record of how a range was chosen."""
        values = ", ".join(f"{name}={getattr(self, name)}" for name in self.method.parameters)
        return f"{self.method.value}({values})"


def _percentile(h: Histogram, m: RangeMethod) -> tuple[float, float]:
    return percentile_range(h, m.percentile)


def _entropy(h: Histogram, m: RangeMethod) -> tuple[float, float]:
    return entropy_range(h, m.levels)


_SELECTORS: dict[Method, Callable[[Histogram, RangeMethod], tuple[float, float]]] = {
    Method.MINMAX: lambda h, _: minmax_range(h),
    Method.PERCENTILE: _percentile,
    Method.ENTROPY: _entropy,
    Method.MSE: lambda h, _: mse_range(h),
}


def select_range(observer: Observer, method: Method | RangeMethod = Method.MINMAX) -> tuple[float, float]:
    """The clipping range (lo, hi), lo <= 0 <= hi, that `method` picks from the observed values."""
    spec = method if isinstance(method, RangeMethod) else RangeMethod(method)
    return _SELECTORS[spec.method](observer.histogram(), spec)
