"""CMSIS-NN's int8 scheme for constants (DOMAIN.md section 2): symmetric per-channel weights, int32 biases.

Weights: zero point 0, values in [-127, 127] (narrow range, so -w is always representable), one scale per
output channel (or one per tensor). Biases: int32, zero point 0, scale s_in * s_w[c]; a bias that does not
fit int32 saturates, which only happens with a degenerate weight scale and is reported by the checks.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from quantcore.ir import QuantParams
from quantcore.scheme.scaling import round_half_away

WEIGHT_QMAX = 127
F64 = npt.NDArray[np.float64]


def weight_scales(w: np.ndarray, axis: int | None) -> F64:
    """max|w| / 127 per channel along `axis` (per tensor when None); all-zero channels get scale 1."""
    a = np.abs(w.astype(np.float64))
    if axis is None:
        peak = np.array(a.max() if a.size else 0.0)
    else:
        peak = np.moveaxis(a, axis, 0).reshape(a.shape[axis], -1).max(axis=1)
    # An all-zero channel quantizes to zeros with any scale; 1.0 keeps its multiplier finite.
    return np.where(peak > 0, peak / WEIGHT_QMAX, 1.0)


def quantize_weights(
    w: np.ndarray, scales: F64, axis: int | None, lowest: int = -WEIGHT_QMAX
) -> npt.NDArray[np.int8]:
    """`lowest` is -128 for an int8 .tflite's own weights (IMPORTED_LOWEST): TensorFlow's integers are
    kept as they are, and CMSIS-NN's kernels take -128 like any other value."""
    shape = [1] * w.ndim
    if axis is not None:
        shape[axis] = -1
    q = _round(w.astype(np.float64) / scales.reshape(shape))
    return np.clip(q, lowest, WEIGHT_QMAX).astype(np.int8)


IMPORTED_LOWEST = -128
"""The lowest weight of an imported int8 model (its weights were not quantized by Fixpoint)."""


def weight_floor(quant: QuantParams | None) -> int:
    """The lowest integer a weight may take: TensorFlow's -128 for an int8 .tflite's weights (their quant
    method "tflite"), else the narrow range's -127."""
    return IMPORTED_LOWEST if quant is not None and quant.method == "tflite" else -WEIGHT_QMAX


def quantize_bias(
    b: np.ndarray, input_scale: float | F64, weight_scales_: F64, wide: bool = False
) -> np.ndarray:
    """round(b / (s_in * s_w[c])): int32, or int64 for the s16 kernels (`wide`); s_in may be per channel."""
    q = _round(b.astype(np.float64) / (input_scale * weight_scales_))
    if wide:
        return q.astype(np.int64)
    return np.clip(q, -(2**31), 2**31 - 1).astype(np.int32)


def quantize_activation(
    x: np.ndarray, scale: float | F64, zero_point: int, qmin: int = -128, qmax: int = 127
) -> np.ndarray:
    """q = clamp(round(x / scale) + zero_point) - how calibration data enters the int8 graph; a
    per-channel `scale` runs along the last (channel) axis."""
    q = _round(np.asarray(x, dtype=np.float64) / scale) + zero_point
    return np.clip(q, qmin, qmax).astype(np.int8 if qmax == 127 else np.int16)


def dequantize(q: np.ndarray, scale: float | np.ndarray, zero_point: int | np.ndarray) -> F64:
    return (q.astype(np.float64) - zero_point) * scale


def _round(x: F64) -> F64:
    """Round half away from zero (TFLite's rounding), vectorised."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


__all__ = [
    "dequantize",
    "quantize_activation",
    "quantize_bias",
    "quantize_weights",
    "round_half_away",
    "weight_scales",
]
