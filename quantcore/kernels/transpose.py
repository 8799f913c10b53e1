"""Reference of CMSIS-NN's arm_transpose_s8: permuting the axes of an int8 tensor of one to four dimensions.

The C takes the shape as a cmsis_nn_dims (n, h, w, c) of which the first transpose_params.num_dims entries
count, and permutations[k] names the input axis that becomes output axis k (numpy's convention, so the
reference is numpy's transpose). The C only moves bytes; what needs care is which calls it mis-handles:
- num_dims 1 is a plain copy and num_dims 2 always a matrix transpose: the permutation is not read, so an
  identity (0, 1) is transposed too, and the reference computes that swap (what the C computes);
- for 3 and 4 dimensions it rejects entries beyond the last axis but not repeated ones, which leave output
  strides at 0, write over other elements and leave others unwritten: the reference refuses those, as no
  bytes are "what the C computes" there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from quantcore.kernels._int import Args

Int8Array = npt.NDArray[np.int8]

MAX_DIMS = 4
"""cmsis_nn_dims holds four dimensions; transpose_params.num_dims counts the leading ones in use."""


def transpose_s8(x: Int8Array, perm: Sequence[int]) -> Int8Array:
    """arm_transpose_s8: `x` of 1 to 4 dimensions (n[, h[, w[, c]]]); output axis k is input axis perm[k]."""
    args = Args("arm_transpose_s8")
    x = args.array("input", x, np.int8)
    if not 1 <= x.ndim <= MAX_DIMS:
        raise args.fail("input", f"must have 1 to {MAX_DIMS} dimensions, got shape {x.shape}")
    order = _permutation(args, perm, x.ndim)
    out: Int8Array = np.ascontiguousarray(x.transpose(order))
    return out


def _permutation(args: Args, perm: Any, ndim: int) -> tuple[int, ...]:
    """Check `perm` is a permutation of the input's axes that arm_transpose_s8 carries out as asked."""
    if not isinstance(perm, (tuple, list)) or len(perm) != ndim:
        raise args.fail("perm", f"must list each of the input's {ndim} axes once, got {perm!r}")
    order = tuple(args.integer(f"perm[{k}]", p, 0, ndim - 1) for k, p in enumerate(perm))
    if sorted(order) != list(range(ndim)):
        raise args.fail("perm", f"must list each of the input's {ndim} axes once, got {order}")
    if ndim == 2:
        # With num_dims == 2 the C transposes the (n, h) matrix without reading the permutation, so (0, 1)
        # swaps too: the reference computes what the C computes (a graph's identity permutation is the
        # code generator's to lower, as it does, to a 4-D call).
        return (1, 0)
    return order
