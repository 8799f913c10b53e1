"""Requantization of accumulators exactly as CMSIS-NN's arm_nn_requantize and arm_nn_requantize_s64.

Two rounding schemes exist and they give different results in the last bit:
- DOUBLE (CMSIS-NN's default, TFLite's reference): a rounding doubling high multiply, then a rounding
  divide by a power of two (midpoint away from zero);
- SINGLE (the build defines CMSIS_NN_USE_SINGLE_ROUNDING): one 64-bit product, rounded once.
The reference must follow whichever the firmware is built with.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from quantcore.kernels._int import I64, wrap32
from quantcore.kernels.rounding import Rounding as Rounding  # its home is numpy-free (the CLI needs it)

ArrayLike = npt.ArrayLike


def doubling_high_mult(a: I64, b: ArrayLike) -> I64:
    """arm_nn_doubling_high_mult_no_sat: (a * b + 2^30) >> 31, truncated to int32."""
    return wrap32((a * np.asarray(b, dtype=np.int64) + (1 << 30)) >> 31)


def divide_by_power_of_two(dividend: I64, exponent: ArrayLike) -> I64:
    """arm_nn_divide_by_power_of_two: arithmetic shift right, midpoint rounded away from zero."""
    exp: I64 = np.asarray(exponent, dtype=np.int64)
    mask: I64 = (np.int64(1) << exp) - 1
    result: I64 = dividend >> exp
    # CMSIS-NN compares against a threshold that is one larger when the *shifted* result is negative.
    threshold: I64 = (mask >> 1) + (result < 0)
    rounded: I64 = result + ((dividend & mask) > threshold)
    return rounded


def requantize(acc: ArrayLike, multiplier: ArrayLike, shift: ArrayLike, rounding: Rounding) -> I64:
    """Scale int32 accumulators by Q31 `multiplier` * 2^`shift` (both broadcast against `acc`)."""
    acc = np.asarray(acc, dtype=np.int64)
    multiplier = np.asarray(multiplier, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    if rounding is Rounding.SINGLE:
        total_shift = 31 - shift
        result = (acc * multiplier) >> (total_shift - 1)
        return wrap32((result + 1) >> 1)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    # C computes val * (1 << left) in int32, so a large accumulator wraps before the multiply.
    value = wrap32(acc << left) if left.any() else acc
    # arm_nn_doubling_high_mult_no_sat, in place: the multiplier is never INT32_MIN (kernels validate
    # it), so the high word always fits in int32 and needs no wrap.
    high: I64 = value * multiplier
    high += 1 << 30
    high >>= 31
    return _round_shift_right(high, right)


def requantize_int32(acc: I64, multiplier: ArrayLike, shift: ArrayLike, rounding: Rounding) -> I64:
    """`requantize` for accumulators already in int32's range (C's int32 accumulator), computed in
    `acc` itself (the caller's scratch, which it may overwrite and return): the same values in fewer
    passes, and no new array, when every multiplier is positive (always, for a real scale; otherwise, and
    for single rounding, it is `requantize`).

    With v = acc << left (wrapped), a = v * M + 2^30 and e the right shift, the double rounding is
        high = floor(a / 2^31),  out = floor((high + c) / 2^e),  c = 2^(e-1) - [high < 0] (c = 0 if e = 0)
    and since floor(a / 2^31) + n = floor((a + n 2^31) / 2^31) for an integer n,
        out = (((v * M + 2^30 + 2^(e-1) 2^31) >> 31) - [high < 0]) >> e
    high < 0 iff a < 0 iff v * M < -2^30 iff (M > 0) v < -(2^30 // M): a per-channel threshold on v, a
    one-byte mask taken before v is overwritten (never true where e = 0, which has no rounding step). No
    overflow in int64: |v| <= 2^31 and M < 2^31 give |v M| < 2^62, and 2^30 + 2^(e-1) 2^31 <= 2^30 + 2^61.
    """
    m = np.asarray(multiplier, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    if rounding is Rounding.SINGLE or not np.all(m > 0):
        return requantize(acc, m, shift, rounding)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    value = wrap32(acc << left) if left.any() else acc
    nudge = (np.int64(1) << right) >> 1
    negative = value < np.where(right > 0, -((1 << 30) // m), np.iinfo(np.int64).min)
    value *= m
    value += (1 << 30) + (nudge << 31)
    value >>= 31
    np.subtract(value, negative, out=value, casting="unsafe")
    if right.any():
        value >>= right
    return value


class BiasedRequantize:
    """requantize(acc + bias) per channel (the last axis), in place in `acc`, with the bias folded into the
    per-channel constants, which are computed once per kernel call instead of once per slice.

    For accumulators whose acc + bias stays in int32 (the caller proves it: no wrap) and no left shift
    (shift <= 0 on every channel, as a real scale below 1 gives), with v = acc + bias:
    - double rounding (every multiplier positive; see requantize_int32 for the derivation):
        out = ((v M + 2^30 + 2^(e-1) 2^31) >> 31) - [v < -(2^30 // M)]) >> e   (no correction if e = 0)
      v M + K = acc M + (bias M + K), and v < t iff acc < t - bias: the bias costs no pass of its own.
    - single rounding: ((v M) >> (t - 1) + 1) >> 1 = (v M + 2^(t-1)) >> t with t = 31 - shift (floor
      arithmetic), = (acc M + bias M + 2^(t-1)) >> t, in int32 since |v M| < 2^62 and t >= 31.
    int64 arithmetic is modular, so acc M may wrap on the way as long as the final sum is in range: it is,
    |v M| < 2^62 and the constant added < 2^61 + 2^30.
    `of` returns None where this form does not hold (the caller keeps requantize_int32)."""

    def __init__(self, add: I64, multiplier: I64, threshold: I64 | None, right: I64) -> None:
        self.add, self.multiplier, self.threshold, self.right = add, multiplier, threshold, right
        self.shifts = bool(right.any())

    @classmethod
    def of(
        cls, bias: ArrayLike | None, multiplier: ArrayLike, shift: ArrayLike, rounding: Rounding
    ) -> BiasedRequantize | None:
        m = np.asarray(multiplier, dtype=np.int64)
        shift = np.asarray(shift, dtype=np.int64)
        b = np.zeros_like(m) if bias is None else np.asarray(bias, dtype=np.int64)
        if np.any(shift > 0):
            return None
        if rounding is Rounding.SINGLE:
            total = 31 - shift
            return cls(b * m + (np.int64(1) << (total - 1)), m, None, total)
        if not np.all(m > 0):
            return None
        right = -shift
        nudge = (np.int64(1) << right) >> 1
        threshold = np.where(right > 0, -((1 << 30) // m) - b, np.iinfo(np.int64).min)
        return cls(b * m + (1 << 30) + (nudge << 31), m, threshold, right)

    def widened(self, rows: int) -> BiasedRequantize:
        """The same requantization for accumulators laid out `rows` rows of channels to a row: numpy's
        per-channel broadcast runs one inner loop per row, so a few channels a row cost a loop call per
        few values - about twice the time per pass of long rows."""
        threshold = None if self.threshold is None else np.tile(self.threshold, rows)
        return BiasedRequantize(
            np.tile(self.add, rows), np.tile(self.multiplier, rows), threshold, np.tile(self.right, rows)
        )

    def __call__(self, acc: I64) -> I64:
        """acc (int64, last axis the channels) -> requantize(acc + bias), overwriting and returning acc."""
        if self.threshold is None:
            acc *= self.multiplier
            acc += self.add
            acc >>= self.right
            return acc
        negative = acc < self.threshold
        acc *= self.multiplier
        acc += self.add
        acc >>= 31
        np.subtract(acc, negative, out=acc, casting="unsafe")
        if self.shifts:
            acc >>= self.right
        return acc


def _round_shift_right(value: I64, exponent: I64) -> I64:
    """divide_by_power_of_two in two passes: add the rounding nudge, shift.

    The C rounds up when the remainder exceeds 2^(e-1) - 1, or 2^(e-1) for negative values; that is
    floor((v + 2^(e-1) - [v < 0]) / 2^e) for e >= 1 and v itself for e = 0.
    """
    nudge = (np.int64(1) << exponent) >> 1
    # value >> 63 is -1 for a negative value and 0 otherwise; masked to 0 where the exponent is 0 (no
    # rounding then), it is the negative values' smaller nudge without np.where's mask and gather.
    negative = value >> 63
    negative &= -(exponent > 0).astype(np.int64)
    value += negative
    value += nudge
    value >>= exponent
    return value


def reduce_multiplier(multiplier: ArrayLike) -> I64:
    """REDUCE_MULTIPLIER: a Q31 multiplier rounded to the Q15 one that arm_nn_requantize_s64 takes."""
    m = np.asarray(multiplier, dtype=np.int64)
    return np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)


def requantize_s64(acc: ArrayLike, reduced_multiplier: ArrayLike, shift: ArrayLike) -> I64:
    """arm_nn_requantize_s64: a 64-bit accumulator times a Q15 multiplier, one rounding (int16 kernels)."""
    acc = np.asarray(acc, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    new_val = acc * np.asarray(reduced_multiplier, dtype=np.int64)
    result = wrap32(new_val >> (14 - shift))
    return wrap32((result + 1) >> 1)
