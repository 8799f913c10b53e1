"""TensorAccumulator's sums in one compiled pass (numba) over the layouts `evaluate` hands over.

For a float reference f and int8 (or int16) values q with d = (q - zero_point) * scale (one scale, or one
per channel along the last axis), one pass gives, every product in float64 (float32 -> float64 and
int -> float64 are exact; (q - zp) is computed in float64 as numpy does):
    sum f f,  sum e e,  sum f d,  sum d d  (e = f - d),  max |e|,  max |f|
- the figures metrics._sums computes with numpy, in another order of float64 additions.

Layouts: q C-contiguous with its channels last (the int8 executor's NHWC) and f either in the same
order (C-contiguous) or channels first (onnxruntime's NCHW seen as NHWC: a transposed view, never copied).
The loop walks f in memory order, (sample, channel) row by row, reading q at the same element (a stride
of one channel count): no copy of either side, and the per-channel scale is one number per row.
Other layouts (gaps, negative strides, q not C-contiguous) and other types than float32 or float64 with
int8 or int16 return None: the caller keeps numpy's path.

Summation order, fixed (the same bits on every run and any machine with IEEE float64): within a row two
accumulators take the even and the odd elements, the row's total is their sum, and the rows' totals are
added in memory order to 0.0. It differs from numpy's pairwise sum by rounding only: both are bounded by
the classical (n - 1) eps sum |terms| of recursive summation, where n here is the longest chain of
additions - a row's half plus the number of rows (tests/verify/test_compiled_sums.py holds the sums to
math.fsum's exactly rounded ones within that bound). The figures reported from them are ratios and
logarithms: a relative change of 1e-12 moves an SQNR by 4e-12 dB.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from quantcore.kernels import jit
from quantcore.kernels.jit import Array, Export

SUMS = jit.Loops(
    "quantcore.verify.numba_sums",
    tuple(
        Export(
            f"rows_{f}_{q}",
            (Array(f, 3, contiguous=False), Array(q, 3), "float64", Array("float64", 1)),
            returns="UniTuple(float64, 6)",
            function="rows",
        )
        for f in ("float32", "float64")
        for q in ("int8", "int16")
    ),
)
"""The loop built for the references' float types and the executor's integer types; f is read with its
strides (a transposed view of onnxruntime's NCHW), q in C order."""

Sums = tuple[tuple[float, float, float, float], float, float]
"""(sum f f, sum e e, sum f d, sum d d), max |e|, max |f|."""


def sums(
    reference: np.ndarray[Any, Any],
    q: np.ndarray[Any, Any],
    scale: float | np.ndarray[Any, Any],
    zero_point: int,
) -> Sums | None:
    """The sums and maxima of metrics._sums for `reference` and (q - zero_point) * scale (scale one float,
    or one per channel along the last axis), or None where the layouts are not covered (the module
    docstring) and the caller is to take numpy's path."""
    scales = np.asarray(scale, dtype=np.float64).reshape(-1)
    if (
        reference.dtype not in (np.float32, np.float64)
        or q.dtype not in (np.int8, np.int16)
        or reference.shape != q.shape
        or reference.size == 0
        or not q.flags.c_contiguous
        or (scales.size != 1 and (q.ndim == 0 or scales.size != q.shape[-1]))
    ):
        return None
    arranged = _arranged(reference, q, scales.size != 1)
    if arranged is None:
        return None
    f, values = arranged
    loop = getattr(jit.functions(SUMS), f"rows_{f.dtype}_{values.dtype}")
    ff, ee, fd, dd, max_e, max_f = loop(f, values, float(zero_point), scales)
    # NaN compares false in max(): a NaN reference leaves its maximum alone but makes sum f f NaN, which
    # the caller looks for (and then refuses the batch on numpy's path)
    return (0.0 + ff, 0.0 + ee, 0.0 + fd, 0.0 + dd), max_e, max_f


def _arranged(
    reference: np.ndarray[Any, Any], q: np.ndarray[Any, Any], per_channel: bool
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]] | None:
    """f as (A, C, P) in its memory order and q as (A, P, C), element [a, c, p] of f pairing with
    [a, p, c] of q; None for a layout the loop does not cover."""
    if reference.flags.c_contiguous:
        if not per_channel:  # one row: f (1, 1, N), q (1, N, 1)
            return reference.reshape(1, 1, -1), q.reshape(1, -1, 1)
        channels = q.shape[-1]  # rows of one channel each, read with a stride on both sides
        return reference.reshape(1, -1, channels).transpose(0, 2, 1), q.reshape(1, -1, channels)
    if reference.ndim < 3 or min(reference.strides) < 0:
        return None
    channels_first = (0, reference.ndim - 1, *range(1, reference.ndim - 1))
    memory = reference.transpose(channels_first)
    if not memory.flags.c_contiguous:
        return None
    samples, channels = q.shape[0], q.shape[-1]
    positions = math.prod(q.shape[1:-1])
    return memory.reshape(samples, channels, positions), q.reshape(samples, positions, channels)
