"""Reference of CMSIS-NN's arm_batch_matmul_s8 and arm_batch_matmul_s16 (TFLite BATCH_MATMUL).

Both operands are cmsis_nn_dims (n, h, w, c) stacks of matrices, w rows of c columns, and the right-hand
side is already transposed: output row i, column j is the dot product of lhs row i and rhs row j, so both
have the same c. The C ignores bmm_params.adj_x / adj_y; a caller with adjoint operands transposes them
first (arm_transpose_s8). The batch dimensions n and h broadcast as in numpy: each pair is equal or one of
them is 1, and the C walks its pointers accordingly (other pairs make it read past an operand).

Per output element, as the pure-C arm_nn_vec_mat_mult_t_s8 / _s16_s16 compute it:
    s8:  acc = sum((lhs + input_offset) * (rhs + filter_offset))          int32, wraps
         out = clamp(requantize(acc, multiplier, shift) + output_offset, act_min, act_max)
    s16: acc = sum(lhs * rhs)                                              int64, no offsets
         out = clamp(requantize_s64(acc, REDUCE_MULTIPLIER(multiplier), shift), act_min, act_max)
The sums are float64 matrix products, exact: an s8 product (offsets up to fully_connected.OFFSET_RANGE)
and an s16 product are at most 2^30 in magnitude, and the sums are taken over column blocks of 2^22 so no
partial sum reaches 2^53.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from quantcore.kernels._int import (
    INT8_MAX,
    INT8_MIN,
    INT16_MAX,
    INT16_MIN,
    INT32_MAX,
    INT32_MIN,
    Args,
    wrap32,
)
from quantcore.kernels.fully_connected import OFFSET_RANGE
from quantcore.kernels.requantize import Rounding, reduce_multiplier, requantize, requantize_s64
from quantcore.kernels.s16 import SHIFT_S32, SHIFT_S64

Int8Array = npt.NDArray[np.int8]
Int16Array = npt.NDArray[np.int16]
I64 = npt.NDArray[np.int64]

# Columns per float64 block, so that no partial sum reaches 2^53: products are at most 2^30 in magnitude.
_BLOCK = 1 << 22


def batch_matmul_s8(
    lhs: Int8Array,
    rhs: Int8Array,
    *,
    multiplier: int,
    shift: int,
    input_offset: int,
    filter_offset: int,
    output_offset: int,
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
    rounding: Rounding = Rounding.DOUBLE,
) -> Int8Array:
    """arm_batch_matmul_s8: lhs (N, H, rows, K), transposed rhs (N', H', cols, K) -> (N'', H'', rows, cols).

    The offsets are bmm_params.fc_params': input_offset is added to lhs, filter_offset to rhs.
    """
    args = Args("arm_batch_matmul_s8")
    lhs, rhs = _operands(args, lhs, rhs, np.int8)
    mult = args.integer("multiplier", multiplier, INT32_MIN + 1, INT32_MAX)
    shft = args.integer("shift", shift, *SHIFT_S32)
    # As fully connected's (the same arm_nn_vec_mat_mult_t_s8): int8 + offset must fit the DSP build's int16
    # lanes; negated int8 zero points are the schema's rule, not the C's.
    lhs_off = args.integer("input_offset", input_offset, *OFFSET_RANGE)
    rhs_off = args.integer("filter_offset", filter_offset, *OFFSET_RANGE)
    # Any int32 (the C adds it to the requantized int32, then clamps); only the schema keeps it in int8.
    out_off = args.integer("output_offset", output_offset, INT32_MIN, INT32_MAX)
    lo, hi = args.activation(act_min, act_max)

    acc = _exact_matmul(lhs.astype(np.float64) + lhs_off, rhs.astype(np.float64) + rhs_off, _BLOCK)
    # The C adds the offset in int32 (wrapping there on the targets), clamps, and casts to int8.
    out = wrap32(requantize(wrap32(acc), mult, shft, rounding) + out_off)
    return np.clip(out, lo, hi).astype(np.int8)


def batch_matmul_s16(
    lhs: Int16Array,
    rhs: Int16Array,
    *,
    multiplier: int,
    shift: int,
    act_min: int = INT16_MIN,
    act_max: int = INT16_MAX,
) -> Int16Array:
    """arm_batch_matmul_s16: batch_matmul_s8 for int16 operands, whose zero points are 0 (no offsets)."""
    args = Args("arm_batch_matmul_s16")
    lhs, rhs = _operands(args, lhs, rhs, np.int16)
    mult = args.integer("multiplier", multiplier, INT32_MIN + 1, INT32_MAX)
    shft = args.integer("shift", shift, *SHIFT_S64)
    lo, hi = args.activation(act_min, act_max)

    acc = _exact_matmul(lhs.astype(np.float64), rhs.astype(np.float64), _BLOCK)
    out = requantize_s64(acc, reduce_multiplier(mult), shft)
    return np.clip(out, lo, hi).astype(np.int16)


def _operands(
    args: Args, lhs: Any, rhs: Any, dtype: type[np.generic]
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Check both stacks: four dimensions, the same depth, and batch dimensions that broadcast."""
    lhs = args.array("lhs", lhs, dtype, ndim=4)
    rhs = args.array("rhs", rhs, dtype, ndim=4)
    if lhs.shape[3] != rhs.shape[3]:
        raise args.fail(
            "rhs",
            f"must be transposed, (N, H, cols, {lhs.shape[3]}) like lhs's columns, got shape {rhs.shape}",
        )
    for axis, name in ((0, "n"), (1, "h")):
        a, b = lhs.shape[axis], rhs.shape[axis]
        if a != b and 1 not in (a, b):
            raise args.fail("rhs", f"batch dimension {name} = {b} does not broadcast against lhs's {a}")
    return lhs, rhs


def _exact_matmul(lhs: npt.NDArray[np.float64], rhs: npt.NDArray[np.float64], block: int) -> I64:
    """lhs @ rhs^T over the last two axes, batch axes broadcast, summed exactly in blocks of columns."""
    depth = lhs.shape[-1]
    shape = (*np.broadcast_shapes(lhs.shape[:2], rhs.shape[:2]), lhs.shape[2], rhs.shape[2])
    acc = np.zeros(shape, dtype=np.int64)
    for start in range(0, depth, block):
        part = slice(start, start + block)
        acc += (lhs[..., part] @ np.swapaxes(rhs[..., part], -1, -2)).astype(np.int64)
    return acc
