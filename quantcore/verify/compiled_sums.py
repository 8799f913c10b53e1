"""TensorAccumulator's sums in one compiled pass (numba) over the layouts `evaluate` hands over.

For a float reference f and int8 (or int16) values q with d = (q - zero_point) * scale (one scale, or one
per channel along the last axis), one pass gives, every product in float64 (float32 -> float64 and
int -> float64 are exact; (q - zp) is computed in float64 as numpy does):
    sum f f,  sum e e,  sum f d,  sum d d  (e = f - d),  max |e|,  max |f|
- the figures metrics._sums computes with numpy, in another order of float64 additions.

Layouts: f is read in its own memory order and q is copied into that order when it is not in it already:
evaluate's f is onnxruntime's NCHW seen as NHWC (a transposed view, never copied) and its q the int8
executor's NHWC, so the int8 side (a quarter of the float side's bytes) is transposed once, and the
loop then walks both sides front to back, as rows of one order: all of it as one row for one scale;
a row per (sample, channel) for a scale per channel (f channels first), or a row per channel (f channels
last: f and q both copied channels first). Other layouts (gaps, negative strides) and other types than
float32 or float64 with int8 or int16 return None: the caller keeps numpy's path.

Summation order, fixed (the same bits on every run and any machine with IEEE float64): within a row,
LANES accumulators (SHORT_LANES for a short row) take the elements in turn (element i to lane
i % LANES), a row's total is its lanes added in lane order, and the rows' totals are added in row order to
0.0. The lanes are what lets the compiler run the loop on vector registers without reordering an
addition: on evaluate's tensors, 2x faster than the two accumulators it had before, transposition
included. It differs from numpy's pairwise sum by rounding only: both are bounded by the classical
(n - 1) eps sum |terms| of recursive summation, where n here is the longest chain of additions - a row's
length / LANES, plus LANES, plus the number of rows (tests/verify/test_compiled_sums.py holds the sums
to math.fsum's exactly rounded ones within that bound). The figures reported from them are ratios and
logarithms: a relative change of 1e-12 moves an SQNR by 4e-12 dB.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from quantcore.kernels import jit
from quantcore.kernels.jit import Array, Export

LANES = 32
"""Accumulators per row (module docstring); SHORT_LANES for rows shorter than SHORT_ROW. The loop's time
over 157 parts of 64 samples, in seconds for 16 / 32 / 64 lanes: one scale, 16 x 28 x 28 values a
sample 0.100 / 0.069 / 0.064 and 64 x 7 x 7 0.026 / 0.018 / 0.016; a scale per channel, rows of 784
0.104 / 0.078 / 0.079, of 196 0.062 / 0.048 / 0.057 and of 49 0.046 / 0.055 / 0.109."""
SHORT_LANES, SHORT_ROW = 16, 128
_ALIGN = 64

SUMS = jit.Loops(
    "quantcore.verify.numba_sums",
    tuple(
        Export(
            f"rows_{f}_{q}",
            (
                Array(f, 2),
                Array(q, 2),
                "float64",
                Array("float64", 1),
                Array("float32", 1),
                Array("float64", 2),
            ),
            returns="UniTuple(float64, 6)",
            function="rows",
        )
        for f in ("float32", "float64")
        for q in ("int8", "int16")
    ),
)
"""The loop built for the references' float types and the executor's integer types."""

Sums = tuple[tuple[float, float, float, float], float, float]
"""(sum f f, sum e e, sum f d, sum d d), max |e|, max |f|."""


def sums(
    reference: np.ndarray[Any, Any],
    q: np.ndarray[Any, Any],
    scale: float | np.ndarray[Any, Any],
    zero_point: int,
    divisor: np.ndarray[Any, Any] | None = None,
) -> Sums | None:
    """The sums and maxima of metrics._sums for `reference` (divided by `divisor`, float32 per channel
    along the last axis, when given) and (q - zero_point) * scale (scale one float, or one per channel
    along the last axis), or None where the layouts are not covered (the module docstring) and the
    caller is to take numpy's path."""
    scales = np.asarray(scale, dtype=np.float64).reshape(-1)
    divisors = np.ones(1, np.float32) if divisor is None else divisor.reshape(-1)
    if (
        reference.dtype not in (np.float32, np.float64)
        or q.dtype not in (np.int8, np.int16)
        or reference.shape != q.shape
        or reference.size == 0
        or any(v.size != 1 and (q.ndim == 0 or v.size != q.shape[-1]) for v in (scales, divisors))
        or divisors.dtype != np.float32
    ):
        return None
    arranged = _arranged(reference, q, scales.size != 1 or divisors.size != 1)
    if arranged is None:
        return None
    f, values = arranged
    loop = getattr(jit.functions(SUMS), f"rows_{f.dtype}_{values.dtype}")
    lanes = _aligned_lanes(LANES if f.shape[1] >= SHORT_ROW else SHORT_LANES)
    ff, ee, fd, dd, max_e, max_f = loop(f, values, float(zero_point), scales, divisors, lanes)
    # NaN compares false in max(): a NaN reference leaves its maximum alone but makes sum f f NaN, which
    # the caller looks for (and then refuses the batch on numpy's path)
    return (0.0 + ff, 0.0 + ee, 0.0 + fd, 0.0 + dd), max_e, max_f


def _aligned_lanes(width: int) -> np.ndarray[Any, Any]:
    """The loop's (6, width) float64 scratch, starting on a 64-byte boundary: each lane row then starts on
    a cache line, and the vector loop runs at its speed (a scratch only 16-byte aligned made it up to 1.8x
    slower)."""
    spare = np.empty(6 * width + _ALIGN // 8, dtype=np.float64)
    skip = (-spare.ctypes.data % _ALIGN) // 8
    return spare[skip : skip + 6 * width].reshape(6, width)


def _arranged(
    reference: np.ndarray[Any, Any], q: np.ndarray[Any, Any], per_channel: bool
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]] | None:
    """f and q as (R, L) in f's memory order (q copied into it where it is not), row r of a scale or
    divisor per channel holding channel r % C; None for a layout the loop does not cover."""
    order = _memory_order(reference)
    if order is None:
        return None
    f = reference.transpose(order)
    values = np.ascontiguousarray(q.transpose(order))
    if not per_channel:
        return f.reshape(1, -1), values.reshape(1, -1)
    channel = order.index(q.ndim - 1)  # where the channels are in memory
    if channel == q.ndim - 1:  # channels last: rows of one channel each, both sides copied
        f, values = (np.ascontiguousarray(np.moveaxis(side, -1, 0)) for side in (f, values))
        return f.reshape(len(f), -1), values.reshape(len(f), -1)
    rows = math.prod(f.shape[: channel + 1])  # the channel varies fastest of the axes before it
    return f.reshape(rows, -1), values.reshape(rows, -1)


def _memory_order(array: np.ndarray[Any, Any]) -> tuple[int, ...] | None:
    """The axes in the order `array` lays them out in memory (outermost first), or None where it is not
    one block without gaps in some order of its axes (a slice with a step, negative strides)."""
    order = tuple(sorted(range(array.ndim), key=lambda axis: -abs(array.strides[axis])))
    if min(array.strides, default=0) < 0 or not array.transpose(order).flags.c_contiguous:
        return None
    return order
