"""Float scale -> (Q31 multiplier, shift), exactly as TFLite's QuantizeMultiplier, which CMSIS-NN expects.

A real multiplier M is stored as q * 2^shift with q in [0.5, 1) held as round(q * 2^31). The edge cases are
TFLite's: a mantissa that rounds up to 2^31 is halved and the shift incremented; a shift below -31 (|M| <
about 2^-32) flushes to (0, 0) because every bit would be shifted out; a shift above 30 saturates to
(2^31 - 1, 30), the largest the single-rounding requantization supports. Rounding is half away from zero
(TfLiteRound = std::round), not Python's round-half-to-even.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from quantcore.errors import QuantcoreError

_Q31 = 1 << 31


class ScaleError(QuantcoreError):
    """A scale that cannot be represented as a multiplier (NaN or infinite)."""


def round_half_away(value: float) -> int:
    """std::round: halves go away from zero."""
    return int(math.copysign(math.floor(abs(value) + 0.5), value))


def quantize_multiplier(scale: float, name: str = "scale") -> tuple[int, int]:
    """(multiplier, shift) with scale ~= multiplier * 2^(shift - 31); shift > 0 means a left shift."""
    scale = float(scale)
    if not math.isfinite(scale):
        raise ScaleError(f"{name} must be a finite number, got {scale}")
    if scale == 0.0:
        return 0, 0
    q, shift = math.frexp(scale)
    q_fixed = round_half_away(q * _Q31)
    if abs(q_fixed) == _Q31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    if shift > 30:
        return (_Q31 - 1) if q_fixed > 0 else -(_Q31 - 1), 30
    return q_fixed, shift


def quantize_multipliers(
    scales: npt.ArrayLike, name: str = "scale"
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]:
    """Per-channel quantize_multiplier: int32 multiplier and shift arrays, as CMSIS-NN's quant params."""
    pairs = [quantize_multiplier(s, f"{name}[{i}]") for i, s in enumerate(np.asarray(scales, float).ravel())]
    mult = np.array([m for m, _ in pairs], dtype=np.int32)
    shift = np.array([s for _, s in pairs], dtype=np.int32)
    return mult, shift
