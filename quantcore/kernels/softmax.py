"""Bit-exact reference of CMSIS-NN's softmax kernels: arm_softmax_s8, arm_softmax_s8_s16, arm_softmax_s16.

Softmax runs along the last axis; every leading axis is a row (CMSIS-NN's num_rows), computed vectorised.

The s8-input kernels follow arm_nn_softmax_common_s8 (the pure-C path of arm_softmax_s8): the row maximum
is subtracted, each difference is scaled by `mult` * 2^`shift` into Q5.26, exponentiated with
arm_nn_exp_on_negative_values, summed in Q12.19, inverted with arm_nn_one_over_one_plus_x_for_x_in_0_1 and
scaled to the output's 1/256 (s8) or 1/65536 (s16) step; differences below `diff_min` give the output
minimum. That arithmetic uses only saturating doubling high multiplies, never arm_nn_requantize, so it is
the same in every build.

arm_softmax_s16 interpolates two 513-entry lookup tables (exp on [-10, 0] and 1/(1+x) on [0, 1]) that the
caller passes in; here they are generated the way TFLite Micro generates them (its gen_lut, in float32),
which reproduces CMSIS-NN's test tables entry for entry. Its input scaling is arm_nn_requantize, so it
depends on the build's rounding.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt

from quantcore.kernels._int import (
    I64,
    INT8_MAX,
    INT8_MIN,
    INT16_MAX,
    INT16_MIN,
    INT32_MAX,
    INT32_MIN,
    Args,
    wrap32,
)
from quantcore.kernels.requantize import Rounding, divide_by_power_of_two, requantize

# arm_nn_softmax_common_s8 accumulates the exponentials with 12 integer bits (Q12.19).
ACCUM_BITS = 12
# arm_softmax_s8 / _s8_s16 document shift in [0, 31]; mult scales a non-positive difference, and
# exp_on_negative_values is only defined for a non-positive argument, so mult must not be negative.
S8_SHIFT_RANGE = (0, 31)
S8_MULT_RANGE = (0, INT32_MAX)
# arm_softmax_s16 rescales with arm_nn_requantize, whose documented ranges these are (its header's
# "[0, 31]" for shift is copied from the s8 kernels; TFLite's int16 softmax uses negative shifts).
S16_SHIFT_RANGE = (-31, 30)
S16_MULT_RANGE = (INT32_MIN + 1, INT32_MAX)
LUT_SIZE = 513

_FloatFn = Callable[[npt.NDArray[np.float32]], npt.NDArray[np.float32]]


def softmax_s8(x: npt.NDArray[np.int8], *, mult: int, shift: int, diff_min: int) -> npt.NDArray[np.int8]:
    """arm_softmax_s8 along the last axis of an int8 array; output scale 1/256, zero point -128."""
    rows, args = _s8_rows("arm_softmax_s8", x, mult, shift, diff_min)
    result = _softmax_common_s8(args, rows, mult, shift, diff_min, out_bits=8)
    return result.reshape(x.shape).astype(np.int8)


def softmax_s8_s16(x: npt.NDArray[np.int8], *, mult: int, shift: int, diff_min: int) -> npt.NDArray[np.int16]:
    """arm_softmax_s8_s16 along the last axis: int8 input, int16 output (scale 1/65536, zero point -32768)."""
    rows, args = _s8_rows("arm_softmax_s8_s16", x, mult, shift, diff_min)
    result = _softmax_common_s8(args, rows, mult, shift, diff_min, out_bits=16)
    return result.reshape(x.shape).astype(np.int16)


def softmax_s16(
    x: npt.NDArray[np.int16], *, mult: int, shift: int, rounding: Rounding = Rounding.DOUBLE
) -> npt.NDArray[np.int16]:
    """arm_softmax_s16 along the last axis of an int16 array, with TFLite Micro's lookup tables."""
    args = Args("arm_softmax_s16")
    rows = _rows(args, x, np.int16)
    mult = args.integer("mult", mult, *S16_MULT_RANGE)
    shift = args.integer("shift", shift, *S16_SHIFT_RANGE)
    diff = rows - rows.max(axis=1, keepdims=True)
    scaled = requantize(diff, mult, shift, rounding)
    # The LUT index wants a symmetric int16: 0 (no difference) maps to the top of the table.
    exps = _interpolate(exp_lut(), np.clip(scaled + INT16_MAX, INT16_MIN, INT16_MAX))
    total = exps.sum(axis=1)
    _check_sum_fits_int32(args, total)
    headroom = _clz(total)
    product = (exps * _reciprocal_s16(total, headroom)[:, None]) >> (30 - headroom)[:, None]
    return _wrap16((product + 1) >> 1).reshape(x.shape).astype(np.int16)


def _reciprocal_s16(total: I64, headroom: I64) -> I64:
    """1/sum from the one-by-one table, as arm_softmax_s16 computes it from the normalised sum."""
    shifted_sum = wrap32((total << (headroom - 1)) + (1 << 13)) >> 14
    # x = sum - 1 re-centred to a symmetric int16 (-65536 - 32768). C stores it in an int16_t, so a sum just
    # below a power of two (shifted_sum 2^17) wraps to -32768 and reads 1/(1+0) instead of 1/(1+1): the row's
    # outputs double. TFLite's reference saturates there instead; this follows the C.
    return _interpolate(one_by_one_lut(), _wrap16(shifted_sum - 98304))


