"""Sliding-window geometry shared by convolution, depthwise convolution and pooling.

CMSIS-NN takes one "before" padding per axis and the output size from the caller; window positions that
fall outside the input (before or after) are padding. Padding is materialised once with a fill value and
each kernel tap is then a strided view, so kernels loop over taps (at most kh*kw), never over pixels.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from quantcore.kernels._int import Args


@dataclass(frozen=True)
class Window:
    """Where each output pixel's window lies in the input, per CMSIS-NN's conv/pool geometry."""

    kernel: tuple[int, int]
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (0, 0)
    dilation: tuple[int, int] = (1, 1)

    def output_hw(self, input_hw: tuple[int, int]) -> tuple[int, int]:
        """The output size with symmetric padding (callers with TF 'SAME' pass theirs explicitly)."""
        return (
            _out(input_hw[0], self.kernel[0], self.stride[0], self.padding[0], self.dilation[0]),
            _out(input_hw[1], self.kernel[1], self.stride[1], self.padding[1], self.dilation[1]),
        )

    def pad(self, x: np.ndarray[Any, Any], output_hw: tuple[int, int], fill: float) -> np.ndarray[Any, Any]:
        """`x` (N, H, W, C) padded with `fill` so that every tap of every output pixel is in range."""
        return self.pad_shifted(x, output_hw, fill, 0, x.dtype)

    def pad_shifted(
        self,
        x: np.ndarray[Any, Any],
        output_hw: tuple[int, int],
        fill: float,
        offset: int,
        dtype: Any,
    ) -> np.ndarray[Any, Any]:
        """`x + offset` as `dtype`, padded with `fill` (see pad): one pass over x, written straight into
        the padded array (np.pad, a converted copy and an add would be three)."""
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = self.kernel, self.stride, self.padding, self.dilation
        n, h, w, c = x.shape
        need_h = (output_hw[0] - 1) * sh + (kh - 1) * dh + 1
        need_w = (output_hw[1] - 1) * sw + (kw - 1) * dw + 1
        padded = np.full(
            (n, ph + h + max(0, need_h - ph - h), pw + w + max(0, need_w - pw - w), c), fill, dtype
        )
        inside = padded[:, ph : ph + h, pw : pw + w]
        if offset:
            np.add(x, offset, out=inside, dtype=dtype, casting="unsafe")
        else:
            np.copyto(inside, x, casting="unsafe")
        return padded

    def taps(
        self, padded: np.ndarray[Any, Any], output_hw: tuple[int, int]
    ) -> Iterator[tuple[int, int, np.ndarray[Any, Any]]]:
        """(ky, kx, view) per kernel tap; view[n, oy, ox, c] is the input that tap sees for (oy, ox)."""
        (kh, kw), (sh, sw), (dh, dw) = self.kernel, self.stride, self.dilation
        oh, ow = output_hw
        for ky in range(kh):
            for kx in range(kw):
                y0, x0 = ky * dh, kx * dw
                yield ky, kx, padded[:, y0 : y0 + (oh - 1) * sh + 1 : sh, x0 : x0 + (ow - 1) * sw + 1 : sw, :]

    def im2col(self, padded: np.ndarray[Any, Any], output_hw: tuple[int, int]) -> np.ndarray[Any, Any]:
        """(N, oh, ow, kh*kw*C) patches in CMSIS-NN's im2col order (ky, kx, c), matching OHWI filters.

        One copy of a (N, oh, ow, kh, kw, C) strided view of `padded` (every tap's view at once), not a
        concatenation of the kh*kw tap views: with few channels each of those copies moves C values per
        pixel and costs far more than the values themselves. With one channel (an image's first layer)
        the tap views are copied into the columns one by one instead: each runs along whole output rows,
        where the single copy's innermost run is one kernel row (64 images of 28 x 28 through a 3 x 3
        window: 0.17 ms against 0.81)."""
        (kh, kw), (sh, sw), (dh, dw) = self.kernel, self.stride, self.dilation
        n, _, _, c = padded.shape
        if c == 1:
            columns = np.empty((n, output_hw[0], output_hw[1], kh * kw), dtype=padded.dtype)
            for index, (_, _, view) in enumerate(self.taps(padded, output_hw)):
                columns[..., index] = view[..., 0]
            return columns
        bn, bh, bw, bc = padded.strides
        patches = np.lib.stride_tricks.as_strided(
            padded,
            shape=(n, output_hw[0], output_hw[1], kh, kw, c),
            strides=(bn, bh * sh, bw * sw, bh * dh, bw * dw, bc),
            writeable=False,
        )
        return patches.reshape(n, output_hw[0], output_hw[1], kh * kw * c)


def _out(size: int, k: int, stride: int, pad: int, dilation: int) -> int:
    return (size + 2 * pad - dilation * (k - 1) - 1) // stride + 1


def check_window(
    args: Args,
    kernel: tuple[int, int],
    stride: Any,
    padding: Any,
    dilation: Any,
    input_hw: tuple[int, int],
    output_hw: Any,
) -> tuple[Window, tuple[int, int]]:
    """Validate window parameters and the output size; returns the Window and (oh, ow)."""
    window = Window(
        kernel=kernel,
        stride=args.pair("stride", stride, 1),
        padding=args.pair("padding", padding, 0),
        dilation=args.pair("dilation", dilation, 1),
    )
    hw = window.output_hw(input_hw) if output_hw is None else args.pair("output_hw", output_hw, 1)
    if hw[0] < 1 or hw[1] < 1:
        raise args.fail(
            "input", f"of size {input_hw} is smaller than the kernel window {kernel} with its padding"
        )
    return window, hw
