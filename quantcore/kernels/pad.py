"""Reference of CMSIS-NN's arm_pad_s8: constant padding before and after the data in each NHWC dimension.

The C copies the input row by row into an output of (pre + size + post) per dimension and fills the rest
with `pad_value`; it only moves bytes, so the reference is numpy's constant pad. Pads are counts of
elements, never negative (cropping is not something arm_pad_s8 does).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from quantcore.kernels._int import INT8_MAX, INT8_MIN, INT32_MAX, Args

Int8Array = npt.NDArray[np.int8]
Dims = tuple[int, int, int, int]

_AXES = ("n", "h", "w", "c")


def pad_s8(x: Int8Array, *, pre_pad: Sequence[int], post_pad: Sequence[int], pad_value: int) -> Int8Array:
    """arm_pad_s8: x NHWC; pre_pad / post_pad are cmsis_nn_dims (n, h, w, c) of elements to add."""
    args = Args("arm_pad_s8")
    x = args.array("input", x, np.int8, ndim=4)
    before = _dims(args, "pre_pad", pre_pad)
    after = _dims(args, "post_pad", post_pad)
    value = args.integer("pad_value", pad_value, INT8_MIN, INT8_MAX)
    shape = [b + s + a for b, s, a in zip(before, x.shape, after, strict=True)]
    # The C sizes each output block (batch, row, pixel) in int32.
    if int(np.prod(shape, dtype=np.int64)) > INT32_MAX:
        raise args.fail("post_pad", f"makes an output of shape {tuple(shape)}, over 2^31 - 1 elements")
    widths = tuple(zip(before, after, strict=True))
    padded: Int8Array = np.pad(x, widths, constant_values=np.int8(value))
    return padded


def _dims(args: Args, name: str, value: Any) -> Dims:
    """Check a cmsis_nn_dims of padding: four integers (n, h, w, c), none negative."""
    if not isinstance(value, (tuple, list)) or len(value) != 4:
        raise args.fail(name, f"must be (n, h, w, c), four integers, got {value!r}")
    n, h, w, c = (
        args.integer(f"{name}.{axis}", v, 0, INT32_MAX) for axis, v in zip(_AXES, value, strict=True)
    )
    return n, h, w, c