@cache
def exp_lut() -> npt.NDArray[np.int16]:
    """The 513-entry exp(x) table on [-10, 0] that TFLite Micro passes to arm_softmax_s16 as exp_lut."""
    # expf, as the float64 exp rounded once to float32 (correctly rounded; glibc's expf agrees here).
    return _gen_lut(lambda v: np.exp(v.astype(np.float64)).astype(np.float32), -10.0, 0.0)


@cache
def one_by_one_lut() -> npt.NDArray[np.int16]:
    """The 513-entry 1/(1+x) table on [0, 1] that TFLite Micro passes to arm_softmax_s16 as one_by_one_lut."""
    return _gen_lut(lambda v: np.float32(1.0) / (np.float32(1.0) + v), 0.0, 1.0)


def _softmax_common_s8(args: Args, rows: I64, mult: int, shift: int, diff_min: int, out_bits: int) -> I64:
    """arm_nn_softmax_common_s8 on (rows, row_size) differences; `out_bits` 8 or 16 picks the output type."""
    diff = rows - rows.max(axis=1, keepdims=True)
    valid = diff >= diff_min
    # C computes diff * (1 << shift) in int32; shift 31 makes the mask INT32_MIN and the product wraps.
    mask = INT32_MIN if shift == 31 else 1 << shift
    exps = _exp_on_negative_values(_mul_sat(wrap32(diff * mask), mult))
    total = np.where(valid, divide_by_power_of_two(exps, ACCUM_BITS), 0).sum(axis=1)
    _check_sum_fits_int32(args, total)
    # A row with no valid element (diff_min > 0) has sum 0; its outputs are all the minimum below, so any
    # positive stand-in keeps the shifts defined without changing a result.
    live = np.where(total > 0, total, 1)
    headroom = _clz(live)
    scale = _one_over_one_plus_x(wrap32((live << headroom) - 2**31))
    bits_over_unit = ACCUM_BITS - headroom + (31 - out_bits)
    _check_shift_defined(args, bits_over_unit, total)
    lo, hi = (INT8_MIN, INT8_MAX) if out_bits == 8 else (INT16_MIN, INT16_MAX)
    scaled = divide_by_power_of_two(_mul_sat(scale[:, None], exps), bits_over_unit[:, None]) + lo
    return np.where(valid, np.clip(scaled, lo, hi), lo)


