"""Window geometry of ONNX Conv and pooling nodes, resolved to explicit pads from static shapes.

The IR stores pads as (top, left, bottom, right), which is also ONNX's order for 2-D
([x1_begin, x2_begin, x1_end, x2_end]). auto_pad and ceil_mode are resolved here so the IR carries
only explicit numbers. ceil_mode follows ONNX Runtime and the ONNX operator text: the output size is
rounded up, but a last window that would start in the end padding is dropped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Pair = tuple[int, int]
Pads = tuple[int, int, int, int]


@dataclass(frozen=True)
class Geometry:
    """A resolved 2-D window: explicit pads (including ceil_mode's extra), that extra alone, output size."""

    pads: Pads
    ceil_pads: Pair
    """Bottom/right padding added only to reach ceil_mode's output size (a subset of `pads`)."""
    output_hw: Pair


def _pair(values: Sequence[int] | None, default: int) -> Pair:
    if not values:
        return (default, default)
    return (int(values[0]), int(values[1]))


def _same(size: int, kernel: int, stride: int, dilation: int, lower: bool) -> tuple[int, int, int]:
    """(begin, end, out) for auto_pad SAME_UPPER/SAME_LOWER: out = ceil(size / stride)."""
    out = math.ceil(size / stride)
    total = max(0, (out - 1) * stride + (kernel - 1) * dilation + 1 - size)
    small, large = total // 2, total - total // 2
    return (large, small, out) if lower else (small, large, out)


def _explicit(size: int, kernel: int, stride: int, dilation: int, begin: int, end: int, ceil: bool) -> int:
    span = size + begin + end - (kernel - 1) * dilation - 1
    out = (-(-span // stride) if ceil else span // stride) + 1
    if ceil and (out - 1) * stride >= size + begin:
        out -= 1  # the last window would start in the end padding
    return out


def resolve(
    input_hw: Pair,
    kernel: Pair,
    *,
    strides: Sequence[int] | None,
    dilations: Sequence[int] | None,
    pads: Sequence[int] | None,
    auto_pad: str,
    ceil_mode: bool = False,
) -> Geometry:
    """Explicit pads and output size of a 2-D window with ONNX's attributes (auto_pad already validated)."""
    stride, dilation = _pair(strides, 1), _pair(dilations, 1)
    begins: list[int] = []
    ends: list[int] = []
    outs: list[int] = []
    extras: list[int] = []
    declared = tuple(int(p) for p in pads) if pads else (0, 0, 0, 0)
    for axis in (0, 1):
        args = (input_hw[axis], kernel[axis], stride[axis], dilation[axis])
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            begin, end, out = _same(*args, lower=auto_pad == "SAME_LOWER")
        else:
            begin, end = (0, 0) if auto_pad == "VALID" else (declared[axis], declared[axis + 2])
            out = _explicit(*args, begin, end, ceil_mode)
        needed = (out - 1) * stride[axis] + (kernel[axis] - 1) * dilation[axis] + 1
        extra = max(0, needed - (input_hw[axis] + begin + end))
        begins.append(begin)
        ends.append(end + extra)
        outs.append(out)
        extras.append(extra)
    return Geometry((begins[0], begins[1], ends[0], ends[1]), (extras[0], extras[1]), (outs[0], outs[1]))
