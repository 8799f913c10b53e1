"""Reference of CMSIS-NN's arm_fully_connected_s8 (per tensor) and arm_fully_connected_per_channel_s8.

Weights are [out][in] (the C's rhs, transposed), the input is (N, in) or any (N, ...) that flattens to it,
and a weight offset (fc_params.filter_offset, for weights with a zero point) is added like the input's:
    acc = bias[o] + sum((x + input_offset) * (w + filter_offset))
The product is a float32 or float64 matrix product, exact for the same reason as in conv.py (exact_float):
with offsets up to OFFSET_RANGE a partial sum is below 2^15 * 2^15 * K, exact in float64 for K < 2^23.
Where quantcore.kernels.int_gemm runs (evaluate's batches), a layer without a weight offset takes its exact
int32 product instead, finished by conv.finish_s8 (the same arithmetic; tests/kernels/test_int_gemm.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from quantcore.kernels import int_gemm
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
from quantcore.kernels.conv import clamp_offset_s8, exact_float, finish_s8
from quantcore.kernels.requantize import Rounding, requantize_int32

Int8Array = npt.NDArray[np.int8]

# The DSP build packs x + input_offset and w + filter_offset into 16-bit lanes ((int16_t) offsets added by
# SXTAB16), so an int8 value plus the offset must fit int16 for every build to compute the same sum; there
# all of them wrap it mod 2^32 alike. Keeping the offsets negated int8 zero points is the schema's rule.
OFFSET_RANGE = (INT16_MIN - INT8_MIN, INT16_MAX - INT8_MAX)


def fully_connected_s8(
    x: Int8Array,
    weights: Int8Array,
    bias: npt.NDArray[np.int32] | None,
    *,
    multiplier: int | npt.NDArray[np.int32],
    shift: int | npt.NDArray[np.int32],
    input_offset: int,
    output_offset: int,
    filter_offset: int = 0,
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
    rounding: Rounding = Rounding.DOUBLE,
) -> Int8Array:
    """Per tensor when multiplier/shift are ints, per output channel when they are int32 arrays."""
    per_channel = isinstance(multiplier, np.ndarray)
    args = Args("arm_fully_connected_per_channel_s8" if per_channel else "arm_fully_connected_s8")
    x = args.array("input", x, np.int8)
    weights = args.array("weights", weights, np.int8, ndim=2)
    out_ch, depth = weights.shape
    if x.ndim < 2 or int(np.prod(x.shape[1:])) != depth:
        raise args.fail("input", f"must be (N, ...) with {depth} values per sample, got shape {x.shape}")
    if bias is not None:
        bias = args.array("bias", bias, np.int32, shape=(out_ch,))
    mult, shft = _quant(args, multiplier, shift, out_ch, per_channel)
    in_off = args.integer("input_offset", input_offset, *OFFSET_RANGE)
    w_off = args.integer("filter_offset", filter_offset, *OFFSET_RANGE)
    # Any int32 (the C adds it to the requantized int32, then clamps); only the schema keeps it in int8.
    out_off = args.integer("output_offset", output_offset, INT32_MIN, INT32_MAX)
    lo, hi = args.activation(act_min, act_max)

    flat = x.reshape(x.shape[0], depth)
    zero_point = int_gemm.zero_point(in_off)
    if w_off == 0 and zero_point is not None and int_gemm.wanted(depth):
        sums = int_gemm.product(int_gemm.to_uint8(flat), weights.T, zero_point=zero_point)
        quant = (bias, np.broadcast_to(mult, (out_ch,)), np.broadcast_to(shft, (out_ch,)))
        return finish_s8(sums, quant, out_off, (lo, hi), rounding)
    rhs_int = weights.T.astype(np.int64) + w_off
    dtype = exact_float(flat, in_off, np.abs(rhs_int).sum(axis=0))
    lhs = flat.astype(dtype)
    lhs += in_off
    acc = (lhs @ rhs_int.astype(dtype)).astype(np.int64)
    if bias is not None:
        acc += bias.astype(np.int64)
    out = requantize_int32(wrap32(acc), mult, shft, rounding)
    return clamp_offset_s8(out, out_off, (lo, hi))


def _quant(
    args: Args, multiplier: Any, shift: Any, out_ch: int, per_channel: bool
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    if per_channel:
        mult = args.array("multiplier", multiplier, np.int32, shape=(out_ch,))
        shft = args.array("shift", shift, np.int32, shape=(out_ch,))
        args.int_values("multiplier", mult, INT32_MIN + 1, INT32_MAX)
        args.int_values("shift", shft, -31, 30)
        return mult, shft
    m = args.integer("multiplier", multiplier, INT32_MIN + 1, INT32_MAX)
    s = args.integer("shift", shift, -31, 30)
    return np.asarray(m, dtype=np.int64), np.asarray(s, dtype=np.int64)