def _mul_sat(a: Any, b: Any) -> I64:
    """arm_nn_doubling_high_mult (MUL_SAT): round(a*b / 2^31), the midpoint away from zero, saturating
    INT32_MIN * INT32_MIN. Unlike the requantization multiply it divides with C's truncating '/'."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    nudge = np.where((a < 0) ^ (b < 0), 1 - (1 << 30), 1 << 30)
    product = a * b + nudge
    quotient = np.where(product >= 0, product >> 31, -((-product) >> 31))
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, quotient)


def _mul_pow2(value: I64, exponent: int) -> I64:
    """arm_nn_mult_by_power_of_two: value * 2^exponent, saturated to int32."""
    threshold = (1 << (31 - exponent)) - 1
    result = wrap32(value << exponent)
    result = np.where(value > threshold, INT32_MAX, result)
    return np.where(value < -threshold, INT32_MIN, result)


# exp(-1/4 * 2^k) for k = 0..6 in Q0.31, one factor per set bit of the argument's integer part.
_EXP_FACTORS = (1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242)


def _exp_on_negative_values(val: I64) -> I64:
    """arm_nn_exp_on_negative_values: exp of a Q5.26 argument <= 0, in Q0.31."""
    mod_minus_quarter = (val & ((1 << 24) - 1)) - (1 << 24)
    remainder = mod_minus_quarter - val
    # exp on [-1/4, 0) by a Taylor polynomial around -1/8 (1895147668 = exp(-1/8) in Q0.31).
    x = (mod_minus_quarter << 5) + (1 << 28)
    x2 = _mul_sat(x, x)
    x4_over_4 = divide_by_power_of_two(_mul_sat(x2, x2), 2)
    tail = divide_by_power_of_two(_mul_sat(wrap32(x4_over_4 + _mul_sat(x2, x)), 715827883) + x2, 1)
    result = wrap32(1895147668 + _mul_sat(1895147668, wrap32(x + tail)))
    for bit, factor in enumerate(_EXP_FACTORS, start=24):
        result = np.where(remainder & (1 << bit), _mul_sat(result, factor), result)
    return np.where(val == 0, INT32_MAX, result)


def _one_over_one_plus_x(val: I64) -> I64:
    """arm_nn_one_over_one_plus_x_for_x_in_0_1: 1/(1+x) for x in [0, 1) in Q0.31, by three Newton steps."""
    total = val + INT32_MAX
    # C: (sum + (sum >= 0 ? 1 : -1)) / 2 with int64 '/', which truncates toward zero.
    adjusted = total + np.where(total >= 0, 1, -1)
    half_denominator = wrap32(np.where(adjusted >= 0, adjusted // 2, -((-adjusted) // 2)))
    x = wrap32(1515870810 + _mul_sat(half_denominator, -1010580540))
    for _ in range(3):
        error = wrap32((1 << 29) - _mul_sat(half_denominator, x))
        x = wrap32(x + _mul_pow2(_mul_sat(x, error), 2))
    return _mul_pow2(x, 1)


def _interpolate(lut: npt.NDArray[np.int16], value: I64) -> I64:
    """arm_softmax_s16's table look-up: the top 9 bits index, the low 7 interpolate; each step is stored
    in an int16_t in C, hence the wraps."""
    table = lut.astype(np.int64)
    index = 256 + (value >> 7)
    offset = value & 0x7F
    base = table[index]
    slope = _wrap16(table[index + 1] - base)
    delta = _wrap16((slope * offset + 64) >> 7)
    return _wrap16(base + delta)


def _gen_lut(func: _FloatFn, lo: float, hi: float) -> npt.NDArray[np.int16]:
    """TFLite's gen_lut<float, int16_t, int16_t> with output range [-1, 1]: 512 samples, each biased by half
    the error of linear interpolation at its midpoint, and one final sample for the last slope."""
    f32 = np.float32
    steps = LUT_SIZE - 1
    step = (f32(hi) - f32(lo)) / f32(steps)
    scale = f32(65536.0) / (f32(1.0) - f32(-1.0))
    i = np.arange(steps).astype(f32)
    value = func(f32(lo) + i * step) * scale
    midpoint = func(f32(lo) + i * step + step / f32(2.0)) * scale
    following = func(f32(lo) + (i + f32(1.0)) * step) * scale
    sample = _round_half_away(value)
    interpolated = _round_half_away((following + sample) / f32(2.0))
    bias = _round_half_away((interpolated - _round_half_away(midpoint)) / f32(2.0))
    last = _round_half_away(func(np.array([hi], dtype=f32)) * scale)
    table: npt.NDArray[np.int16] = np.clip(
        np.concatenate([sample - bias, last]), INT16_MIN, INT16_MAX
    ).astype(np.int16)
    table.flags.writeable = False
    return table


def _round_half_away(value: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """C's roundf (TfLiteRound): the midpoint away from zero. The fraction `value - trunc` is exact."""
    whole = np.trunc(value)
    rounded: npt.NDArray[np.float32] = whole + np.sign(value) * (np.abs(value - whole) >= 0.5)
    return rounded


def _clz(values: I64) -> I64:
    """CLZ of positive int32 values: 31 - floor(log2 v); frexp is exact for integers below 2^53."""
    _, exponent = np.frexp(values.astype(np.float64))
    return 32 - exponent.astype(np.int64)


def _wrap16(values: I64) -> I64:
    """Reduce to [-2^15, 2^15), as storing into an int16_t does in C."""
    return ((values + 2**15) & 0xFFFF) - 2**15


def _rows(args: Args, x: Any, dtype: type[np.generic]) -> I64:
    """`x` as an int64 (rows, row_size) matrix, after checking its dtype and that rows are not empty."""
    x = args.array("x", x, dtype)
    if x.ndim < 1 or x.shape[-1] < 1:
        raise args.fail(
            "x", f"must have at least one axis whose last (the row) is not empty, got shape {x.shape}"
        )
    rows: I64 = x.reshape(-1, x.shape[-1]).astype(np.int64)
    return rows


def _s8_rows(kernel: str, x: Any, mult: Any, shift: Any, diff_min: Any) -> tuple[I64, Args]:
    args = Args(kernel)
    rows = _rows(args, x, np.int8)
    args.integer("mult", mult, *S8_MULT_RANGE)
    args.integer("shift", shift, *S8_SHIFT_RANGE)
    args.integer("diff_min", diff_min, INT32_MIN, INT32_MAX)
    return rows, args


def _check_sum_fits_int32(args: Args, total: I64) -> None:
    """The C kernels sum a row's exponentials in an int32; a longer row could overflow it."""
    if total.size and int(total.max()) > INT32_MAX:
        row = int(np.argmax(total))
        raise args.fail(
            "x", f"row {row}: the sum of its exponentials overflows the C kernel's int32 (row too long)"
        )


def _check_shift_defined(args: Args, bits_over_unit: I64, total: I64) -> None:
    """The s8 output shifts by 35 - CLZ(sum), more than 31 once the sum reaches 2^28 (512 or more elements
    near the row's maximum): undefined in C, and the compiled kernels disagree, so it is rejected."""
    bad = (bits_over_unit > 31) & (total > 0)
    if bad.any():
        row = int(np.argmax(bad))
        raise args.fail(
            "x",
            f"row {row}: its exponentials sum to 2^28 or more, which makes CMSIS-NN shift an int32 by "
            f"{int(bits_over_unit[row])} bits (undefined behaviour); use shorter rows",
        )
