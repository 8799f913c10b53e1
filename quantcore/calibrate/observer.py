"""The per-tensor observer: accumulates count, min, max, zeros and a mergeable histogram over batches.

    obs = Observer("layer2.relu")
    for batch in activations:
        obs.observe(batch)
    other_process_obs = Observer.from_dict(message)   # or load_npz(...)[name]
    obs.merge(other_process_obs)

Observation is single-pass and merging is exact and order-independent (histogram.py says why): sharded
calibration gives bit for bit what one process would. A batch with NaN or Inf is rejected whole, with the
tensor's name and the number of bad values, and leaves the observer unchanged. Values are taken as float32,
the precision of the networks being quantized.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from quantcore.calibrate.errors import (
    EmptyObserverError,
    NonFiniteBatchError,
    ObserverFormatError,
    ObserverMismatchError,
)
from quantcore.calibrate.histogram import DEFAULT_BINS, Histogram, histogram_of, merge_histograms
from quantcore.errors import CalibrationError

FORMAT = "fixpoint.calibrate.observer"
FORMAT_VERSION = 1
_EMPTY_GRID: dict[str, Any] = {"exponent": None, "first": None, "counts": [], "zeros": 0}
_EMPTY_GRID |= {"min": None, "max": None}


class Observer:
    """Statistics of one tensor's values over all the batches it has been shown."""

    def __init__(self, name: str, bins: int = DEFAULT_BINS) -> None:
        if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
            raise CalibrationError(f"tensor '{name}': bins must be a positive integer, got {bins!r}")
        self._name = name
        self._bins = bins
        self._histogram: Histogram | None = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def bins(self) -> int:
        """Resolution: [min, max] spans more than `bins` and at most 2 * bins bins (fewer only where
        float32 itself has fewer distinct values, see grid.py)."""
        return self._bins

    @property
    def count(self) -> int:
        """How many values have been observed."""
        return 0 if self._histogram is None else self._histogram.total

    @property
    def min(self) -> float:
        return self.histogram().min

    @property
    def max(self) -> float:
        return self.histogram().max

    def histogram(self) -> Histogram:
        """The accumulated histogram; EmptyObserverError (naming the tensor) if nothing was observed."""
        if self._histogram is None:
            raise EmptyObserverError(self._name)
        return self._histogram

    def observe(self, batch: npt.ArrayLike) -> None:
        """Add a batch of values (any shape); empty batches are ignored."""
        with np.errstate(over="ignore"):  # float64 beyond float32's range becomes inf, reported below
            values = np.ascontiguousarray(batch, dtype=np.float32).reshape(-1)
        if values.size == 0:
            return
        # min and max propagate NaN and show +-inf: two fast reductions check the whole batch. Adding 0.0
        # turns -0.0 into 0.0, or merged extremes would depend on which zero came first.
        vmin, vmax = float(values.min()) + 0.0, float(values.max()) + 0.0
        if not (np.isfinite(vmin) and np.isfinite(vmax)):
            bad = values.size - int(np.count_nonzero(np.isfinite(values)))
            raise NonFiniteBatchError(self._name, bad, values.size)
        self._histogram = histogram_of(values, vmin, vmax, self._bins, self._histogram)

    def merge(self, other: Observer) -> None:
        """Add everything `other` observed (same tensor name and bins); `other` is left unchanged."""
        if (other.name, other.bins) != (self._name, self._bins):
            raise ObserverMismatchError(
                f"cannot merge the observer of '{other.name}' ({other.bins} bins) into that of "
                f"'{self._name}' ({self._bins} bins): merge observers of the same tensor and resolution"
            )
        if other._histogram is None:
            return
        if self._histogram is None:
            self._histogram = other._histogram
        else:
            self._histogram = merge_histograms(self._histogram, other._histogram)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Observer):
            return NotImplemented
        if (self._name, self._bins) != (other._name, other._bins):
            return False
        if self._histogram is None or other._histogram is None:
            return self._histogram is other._histogram
        return self._histogram.same_as(other._histogram)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        if self._histogram is None:
            return f"Observer({self._name!r}, empty)"
        h = self._histogram
        return f"Observer({self._name!r}, count={h.total}, min={h.min}, max={h.max}, bins={len(h.counts)})"

    def to_dict(self) -> dict[str, Any]:
        """Plain Python data (JSON-able; floats round-trip exactly through json)."""
        record: dict[str, Any] = {"format": FORMAT, "version": FORMAT_VERSION}
        record |= {"name": self._name, "bins": self._bins}
        h = self._histogram
        if h is None:
            return record | _EMPTY_GRID
        record |= {"exponent": h.exponent, "first": h.first, "counts": h.counts.tolist(), "zeros": h.zeros}
        return record | {"min": h.min, "max": h.max}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Observer:
        """The observer `to_dict` described; ObserverFormatError if the data is malformed."""
        name = str(data.get("name", "?"))
        if data.get("format") != FORMAT or data.get("version") != FORMAT_VERSION:
            raise ObserverFormatError(
                f"tensor '{name}': not a version-{FORMAT_VERSION} {FORMAT} record "
                f"(format {data.get('format')!r}, version {data.get('version')!r})"
            )
        try:
            observer = cls(name, data["bins"])
            if data["counts"]:
                observer._histogram = _histogram_from(data)
        except (KeyError, TypeError, ValueError, ObserverFormatError) as error:
            raise ObserverFormatError(f"tensor '{name}': bad observer record: {error}") from error
        return observer


def _histogram_from(data: dict[str, Any]) -> Histogram:
    fields = ("bins", "exponent", "first", "zeros")
    if not all(isinstance(data[key], int | np.integer) for key in fields):
        raise ObserverFormatError(f"{', '.join(fields)} must be integers")
    counts = np.asarray(data["counts"])
    if counts.dtype.kind not in "iu":
        raise ObserverFormatError("counts must be integers")
    return Histogram(
        int(data["bins"]),
        int(data["exponent"]),
        int(data["first"]),
        counts.astype(np.int64),
        int(data["zeros"]),
        float(data["min"]) + 0.0,  # -0.0 -> 0.0, as observe() records it
        float(data["max"]) + 0.0,
    )
