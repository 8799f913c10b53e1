"""Calibration: per-tensor observers with mergeable histograms, range selection and quant params.

Pure numpy: the pipeline feeds each tensor's activations, by name, to an Observer; observers from several
batches or processes merge exactly (histogram.py); a Method turns the statistics into a clipping range
(minmax, percentile, entropy, mse) and quantcore.scheme.qparams turns the range into CMSIS-NN's
(scale, zero_point).
"""

from quantcore.calibrate.entropy import entropy_range
from quantcore.calibrate.errors import (
    EmptyObserverError,
    NonFiniteBatchError,
    ObserverFormatError,
    ObserverMismatchError,
)
from quantcore.calibrate.histogram import DEFAULT_BINS, Histogram, merge_histograms
from quantcore.calibrate.method import Method, RangeMethod, select_range
from quantcore.calibrate.mse import mse_range
from quantcore.calibrate.observer import Observer
from quantcore.calibrate.ranges import minmax_range, percentile_range, quantile
from quantcore.calibrate.serialize import load_npz, save_npz

__all__ = [
    "DEFAULT_BINS",
    "EmptyObserverError",
    "Histogram",
    "Method",
    "NonFiniteBatchError",
    "Observer",
    "ObserverFormatError",
    "ObserverMismatchError",
    "RangeMethod",
    "entropy_range",
    "load_npz",
    "merge_histograms",
    "minmax_range",
    "mse_range",
    "percentile_range",
    "quantile",
    "save_npz",
    "select_range",
]
