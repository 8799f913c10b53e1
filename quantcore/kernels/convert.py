"""Conversion of a quantized tensor to another scale or width (int8 <-> int16), Fixpoint's own kernel.

CMSIS-NN has no such function; the generated C carries a small one that computes exactly this with
arm_nn_requantize (so it follows the build's rounding):
    out = clamp(requantize(x + input_offset, multiplier, shift) + output_offset, act_min, act_max)
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from quantcore.kernels._int import INT16_MAX, INT16_MIN, INT32_MAX, Args
from quantcore.kernels.requantize import Rounding, requantize

_TYPES = {np.dtype(np.int8): (-128, 127), np.dtype(np.int16): (INT16_MIN, INT16_MAX)}


def requantize_tensor(
    x: npt.NDArray[np.int8] | npt.NDArray[np.int16],
    *,
    input_offset: int,
    output_offset: int,
    multiplier: int,
    shift: int,
    act_min: int,
    act_max: int,
    out_dtype: type[np.integer] = np.int16,
    rounding: Rounding = Rounding.DOUBLE,
) -> np.ndarray:
    args = Args("fixpoint_requantize")
    if not isinstance(x, np.ndarray) or x.dtype not in _TYPES:
        raise args.fail(
            "input", f"must be an int8 or int16 array, got {getattr(x, 'dtype', type(x).__name__)}"
        )
    lo_in, hi_in = _TYPES[x.dtype]
    args.integer("input_offset", input_offset, -hi_in, -lo_in)
    out_lo, out_hi = _TYPES[np.dtype(out_dtype)]
    args.integer("output_offset", output_offset, out_lo, out_hi)
    args.integer("multiplier", multiplier, 0, INT32_MAX)
    args.integer("shift", shift, -31, 30)
    lo, hi = args.activation(act_min, act_max, out_lo, out_hi)
    out = requantize(x.astype(np.int64) + input_offset, multiplier, shift, rounding) + output_offset
    return np.clip(out, lo, hi).astype(out_dtype)
