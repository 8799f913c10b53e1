"""A clipping range -> (scale, zero_point) for CMSIS-NN activations (DOMAIN.md section 2).

int8 is asymmetric: real = scale * (q - zero_point), q in [-128, 127], zero_point in [-128, 127]. The
range is first widened to contain 0, so that zero is exactly representable (padding, ReLU):
    scale = (hi - lo) / 255,   zero_point = round(-128 - lo / scale)
The zero point is computed from the range in exact rational arithmetic, -128 - 255 * lo / (hi - lo),
rounded half to even. Exactness matters because of ties: every symmetric range [-a, a] gives exactly
-0.5, and evaluating lo / scale in floats would land on either side of it depending on how scale
rounded; half-to-even (numpy's and ONNX QuantizeLinear's rounding) maps the tie to 0, so symmetric
ranges always get zero_point 0. (TFLite's converter, which picks the zero point from the end with the
smaller error and rounds half away from zero, gives -1 for [-1, 1]; either is a valid encoding.)

int16 (the s16 kernels) is symmetric: zero_point 0, scale = max(|lo|, |hi|) / 32767.

An all-zero range (lo == hi == 0, a tensor that was always zero) has no natural scale: every scale
represents its one value. It gets DEGENERATE_SCALE = 2^-16 with zero_point 0: small, so a stray
non-zero value at run time still dequantizes to almost nothing, yet not tiny, so that a consumer's
int32 bias (scale s_in * s_w) does not overflow. Any other scale is floored at float32's smallest
normal number, since the toolchains store scales as float32.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Literal

from quantcore.errors import CalibrationError

Dtype = Literal["int8", "int16"]

INT8_MIN, INT8_MAX = -128, 127
INT16_MAX = 32767
DEGENERATE_SCALE = 2.0**-16
MIN_SCALE = 2.0**-126


def quant_params(lo: float, hi: float, dtype: Dtype = "int8") -> tuple[float, int]:
    """(scale, zero_point) of the range [lo, hi] widened to contain 0."""
    lo, hi = _widened(lo, hi)
    if dtype == "int8":
        return _int8_params(lo, hi)
    if dtype == "int16":
        return _int16_params(lo, hi)
    raise CalibrationError(f"quant_params: dtype must be 'int8' or 'int16', got {dtype!r}")


def representable_range(scale: float, zero_point: int, dtype: Dtype = "int8") -> tuple[float, float]:
    """The real values of the smallest and largest code: [scale * (qmin - zp), scale * (qmax - zp)]."""
    qmin, qmax = (INT8_MIN, INT8_MAX) if dtype == "int8" else (-INT16_MAX - 1, INT16_MAX)
    return scale * (qmin - zero_point), scale * (qmax - zero_point)


def _widened(lo: float, hi: float) -> tuple[float, float]:
    lo, hi = float(lo), float(hi)
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise CalibrationError(f"quant_params: the range must be finite with lo <= hi, got [{lo}, {hi}]")
    return min(lo, 0.0), max(hi, 0.0)


def _int8_params(lo: float, hi: float) -> tuple[float, int]:
    if lo == hi:  # both 0 after widening
        return DEGENERATE_SCALE, 0
    scale = max((hi - lo) / (INT8_MAX - INT8_MIN), MIN_SCALE)
    exact = INT8_MIN - Fraction(INT8_MAX - INT8_MIN) * Fraction(lo) / (Fraction(hi) - Fraction(lo))
    # lo <= 0 <= hi puts `exact` in [-128, 127]; the clamp only guards the contract.
    return scale, min(max(round(exact), INT8_MIN), INT8_MAX)


def _int16_params(lo: float, hi: float) -> tuple[float, int]:
    largest = max(-lo, hi)
    if largest == 0:
        return DEGENERATE_SCALE, 0
    return max(largest / INT16_MAX, MIN_SCALE), 0
