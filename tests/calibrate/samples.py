"""Seeded sample data for the calibration tests, and the int8 quantizer applied to raw samples."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from quantcore.calibrate import Observer
from quantcore.scheme.qparams import quant_params

Array = npt.NDArray[np.float64]


def gaussian(n: int = 1_000_000, seed: int = 0) -> Array:
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32).astype(np.float64)


def gaussian_with_outliers(n: int = 1_000_000, seed: int = 0) -> Array:
    """N(0, 1) where 0.1% of the samples are scaled by 30: a rare population 30x as wide."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    x[rng.choice(n, n // 1000, replace=False)] *= 30
    return x.astype(np.float32).astype(np.float64)


def gaussian_with_point_outliers(n: int = 1_000_000, seed: int = 0) -> Array:
    """N(0, 1) where 0.1% of the samples are replaced by +-30 (30 sigma)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    picked = rng.choice(n, n // 1000, replace=False)
    x[picked] = np.where(rng.random(picked.size) < 0.5, -30.0, 30.0)
    return x.astype(np.float32).astype(np.float64)


def uniform(n: int = 1_000_000, seed: int = 0, lo: float = -1.0, hi: float = 1.0) -> Array:
    return np.random.default_rng(seed).uniform(lo, hi, n).astype(np.float32).astype(np.float64)


def observed(values: npt.ArrayLike, name: str = "t", bins: int = 2048) -> Observer:
    observer = Observer(name, bins)
    observer.observe(values)
    return observer


def quantization_mse(x: Array, lo: float, hi: float) -> float:
    """Mean squared error of int8-quantizing the samples with quant_params(lo, hi), the deployed way."""
    scale, zero_point = quant_params(lo, hi)
    q = np.clip(np.rint(x / scale) + zero_point, -128, 127)
    return float(np.mean((x - scale * (q - zero_point)) ** 2))
