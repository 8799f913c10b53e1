"""Conversion of a quantized tensor to another scale or width (int8 <-> int16), Fixpoint's own kernel.

CMSIS-NN has no such function; the generated C carries a small one that computes exactly this with
arm_nn_requantize (so it follows the build's rounding):
    out = clamp(requantize(x + input_offset, multiplier, shift) + output_offset, act_min, act_max)
Its checks are the C's definedness only (x + input_offset in int32, a shift arm_nn_requantize can shift
by); zero points, multipliers and clamps inside the types are the quantizer's and the schema's rules.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from quantcore.kernels._int import INT16_MAX, INT16_MIN, INT32_MAX, INT32_MIN, Args
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
    if np.dtype(out_dtype) not in _TYPES:
        raise args.fail("out_dtype", f"must be int8 or int16, got {np.dtype(out_dtype).name}")
    # The C adds input_offset to the input in int32: it must not overflow there (undefined in C).
    args.integer("input_offset", input_offset, INT32_MIN - lo_in, INT32_MAX - hi_in)
    # The output offset is added in int64 and the clamp compares int64s: any int32 is defined.
    args.integer("output_offset", output_offset, INT32_MIN, INT32_MAX)
    # The generated C runs the scalar arm_nn_requantize (no vector build): defined for any int32 multiplier.
    args.integer("multiplier", multiplier, INT32_MIN, INT32_MAX)
    args.integer("shift", shift, -31, 30)
    lo, hi = args.activation(act_min, act_max)
    out = requantize(x.astype(np.int64) + input_offset, multiplier, shift, rounding) + output_offset
    # The C's `value < act_min ? act_min : (value > act_max ? act_max : value)`: act_min wins when the two
    # cross (np.clip would give act_max), and the cast keeps the low bits.
    return np.where(out < lo, lo, np.minimum(out, hi)).astype(out_dtype)
