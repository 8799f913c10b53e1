"""Window.im2col: the patches in CMSIS-NN's (ky, kx, c) order, taken straight from the padded input,
for every geometry; one-channel inputs (an image's first layer) take their own copy path."""

from __future__ import annotations

import numpy as np
import pytest

from quantcore.kernels.window import Window


def _patches(padded: np.ndarray, window: Window, hw: tuple[int, int]) -> np.ndarray:
    """Each output pixel's window read element by element: the definition."""
    (kh, kw), (sh, sw), (dh, dw) = window.kernel, window.stride, window.dilation
    n, _, _, c = padded.shape
    out = np.empty((n, hw[0], hw[1], kh * kw * c), dtype=padded.dtype)
    for oy in range(hw[0]):
        for ox in range(hw[1]):
            for ky in range(kh):
                for kx in range(kw):
                    at = (ky * kw + kx) * c
                    out[:, oy, ox, at : at + c] = padded[:, oy * sh + ky * dh, ox * sw + kx * dw, :]
    return out


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize(
    ("kernel", "stride", "padding", "dilation"),
    [((3, 3), (1, 1), (1, 1), (1, 1)), ((5, 5), (1, 1), (0, 0), (1, 1)), ((5, 3), (2, 1), (2, 0), (1, 2)),
     ((1, 1), (2, 2), (0, 0), (1, 1)), ((3, 2), (3, 2), (1, 1), (2, 3))],
)  # fmt: skip
def test_im2col_gives_each_windows_values_in_cmsis_nns_order(
    channels: int,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, int],
    dilation: tuple[int, int],
) -> None:
    window = Window(kernel, stride, padding, dilation)
    hw = window.output_hw((13, 11))
    x = np.random.default_rng(channels).integers(-128, 128, (3, 13, 11, channels)).astype(np.int8)
    padded = window.pad(x, hw, -7)
    columns = window.im2col(padded, hw)
    assert columns.shape == (3, *hw, kernel[0] * kernel[1] * channels)
    np.testing.assert_array_equal(columns, _patches(padded, window, hw))
